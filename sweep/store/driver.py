"""Which process drives a sweep now: a marker in the sweep's folder, so that a second driver of the same sweep is
refused before it deletes or restores anything.

``sweep run``, ``sweep resume`` and ``sweep confirm`` write ``{storage}/{name}/driver.json`` (the host, the process id,
its start time and pid namespace, the folder, when, which command) before anything of theirs that could clash, keep it
beating (a count rewritten every ``GRPO_SWEEP_DRIVER_BEAT_S`` seconds, 15 by default) and remove it when they end,
however they end; a driver killed outright (``kill -9``, a machine lost) leaves it behind, and it stops beating.
Another command on the same sweep reads it first (``check_free``):

- a process of this machine (and pid namespace) that is still the one that wrote it (its id alive, with the same start
  time where the system tells one) is a live driver: refused, named; one that is gone is no obstacle;
- another host's (or container's) cannot be asked: it is watched for ``MISSED`` beats; beating, it is refused; silent,
  its driver is gone, and the command goes on, saying so (a sweep whose machine was lost, started or resumed on another);
- a marker that names another folder (a sweep's folder copied or moved while it ran) is another sweep's.

Without it, a second ``sweep run`` of a name whose first start was still building its bases deleted that start's folder,
and a ``sweep resume`` of a sweep whose driver was alive ran its trials twice.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from configkit import environ
from configkit.base import ConfigError
from sweep.store.storage import Storage

DRIVER_FILE = "driver.json"
BEAT_S = 15.0  # default seconds between beats (GRPO_SWEEP_DRIVER_BEAT_S)
MISSED = 3  # beats another host's marker must miss before its driver counts as gone


@dataclass(frozen=True)
class Driver:
    host: str
    pid: int
    pid_start: str | None  # the process's start time as the system counts it (Linux: /proc/{pid}/stat), else None
    started: float  # when it claimed the sweep (seconds since the epoch)
    command: str  # "sweep run", "sweep resume" or "sweep confirm"
    pid_ns: str | None = None  # its process namespace (Linux: /proc/self/ns/pid), where ids mean what they mean here
    folder: str | None = None  # the sweep's folder it claimed (``Storage.display``)
    beat: int = 0  # rewritten while it runs: a marker whose count stops changing names a driver that is gone

    def same_claim(self, other: Driver | None) -> bool:
        """The same process's claim, whatever its beat."""
        return other is not None and replace(other, beat=0) == replace(self, beat=0)


def beat_s() -> float:
    """Seconds between a driver's beats (``GRPO_SWEEP_DRIVER_BEAT_S``; a value that is no positive number: the default)."""
    try:
        value = float(environ.GRPO_SWEEP_DRIVER_BEAT_S.get() or BEAT_S)
    except ValueError:
        return BEAT_S
    return value if value > 0 else BEAT_S


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


def standing(marker: Driver, here: Driver, alive: Callable[[int, str | None], bool]) -> str:
    """``live`` (a process of this host and pid namespace, still the one that wrote the marker, and not ``here``'s),
    ``gone`` (it ended, it is this very process, or the marker names another folder: a copy's), or ``elsewhere``
    (another host's or namespace's: not to be asked from here). ``here``: this process, as ``this_driver`` says."""
    if marker.folder is not None and marker.folder != here.folder:
        return "gone"
    if marker.host != here.host or marker.pid_ns != here.pid_ns:
        return "elsewhere"
    return "live" if marker.pid != here.pid and alive(marker.pid, marker.pid_start) else "gone"


def folder_of(store: Storage, name: str) -> str:
    """The sweep's folder as a marker names it: a local one with its links resolved (one folder, however it is reached)."""
    return str(Path(store.path(name)).resolve()) if store.is_local else store.display(name)


def this_driver(command: str, folder: str | None = None) -> Driver:
    return Driver(socket.gethostname(), os.getpid(), process_start(os.getpid()), time.time(), command, pid_namespace(), folder)


def read_marker(store: Storage, name: str) -> Driver | None:
    """The sweep's marker, or None where there is none or it cannot be read (a damaged marker names no process)."""
    if not store.exists(name, DRIVER_FILE):
        return None
    try:
        data = json.loads(store.read_text(name, DRIVER_FILE))
        return Driver(str(data["host"]), int(data["pid"]), data.get("pid_start"), float(data["started"]), str(data["command"]),
                      data.get("pid_ns"), data.get("folder"), int(data.get("beat", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_free(store: Storage, name: str, command: str) -> None:
    """Refuse when another driver runs the sweep now (``standing``; another host's watched for ``MISSED`` beats)."""
    marker = read_marker(store, name)
    if marker is None:
        return
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(marker.started))
    where = store.display(name)
    state = standing(marker, this_driver(command, folder_of(store, name)), process_alive)
    if state == "live":
        raise ConfigError(
            f"{where}: `{marker.command}` is driving this sweep now (process {marker.pid} on this machine, since {since}); "
            f"a second `{command}` would run its trials twice or delete what it is building. Wait for it to end, or stop it "
            f"(`kill -INT {marker.pid}`: it stops as a driver that died does, and `python -m sweep resume` continues it)")
    if state == "elsewhere":
        other = "in another container (process namespace) on this host" if marker.host == socket.gethostname() else f"on host {marker.host}"
        said = f"{where}: its driver.json names `{marker.command}` of process {marker.pid} {other} (since {since})"
        window = MISSED * beat_s()
        print(f"{said}; watching it up to {window:.0f} s for a heartbeat", file=sys.stderr, flush=True)
        if _beats(store, name, marker, window):
            raise ConfigError(f"{said}, and it beats: that driver runs the sweep now. Wait for it to end, or stop it there; a second "
                              f"`{command}` would run its trials twice or delete what it is building")
        print(f"{where}: no heartbeat in {window:.0f} s: that driver is gone; going on", file=sys.stderr, flush=True)


def _beats(store: Storage, name: str, marker: Driver, window: float) -> bool:
    """Whether the marker changes (a beat, or another claim) within ``window`` seconds."""
    end = time.monotonic() + window
    while time.monotonic() < end:
        time.sleep(min(1.0, window / 10))
        now = read_marker(store, name)
        if now is not None and now != marker:
            return True
    return False


@dataclass
class Claim:
    """A driver's hold on a sweep: its marker and the thread that keeps it beating."""

    store: Storage
    name: str
    driver: Driver
    stop: threading.Event
    thread: threading.Thread


def claim(store: Storage, name: str, command: str) -> Claim:
    """Write this process's marker into the sweep's folder and keep it beating until ``release``."""
    me = this_driver(command, folder_of(store, name))
    store.write_text(json.dumps(asdict(me)), name, DRIVER_FILE)
    stop = threading.Event()
    thread = threading.Thread(target=_beat, args=(store, name, me, stop, beat_s()), name=f"driver-beat-{name}", daemon=True)
    thread.start()
    return Claim(store, name, me, stop, thread)


def _beat(store: Storage, name: str, me: Driver, stop: threading.Event, every: float) -> None:
    """Rewrite the marker with the next count every ``every`` seconds while it is still this process's claim."""
    beat = me.beat
    while not stop.wait(every):
        try:
            if not me.same_claim(read_marker(store, name)):
                return  # removed, or another driver's now: not ours to write
            beat += 1
            store.write_text(json.dumps(asdict(replace(me, beat=beat))), name, DRIVER_FILE)
        except OSError:  # a storage hiccup: the next beat tries again
            continue


def still_held(held: Claim) -> None:
    """Refuse when another driver claimed the sweep since ``held`` was written (two starts in the same instant: the
    later claim stands, the earlier stops here)."""
    marker = read_marker(held.store, held.name)
    if not held.driver.same_claim(marker):
        who = f"process {marker.pid} on host {marker.host}" if marker else "a command that removed the marker"
        raise ConfigError(f"{held.store.display(held.name)}: another driver claimed this sweep at the same moment ({who}); "
                          "it goes on and this one stops")


def release(held: Claim) -> None:
    """Stop the beat and remove the marker if it is still this process's (a later driver's is not ours to remove). Never
    raises: the sweep's results stand, and a marker left behind names a process that is gone and stops beating."""
    held.stop.set()
    held.thread.join(timeout=30)
    try:
        if held.driver.same_claim(read_marker(held.store, held.name)):
            held.store.delete(held.name, DRIVER_FILE)
    except OSError as exc:
        print(f"{held.store.display(held.name, DRIVER_FILE)} could not be removed ({exc}); it names a process that is gone", file=sys.stderr)
