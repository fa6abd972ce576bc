"""A trial's local scratch directories (checkpoints before Tune copies them, a resume's download, an S3
sweep's trajectories before upload), named after the process that made them.

A one-worker trial that ends removes its own. One that is killed (ASHA stopping it, a preempted node,
kill -9) cannot, and Ray Train workers leave theirs. On a GPU node each left behind can hold a whole
model's checkpoint. So every trial first removes the ones whose process is gone.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from toolenvs.lifeline import alive

KINDS = ("checkpoints", "resume", "trajectories")
NAME = re.compile(rf"grpo-({'|'.join(KINDS)})-pid(\d+)-")


def scratch_dir(kind: str) -> str:
    """A new directory for this process, ``grpo-{kind}-pid{pid}-*`` in the temporary directory."""
    if kind not in KINDS:
        raise ValueError(f"scratch kind {kind!r}: one of {', '.join(KINDS)}")
    return tempfile.mkdtemp(prefix=f"grpo-{kind}-pid{os.getpid()}-")


def remove_orphans(root: str | Path | None = None) -> list[Path]:
    """Remove the scratch directories whose process has exited; returns them."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob("grpo-*-pid*-*"):
        match = NAME.match(path.name)
        if match and path.is_dir() and not alive(int(match.group(2))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
