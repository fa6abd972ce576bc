"""The zero-variance forecast against the closed form, and a real probe of a tiny base policy."""

from __future__ import annotations

import pytest

from sweep.forecast import ProbeResult, env_status, expected_zero_variance, forecast_table, tasks_without_signal, zero_variance_probability
from tests.conftest import TEST_MODEL


def test_closed_form_by_hand():
    # p = 0.5, n = 4: 2 * 0.5^4 = 0.125; p = 0.1, n = 2: 0.01 + 0.81 = 0.82; p = 0 or 1: always 1
    assert zero_variance_probability(0.5, 4) == pytest.approx(0.125)
    assert zero_variance_probability(0.1, 2) == pytest.approx(0.82)
    assert zero_variance_probability(0.0, 8) == zero_variance_probability(1.0, 8) == 1.0
    assert expected_zero_variance([0.5, 0.1], 2) == pytest.approx((0.5 + 0.82) / 2)


def test_table_per_env_and_overall():
    results = [ProbeResult("a", "hotel", 2, 4), ProbeResult("b", "hotel", 4, 4), ProbeResult("c", "mail", 0, 4)]
    rows = {r["env_key"]: r for r in forecast_table(results, [2, 4])}
    # hotel: p = 0.5 and 1.0 -> zero_var@2 = (0.5 + 1) / 2 = 0.75; mail: p = 0 -> 1.0 and FAILING
    assert rows["hotel"]["zero_var@2"] == pytest.approx(0.75)
    assert rows["hotel"]["mean_success"] == pytest.approx(0.75) and rows["hotel"]["status"] == "OK"
    assert rows["mail"]["zero_var@4"] == 1.0 and rows["mail"]["status"] == "FAILING"
    assert rows["all"]["tasks"] == 3 and rows["all"]["zero_var@4"] == pytest.approx((0.125 + 1 + 1) / 3)
    assert tasks_without_signal(results) == ["b", "c"]
    assert env_status(0.95) == "SATURATED"


@pytest.mark.slow
def test_probe_counts_every_sample_of_every_task():
    from grpo.config import TrainerConfig
    from sweep.forecast import probe

    cfg = TrainerConfig.model_validate({"model": TEST_MODEL, "torch_threads": 1, "env": {"max_tasks": 3}, "rollout": {"max_turns": 2}})
    results = probe(cfg, k=3)
    assert [r.samples for r in results] == [3, 3, 3]
    assert all(0 <= r.successes <= 3 for r in results)
    row = forecast_table(results, [3])[-1]
    assert row["zero_var@3"] == pytest.approx(sum(zero_variance_probability(r.p, 3) for r in results) / 3)


def test_candidates_come_from_the_space_and_render_suggests_the_best(capsys):
    from pathlib import Path

    from sweep.config import load_sweep_config
    from sweep.forecast import candidate_sizes, render

    space = load_sweep_config(Path(__file__).resolve().parents[2] / "sweep" / "search_spaces" / "demo_cpu.yaml")
    assert candidate_sizes(space.base_trainer(), space) == [4, 8]
    assert candidate_sizes(space.base_trainer()) == [2, 4, 8, 16]
    render([ProbeResult("a", "hotel", 1, 4), ProbeResult("b", "hotel", 0, 4)], [4, 8], k=4)
    out = capsys.readouterr().out
    assert "hotel" in out and "least zero-variance: n=8" in out and "1 of 2 tasks" in out
