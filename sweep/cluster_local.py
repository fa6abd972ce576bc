"""cluster.yaml, derived for machines you already have: Ray's ``local`` (on-premise) provider.

``python -m sweep.cluster_local derive cluster.yaml --head-ip IP [--worker-ip IP ...] -o local.yaml``
writes a config that ``ray up``/``ray submit``/``ray down`` run like the AWS one, over SSH. Kept from cluster.yaml,
verbatim: ``file_mounts`` (the project at ``~/grpo-sweep``, the secrets file ``~/.grpo-sweep.env``),
``rsync_exclude``/``rsync_filter``, the commands that are not installs, and the ``ray start`` lines (the
secrets file loaded into Ray's environment, ``--autoscaling-config``, ``--dashboard-host``). Changed:

- provider: ``local`` with ``head_ip``/``worker_ips``. That provider takes no node types, so the head/H100
  types (instance types, AMIs, spot, disks) go, and with them ``CPU: 0`` on the head: trials may run there.
- setup: ``scripts/bootstrap.sh`` builds ``~/grpo-sweep/.venv`` (torch's CPU build where no GPU) and
  ``~/.bashrc`` activates it, so ``ray``, ``python`` and ``ray submit`` use it; instead of pip into the
  AMI's Python, the ``gpu`` extra (vLLM), the Qwen3-8B download and the 8-GPU check.
- start: ``ray stop`` is dropped (it stops every Ray process on the machine, whoever started it); each
  ``ray start`` gets the ports you pass (``--ray-port port=6380`` on the command line, ``LocalCluster.ports``;
  by default cluster.yaml's), the head
  ``--node-ip-address`` and, if given, ``--num-cpus``; workers dial the head's GCS port; ``ulimit -n
  65536`` falls back to the hard limit where that is lower and cannot be raised.
- auth: your SSH user and key; an SSH port other than 22 through a ProxyCommand (Ray's SSH runner has
  no port setting; ``relay`` below is that ProxyCommand).

Left out, because only a cloud has them: the H100 nodes and their ``gpu`` extra (vLLM), spot reclaims, the
autoscaler adding nodes, S3 with an instance role. ``ray down`` still runs ``ray stop`` on each node (Ray's own teardown): on a machine
that other Ray users share, that stops theirs too (tests/sweep/test_cluster_loopback.py runs the head in
its own PID namespace for this reason).
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PROJECT_DIR = "~/grpo-sweep"
ACTIVATE = f". {PROJECT_DIR}/.venv/bin/activate"
ACTIVATE_IN_BASHRC = f"grep -qxF '{ACTIVATE}' ~/.bashrc 2>/dev/null || echo '{ACTIVATE}' >> ~/.bashrc"
BOOTSTRAP = f"cd {PROJECT_DIR} && bash scripts/bootstrap.sh"
HEAD_PORT_FLAGS = (
    "port", "object-manager-port", "node-manager-port", "dashboard-port", "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port", "metrics-export-port", "ray-client-server-port", "runtime-env-agent-port",
)
"""The ``ray start --head`` flags that open a port; ``LocalCluster.ports`` may set any of them."""
WORKER_PORT_FLAGS = tuple(f for f in HEAD_PORT_FLAGS if f not in ("port", "dashboard-port", "ray-client-server-port"))


@dataclass(frozen=True)
class LocalCluster:
    """The machines the derived config runs on, and how Ray reaches them."""

    head_ip: str
    """The address the head is reached at, by you over SSH and by the workers."""
    worker_ips: tuple[str, ...] = ()
    """Worker machines; Ray's local provider keeps them all up (no autoscaling)."""
    ssh_user: str = "ubuntu"
    ssh_private_key: str = "~/.ssh/id_ed25519"
    ssh_port: int = 22
    """Other than 22: reached through ``python -m sweep.cluster_local relay`` as the ProxyCommand."""
    head_cpus: int | None = None
    """``ray start --num-cpus`` on the head; None lets Ray count them."""
    ports: dict[str, int] = field(default_factory=dict)
    """``ray start`` port flags (HEAD_PORT_FLAGS, without ``--``) to set; unset ones keep cluster.yaml's or Ray's."""
    cluster_name: str | None = None
    """None keeps cluster.yaml's; ``ray up`` with the same name updates that cluster."""

    def __post_init__(self):
        unknown = sorted(set(self.ports) - set(HEAD_PORT_FLAGS))
        if unknown:
            raise ValueError(f"LocalCluster.ports: unknown flag(s) {unknown}; allowed: {', '.join(HEAD_PORT_FLAGS)}")


def with_flags(command: str, flags: dict[str, object]) -> str:
    """``command`` with its ``ray start`` part given ``--name=value`` for each flag, replacing the same flag.

    Only the ``&&``-separated part that starts with ``ray start`` changes; its tokens are split on spaces
    (cluster.yaml's start lines quote nothing), so ``~`` and ``$RAY_HEAD_IP`` stay for the node's shell.
    """
    parts = command.split(" && ")
    for i, part in enumerate(parts):
        if part.strip().startswith("ray start"):
            tokens = [t for t in part.split() if t.split("=", 1)[0].lstrip("-") not in flags or not t.startswith("--")]
            parts[i] = " ".join(tokens + [f"--{name}={value}" for name, value in flags.items()])
    return " && ".join(parts)


def capped_ulimit(command: str) -> str:
    """``ulimit -n N`` that falls back to the hard limit where N is above it (a non-root user, a container):
    the AMI lets root raise it, a machine you have may not, and Ray starts either way."""
    return re.sub(r"ulimit -n (\d+)", r'{ ulimit -n \1 2>/dev/null || ulimit -n "$(ulimit -Hn)"; }', command)


def start_commands(commands: list[str], flags: dict[str, object]) -> list[str]:
    """cluster.yaml's start lines without ``ray stop``, the ``ray start`` in each given ``flags``, ulimit capped."""
    return [capped_ulimit(with_flags(c, flags)) for c in commands if c.strip() != "ray stop"]


def derive(cluster: dict, machines: LocalCluster) -> dict:
    """The local-provider config for ``machines`` from a parsed cluster.yaml (see the module docstring)."""
    derived = {key: copy.deepcopy(cluster[key]) for key in ("cluster_name", "upscaling_speed", "idle_timeout_minutes",
                                                             "file_mounts", "rsync_exclude", "rsync_filter") if key in cluster}
    if machines.cluster_name:
        derived["cluster_name"] = machines.cluster_name
    derived["max_workers"] = len(machines.worker_ips)
    derived["provider"] = {"type": "local", "head_ip": machines.head_ip, "worker_ips": list(machines.worker_ips)}
    derived["auth"] = {"ssh_user": machines.ssh_user, "ssh_private_key": machines.ssh_private_key}
    if machines.ssh_port != 22:
        derived["auth"]["ssh_proxy_command"] = f"{sys.executable} -m sweep.cluster_local relay %h {machines.ssh_port}"
    kept = [c for c in cluster.get("setup_commands", []) if "pip install" not in c]
    derived["setup_commands"] = [*kept, ACTIVATE_IN_BASHRC, BOOTSTRAP]
    derived["head_setup_commands"] = []
    derived["worker_setup_commands"] = []
    head_flags: dict[str, object] = {**machines.ports, "node-ip-address": machines.head_ip}
    if machines.head_cpus is not None:
        head_flags["num-cpus"] = machines.head_cpus
    worker_flags: dict[str, object] = {k: v for k, v in machines.ports.items() if k in WORKER_PORT_FLAGS}
    worker_flags["address"] = f"$RAY_HEAD_IP:{machines.ports.get('port', 6379)}"
    derived["head_start_ray_commands"] = start_commands(cluster["head_start_ray_commands"], head_flags)
    derived["worker_start_ray_commands"] = start_commands(cluster["worker_start_ray_commands"], worker_flags)
    return derived


def relay(host: str, port: int) -> None:
    """Copy stdin to ``host:port`` and the socket back to stdout: an SSH ProxyCommand for a port other than 22."""
    sock = socket.create_connection((host, port))

    def upstream():
        while data := os.read(0, 65536):
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, daemon=True).start()
    while data := sock.recv(65536):
        os.write(1, data)


def ray_ports(pairs: list[str]) -> dict[str, int]:
    """``--ray-port FLAG=PORT`` values as ``LocalCluster.ports``; a value that is not FLAG=PORT with PORT in
    1-65535 raises ValueError naming it (``LocalCluster`` names an unknown FLAG)."""
    ports = {}
    for pair in pairs:
        flag, _, port = pair.partition("=")
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"--ray-port {pair!r}: expected FLAG=PORT with PORT 1-65535, e.g. port=6380; FLAG one of {', '.join(HEAD_PORT_FLAGS)}")
        ports[flag.removeprefix("--")] = int(port)
    return ports


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sweep.cluster_local", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    derive_cmd = commands.add_parser("derive", help="write the local-provider config derived from cluster.yaml")
    derive_cmd.add_argument("cluster_yaml", type=Path)
    derive_cmd.add_argument("--head-ip", required=True)
    derive_cmd.add_argument("--worker-ip", action="append", default=[], help="repeat for each worker machine")
    derive_cmd.add_argument("--ssh-user", default="ubuntu")
    derive_cmd.add_argument("--ssh-private-key", default="~/.ssh/id_ed25519")
    derive_cmd.add_argument("--ssh-port", type=int, default=22)
    derive_cmd.add_argument("--head-cpus", type=int)
    derive_cmd.add_argument("--cluster-name")
    derive_cmd.add_argument("--ray-port", action="append", default=[], metavar="FLAG=PORT",
                            help=f"a `ray start` port, repeat for each ({', '.join(HEAD_PORT_FLAGS)}); unset ones keep cluster.yaml's")
    derive_cmd.add_argument("-o", "--output", type=Path, required=True)
    derive_cmd.add_argument("--force", action="store_true", help="replace the --output file if it exists (refused without it)")
    relay_cmd = commands.add_parser("relay", help="ProxyCommand: pipe stdin/stdout to HOST:PORT")
    relay_cmd.add_argument("host")
    relay_cmd.add_argument("port", type=int)
    args = parser.parse_args(argv)
    if args.command == "relay":
        relay(args.host, args.port)
        return
    try:
        machines = LocalCluster(head_ip=args.head_ip, worker_ips=tuple(args.worker_ip), ssh_user=args.ssh_user,
                                ssh_private_key=args.ssh_private_key, ssh_port=args.ssh_port, head_cpus=args.head_cpus,
                                ports=ray_ports(args.ray_port), cluster_name=args.cluster_name)
    except ValueError as e:
        derive_cmd.error(str(e))
    if not args.cluster_yaml.is_file():
        derive_cmd.error(f"{args.cluster_yaml}: no such file (the cluster.yaml to derive from)")
    if args.output.resolve() == args.cluster_yaml.resolve():
        derive_cmd.error(f"-o {args.output} is the cluster.yaml it derives from: write the derived config to another file")
    if args.output.exists() and not args.force:
        derive_cmd.error(f"-o {args.output} exists: give --force to replace it, or another file")
    config = derive(yaml.safe_load(args.cluster_yaml.read_text()), machines)
    args.output.write_text(f"# Derived from {args.cluster_yaml} by python -m sweep.cluster_local (README, 'Going to a cluster')\n"
                           + yaml.safe_dump(config, sort_keys=False))


if __name__ == "__main__":
    main()
