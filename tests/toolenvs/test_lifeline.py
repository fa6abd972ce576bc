"""A child with a lifeline exits when its launcher is killed: no orphan servers, no orphan base-policy builds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT = """
import subprocess, sys
CHILD = "import os, time; from toolenvs.lifeline import exit_with_parent; exit_with_parent(os.getppid()); print(flush=True); time.sleep(60)"
child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
child.stdout.readline()  # its lifeline is in place
print(child.pid, flush=True)
child.wait()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie (dead, not yet reaped by init) counts as gone
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_child_dies_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)  # the parent cannot clean up: the child must notice
    parent.communicate()  # reaps it and closes its pipe
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
