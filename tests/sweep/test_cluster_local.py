"""sweep.cluster_local: the local-provider config derived from cluster.yaml passes Ray's own checks (as
``ray up`` runs them before touching a machine) and keeps what it says it keeps; the SSH relay pipes bytes."""

from __future__ import annotations

import copy
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from sweep.cluster_local import HEAD_PORT_FLAGS, LocalCluster, derive, main

CLUSTER = Path(__file__).resolve().parents[2] / "cluster.yaml"
PORTS = {flag: 20000 + i for i, flag in enumerate(HEAD_PORT_FLAGS)}


@pytest.fixture(scope="module")
def cluster() -> dict:
    return yaml.safe_load(CLUSTER.read_text())


@pytest.fixture(scope="module")
def derived(cluster) -> dict:
    machines = LocalCluster(head_ip="10.0.0.1", worker_ips=("10.0.0.2", "10.0.0.3"), ssh_user="me", head_cpus=8, ports=PORTS)
    return derive(cluster, machines)


def test_ray_accepts_the_derived_config(derived):
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = prepare_config(copy.deepcopy(derived))
    validate_config(config)
    assert config["provider"] == {"type": "local", "head_ip": "10.0.0.1", "worker_ips": ["10.0.0.2", "10.0.0.3"]}
    assert config["available_node_types"]["local.cluster.node"]["max_workers"] == 2


def test_mounts_secrets_and_start_lines_are_cluster_yamls(cluster, derived):
    for key in ("file_mounts", "rsync_exclude", "rsync_filter", "idle_timeout_minutes"):
        assert derived[key] == cluster[key]
    head = [c for c in cluster["head_start_ray_commands"] if c != "ray stop"]
    assert len(derived["head_start_ray_commands"]) == len(head) == 1
    line = derived["head_start_ray_commands"][0]
    for kept in (". ~/.grpo-sweep.env", "ray start --head", "--autoscaling-config=~/ray_bootstrap_config.yaml", "--dashboard-host=127.0.0.1"):
        assert kept in line


def test_nothing_stops_other_rays_and_ports_are_ours(derived):
    commands = derived["setup_commands"] + derived["head_start_ray_commands"] + derived["worker_start_ray_commands"]
    assert not any("ray stop" in c for c in commands)
    head = derived["head_start_ray_commands"][0]
    for flag, port in PORTS.items():
        assert head.count(f"--{flag}=") == 1 and f"--{flag}={port}" in head
    assert "--port=6379" not in head and "--node-ip-address=10.0.0.1" in head and "--num-cpus=8" in head
    worker = derived["worker_start_ray_commands"][0]
    assert f"--address=$RAY_HEAD_IP:{PORTS['port']}" in worker and "--dashboard-port" not in worker
    assert f"--object-manager-port={PORTS['object-manager-port']}" in worker


def test_setup_is_bootstrap_not_the_gpu_workers(derived):
    setup = " ".join(derived["setup_commands"] + derived["head_setup_commands"] + derived["worker_setup_commands"])
    assert "bash scripts/bootstrap.sh" in setup and "touch ~/.grpo-sweep.env" in setup
    for gone in ("[gpu]", "snapshot_download", "cuda.device_count", "pip install"):
        assert gone not in setup


def test_ulimit_falls_back_to_the_hard_limit(derived):
    line = derived["head_start_ray_commands"][0]
    assert '{ ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; }' in line
    done = subprocess.run(["bash", "-c", line.split(" && ray start")[0].replace(". ~/.grpo-sweep.env", "true")], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_ssh_port_goes_through_the_relay(cluster):
    auth = derive(cluster, LocalCluster(head_ip="127.0.0.1", ssh_port=2222))["auth"]
    assert auth["ssh_proxy_command"].endswith("-m sweep.cluster_local relay %h 2222")
    assert "ssh_proxy_command" not in derive(cluster, LocalCluster(head_ip="127.0.0.1"))["auth"]


def test_unknown_port_flag_is_named():
    with pytest.raises(ValueError, match="dashboard-prot.*allowed: port, object-manager-port"):
        LocalCluster(head_ip="127.0.0.1", ports={"dashboard-prot": 1})


def test_cli_writes_the_config(tmp_path):
    out = tmp_path / "local.yaml"
    main(["derive", str(CLUSTER), "--head-ip", "192.168.1.5", "--ssh-user", "me", "--cluster-name", "mine", "-o", str(out)])
    config = yaml.safe_load(out.read_text())
    assert config["cluster_name"] == "mine" and config["provider"]["head_ip"] == "192.168.1.5" and config["max_workers"] == 0


def test_cli_sets_ray_ports_and_names_a_bad_one(tmp_path, capsys):
    out = tmp_path / "local.yaml"
    main(["derive", str(CLUSTER), "--head-ip", "10.0.0.1", "--worker-ip", "10.0.0.2", "--ray-port", "port=6380",
          "--ray-port", "object-manager-port=8076", "-o", str(out)])
    config = yaml.safe_load(out.read_text())
    head, worker = config["head_start_ray_commands"][-1], config["worker_start_ray_commands"][-1]
    assert "--port=6380" in head and "--object-manager-port=8076" in head, head
    assert "--address=$RAY_HEAD_IP:6380" in worker and "--object-manager-port=8076" in worker, worker
    for bad, named in (("dashbord-port=1", "dashbord-port"), ("port=x", "'port=x'"), ("port=70000", "'port=70000'")):
        with pytest.raises(SystemExit) as exit_:
            main(["derive", str(CLUSTER), "--head-ip", "10.0.0.1", "--ray-port", bad, "-o", str(tmp_path / "bad.yaml")])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and named in err and "dashboard-port" in err and "Traceback" not in err, err
    assert not (tmp_path / "bad.yaml").exists()


def test_relay_pipes_both_ways():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def echo_upper():
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data.upper())

    threading.Thread(target=echo_upper, daemon=True).start()
    relay = [sys.executable, "-m", "sweep.cluster_local", "relay", "127.0.0.1", str(server.getsockname()[1])]
    done = subprocess.run(relay, input=b"ssh-2.0 hello\n", capture_output=True, timeout=30)
    server.close()
    assert done.returncode == 0 and done.stdout == b"SSH-2.0 HELLO\n", done.stderr


def test_cli_never_writes_over_a_file_unasked_nor_over_its_own_input(tmp_path, capsys):
    """-o onto cluster.yaml itself replaced it with the derived config (123 lines became 37); an existing -o file is
    replaced only with --force; a missing cluster.yaml is named, not a traceback."""
    import shutil

    source = tmp_path / "cluster.yaml"
    shutil.copy(CLUSTER, source)
    out = tmp_path / "local.yaml"
    out.write_text("mine\n")
    for args, named in ((["-o", str(source), "--force"], "is the cluster.yaml it derives from"), (["-o", str(out)], "exists: give --force"),
                        (["-o", str(tmp_path / "new.yaml"), "--cluster-name", "x"], "no such file")):
        given = str(tmp_path / "absent.yaml") if named == "no such file" else str(source)
        with pytest.raises(SystemExit) as exit_:
            main(["derive", given, "--head-ip", "10.0.0.1", *args])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and named in err and "Traceback" not in err, err
    assert source.read_text() == CLUSTER.read_text() and out.read_text() == "mine\n" and not (tmp_path / "new.yaml").exists()
    main(["derive", str(source), "--head-ip", "10.0.0.1", "-o", str(out), "--force"])
    assert yaml.safe_load(out.read_text())["provider"]["head_ip"] == "10.0.0.1"
