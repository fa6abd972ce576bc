"""Stopping what a test started: a driver's whole process group, and Ray processes that outlive it.

After a driver is killed, Ray's agents and workers can outlive it (FIELD_NOTES). Every process a test's
Ray starts inherits the test's private ``RAY_TMPDIR``, so that value names exactly this test's processes:
``kill_by_env`` ends those by pid and nothing else.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a process started with ``start_new_session=True`` and everything in its group (a machine dying)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def pids_with_env(name: str, value: str) -> list[int]:
    """Processes whose environment holds ``name=value`` (those this test started, given a unique value)."""
    wanted = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def kill_by_env(name: str, value: str) -> int:
    """SIGKILL every process whose environment holds ``name=value``; returns how many."""
    pids = pids_with_env(name, value)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)
