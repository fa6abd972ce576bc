"""The CLI: validate is instant and torch-free; bad files exit 2 with the file and key named."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

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
    run = _sweep("train", "sweep/search_spaces/demo_cpu.yaml", "--set", "optim.lr=-1", "--metrics-jsonl", str(tmp_path / "new" / "m.jsonl"))
    assert run.returncode == 2 and "optim.lr" in run.stderr and "greater than 0" in run.stderr
    assert not (tmp_path / "new").exists()  # the metrics file's folder is made only once the config is accepted


def test_one_trial_of_a_space_is_not_held_to_its_schedulers_periods():
    """`train` and `forecast` run one trial of a space's base: ASHA's grace period (6 in the demo) does not refuse a
    shorter run (it did, and `--set scheduler.grace_period` is a sweep key they refuse); `run` still checks it."""
    from configkit.base import ConfigError
    from sweep.spec.loader import load_space, load_trainer

    cfg, space = load_trainer(ROOT / "sweep/search_spaces/demo_cpu.yaml", {"total_steps": 2})
    assert cfg.total_steps == 2 and space is not None
    with pytest.raises(ConfigError, match=r"key 'scheduler.grace_period' = 6 exceeds trainer.total_steps = 2"):
        load_space(ROOT / "sweep/search_spaces/demo_cpu.yaml", {"trainer.total_steps": 2})


def test_a_train_run_ends_with_what_it_did_or_why_it_did_nothing():
    from grpo.reporting import ConsoleReporter

    quiet = ConsoleReporter(stream=io.StringIO())
    assert quiet.closing_line(6, "ckpt/global_step_6") == (
        "no step to run: resume_from ckpt/global_step_6 is at or past total_steps = 6; raise it (--set total_steps=N) to train further")
    quiet.report(5, {"eval/avg_pass_at_1": 0.25}, None)
    quiet.report(6, {"reward/avg_pass_at_1": 0.5, "eval/avg_pass_at_1": 0.375}, "out/global_step_6")
    assert quiet.closing_line(6, "ckpt/global_step_4") == "done: steps 5-6 of 6; held-out pass@1 0.250 -> 0.375; last checkpoint out/global_step_6"
