"""The cluster path for real, on one machine: ``ray up`` of the config ``sweep.cluster_local`` derives from
cluster.yaml (Ray's ``local`` provider, head 127.0.0.1), then ``ray submit`` of a tiny CPU sweep,
``ray job submit`` of another (its status, logs and trial actor read back through the dashboard's HTTP API, as
``curl`` would), the leaderboards fetched back with ``ray rsync-down``, and ``ray down``.

The head is "a machine" reached over SSH: an ``sshd`` this test starts on a free port with its own config,
host key and authorized key, in its own PID namespace (``unshare --pid --mount-proc``). The namespace is
why ``ray down`` may run Ray's own teardown, ``ray stop``, which stops every Ray process it can see: in
there it sees only this cluster's, so the other Rays on the host (and a decoy a host-wide ``ray stop``
would kill) survive; killing the namespace's first process at the end stops whatever is left. The node's
environment (sshd ``SetEnv``, and commands start in its HOME): HOME and RAY_TMPDIR in this test's temporary
dir, token auth off; the client's HOME, RAY_TMPDIR and TMPDIR are the test's too.

One shortcut, for time: the head's ``~/grpo-sweep/.venv`` is made before ``ray up`` as a thin venv
layered on this test's venv, with the stamp ``scripts/bootstrap.sh`` leaves, so the derived setup's
``bash scripts/bootstrap.sh`` runs and finds it current (a real build in a clean SSH environment took
5 min 50 s and 6 GB here: without this machine's PIP_FIND_LINKS, pip picks torch's CUDA wheel). Not a
link to this test's venv: were the stamp stale, bootstrap.sh would reinstall the project into it from the
head's copy, which this test deletes.
Needs root, ``sshd``, ``rsync`` and ``unshare`` (scripts/ci_deps.sh installs the first two).
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from sweep.cluster_local import HEAD_PORT_FLAGS, LocalCluster, derive
from tests.support.ports import free_ports
from tests.support.ray_jobs import get_json, tiny_space, wait_for_client

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@dataclass(frozen=True)
class Node:
    """The SSH-reachable "machine" the head runs on."""

    home: Path
    ssh_port: int
    ssh_key: Path
    init_pid: int  # the namespace's first process (sshd); its death ends every process in there


def missing_tools() -> list[str]:
    wanted = {"sshd": Path(SSHD).exists(), "rsync": shutil.which("rsync"), "unshare": shutil.which("unshare"),
              "ssh-keygen": shutil.which("ssh-keygen"), "root": os.geteuid() == 0}
    return [name for name, found in wanted.items() if not found]


def namespace_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


def processes_in(namespace: str) -> dict[int, str]:
    """pid -> command line of every live (not zombie) process in that PID namespace, as the host sees them."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                zombie = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
                if os.readlink(entry / "ns/pid") == namespace and not zombie:
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
    return found


def wait_for_sshd(process: subprocess.Popen, port: int, log: Path, deadline_s: float = 20) -> None:
    """Poll until sshd accepts on ``port``; fail with its log if it (or ``unshare``) exited or never listened."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            why = "exited" if process.poll() is not None else "not listening" if time.monotonic() > deadline else ""
            assert not why, f"sshd under `unshare --pid` {why} (needs root with CAP_SYS_ADMIN): {log.read_text()[-2000:]}"
            time.sleep(0.1)


def sshd_config(base: Path, port: int, node_home: Path) -> str:
    env = {"HOME": node_home, "RAY_TMPDIR": base / "nt", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    return "\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {base / 'k' / 'host'}",
        f"AuthorizedKeysFile {base / 'k' / 'user.pub'}", "PidFile none", "PermitRootLogin prohibit-password",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        "SetEnv " + " ".join(f"{k}={v}" for k, v in env.items()),
        'ForceCommand cd "$HOME" && eval "$SSH_ORIGINAL_COMMAND"',  # sshd starts in the passwd home; a node's is HOME
        "",
    ])


@pytest.fixture
def node() -> Iterator[Node]:
    """An sshd on a free 127.0.0.1 port in a new PID namespace; stopped (with all it started) at the end."""
    if missing := missing_tools():
        pytest.skip(f"the loopback cluster needs {', '.join(missing)}: run `bash scripts/ci_deps.sh` as root")
    base = Path(tempfile.mkdtemp(prefix="rl", dir="/tmp"))  # Ray's socket paths under it must stay short
    (base / "k").mkdir()
    home = base / "n"
    home.mkdir()
    for name in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / "k" / name)], check=True)
    (port,) = free_ports(1)
    (base / "sshd_config").write_text(sshd_config(base, port, home))
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory (the package's service makes it)
    log = open(base / "sshd.log", "wb")
    unshare = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", SSHD, "-D", "-e", "-f",
                                str(base / "sshd_config")], stdout=log, stderr=log, start_new_session=True)
    try:
        wait_for_sshd(unshare, port, base / "sshd.log")
        (child,) = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read_text().split()
        yield Node(home=home, ssh_port=port, ssh_key=base / "k" / "user", init_pid=int(child))
    finally:
        unshare.kill()  # --kill-child: sshd (the namespace's init) dies, and the kernel ends everything in there
        unshare.wait(timeout=30)
        log.close()
        shutil.rmtree(base, ignore_errors=True)


def seed_head_venv(project: Path) -> None:
    """``~/grpo-sweep/.venv`` as bootstrap.sh leaves it, without installing: a venv whose site-packages put
    the mounted project first and this test's venv after it, with ``ray`` on its PATH and bootstrap's stamp."""
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    layer = f"{project}\nimport site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
    (venv / "lib" / version / "site-packages" / "_grpo_sweep_layer.pth").write_text(layer)
    ray = venv / "bin" / "ray"
    ray.write_text(f"#!{venv}/bin/python\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n")
    ray.chmod(0o755)
    (venv / ".grpo-sweep-installed").write_text(f"{hashlib.sha256((ROOT / 'pyproject.toml').read_bytes()).hexdigest()} dev\n")


def ray_cli(args: list[str], env: dict[str, str], timeout_s: float) -> str:
    """Run ``ray ARGS`` from the checkout (file_mounts' ``.``) and return its output; fail with its tail."""
    done = subprocess.run([str(VENV_BIN / "ray"), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"ray {' '.join(args)} exited {done.returncode}:\n{output[-4000:]}"
    return output


def decoy() -> subprocess.Popen:
    """A process a host-wide ``ray stop`` would kill (its command line names a Ray worker script)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", "default_worker.py"], start_new_session=True)


@pytest.mark.slow
@pytest.mark.e2e
def test_ray_up_submit_job_submit_down_on_loopback(node, tmp_path, monkeypatch):
    from ray.job_submission import JobStatus

    ports = dict(zip(HEAD_PORT_FLAGS, free_ports(len(HEAD_PORT_FLAGS)), strict=True))
    name = f"loopback-{uuid.uuid4().hex[:8]}"
    client_home = tmp_path / "client-home"
    spaces = tmp_path / "spaces"
    client_home.mkdir()
    spaces.mkdir()
    # the secrets file cluster.yaml mounts and loads into Ray's environment: only through it do trials learn where
    # to build the tiny base policy, so a base in `cache` at the end shows the file reached them
    cache = tmp_path / "cache"
    (client_home / ".grpo-sweep.env").write_text(f"export GRPO_SWEEP_CACHE={cache}\nexport TOKENIZERS_PARALLELISM=false\n")
    results = node.home / "results"
    for space in ("submit", "job"):
        (spaces / f"{space}.yaml").write_text(yaml.safe_dump(tiny_space(space, results)))
    machines = LocalCluster(head_ip="127.0.0.1", ssh_user="root", ssh_private_key=str(node.ssh_key), ssh_port=node.ssh_port,
                            head_cpus=2, ports=ports, cluster_name=name)
    config = derive(yaml.safe_load((ROOT / "cluster.yaml").read_text()), machines)
    config["file_mounts"]["~/loopback"] = str(spaces)  # the test's space files, beside the project and the secrets file
    config_path = tmp_path / "local.yaml"
    config_path.write_text(yaml.safe_dump(config))
    (node.home / "grpo-sweep").mkdir()
    seed_head_venv(node.home / "grpo-sweep")
    client_tmp = tmp_path / "client-tmp"
    client_tmp.mkdir()
    env = {**os.environ, "HOME": str(client_home), "RAY_TMPDIR": str(client_tmp), "TMPDIR": str(client_tmp),
           "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("RAY_ADDRESS", None)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    namespace = namespace_of(node.init_pid)
    bystander = decoy()
    address = f"http://127.0.0.1:{ports['dashboard-port']}"
    took: dict[str, float] = {}
    try:
        took["start"] = time.monotonic()
        up = ray_cli(["up", "-y", "--no-config-cache", str(config_path)], env, timeout_s=300)
        assert "bootstrap: installing" not in up  # the seeded venv was current: the setup installed nothing
        head = processes_in(namespace)
        assert any("gcs_server" in c and str(ports["port"]) in c for c in head.values()), head
        assert not any("ray stop" in c for c in config["head_start_ray_commands"])

        took["ray up"] = time.monotonic()
        submitted = ray_cli(["submit", str(config_path), "sweep/__main__.py", "run", "loopback/submit.yaml"], env, timeout_s=300)
        assert "Leaderboard" in submitted
        took["ray submit"] = time.monotonic()

        client = wait_for_client(address)
        job_id = f"loopback-{uuid.uuid4().hex[:8]}"
        ray_cli(["job", "submit", "--address", address, "--working-dir", ".", "--submission-id", job_id, "--no-wait", "--",
                 "python", "-m", "sweep", "run", str(node.home / "loopback" / "job.yaml")], env, timeout_s=120)
        deadline = time.monotonic() + 300
        while (status := client.get_job_status(job_id)) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
            assert time.monotonic() < deadline, client.get_job_logs(job_id)[-3000:]
            time.sleep(1)
        logs = client.get_job_logs(job_id)
        assert status == JobStatus.SUCCEEDED, logs[-3000:]
        assert "Leaderboard" in logs and f"results: {results / 'job'}" in logs
        # the same through the dashboard's HTTP API, as `curl` or a browser would read it
        job = get_json(f"{address}/api/jobs/{job_id}")
        assert job["status"] == "SUCCEEDED" and job["entrypoint"].endswith(f"sweep run {node.home / 'loopback' / 'job.yaml'}")
        assert "Leaderboard" in get_json(f"{address}/api/jobs/{job_id}/logs")["logs"]
        actors = get_json(f"{address}/api/v0/actors?detail=1&limit=100")["data"]["result"]["result"]
        trials = [a for a in actors if a.get("class_name") == "ImplicitFunc" and a.get("job_id") == job["driver_info"]["id"]]
        assert len(trials) == 1 and trials[0]["state"] == "DEAD"
        took["ray job submit"] = time.monotonic()
        drivers = [j.entrypoint for j in client.list_jobs() if j.type == "DRIVER"]  # `ray submit`'s driver joined this cluster
        assert any("__main__.py run" in (e or "") for e in drivers), drivers
        assert any(cache.iterdir()), "no base policy in the secrets file's GRPO_SWEEP_CACHE: the file did not reach the trials"

        fetched = tmp_path / "fetched"
        ray_cli(["rsync-down", str(config_path), "~/results/", str(fetched)], env, timeout_s=120)
        for space in ("submit", "job"):
            rows = json.loads((fetched / space / "leaderboard.json").read_text())
            assert len(rows) == 1 and rows[0]["status"] == "finished" and rows[0]["steps"] == 2, rows
        took["ray rsync-down"] = time.monotonic()

        ray_cli(["down", "-y", str(config_path)], env, timeout_s=120)
        left = {pid: c for pid, c in processes_in(namespace).items() if not c.startswith("sshd")}
        assert not left, f"ray down left these running on the head: {left}"
        assert bystander.poll() is None, "a Ray-looking process outside the head's namespace was stopped"
        took["ray down"] = time.monotonic()
        steps = list(took.items())
        print("loopback cluster, seconds:", {name: round(t - before, 1) for (_, before), (name, t) in zip(steps, steps[1:])})
    finally:
        os.killpg(bystander.pid, signal.SIGKILL)
        bystander.wait()
        shutil.rmtree(ssh_control_dir(name), ignore_errors=True)
        with contextlib.suppress(OSError):
            ssh_control_dir(name).parent.rmdir()  # only if no other cluster's sockets are in it


def ssh_control_dir(cluster_name: str) -> Path:
    """Where Ray's SSH runner keeps this cluster's ControlMaster sockets (command_runner.SSHCommandRunner)."""
    user, cluster = (hashlib.sha256(s.encode()).hexdigest()[:10] for s in (getpass.getuser(), cluster_name))
    return Path(f"/tmp/ray_ssh_{user}") / cluster
