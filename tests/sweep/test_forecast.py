"""The zero-variance forecast against the closed form, and a real probe of a tiny base policy."""

from __future__ import annotations

from math import comb

import pytest

from sweep.forecast import (
    ProbeResult,
    context_bound,
    env_status,
    expected_zero_variance,
    forecast_table,
    suggest,
    suggestion_lines,
    tasks_without_signal,
    zero_variance_estimate,
    zero_variance_probability,
)
from tests.conftest import TEST_MODEL


def test_closed_form_by_hand():
    # p = 0.5, n = 4: 2 * 0.5^4 = 0.125; p = 0.1, n = 2: 0.01 + 0.81 = 0.82; p = 0 or 1: always 1
    assert zero_variance_probability(0.5, 4) == pytest.approx(0.125)
    assert zero_variance_probability(0.1, 2) == pytest.approx(0.82)
    assert zero_variance_probability(0.0, 8) == zero_variance_probability(1.0, 8) == 1.0
    assert expected_zero_variance([0.5, 0.1], 2) == pytest.approx((0.5 + 0.82) / 2)


def test_the_estimate_is_unbiased_for_the_closed_form():
    # 2 of 4 solved, n = 2: of the C(4,2) = 6 pairs, 1 is both successes and 1 both failures -> 2/6
    assert zero_variance_estimate(2, 4, 2) == pytest.approx(1 / 3)
    assert zero_variance_estimate(2, 4, 4) == 0.0 and zero_variance_estimate(4, 4, 4) == 1.0
    assert zero_variance_estimate(1, 4, 8) == pytest.approx(zero_variance_probability(0.25, 8))  # n > k: plug-in
    for p in (0.1, 0.5, 0.75, 0.97):  # its expectation over Binomial(k, p) counts is exactly p^n + (1-p)^n
        for k, n in ((4, 2), (8, 4), (8, 8), (6, 3)):
            mean = sum(comb(k, c) * p**c * (1 - p) ** (k - c) * zero_variance_estimate(c, k, n) for c in range(k + 1))
            assert mean == pytest.approx(zero_variance_probability(p, n))


def test_table_per_env_and_overall():
    results = [ProbeResult("a", "hotel", 2, 4), ProbeResult("b", "hotel", 4, 4), ProbeResult("c", "mail", 0, 4)]
    rows = {r["env_key"]: r for r in forecast_table(results, [2, 4])}
    # hotel: a 2/4 -> 1/3 at n = 2, b 4/4 -> 1; mail: 0/4 -> 1.0 and FAILING
    assert rows["hotel"]["zero_var@2"] == pytest.approx((1 / 3 + 1) / 2)
    assert rows["hotel"]["mean_success"] == pytest.approx(0.75) and rows["hotel"]["status"] == "LEARNABLE"
    assert rows["mail"]["zero_var@4"] == 1.0 and rows["mail"]["status"] == "FAILING"
    assert rows["all"]["tasks"] == 3 and rows["all"]["zero_var@4"] == pytest.approx((0 + 1 + 1) / 3)
    assert tasks_without_signal(results) == ["b", "c"]
    assert env_status(0.95) == "SATURATED"


@pytest.mark.slow
def test_probe_counts_every_sample_of_every_task():
    from grpo.config import TrainerConfig
    from sweep.forecast import probe

    cfg = TrainerConfig.model_validate({"model": TEST_MODEL, "torch_threads": 1, "env": {"max_tasks": 3}, "rollout": {"max_turns": 2}})
    said: list[str] = []
    results = probe(cfg, k=3, say=said.append)
    assert probe(cfg, k=3) == results  # hearing the episodes end changes no sample
    assert len(said) == 9 and said[-1].startswith(f"probe: 9/9 episodes (100%), {sum(r.successes for r in results)} passed, ")
    assert [r.samples for r in results] == [3, 3, 3]
    assert all(0 <= r.successes <= 3 for r in results)
    row = forecast_table(results, [3])[-1]
    assert row["zero_var@3"] == pytest.approx(sum(zero_variance_estimate(r.successes, 3, 3) for r in results) / 3)
    assert all(r.context_limited <= r.samples for r in results)
    short = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"max_input_length": 8})})  # no prompt fits: no turn runs
    cut = probe(short, k=2)
    assert [(r.successes, r.context_limited) for r in cut] == [(0, 2)] * 3
    assert context_bound(cut) == [r.task_key for r in cut] and forecast_table(cut, [2])[-1]["context_limited"] == 1.0


def test_probe_progress_says_a_line_at_every_tenth_of_the_episodes():
    from types import SimpleNamespace

    from sweep.forecast import ProbeProgress

    said: list[str] = []
    ticks = iter(range(100))
    heard = ProbeProgress(25, said.append, clock=lambda: 2.0 * next(ticks))
    outcomes = [(False, 1.0), (False, 0.0), (True, 0.0)] * 8 + [(False, 1.0)]  # 9 passes, 8 env errors in 25
    for env_error, reward in outcomes:
        heard(SimpleNamespace(env_error=env_error, reward=reward))
    assert len(said) == 10  # at 3, 5, 8, 10, 13, 15, 18, 20, 23, 25 of 25
    assert said[0] == "probe: 3/25 episodes (12%), 1 passed, 1 env error, 2 s"  # the clock read as it is made (0), then +2 a line
    assert said[-1] == "probe: 25/25 episodes (100%), 9 passed, 8 env errors, 20 s"
    clean: list[str] = []
    ProbeProgress(1, clean.append, clock=lambda: 0.0)(SimpleNamespace(env_error=False, reward=0.0))
    assert clean == ["probe: 1/1 episodes (100%), 0 passed, 0 s"]


def test_candidates_come_from_the_space_and_render_suggests_the_best(capsys):
    from pathlib import Path

    from sweep.forecast import candidate_sizes, render
    from sweep.spec.loader import load_space

    space = load_space(Path(__file__).resolve().parents[2] / "sweep" / "search_spaces" / "demo_cpu.yaml")
    assert candidate_sizes(space.trainer, space) == [4, 8]
    assert candidate_sizes(space.trainer) == [2, 4, 8, 16]
    render([ProbeResult("a", "hotel", 2, 8), ProbeResult("b", "hotel", 0, 8)], [4, 8], k=8)
    out = capsys.readouterr().out
    assert "hotel" in out and "least zero-variance: n=8" in out and "1 of 2 tasks" in out
    assert "suggested n_samples_per_prompt: 8 (" in out and "never solved 1: b" in out and "plug-in" not in out
    render([ProbeResult("a", "hotel", 1, 4)], [4, 8], k=4)
    assert "n=8 > k=4: plug-in estimates" in capsys.readouterr().out


def test_suggestion_range_tasks_to_drop_and_flags():
    results = [ProbeResult(f"h{i}", "hotel", 4, 8) for i in range(3)] + [ProbeResult("x", "hotel", 8, 8), ProbeResult("m", "mail", 0, 8)]
    s = suggest(results, [2, 4, 8], tolerance=0.05)
    # kept tasks: 4 of 8 solved -> n=2: 2*C(4,2)/C(8,2) = 12/28 = 0.43; n=4: 2/70 = 0.029; n=8: 0 -> 4 is within 0.05 of 8
    assert (s.n_low, s.n_high) == (4, 8) and s.zero_var_low == pytest.approx(2 / 70)
    assert s.always_solved == ["x"] and s.never_solved == ["m"]
    assert s.flagged_envs == [("mail", "FAILING", 0.0)]
    assert suggest(results, [2, 4, 8], tolerance=0.5).n_low == 2
    lines = suggestion_lines(suggest([ProbeResult("m", "mail", 0, 8)], [2, 4]), k=8)
    assert "none helps" in lines[-2] and lines[0].startswith("flag: env mail is FAILING")


def test_tasks_cut_off_by_the_context_limit_are_named_apart():
    # m1 and m2 never solved; every episode of m2 ran past max_input_length, 3 of m1's 8 did
    results = [ProbeResult("h", "hotel", 4, 8), ProbeResult("m1", "mail", 0, 8, context_limited=3), ProbeResult("m2", "mail", 0, 8, context_limited=8)]
    assert context_bound(results) == ["m2"]
    rows = {r["env_key"]: r for r in forecast_table(results, [4])}
    assert rows["mail"]["context_limited"] == pytest.approx(11 / 16) and rows["hotel"]["context_limited"] == 0.0
    assert rows["all"]["context_limited"] == pytest.approx(11 / 24)
    lines = suggestion_lines(suggest(results, [4]), k=8)
    assert lines[-1].startswith("of the never solved, 1 ran past rollout.max_input_length") and lines[-1].endswith(": m2")
    assert not any("max_input_length" in line for line in suggestion_lines(suggest(results[:2], [4]), k=8))


@pytest.mark.slow
def test_forecast_predicts_the_first_training_steps_zero_variance_share(tmp_path):
    """Seeded: a probe of 48 samples per task forecasts ``reward/frac_zero_variance`` of step 1 at n = 4.

    Twelve one-call tasks (cancel a booking by id) and a longer warm-start give a base policy with mid-range
    success, where the forecast is not trivially 0 or 1. Both sides are samples: the step's share over its
    192 groups (each task 16 times) has sd ≈ 0.035 and the forecast's about 0.02, so ±0.1 is about 2.5 sd of
    their difference (with 96 groups and 32 samples it was 1.6 sd, and a change of base policy moved the
    difference from 0.08 to 0.10).
    """
    from grpo.config import DEFAULT_TASKS, TrainerConfig
    from grpo.reporting import ListReporter
    from grpo.trainer import train
    from sweep.forecast import probe

    cancel = [line for line in open(DEFAULT_TASKS) if '"hotel-cancel_id-' in line]
    (tmp_path / "cancel.jsonl").write_text("".join(cancel))
    cfg = TrainerConfig.model_validate({
        "model": {**TEST_MODEL, "warmstart_steps": 400, "warmstart_batch_size": 16}, "torch_threads": 1, "seed": 0, "total_steps": 1,
        "env": {"tasks_path": str(tmp_path / "cancel.jsonl")},
        "rollout": {"max_turns": 1, "n_samples_per_prompt": 4, "prompts_per_step": 16 * len(cancel)},
    })
    predicted = forecast_table(probe(cfg, k=48), [4])[-1]["zero_var@4"]
    reporter = ListReporter()
    train(cfg, reporter)
    measured = reporter.reports[0][1]["reward/frac_zero_variance"]
    assert 0.1 < predicted < 0.9, predicted  # a forecast with something to predict
    assert measured == pytest.approx(predicted, abs=0.1)
