"""How a driver stops when it is told to: SIGTERM (``kill``, ``docker stop``, a scheduler's preemption, ``ray job stop``)
and SIGHUP (its terminal gone) stop it as Ctrl-C does, raising ``Stopped`` in the main thread, so that its ``finally``
blocks run: its ``driver.lock`` is removed, Ray is shut down, and it exits naming ``sweep resume`` (``sweep.run``).

Without it, SIGTERM before Ray started (the bases' minutes) killed the driver outright, its marker left behind; once
``ray.init`` began, Ray's own handler made it a silent ``sys.exit(15)``. A signal ignored when the driver started
(SIGHUP under ``nohup``) stays ignored. Once stopping, the driver's cleanup (an S3 deletion, Ray's shutdown) is not cut
short by a second SIGTERM or SIGHUP: those are noted, not raised (a second Ctrl-C still is).
"""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOPPING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Stopped(KeyboardInterrupt):
    """The driver was told to stop by ``signum``."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []  # the stopping signals received while a driver held its sweep, first first
_overtaken = threading.Event()  # the stop came from ``interrupt_main``: another driver took the sweep over
_depth = 0  # ``stopping_on_signals`` blocks open (a confirm holds its sweep while it runs the confirming one)


def _stop(signum, frame) -> None:
    _received.append(signum)
    if len(_received) == 1:  # a later one lands in the cleanup the first began
        raise Stopped(signum)


def signal_of(stopped: BaseException) -> int:
    """The signal an interruption came from: ``Stopped``'s; a plain ``KeyboardInterrupt`` after a stopping signal came, that
    signal's (Ray's compiled waits catch the handler's ``Stopped`` and raise a plain one in its place); else Ctrl-C's."""
    return getattr(stopped, "signum", None) or (_received[0] if _received else signal.SIGINT)


def overtaken() -> bool:
    """Whether the driver's stop came from its beat finding another driver's claim (``interrupt_main``), not a person."""
    return _overtaken.is_set()


def _forget() -> None:
    _received.clear()
    _overtaken.clear()


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """For the block, SIGTERM and SIGHUP raise ``Stopped`` (where they were not ignored); the earlier handlers after.
    Outside the main thread (where Python allows no handler) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _depth
    if _depth == 0:
        _forget()
    earlier = {}
    for signum in STOPPING:
        handler = signal.getsignal(signum)
        if handler is not signal.SIG_IGN and handler is not _stop:
            earlier[signum] = signal.signal(signum, _stop)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        _put_back(earlier)
        if _depth == 0:  # what the outermost block saw is not the next command's
            _forget()


@contextmanager
def handlers_kept() -> Iterator[None]:
    """The stopping signals' handlers as they were before the block. For ``ray.init``: it replaces SIGTERM's with
    ``sys.exit(signum)`` as it begins; a SIGTERM meanwhile (its ``SystemExit``) is a ``Stopped`` here."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    earlier = {signum: signal.getsignal(signum) for signum in STOPPING}
    try:
        yield
    except SystemExit as exc:
        if exc.code not in STOPPING or earlier.get(exc.code) is not _stop:
            raise
        _received.append(exc.code)
        raise Stopped(exc.code) from None
    finally:
        _put_back(earlier)


def _put_back(earlier: dict) -> None:
    """The handlers as they were (None: one not set from Python, the system's default)."""
    for signum, handler in earlier.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def interrupt_main() -> None:
    """Stop the main thread from another (``driving``'s beat, finding the sweep taken over) as a stopping signal would:
    a real signal to it alone, which also ends a wait it is blocked in (``_thread.interrupt_main`` does not); SIGTERM
    where a handler raises on it (``Stopped``; Ray's during its start), else SIGINT (a driver started in the background by
    a script has SIGINT ignored, and one started with SIGTERM ignored keeps it so)."""
    _overtaken.set()
    if not hasattr(signal, "pthread_kill"):  # Windows: at the main thread's next bytecode
        _thread.interrupt_main()
        return
    raising = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM if raising else signal.SIGINT)
