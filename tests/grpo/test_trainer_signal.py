"""Dynamic sampling and the curriculum in the step loop, end to end on CPU: their metrics add up, and a run
resumed from a checkpoint draws the same extra tasks and the same weights as one that never stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.config import TrainerConfig
from grpo.reporting import ListReporter
from grpo.trainer import train
from tests.conftest import TEST_MODEL

SPACE = Path(__file__).resolve().parents[2] / "sweep" / "search_spaces" / "learning_cpu.yaml"
RESUMED_KEYS = ("reward/avg_pass_at_1", "rollout/episodes", "rollout/response_tokens", "policy/loss", "policy/kl", "policy/grad_norm",
                "dynamic/rounds", "dynamic/signal_share", "curriculum/hotel/weight", "curriculum/expected_signal", "curriculum/mean_pass_rate")


@pytest.mark.slow
def test_dynamic_sampling_and_curriculum_report_and_resume_exactly(tmp_path):
    base = {
        "model": TEST_MODEL,
        "total_steps": 3,
        "torch_threads": 1,
        "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 3, "max_turns": 2, "temperature": 1.5},
        "algorithm": {"dynamic_sampling": {"enabled": True, "max_rounds": 2}, "zero_variance_groups": "mask"},
        "data": {"curriculum": {"enabled": True, "floor": 0.2}},
        "optim": {"lr": 1e-3},
        "checkpoint": {"interval": 2, "dir": str(tmp_path / "ckpt")},
    }
    straight = ListReporter()
    train(TrainerConfig.model_validate(base), straight)
    assert [s for s, _ in straight.reports] == [1, 2, 3]
    for _, m in straight.reports:
        rounds = m["dynamic/rounds"]
        assert rounds in (1.0, 2.0)
        assert m["rollout/episodes"] == rounds * 2 * 3  # every round's episodes are in the step's metrics
        assert m["dynamic/extra_episodes"] == (rounds - 1) * 2 * 3
        assert m["dynamic/groups_trained"] + m["dynamic/groups_filtered"] == rounds * 2
        assert m["dynamic/signal_share"] == pytest.approx(1 - m["reward/frac_zero_variance"])
        if m["dynamic/no_signal"]:  # nothing had signal after 2 rounds: the first round trains (masked: no loss)
            assert rounds == 2.0 and m["dynamic/groups_trained"] == 2.0
        else:
            assert rounds == 1.0 or m["dynamic/groups_trained"] <= 2.0
        assert m["curriculum/hotel/weight"] == pytest.approx(1.0) and 0.0 < m["curriculum/mean_pass_rate"] < 1.0
    assert straight.reports[0][1]["curriculum/mean_pass_rate"] != 0.5  # the estimates moved after step 1

    resumed = ListReporter()
    train(TrainerConfig.model_validate({**base, "resume_from": str(tmp_path / "ckpt" / "global_step_2")}), resumed)
    assert [s for s, _ in resumed.reports] == [3]
    want = straight.reports[2][1]
    got = resumed.reports[0][1]
    for key in RESUMED_KEYS:
        assert got[key] == pytest.approx(want[key], rel=1e-6, abs=1e-9), key


@pytest.mark.slow
def test_dynamic_sampling_fills_the_batch_with_groups_that_have_signal(tmp_path):
    """On the learning space's shipped base (it passes about a third of the tasks, so groups differ), a step
    that stops before its round limit trains on exactly prompts_per_step groups, every one with signal."""
    from sweep.spec.loader import load_trainer

    cfg, _ = load_trainer(SPACE, {
        "total_steps": 2, "torch_threads": 1, "rollout.prompts_per_step": 4, "rollout.n_samples_per_prompt": 4,
        "algorithm.dynamic_sampling": {"enabled": True, "max_rounds": 4}, "eval.n_samples": 1, "eval.interval": 10,
    })
    reporter = ListReporter()
    train(cfg, reporter)
    for _, m in reporter.reports:
        groups = m["dynamic/rounds"] * 4
        with_signal = round(m["dynamic/signal_share"] * groups)
        assert m["dynamic/groups_trained"] == (min(4, with_signal) if with_signal else 4)
        if m["dynamic/rounds"] < 4:  # it stopped early: the batch was full of groups with signal
            assert with_signal >= 4 and m["dynamic/groups_trained"] == 4
    assert any(m["dynamic/signal_share"] > 0 for _, m in reporter.reports)


@pytest.mark.slow
def test_dynamic_sampling_with_two_workers(tmp_path, private_cache):
    """``sweep train --workers 2``: both ranks draw the same extra rounds, agree on the groups that train and
    deal them out, padding the shorter share, so the sharded update neither hangs nor mismatches."""
    import json
    import os
    import subprocess
    import sys

    metrics = tmp_path / "metrics.jsonl"
    sets = ["total_steps=2", "torch_threads=1", "rollout.prompts_per_step=4", "rollout.n_samples_per_prompt=4", "eval.n_samples=1",
            "eval.interval=10", "algorithm.dynamic_sampling={enabled: true, max_rounds: 3}"]
    run = subprocess.run([sys.executable, "-m", "sweep", "train", str(SPACE), "--workers", "2", "--metrics-jsonl", str(metrics),
                          *(f"--set={s}" for s in sets)],
                         capture_output=True, text=True, timeout=900, env={**os.environ, "GRPO_SWEEP_CACHE": str(private_cache)},
                         cwd=SPACE.parents[2])
    assert run.returncode == 0, run.stdout[-1000:] + run.stderr[-6000:]  # the steps printed, and a rank's Python stacks if it aborted
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["rollout/episodes"] == r["dynamic/rounds"] * 16  # both ranks' episodes of every round
        assert 1 <= r["dynamic/groups_trained"] <= 4
    assert any(r["dynamic/signal_share"] > 0 for r in rows)


@pytest.mark.slow
def test_env_level_curriculum_reports_each_env_and_resumes_exactly(tmp_path):
    """``data.curriculum.level: both`` over two envs: each env's weight and pass rate are reported, and a run
    resumed from a checkpoint (the env counts in it) draws and reports as one that never stopped."""
    data = Path(__file__).resolve().parents[2] / "toolenvs" / "data"
    base = {
        "model": TEST_MODEL,
        "total_steps": 2,
        "torch_threads": 1,
        "env": {"tasks_path": [str(data / "hotel.jsonl"), str(data / "outlook.jsonl")]},
        "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 1, "temperature": 1.5},
        "data": {"curriculum": {"enabled": True, "level": "both", "floor": 0.2}},
        "checkpoint": {"interval": 1, "dir": str(tmp_path / "ckpt")},
    }
    straight = ListReporter()
    train(TrainerConfig.model_validate(base), straight)
    for _, m in straight.reports:
        assert m["curriculum/hotel/weight"] + m["curriculum/outlook/weight"] == pytest.approx(1.0)
        assert 0.0 < m["curriculum/hotel/pass_rate"] < 1.0 and 0.0 < m["curriculum/outlook/pass_rate"] < 1.0
    resumed = ListReporter()
    train(TrainerConfig.model_validate({**base, "resume_from": str(tmp_path / "ckpt" / "global_step_1")}), resumed)
    assert [s for s, _ in resumed.reports] == [2]
    want, got = straight.reports[1][1], resumed.reports[0][1]
    for key in ("rollout/episodes", "policy/loss", "curriculum/hotel/weight", "curriculum/outlook/weight", "curriculum/hotel/pass_rate",
                "curriculum/outlook/pass_rate", "curriculum/expected_signal", "curriculum/mean_pass_rate"):
        assert got[key] == pytest.approx(want[key], rel=1e-6, abs=1e-9), key
