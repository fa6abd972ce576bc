"""This process's own resources: its resident memory, freed heap handed back, and starting and ending a launched rank.

No torch here: the CLI's ``__main__`` guard and the sweep driver import it cheaply.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import sys
from typing import NoReturn

from configkit import environ


def resident_gib() -> float:
    """This process's resident memory in GiB (rank 0's in a sharded trial): memory that grows step after
    step, or trial after trial in a CPU trial's reused process, shows here."""
    import psutil

    return psutil.Process().memory_info().rss / 2**30


def release_memory() -> None:
    """Hand memory this process has freed back to the OS.

    glibc keeps freed heap pages, so a reused process would start each trial holding the last one's peak:
    in the efficiency bench a reused process's resident memory at a trial's first step rose from 1.0 to
    2.1 GiB over 6 trials, while 8 trials run by ``train`` in a loop with this release started at 0.45 GiB
    each (0.7 to 0.95 GiB without it: no leak, only what the allocator kept).
    """
    gc.collect()  # the models sit in reference cycles (hooks); free them before trimming
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):  # a libc without malloc_trim (musl)
            pass


def launched_rank() -> bool:
    """Whether this process is one rank of a group a launcher started (torchrun sets ``WORLD_SIZE``)."""
    return int(environ.WORLD_SIZE.get("1") or 1) > 1


def watch_rank_crashes() -> None:
    """Have this launched rank print every thread's Python stack to stderr if it dies in native code.

    A rank that aborts inside C++ (glibc's ``free(): invalid pointer``, gloo's ``terminate called``) or
    segfaults leaves only torchrun's "exitcode: -6" otherwise; with ``faulthandler`` its stderr names the
    Python line each thread was on (CI lost a two-rank CPU run that way once, 2026-11-30, with no stack).
    """
    import faulthandler

    if not faulthandler.is_enabled():
        faulthandler.enable(all_threads=True)


def exit_rank_process(status: int) -> NoReturn:
    """End a rank process this project started (torchrun, ``mp.spawn``) without Python's finalization.

    gloo's worker threads free a finished collective's work after its waiter has moved on, and with it the
    last reference to a tensor Python made; that needs the GIL. If the interpreter is finalizing by then, the
    thread exits inside C++ and the process aborts (SIGABRT, "terminate called without an active exception";
    torch 2.13: 2 of 40 two-rank runs on 2 cores, 0 of 120 with this exit). ``destroy_process_group`` does
    not join those threads, and a barrier makes it no better (its work holds the earlier works). Ray Train
    workers are Ray's processes (it ends them with ``ray.kill``, no finalization); only ranks we start end here.
    """
    try:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:  # a flush that fails (a closed pipe) must not bring finalization back
        os._exit(status)
