"""Start local apps' MCP servers as child processes (one, or a trial's pool), wait until they listen, always stop them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from configkit import environ

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
        return self.launch().wait_ready()

    def launch(self) -> LocalEnvServer:
        """Start the process without waiting for it (a pool starts all its servers, then waits)."""
        env = environ.child_environment(PYTHONPATH=os.pathsep.join(filter(None, [_ROOT, environ.PYTHONPATH.get()])))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolenvs.local.server", "--app", self.env_key, "--no-default-episode", "--parent-pid", str(os.getpid())],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        return self

    def wait_ready(self) -> LocalEnvServer:
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
            try:  # stdout closed: it is exiting, so its status is a moment away
                status = self.process.wait(5) if line == "" and found else self.process.poll()
            except subprocess.TimeoutExpired:
                status = None
            self.stop()
            why = f"exited with status {status} (its error is above)" if status is not None else f"did not start within {self.ready_timeout_s:.0f}s"
            raise RuntimeError(f"env server {self.env_key!r} {why}")
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


class EnvServerPool:
    """``with EnvServerPool(["hotel", ...]) as urls:`` — a trial's servers, one per env_key, started in
    parallel and always stopped (each also exits by itself if the trial process dies)."""

    def __init__(self, env_keys: list[str], ready_timeout_s: float = READY_TIMEOUT_S):
        self.servers = {key: LocalEnvServer(key, ready_timeout_s) for key in dict.fromkeys(env_keys)}

    def __enter__(self) -> dict[str, str]:
        try:
            for server in self.servers.values():
                server.launch()
            return {key: server.wait_ready().base_url for key, server in self.servers.items()}
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()

    def __exit__(self, *exc: object) -> None:
        self.stop()
