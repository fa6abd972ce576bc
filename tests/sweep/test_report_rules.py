"""Each environment rule and the env status on hand-made numbers: fires when it should, and only then (a
trial's own diagnosis is its verdict: tests/sweep/test_verdict.py)."""

from __future__ import annotations

from sweep.report.rules import ENV_RULES, diagnose, env_errors, env_failing, env_saturated
from sweep.report.summary import EnvRow, env_status
from sweep.verdict.thresholds import Thresholds

TH = Thresholds()


def row(first: float, best: float, step: int = 0) -> EnvRow:
    return EnvRow("hotel", first, step, best, 2, best - first, env_status(first, best, TH), 1.0, 0.1)


def test_env_status_boundaries():
    assert env_status(0.9, 1.0, TH) == "SATURATED"
    assert env_status(0.0, 0.05, TH) == "FAILING"
    assert env_status(0.2, 0.25, TH) == "IMPROVED"
    assert env_status(0.2, 0.24, TH) == "FLAT"
    assert env_status(0.2, 0.24, Thresholds(min_delta=0.02)) == "IMPROVED"


def test_env_rules_and_diagnose_collects_everything():
    assert "saturated at step 0" in env_saturated(row(0.95, 1.0), TH)[0]
    assert env_failing(row(0.0, 0.0), TH) is not None and env_failing(row(0.2, 0.5), TH) is None
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
