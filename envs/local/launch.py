"""Start a local app's MCP server as a child process, wait until it listens, and always stop it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

READY_TIMEOUT_S = 60.0
_ROOT = str(Path(__file__).resolve().parents[2])


class LocalEnvServer:
    """``with LocalEnvServer("hotel") as server: server.url`` — one server process for one trial."""

    def __init__(self, env_key: str, ready_timeout_s: float = READY_TIMEOUT_S):
        self.env_key = env_key
        self.ready_timeout_s = ready_timeout_s
        self.process: subprocess.Popen[str] | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalEnvServer:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "envs.local.server", "--app", self.env_key, "--parent-pid", str(os.getpid())],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.port = self._read_port()
        return self

    def _read_port(self) -> int:
        assert self.process is not None and self.process.stdout is not None
        found: list[str] = []
        reader = threading.Thread(target=lambda: found.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(self.ready_timeout_s)
        line = found[0] if found else ""
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"env server {self.env_key!r} did not start within {self.ready_timeout_s:.0f}s")
        return int(line.split()[1])

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            deadline = time.monotonic() + 5
            while self.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def __enter__(self) -> LocalEnvServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
