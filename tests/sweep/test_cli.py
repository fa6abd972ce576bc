"""The CLI: validate is instant and torch-free; bad files exit 2 with the file and key named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sweep(*args):
    return subprocess.run([sys.executable, "-m", "sweep", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_validate_the_demo_space_without_importing_torch():
    probe = (
        "import sys; from sweep.__main__ import main; code = main(['validate', 'sweep/search_spaces/demo_cpu.yaml']); "
        "assert 'torch' not in sys.modules and 'ray' not in sys.modules, 'heavy import on the CLI path'; sys.exit(code)"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "ok" in run.stdout and "optim.lr" in run.stdout


def test_bad_space_exits_2_naming_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("space:\n  optim.lr: {uniform: [0.1, 0.01]}\n")
    run = _sweep("validate", str(bad))
    assert run.returncode == 2
    assert "bad.yaml" in run.stderr and "space.optim.lr" in run.stderr and "must be below high" in run.stderr
    run = _sweep("run", str(bad))  # run validates before starting Ray
    assert run.returncode == 2 and "space.optim.lr" in run.stderr


def test_train_rejects_a_bad_override(tmp_path):
    run = _sweep("train", "sweep/search_spaces/demo_cpu.yaml", "--set", "optim.lr=-1")
    assert run.returncode == 2 and "optim.lr" in run.stderr and "greater than 0" in run.stderr
