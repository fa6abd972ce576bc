"""Scratch directories of killed trials are removed by the next trial on the node; live ones are kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.trials.scratch import remove_orphans, scratch_dir


def test_only_the_scratch_of_exited_processes_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    ours = scratch_dir("checkpoints")
    dead = subprocess.run(
        [sys.executable, "-c", "from sweep.trials.scratch import scratch_dir; print(scratch_dir('resume'))"],
        capture_output=True, text=True, check=True, env={**os.environ, "TMPDIR": str(tmp_path)},
    ).stdout.strip()
    (Path(dead) / "model.safetensors").write_bytes(b"x" * 10)
    unrelated = tmp_path / "grpo-checkpoints-abc123"  # the old unnamed kind, or someone else's: left alone
    unrelated.mkdir()
    assert Path(dead).parent == tmp_path
    assert remove_orphans() == [Path(dead)]
    assert not os.path.exists(dead) and os.path.isdir(ours) and unrelated.is_dir()
    assert remove_orphans() == []


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="checkpoints, resume, trajectories"):
        scratch_dir("models")
