"""Where a sweep's results live, as one URI: a local directory or ``s3://bucket/prefix``.

For S3-compatible servers the endpoint comes from the URI (``s3://bucket/prefix?endpoint_override=host:port&scheme=http``,
also ``region=``) or from ``AWS_ENDPOINT_URL`` (and ``AWS_REGION``/``AWS_DEFAULT_REGION``). Credentials come only from the environment (or the machine's role): a URI
that carries keys is refused, so no key is ever written into a config, a result or a log.

Under ``{storage}/{name}/``: Tune's experiment (trial results, checkpoints), ``trajectories/{trial}/``,
``leaderboard.json``, ``sweep_config.json`` (what ``sweep resume`` rebuilds the sweep from) and
``optuna.db``. SQLite cannot live on S3, so with S3 the study is kept in a local directory named after the
experiment (the same on every machine, since Tune pickles the searcher with its path) and copied up
whenever Tune snapshots the searcher; ``sweep resume`` copies it down first.

Leaves out: other schemes (gs://, hdfs://) which pyarrow could serve but nothing here tests.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pyarrow.fs as pafs

from configkit import environ
from configkit.base import ConfigError

SECRET_QUERY_KEYS = ("access_key", "secret_key", "session_token")
S3_QUERY_KEYS = ("endpoint_override", "scheme", "region")
# pyarrow's default gives up on a request that stalls 3 s, which a busy S3-compatible server can exceed
S3_REQUEST_TIMEOUT_S = 60.0
S3_CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Storage:
    """An opened storage URI: ``root`` is its path on ``fs`` (``/abs/dir`` or ``bucket/prefix``)."""

    uri: str
    fs: pafs.FileSystem
    root: str

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        """A path on ``fs`` under the root."""
        return "/".join([self.root.rstrip("/"), *(p.strip("/") for p in parts if p)])

    def display(self, *parts: str) -> str:
        """Where a thing is, for people: ``s3://bucket/prefix/...`` (no query) or a local path."""
        return self.path(*parts) if self.is_local else "s3://" + self.path(*parts)

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def read_text(self, *parts: str) -> str:
        with self.fs.open_input_stream(self.path(*parts)) as f:
            return f.read().decode()

    def write_text(self, text: str, *parts: str) -> str:
        target = self.path(*parts)
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        with self.fs.open_output_stream(target) as f:
            f.write(text.encode())
        return target

    def upload(self, local: str | Path, *parts: str) -> None:
        """Copy a local file (or directory, recursively) to ``parts`` under the root."""
        pafs.copy_files(str(local), self.path(*parts), source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs)

    def copy(self, source: tuple[str, ...], target: tuple[str, ...]) -> None:
        """Copy a file or directory within this storage."""
        pafs.copy_files(self.path(*source), self.path(*target), source_filesystem=self.fs, destination_filesystem=self.fs)

    def download(self, local: str | Path, *parts: str) -> bool:
        """Copy ``parts`` (a file or directory) to a local path; False when it is not there."""
        if not self.exists(*parts):
            return False
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(self.path(*parts), str(local), source_filesystem=self.fs, destination_filesystem=pafs.LocalFileSystem())
        return True

    def delete_dir(self, *parts: str) -> None:
        if self.exists(*parts):
            self.fs.delete_dir(self.path(*parts))


def open_storage(uri: str) -> Storage:
    """A local directory (made absolute) or an S3 URI; anything else is a ConfigError naming ``storage``."""
    if "://" not in uri:
        local = Path(uri).expanduser().resolve()
        return Storage(str(local), pafs.LocalFileSystem(), str(local))
    scheme = urlsplit(uri).scheme
    if scheme != "s3":
        raise ConfigError(f"key 'storage' = {uri!r}: scheme {scheme}:// is not supported; allowed: a local directory or s3://bucket/prefix")
    parts = urlsplit(uri)
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    secrets = sorted(set(query) & set(SECRET_QUERY_KEYS))
    if secrets:
        raise ConfigError(
            f"key 'storage': the URI carries {', '.join(secrets)}; credentials come only from the environment "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN): remove them from the URI"
        )
    unknown = sorted(set(query) - set(S3_QUERY_KEYS))
    if unknown or not parts.netloc:
        problem = f"unknown option {', '.join(unknown)}" if unknown else "no bucket"
        raise ConfigError(f"key 'storage' = {uri!r}: {problem}; write s3://bucket/prefix, optionally ?{'&'.join(k + '=...' for k in S3_QUERY_KEYS)}")
    fs = pafs.S3FileSystem(request_timeout=S3_REQUEST_TIMEOUT_S, connect_timeout=S3_CONNECT_TIMEOUT_S, **_s3_options(query))
    return Storage(uri, fs, (parts.netloc + parts.path).rstrip("/"))


def _s3_options(query: dict[str, str]) -> dict[str, str]:
    """Endpoint, scheme and region from the URI's query, else from AWS_ENDPOINT_URL / AWS_REGION / AWS_DEFAULT_REGION."""
    options: dict[str, str] = {}
    endpoint = query.get("endpoint_override") or environ.AWS_ENDPOINT_URL.get("")
    if "://" in endpoint:
        options["scheme"], endpoint = endpoint.split("://", 1)
    if endpoint:
        options["endpoint_override"] = endpoint.rstrip("/")
    if query.get("scheme"):
        options["scheme"] = query["scheme"]
    region = query.get("region") or environ.AWS_REGION.get() or environ.AWS_DEFAULT_REGION.get()
    if region:
        options["region"] = region
    return options


def split_experiment(uri: str) -> tuple[str, str]:
    """``s3://b/p/name?q`` -> (``s3://b/p?q``, ``name``); ``dir/name`` -> (``dir``, ``name``)."""
    if "://" not in uri:
        path = Path(uri).expanduser().resolve()
        return str(path.parent), path.name
    parts = urlsplit(uri)
    parent, _, name = parts.path.rstrip("/").rpartition("/")
    if not name:
        raise ConfigError(f"{uri!r}: name the sweep's directory, s3://bucket/prefix/NAME")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{parent}{query}", name


def optuna_db_path(store: Storage, name: str) -> Path:
    """The study's SQLite file: in the experiment directory when local; else a local copy named after the
    experiment, the same path on every machine (Tune pickles the searcher, and with it this path)."""
    if store.is_local:
        return Path(store.path(name, "optuna.db"))
    key = hashlib.sha1(store.path(name).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "grpo-sweep-optuna" / key / "optuna.db"


_PUSHED: dict[Path, tuple[int, int]] = {}  # the study file's (size, mtime) when last copied up


def push_study(store: Storage, name: str) -> None:
    """Copy the local study up to ``{name}/optuna.db`` when it changed (S3 only; a local study already lives there)."""
    local = optuna_db_path(store, name)
    if store.is_local or not local.is_file():
        return
    stamp = (local.stat().st_size, local.stat().st_mtime_ns)
    if _PUSHED.get(local) != stamp:
        store.upload(local, name, "optuna.db")
        _PUSHED[local] = stamp


def pull_study(store: Storage, name: str) -> Path:
    """Before resuming on any machine: the study's local copy from storage (S3 only); returns its path."""
    local = optuna_db_path(store, name)
    local.parent.mkdir(parents=True, exist_ok=True)
    if not store.is_local:
        local.unlink(missing_ok=True)
        store.download(local, name, "optuna.db")
    return local


class DirMirror:
    """Mirrors a local directory to a storage path: each ``push`` uploads files new or changed since the last.

    Trials write eval trajectories to a local directory (the trainer knows only paths); with S3 storage the
    reporter pushes before each report, so whatever a step wrote is in the bucket before Tune sees the step.
    """

    def __init__(self, local: str | Path, store: Storage, *parts: str):
        self.local, self.store, self.parts = Path(local), store, parts
        self._seen: dict[Path, tuple[int, int]] = {}

    def pull(self) -> None:
        """Start from what storage already holds (a resumed trial appends to its earlier files)."""
        self.store.download(self.local, *self.parts)
        self._seen = self._snapshot()

    def push(self) -> None:
        now = self._snapshot()
        for path, stamp in now.items():
            if self._seen.get(path) != stamp:
                self.store.upload(path, *self.parts, path.relative_to(self.local).as_posix())
        self._seen = now

    def _snapshot(self) -> dict[Path, tuple[int, int]]:
        if not self.local.is_dir():
            return {}
        return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in self.local.rglob("*") if p.is_file()}
