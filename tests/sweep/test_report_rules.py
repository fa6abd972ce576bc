"""Each environment rule and the env status on hand-made numbers: fires when it should, and only then (a
trial's own diagnosis is its verdict: tests/sweep/test_verdict.py)."""

from __future__ import annotations

from sweep.report.envs import EnvRow, env_status
from sweep.report.rules import ENV_RULES, diagnose, env_errors, env_failing, env_saturated
from sweep.verdict.thresholds import Thresholds

TH = Thresholds()


def row(base: float, last: float, step: int = 0) -> EnvRow:
    return EnvRow("hotel", base, step, last, (2, 3), last, 3, None, None, env_status(base, last, None, None, TH), 1.0, 0.1)


def test_env_status_on_base_vs_last_and_its_noise():
    # (base, last, interval of last - base): the first rule that holds
    assert env_status(0.9, 0.9, None, None, TH) == "SATURATED"
    assert env_status(0.95, 0.93, -0.05, 0.01, TH) == "SATURATED"  # a dip within noise
    assert env_status(0.95, 0.80, -0.2, -0.1, TH) == "REGRESSED"  # below the base beyond noise, by 0.15
    assert env_status(0.5, 0.42, -0.15, -0.01, TH) == "REGRESSED"
    assert env_status(0.5, 0.47, -0.06, -0.01, TH) == "FLAT"  # beyond noise but by 0.03 < min_delta
    assert env_status(0.0, 0.05, None, None, TH) == "FAILING"
    assert env_status(0.03, 0.07, None, None, TH) == "FLAT"  # off the floor at the end, by too little to count
    assert env_status(0.2, 0.3, 0.02, 0.18, TH) == "IMPROVED"
    assert env_status(0.2, 0.3, -0.01, 0.2, TH) == "FLAT"  # +0.10 but within noise: not judged on a lucky draw
    assert env_status(0.2, 0.24, 0.01, 0.07, TH) == "FLAT"  # beyond noise, by 0.04 < min_delta
    assert env_status(0.2, 0.24, 0.01, 0.07, Thresholds(min_delta=0.02)) == "IMPROVED"
    assert env_status(0.2, 0.25, None, None, TH) == "IMPROVED"  # no per-task results: min_delta decides
    assert env_status(0.2, 0.15, None, None, TH) == "REGRESSED"


def test_env_rules_and_diagnose_collects_everything():
    assert "saturated at the base" in env_saturated(row(0.95, 1.0), TH)[0]
    assert env_failing(row(0.0, 0.0), TH) is not None and env_failing(row(0.2, 0.5), TH) is None
    assert env_failing(row(0.0, 0.0), TH)[1] == "pass@1 0.000 at the base and 0.000 at the end, both ≤ 0.05"
    found = diagnose([row(0.95, 1.0), row(0.2, 0.5)], TH)
    assert [(d.rule, d.subject) for d in found] == [("env_saturated", "env hotel")]
    assert set(ENV_RULES) == {"env_saturated", "env_failing", "env_errors"}


def test_env_errors_fire_above_their_threshold_only():
    from dataclasses import replace

    half = replace(row(0.2, 0.5), env_error_frac=0.5)  # e.g. Fleet: one task of two whose judge always fails
    finding, evidence = env_errors(half, TH)
    assert "left out of their groups, never scored 0" in finding and evidence == "mean reward/hotel/env_error_frac 0.500 > 0.05"
    assert env_errors(replace(half, env_error_frac=0.05), TH) is None  # at the threshold: quiet
    assert env_errors(replace(half, env_error_frac=None), TH) is None  # older sweeps: not measured
    assert [d.rule for d in diagnose([half], TH)] == ["env_errors"]


def test_stop_reason_names_the_scheduler_when_known():
    from sweep.report.load import TrialData
    from sweep.report.summary import stop_reason

    trial = TrialData("t1", "f", {}, [{"training_iteration": 2}])
    assert stop_reason(trial, {}, 3, "median") == "median stopping"
    assert stop_reason(trial, {}, 3, None) == "stopped early (scheduler)"
    assert stop_reason(trial, {}, 2, None) == "finished"
    assert stop_reason(trial, {"t1": {"status": "zero signal"}}, 3, "asha") == "zero signal"
    assert stop_reason(TrialData("t2", "f", {}, [], error="boom"), {}, 3, "asha") == "error"
    flat = TrialData("t3", "f", {}, [{"training_iteration": s, "reward/variance_per_prompt": v} for s, v in ((1, 0.2), (2, 0.0), (3, 0.0))])
    assert stop_reason(flat, {}, 5, "asha", (1e-3, 2)) == "zero signal"  # no leaderboard yet (the live page): the sweep's rule
    assert stop_reason(flat, {}, 5, "asha", (1e-3, 3)) == "ASHA" and stop_reason(flat, {}, 5, "asha") == "ASHA"
