"""Write a sweep saved by the flat ``sweep/`` layout (before the rooms), killed midway, as a tarball.

Run it with the code of a commit before the rooms (e.g. 0ad01ef) first on the path:

    git worktree add /tmp/flat 0ad01ef
    PYTHONPATH=/tmp/flat .venv/bin/python tests/sweep/data/make_old_layout_sweep.py tests/sweep/data/old_layout_sweep.tar.gz

It runs ``tests/sweep/test_resume.py``'s two-trial sweep of that commit (the test model, 6 steps, a checkpoint
every 2) and kills its driver once one trial has finished and the other has a checkpoint, as that test does.
Tune's ``tuner.pkl`` and searcher state then name the classes by the old module paths (``sweep.checkpoints``,
``sweep.live_page``, ``sweep.stoppers``, ``sweep.space``, ...), which ``tests/sweep/test_moved.py`` resumes.
"""
# ruff: noqa: I001 (``sweep.storage`` exists only in the commit this runs on, so the sorter cannot place it)

from __future__ import annotations

import os
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml

from sweep.storage import open_storage  # the old layout's path: this script runs on a commit before the rooms
from tests.sweep.test_resume import kill_midway, space


def main(out: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="old-layout"))
    storage = str(work / "results")
    env = {**os.environ, "GRPO_SWEEP_CACHE": str(work / "cache")}
    space_file = work / "space.yaml"
    space_file.write_text(yaml.safe_dump(space(storage)))
    _, at_kill = kill_midway(open_storage(storage), space_file, env, work)
    print("at the kill (last reported step, newest marked checkpoint):", at_kill)
    with tarfile.open(out, "w:gz") as tar:
        tar.add(work / "results" / "resume", arcname="resume")


if __name__ == "__main__":
    main(sys.argv[1])
