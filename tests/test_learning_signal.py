"""The learning-signal bench's measure, by hand: plain's final score (the mean of its last two evals, not its
best), the per-task rates it is compared on, and the paired task bootstrap of an arm's final minus plain's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.learning_signal import episodes_to_reach, eval_curve, final_rates, final_score, kept_settings, paired_difference, step0_line  # noqa: E402


def test_the_final_score_is_the_mean_of_the_last_two_trained_evals_not_the_best():
    evals = {0: 0.30, 5: 0.62, 10: 0.50, 15: 0.54}  # the best, 0.62 at step 5, is a lucky draw
    assert final_score(evals) == pytest.approx(0.52)
    steps = [{"step": s, "episodes": 64 * s} for s in range(1, 16)]
    curve = eval_curve(steps, evals)
    assert curve == [(0, 0.30), (320, 0.62), (640, 0.50), (960, 0.54)]
    assert episodes_to_reach(curve, final_score(evals)) == 320 and episodes_to_reach(curve, 0.7) is None


def test_final_rates_sum_the_last_two_evals_per_task():
    tasks = {0: {"a": [0, 4]}, 5: {"a": [1, 4], "b": [0, 4]}, 10: {"a": [2, 4], "b": [4, 4]}, 15: {"a": [3, 4], "b": [2, 4]}}
    assert final_rates(tasks) == {"a": (5, 8), "b": (6, 8)}


def test_the_paired_difference_and_its_noise():
    same = {"a": (4, 8), "b": (2, 8)}
    diff, low, high = paired_difference(same, same)
    assert diff == 0.0 and low < 0 < high  # each run's passes drawn again from its binomial: noise around no difference
    diff, low, high = paired_difference({"a": (8, 8), "b": (8, 8)}, {"a": (0, 8), "b": (0, 8)})
    assert (diff, low, high) == (1.0, 1.0, 1.0)  # every episode passed against none: no noise to draw
    diff, low, high = paired_difference({"a": (6, 8), "b": (2, 8)}, {"a": (4, 8), "b": (2, 8)})
    assert diff == pytest.approx(0.125) and low < 0.125 < high  # (6/8 - 4/8 + 0) / 2, with binomial noise around it


def test_a_kept_folder_takes_only_the_settings_it_was_made_with(tmp_path):
    settings = {"space": "sweep/search_spaces/fleet_mix_cpu.yaml", "steps": 30, "k": 8, "sets": {}}
    kept_settings(tmp_path, settings)
    kept_settings(tmp_path, dict(settings))  # the next sitting, same settings: its runs are reused
    with pytest.raises(SystemExit) as refused:
        kept_settings(tmp_path, {**settings, "steps": 10})
    assert str(tmp_path / "bench.json") in str(refused.value) and "steps: 30 there, 10 now" in str(refused.value)


def test_the_other_arms_start_from_plain_base_eval_line(tmp_path):
    lines = [{"global_step": 0, "eval/avg_pass_at_1": 0.4, "tasks": {"a": [3, 8]}, "shared": True}, {"global_step": 5, "eval/avg_pass_at_1": 0.5}]
    (tmp_path / "aggregated_results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert step0_line(tmp_path) == {"global_step": 0, "eval/avg_pass_at_1": 0.4, "tasks": {"a": [3, 8]}}  # as the trainer shares it again
    assert step0_line(tmp_path / "gone") is None  # a kept run without its folder: the arm evaluates the base itself


def test_step0_signal_weighs_the_probe_rates_by_each_arm_own_draw():
    from bench.learning_signal import step0_signal

    root = Path(__file__).resolve().parents[1]
    probe = root / "bench" / "data" / "signal_mix" / "probe.json"
    tasks = json.loads(probe.read_text())["tasks"]
    even = sum(1 - (t["successes"] / 8) ** 8 - (1 - t["successes"] / 8) ** 8 for t in tasks) / len(tasks)  # n = 8, each task drawn alike
    arms = ["plain", "curriculum", "env_curriculum", "env_tasks", "curriculum_sharp", "env_tasks_sharp"]
    shares = step0_signal(root / "sweep" / "search_spaces" / "fleet_mix_cpu.yaml", probe, arms, {})
    assert shares["plain"] == round(even, 3)
    assert shares["env_curriculum"] > shares["curriculum"] > shares["plain"]  # weighting by potential draws more of the groups that teach
    # fewer pseudo-counts: a task the probe saw solved always or never fades, at task and env level alike
    assert shares["curriculum_sharp"] > shares["curriculum"] + 0.2 and shares["env_tasks_sharp"] > shares["env_tasks"] + 0.2
