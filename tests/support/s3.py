"""A real S3-compatible server for tests: moto's standalone server on 127.0.0.1, a free port, a fresh bucket.

Use the fixtures by importing them into a test module or conftest (``from tests.support.s3 import
moto_server, s3_bucket  # noqa: F401``), or the context manager ``MotoServer`` directly. The server
takes any credentials; ``S3Bucket.env`` holds fake ones plus ``AWS_ENDPOINT_URL`` for subprocesses.
Leaves out: s3fs (it pins an older botocore than boto3 needs; see FIELD_NOTES).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.support.ports import free_port

FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


class MotoServer:
    """``python -m moto.server`` on 127.0.0.1; ``with MotoServer() as server: server.endpoint_url``."""

    def __init__(self, ready_timeout_s: float = 30.0):
        self.port = free_port()
        self.ready_timeout_s = ready_timeout_s
        self.process: subprocess.Popen | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def host_port(self) -> str:
        """``127.0.0.1:PORT``: what pyarrow's ``endpoint_override`` takes (with ``scheme=http``)."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> MotoServer:
        cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        # a file, not a pipe: the server logs every request, and a pipe nobody reads fills and stalls it
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log)
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self) -> None:
        """Poll with a deadline: the server answers HTTP once it is up (~0.3 s)."""
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"moto server exited with {self.process.returncode}: {self.log.read().decode()[-2000:]}")
            try:
                urllib.request.urlopen(self.endpoint_url + "/moto-api/", timeout=1).close()
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        raise TimeoutError(f"moto server on {self.endpoint_url} not ready after {self.ready_timeout_s:g} s")

    def __exit__(self, *exc) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        self.process = None

    def client(self):
        """A boto3 S3 client for this server (fake credentials)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
        )


@dataclass
class S3Bucket:
    """A created bucket on a running moto server."""

    server: MotoServer
    name: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def endpoint_url(self) -> str:
        return self.server.endpoint_url

    def uri(self, prefix: str = "") -> str:
        return f"s3://{self.name}/{prefix}".rstrip("/")

    def keys(self, prefix: str = "") -> list[str]:
        """Every object key under ``prefix`` (paginated)."""
        pages = self.server.client().get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        return [obj["Key"] for page in pages for obj in page.get("Contents", [])]

    def read(self, key: str) -> bytes:
        return self.server.client().get_object(Bucket=self.name, Key=key)["Body"].read()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One moto server per test session (buckets keep tests apart)."""
    with MotoServer() as server:
        yield server


@pytest.fixture
def s3_bucket(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Bucket]:
    """A fresh bucket; fake credentials and ``AWS_ENDPOINT_URL`` set in this process's environment too."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    moto_server.client().create_bucket(Bucket=name)
    env = {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": moto_server.endpoint_url}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield S3Bucket(moto_server, name, env)


def subprocess_env(bucket: S3Bucket, **extra: str) -> dict[str, str]:
    """This process's environment plus the bucket's credentials and endpoint (for ``subprocess.run(env=...)``)."""
    return {**os.environ, **bucket.env, **extra}
