"""``ray job submit`` end to end against a local ``ray start --head`` this test starts: the README's command
(``ray job submit --working-dir . -- python -m sweep run SPACE``) runs the sweep as a Ray job from a copy
of the working directory, reaches SUCCEEDED with the leaderboard in its logs, and its
status, logs and trial actors read back through the dashboard's HTTP API.

The head runs in this venv's Python (the job runs in the cluster's Python), with its own RAY_TMPDIR, free
ports, 127.0.0.1 only, and token auth off for server and client alike; everything it started is stopped
by process group and by a marker in the processes' environment (never ``ray stop``, which would stop
every Ray on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.conftest import TEST_MODEL

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
MARKER = "GRPO_TEST_RAY_HEAD"


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def kill_marked(value: str) -> None:
    """SIGKILL every process whose environment carries this test's marker (Ray's agents and workers included)."""
    wanted = f"{MARKER}={value}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


@contextmanager
def ray_head(extra_env: dict[str, str]) -> Iterator[str]:
    """``ray start --head --block`` on 127.0.0.1 with free ports; yields the dashboard's address."""
    tmp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # Ray's socket paths must stay short
    marker = uuid.uuid4().hex
    gcs, dashboard, agent, agent_grpc, metrics, client, runtime_env, node_manager, object_manager = free_ports(9)
    env = {**os.environ, **extra_env, MARKER: marker, "RAY_TMPDIR": tmp, "RAY_AUTH_MODE": "disabled",
           "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "RAY_USAGE_STATS_ENABLED": "0"}
    command = [
        str(VENV_BIN / "ray"), "start", "--head", "--block", "--num-cpus", "2", "--num-gpus", "0", "--temp-dir", tmp,
        "--node-ip-address", "127.0.0.1", "--port", str(gcs), "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
        "--dashboard-port", str(dashboard), "--dashboard-agent-listen-port", str(agent), "--dashboard-agent-grpc-port", str(agent_grpc),
        "--metrics-export-port", str(metrics), "--ray-client-server-port", str(client), "--runtime-env-agent-port", str(runtime_env),
        "--node-manager-port", str(node_manager), "--object-manager-port", str(object_manager), "--disable-usage-stats",
    ]
    head = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield f"http://127.0.0.1:{dashboard}"
    finally:
        try:
            os.killpg(head.pid, signal.SIGTERM)  # --block stops the processes it started
            head.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(head.pid, signal.SIGKILL)
        kill_marked(marker)
        shutil.rmtree(tmp, ignore_errors=True)


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def wait_for_client(address: str, deadline_s: float = 90):
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return JobSubmissionClient(address)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def space_data(name: str, storage: Path) -> dict:
    """One trial of 2 GRPO steps on the tiny test model, one CPU (the loopback cluster test submits it too)."""
    return {
        "name": name,
        "trainer": {"total_steps": 2, "model": TEST_MODEL, "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2}},
        "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}},
        "search": {"searcher": "random", "num_samples": 1, "seed": 0},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 1},
        "max_concurrent_trials": 1,
        "storage": str(storage),
    }


def tiny_space(tmp_path: Path) -> Path:
    space = space_data("job", tmp_path / "results")
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


@pytest.mark.slow
@pytest.mark.e2e
def test_ray_job_submit_runs_the_sweep(tmp_path, private_cache, monkeypatch):
    from ray.job_submission import JobStatus

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the client as the head: token auth off on both sides
    space = tiny_space(tmp_path)
    with ray_head({"GRPO_SWEEP_CACHE": str(private_cache)}) as address:
        client = wait_for_client(address)
        job_id = f"sweep-{uuid.uuid4().hex[:8]}"
        # the documented command, verbatim: Ray skips .git, .venv and .gitignore'd paths when it packs `.`
        submit = [str(VENV_BIN / "ray"), "job", "submit", "--address", address, "--working-dir", ".", "--submission-id", job_id,
                  "--no-wait", "--", "python", "-m", "sweep", "run", str(space)]
        sent = subprocess.run(submit, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        deadline = time.monotonic() + 240
        while (status := client.get_job_status(job_id)) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
            assert time.monotonic() < deadline, client.get_job_logs(job_id)[-3000:]
            time.sleep(1)
        logs = client.get_job_logs(job_id)
        assert status == JobStatus.SUCCEEDED, logs[-3000:]
        assert "Leaderboard" in logs and f"results: {tmp_path / 'results' / 'job'}" in logs

        # the same through the dashboard's HTTP API, as `curl` or a browser would read it
        job = get_json(f"{address}/api/jobs/{job_id}")
        assert job["status"] == "SUCCEEDED" and job["entrypoint"] == f"python -m sweep run {space}"
        http_logs = get_json(f"{address}/api/jobs/{job_id}/logs")["logs"]
        assert "Leaderboard" in http_logs
        actors = get_json(f"{address}/api/v0/actors?detail=1&limit=100")["data"]["result"]["result"]
        trials = [a for a in actors if a.get("class_name") == "ImplicitFunc" and a.get("job_id") == job["driver_info"]["id"]]
        assert len(trials) == 1 and trials[0]["state"] == "DEAD"

    rows = json.loads((tmp_path / "results" / "job" / "leaderboard.json").read_text())
    assert len(rows) == 1 and rows[0]["status"] == "finished" and rows[0]["steps"] == 2
    assert rows[0]["trial"] in logs
