"""A child process that exits by itself when the process that launched it dies, however it died
(SIGKILL included): the MCP servers of a trial and the base-policy build of a sweep leave no orphans."""

from __future__ import annotations

import os
import threading
import time


def parent_alive(parent_pid: int, direct: bool) -> bool:
    """Our launcher is alive. A direct parent is exact: once it dies we are re-parented, zombie or not."""
    if direct:
        return os.getppid() == parent_pid
    return alive(parent_pid)


def alive(pid: int) -> bool:
    """The process exists and has not exited (a zombie has); another user's process counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not zombie(pid)  # unknown (no /proc): alive


def zombie(pid: int) -> bool | None:
    """Whether the process has exited but is not yet reaped (Linux ``/proc``); None when /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return None


def exit_with_parent(parent_pid: int) -> None:
    """Exit within ~0.2 s of the launcher's death, however it died (SIGKILL included): no orphan servers."""
    direct = os.getppid() == parent_pid

    def watch() -> None:
        while parent_alive(parent_pid, direct):
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
