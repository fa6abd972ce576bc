"""Which process drives a sweep now: a marker in the sweep's folder, so that a second driver of the same sweep is
refused before it deletes or restores anything.

``sweep run`` and ``sweep resume`` write ``{storage}/{name}/driver.json`` (the host, the process id and its start
time, when, which command) before anything else of theirs, and remove it when they end, however they end; a driver
killed outright (``kill -9``, a machine lost) leaves it behind. Another ``run`` or ``resume`` of the same sweep reads
it first (``check_free``): a process on this machine that is still the one that wrote it (its id alive, with the same
start time where the system tells one) is a live driver, and is refused, named; one that is gone is no obstacle. A
marker from another host, or from another process namespace on this one (a container sharing the host's name), cannot
be checked from here: ``run`` refuses it unless ``--fresh`` says to start over, and
``resume`` (the way to continue a sweep whose machine died, from any other) goes on and says whose it was. Without
it, a second ``sweep run`` of a name whose first start was still building its bases deleted that start's folder, and
a ``sweep resume`` of a sweep whose driver was alive ran its trials twice.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from configkit.base import ConfigError
from sweep.store.storage import Storage

DRIVER_FILE = "driver.json"


@dataclass(frozen=True)
class Driver:
    host: str
    pid: int
    pid_start: str | None  # the process's start time as the system counts it (Linux: /proc/{pid}/stat), else None
    started: float  # when it claimed the sweep (seconds since the epoch)
    command: str  # "sweep run" or "sweep resume"
    pid_ns: str | None = None  # its process namespace (Linux: /proc/self/ns/pid), where ids mean what they mean here


def pid_namespace() -> str | None:
    """This process's pid namespace (``pid:[4026531836]``), or None where the system has none to tell: two containers
    may share a host's name, each with its own process ids."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks after boot (field 22 of ``/proc/{pid}/stat``), or None where there is
    no such file: with the id, it names one process, not a later one that was given the same id."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # after the command's name, which may hold spaces and parentheses


def process_alive(pid: int, pid_start: str | None) -> bool:
    """Whether the process ``pid`` runs on this machine and, where its start time was recorded, is the same one."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    return pid_start is None or process_start(pid) in (None, pid_start)


def standing(marker: Driver, host: str, alive: Callable[[int, str | None], bool], me: int, pid_ns: str | None = None) -> str:
    """``live`` (a process on this host, still the one that wrote the marker, and not this one), ``gone`` (it ended,
    or it is this very process), or ``elsewhere`` (another host's or process namespace's: not to be checked from here)."""
    if marker.host != host or marker.pid_ns != pid_ns:
        return "elsewhere"
    return "live" if marker.pid != me and alive(marker.pid, marker.pid_start) else "gone"


def this_driver(command: str) -> Driver:
    return Driver(socket.gethostname(), os.getpid(), process_start(os.getpid()), time.time(), command, pid_namespace())


def read_marker(store: Storage, name: str) -> Driver | None:
    """The sweep's marker, or None where there is none or it cannot be read (a damaged marker names no process)."""
    if not store.exists(name, DRIVER_FILE):
        return None
    try:
        data = json.loads(store.read_text(name, DRIVER_FILE))
        return Driver(str(data["host"]), int(data["pid"]), data.get("pid_start"), float(data["started"]), str(data["command"]), data.get("pid_ns"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_free(store: Storage, name: str, command: str, elsewhere: str) -> None:
    """Refuse when another driver runs the sweep now (``standing``). ``elsewhere``: what a marker from another host
    gets: ``refuse`` (``run`` without ``--fresh``) or ``note`` (``resume``, ``run --fresh``: said, then on)."""
    marker = read_marker(store, name)
    if marker is None:
        return
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(marker.started))
    where = store.display(name)
    state = standing(marker, socket.gethostname(), process_alive, os.getpid(), pid_namespace())
    if state == "live":
        raise ConfigError(
            f"{where}: `{marker.command}` is driving this sweep now (process {marker.pid} on this machine, since {since}); "
            f"a second `{command}` would run its trials twice or delete what it is building. Wait for it to end, or stop it "
            f"(`kill -INT {marker.pid}`: it stops as a driver that died does, and `python -m sweep resume` continues it)")
    if state == "elsewhere":
        other = "in another container (process namespace) on this host" if marker.host == socket.gethostname() else f"on host {marker.host}"
        said = (f"{where}: `{marker.command}` of process {marker.pid} {other} (since {since}) has not ended as far as "
                "the sweep's folder says (its driver.json)")
        if elsewhere == "refuse":
            raise ConfigError(f"{said}. If that process still runs, let it end; if it is gone (its machine lost), start over with "
                              "`python -m sweep run SPACE --fresh`, or continue it with `python -m sweep resume` once it has a first trial")
        print(f"{said}; going on: if that process still runs, stop one of the two (two drivers of one sweep run its trials twice)",
              file=sys.stderr, flush=True)


def claim(store: Storage, name: str, command: str) -> Driver:
    """Write this process's marker into the sweep's folder; returns it (for ``release``)."""
    me = this_driver(command)
    store.write_text(json.dumps(asdict(me)), name, DRIVER_FILE)
    return me


def release(store: Storage, name: str, me: Driver) -> None:
    """Remove the marker if it is still this process's (a later driver's is not ours to remove). Never raises: the
    sweep's results stand, and a marker left behind names a process that is gone."""
    try:
        if read_marker(store, name) == me:
            store.delete(name, DRIVER_FILE)
    except OSError as exc:
        print(f"{store.display(name, DRIVER_FILE)} could not be removed ({exc}); the next run finds its process gone", file=sys.stderr)
