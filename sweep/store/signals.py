"""How a driver stops when it is told to: SIGTERM (``kill``, ``docker stop``, a scheduler's preemption, ``ray job stop``)
and SIGHUP (its terminal gone) stop it as Ctrl-C does, raising ``Stopped`` in the main thread, so that its ``finally``
blocks run: its ``driver.lock`` is removed, Ray is shut down, and it exits naming ``sweep resume`` (``sweep.run``).

Without it, SIGTERM before Ray started (the bases' minutes) killed the driver outright, its marker left behind; after
``ray.init`` Ray's own handler made it a silent ``sys.exit(15)``. A signal ignored when the driver started (SIGHUP under
``nohup``) stays ignored.
"""

from __future__ import annotations

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


_received: list[int] = []  # the stopping signals received in this process, latest last


def _stop(signum, frame) -> None:
    _received.append(signum)
    raise Stopped(signum)


def signal_of(stopped: BaseException) -> int:
    """The signal an interruption came from: ``Stopped``'s; a plain ``KeyboardInterrupt`` after a stopping signal came, that
    signal's (Ray's compiled waits catch the handler's ``Stopped`` and raise a plain one in its place); else Ctrl-C's."""
    return getattr(stopped, "signum", None) or (_received[-1] if _received else signal.SIGINT)


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """For the block, SIGTERM and SIGHUP raise ``Stopped`` (where they were not ignored); the earlier handlers after.
    Outside the main thread (where Python allows no handler) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    earlier = {}
    _received.clear()
    for signum in STOPPING:
        handler = signal.getsignal(signum)
        if handler is not signal.SIG_IGN and handler is not _stop:
            earlier[signum] = signal.signal(signum, _stop)
    try:
        yield
    finally:
        for signum, handler in earlier.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


@contextmanager
def handlers_kept() -> Iterator[None]:
    """The stopping signals' handlers as they were before the block: ``ray.init`` replaces SIGTERM's with its own."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    earlier = {signum: signal.getsignal(signum) for signum in STOPPING}
    try:
        yield
    finally:
        for signum, handler in earlier.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def interrupt_main() -> None:
    """Stop the main thread from another as a stopping signal would: a real signal to it alone (which also ends a wait it
    is blocked in; ``_thread.interrupt_main`` does not), SIGTERM where ``Stopped`` handles it, else SIGINT (a driver
    started in the background by a script has SIGINT ignored)."""
    signum = signal.SIGTERM if signal.getsignal(signal.SIGTERM) is _stop else signal.SIGINT
    signal.pthread_kill(threading.main_thread().ident, signum)
