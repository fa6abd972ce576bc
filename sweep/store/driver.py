"""Which process drives a sweep now: a marker in the sweep's folder, so that a second driver of the same sweep is
refused before it deletes or restores anything.

``sweep run``, ``sweep resume`` and ``sweep confirm`` write ``{storage}/{name}/driver.lock`` (the host, the process id,
its start time and pid namespace, the folder, when, which command) before anything of theirs that could clash, keep it
beating (a count rewritten every ``GRPO_SWEEP_DRIVER_BEAT_S`` seconds, 15 by default) and remove it when they end,
however they end; a driver killed outright (``kill -9``, a machine lost) leaves it behind, and it stops beating.
Another command on the same sweep reads it first (``check_free``):

- a process of this machine (and pid namespace) that is still the one that wrote it (its id alive, with the same start
  time where the system tells one) is a live driver: refused, named; one that is gone is no obstacle;
- another host's (or container's) cannot be asked: it is watched for ``MISSED`` of its own beat intervals (its
  writer's rhythm, kept in it); beating, it is refused; silent, its driver is gone, and the command goes on, saying so
  (a sweep whose machine was lost, started or resumed on another);
- on this host, a marker that names another folder (a sweep's folder copied or moved while it ran) is another sweep's.

A start claims, then checks a moment later that the claim is still its own (of two made together the later stands),
and again after its bases; a beat that finds another claim (or none) marks this one lost and, under ``driving``,
interrupts the driver (``TakenOver``): a driver whose beats failed long enough to be counted gone stops once it sees. ``driver.lock``, not ``.json``: Tune's
restore downloads the experiment's ``*.json`` and uploads them back with every snapshot.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import psutil

from configkit import environ
from configkit.base import ConfigError
from sweep.store.signals import Stopped, interrupt_main, signal_of, stopping_on_signals
from sweep.store.storage import Storage

DRIVER_FILE = "driver.lock"  # JSON inside; not named *.json: Tune's restore downloads those and uploads them back every snapshot
BEAT_S = 15.0  # default seconds between beats (GRPO_SWEEP_DRIVER_BEAT_S)
MISSED = 4  # beat intervals (the marker's own) another host's marker must stay unchanged before its driver counts as gone
SETTLE_S = 2.0  # after a claim, at most: longer than a watcher's poll, so of two claims made together the later is seen


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
    every: float = BEAT_S  # its seconds between beats: a watcher waits for the writer's rhythm, not its own

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
    """The process's start time as the system tells it (psutil: Linux, macOS, Windows), or None where it cannot:
    with the id, it names one process, not a later one that was given the same id."""
    try:
        return repr(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def process_alive(pid: int, pid_start: str | None) -> bool:
    """Whether the process ``pid`` runs on this machine (a zombie does not) and, where its start time was recorded,
    is the same one."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return pid_start is None or repr(process.create_time()) == pid_start
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


def standing(marker: Driver, here: Driver, alive: Callable[[int, str | None], bool]) -> str:
    """``live`` (a process of this host and pid namespace, still the one that wrote the marker, and not ``here``'s),
    ``gone`` (it ended, it is this very process, or the marker names another folder of this host: a copy's), or
    ``elsewhere`` (another host's or namespace's: not to be asked from here; its folder may be this one mounted at
    another path). ``here``: this process, as ``this_driver`` says."""
    if marker.host != here.host or marker.pid_ns != here.pid_ns:
        return "elsewhere"
    if marker.folder is not None and here.folder is not None and not _same_folder(marker.folder, here.folder):
        return "gone"
    return "live" if marker.pid != here.pid and alive(marker.pid, marker.pid_start) else "gone"


def _same_folder(a: str, b: str) -> bool:
    """One folder of this machine, however named (a case-insensitive file system, a second mount); S3 addresses by name."""
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one is gone, or an S3 address
        return False


def folder_of(store: Storage, name: str) -> str:
    """The sweep's folder as a marker names it: a local one with its links resolved (one folder, however it is reached)."""
    return str(Path(store.path(name)).resolve()) if store.is_local else store.display(name)


def this_driver(command: str, folder: str | None = None) -> Driver:
    return Driver(socket.gethostname(), os.getpid(), process_start(os.getpid()), time.time(), command, pid_namespace(), folder, 0, beat_s())


class MarkerUnreadable(ConfigError):
    """The marker is there and cannot be read: nothing can be said of its driver, so nothing may go on as if it were gone."""


def read_marker(store: Storage, name: str, tries: int = 3) -> Driver | None:
    """The sweep's marker, or None where there is none. A marker that cannot be read (storage failing, or caught
    half-written) is read again up to ``tries`` times a second apart, then ``MarkerUnreadable``."""
    for attempt in range(tries):
        try:
            if not store.exists(name, DRIVER_FILE):
                return None
            data = json.loads(store.read_text(name, DRIVER_FILE))
            return Driver(str(data["host"]), int(data["pid"]), data.get("pid_start"), float(data["started"]), str(data["command"]),
                          data.get("pid_ns"), data.get("folder"), int(data.get("beat", 0)), float(data.get("every", BEAT_S)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            why = f"{type(exc).__name__}: {exc}"
            if attempt + 1 < tries:
                time.sleep(1.0)
    raise MarkerUnreadable(f"{store.display(name, DRIVER_FILE)} cannot be read ({why}): whether a driver runs this sweep now cannot "
                           "be told. If none does, remove that file and run the command again")


def check_free(store: Storage, name: str, command: str) -> None:
    """Refuse when another driver runs the sweep now (``standing``; another host's watched for ``MISSED`` of its beats)."""
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
            f"(`kill {marker.pid}`: it stops as a driver that died does, and `python -m sweep resume` continues it)")
    if state == "elsewhere":
        other = "in another container (process namespace) on this host" if marker.host == socket.gethostname() else f"on host {marker.host}"
        said = f"{where}: its {DRIVER_FILE} names `{marker.command}` of process {marker.pid} {other} (since {since})"
        window = MISSED * marker.every
        print(f"{said}; watching it up to {window:.0f} s for a heartbeat", file=sys.stderr, flush=True)
        if _beats(store, name, marker, window):
            raise ConfigError(f"{said}, and it beats: that driver runs the sweep now. Wait for it to end, or stop it there; a second "
                              f"`{command}` would run its trials twice or delete what it is building")
        print(f"{where}: no heartbeat in {window:.0f} s: that driver is gone; going on", file=sys.stderr, flush=True)


def _beats(store: Storage, name: str, marker: Driver, window: float) -> bool:
    """Whether the marker changes (a beat, another claim, or its removal: a driver that ended) within ``window`` seconds;
    a moment it cannot be read is no change."""
    end = time.monotonic() + window
    while time.monotonic() < end:
        time.sleep(min(1.0, window / 10))
        try:
            now = read_marker(store, name, tries=1)
        except MarkerUnreadable:
            continue
        if now != marker:
            return now is not None
    return False


@dataclass
class Claim:
    """A driver's hold on a sweep: its marker, the thread that keeps it beating, and whether another claim took it."""

    store: Storage
    name: str
    driver: Driver
    stop: threading.Event
    thread: threading.Thread | None = None
    lost: threading.Event = field(default_factory=threading.Event)
    on_lost: Callable[[], None] | None = None  # called from the beat's thread once the claim is lost


def claim(store: Storage, name: str, command: str, on_lost: Callable[[], None] | None = None) -> Claim:
    """Write this process's marker into the sweep's folder and keep it beating until ``release``; ``on_lost``: what
    the beat does when it finds the claim taken (``driving``: interrupt the main thread)."""
    me = this_driver(command, folder_of(store, name))
    held = Claim(store, name, me, threading.Event(), on_lost=on_lost)
    try:
        store.write_text(json.dumps(asdict(me)), name, DRIVER_FILE)
        held.thread = threading.Thread(target=_beat, args=(held,), name=f"driver-beat-{name}", daemon=True)
        held.thread.start()
    except BaseException:  # a signal (or a failed write) with the marker written: it is not left naming this process
        release(held)
        raise
    return held


def _beat(held: Claim) -> None:
    """Rewrite the marker with the next count every beat while it is still this process's claim; another claim in it (or
    none) ends the beat and marks the claim lost (``still_held`` says so). A read or write that fails is tried next beat."""
    beat = held.driver.beat
    while not held.stop.wait(held.driver.every):
        try:
            marker = read_marker(held.store, held.name, tries=1)
        except MarkerUnreadable:
            continue
        if not held.driver.same_claim(marker):
            held.lost.set()
            if held.on_lost is not None and not held.stop.is_set():
                held.on_lost()
            return
        beat += 1
        if held.stop.is_set():
            return
        try:
            held.store.write_text(json.dumps(asdict(replace(held.driver, beat=beat))), held.name, DRIVER_FILE)
        except OSError:
            continue


class TakenOver(ConfigError):
    """Another driver claimed the sweep while this one ran it (its beats failing long enough for a watcher to count it
    gone, or its marker removed): this one stopped, as on Ctrl-C, and leaves the sweep to the other."""


@contextmanager
def driving(store: Storage, name: str, command: str) -> Iterator[Claim]:
    """The sweep claimed for the block: ``check_free``, ``claim``, a settling wait longer than a watcher's poll, then
    ``still_held`` (of two claims made together, the later stands and this one stops before doing anything); released
    however the block ends. Meanwhile SIGTERM and SIGHUP stop it as Ctrl-C does (``sweep.store.signals``), and a beat that
    finds the claim taken interrupts the main thread the same way: ``TakenOver``, so that two drivers never run the
    sweep's trials side by side for longer than a beat."""
    check_free(store, name, command)
    main = threading.current_thread() is threading.main_thread()
    with stopping_on_signals():
        held = None
        try:
            held = claim(store, name, command, on_lost=interrupt_main if main else None)
            time.sleep(min(SETTLE_S, held.driver.every / 4))
            still_held(held)
            yield held
        except KeyboardInterrupt as stopped:
            if held is not None and held.lost.is_set():
                raise TakenOver(_taken_over(held)) from None
            if not hasattr(stopped, "signum"):  # Ray's compiled waits raise a plain one in place of ``Stopped``
                raise Stopped(signal_of(stopped)) from None
            raise
        finally:
            if held is not None:  # else claim removed what it wrote
                release(held)


def _taken_over(held: Claim) -> str:
    try:
        marker = read_marker(held.store, held.name, tries=1)
    except MarkerUnreadable:
        marker = None
    who = (f"`{marker.command}` of process {marker.pid} on host {marker.host}" if marker is not None and not held.driver.same_claim(marker)
           else "a command that removed its marker")
    return (f"{held.store.display(held.name)}: another driver took this sweep over while this one ran it ({who}); this one "
            "stopped its trials and leaves the sweep to it")


def still_held(held: Claim) -> None:
    """Refuse when another driver claimed the sweep since ``held`` was written: the later claim stands, this one stops."""
    if holds(held):
        return
    marker = read_marker(held.store, held.name)
    who = f"process {marker.pid} on host {marker.host}" if marker and not held.driver.same_claim(marker) else "a command that removed it"
    raise ConfigError(f"{held.store.display(held.name)}: another driver claimed this sweep after this one ({who}); "
                      "it goes on and this one stops")


def holds(held: Claim) -> bool:
    """Whether the sweep is still this claim's (its marker this process's, never taken meanwhile); unreadable: no."""
    try:
        return not held.lost.is_set() and held.driver.same_claim(read_marker(held.store, held.name))
    except MarkerUnreadable:
        return False


def release(held: Claim) -> None:
    """Stop the beat (waiting for one under way) and remove the marker if it is still this process's (a later driver's is
    not ours to remove). Never raises: the sweep's results stand, and a marker left behind names a process that is gone
    and stops beating. Safe to call twice."""
    held.stop.set()
    if held.thread is not None and held.thread.ident is not None:  # started (a claim stopped as it started its beat: not)
        held.thread.join(timeout=300)  # a write stuck on storage: S3's requests time out well before
    try:
        if held.driver.same_claim(read_marker(held.store, held.name)):
            held.store.delete(held.name, DRIVER_FILE)
    except (OSError, MarkerUnreadable) as exc:
        print(f"{held.store.display(held.name, DRIVER_FILE)} could not be removed ({exc}); it names a process that is gone", file=sys.stderr)
