"""Each diagnosis rule and the env status on hand-made numbers: fires when it should, and only then."""

from __future__ import annotations

from sweep.report.rules import (
    ENV_RULES,
    TRIAL_RULES,
    TrialCurves,
    diagnose,
    entropy_collapse,
    env_failing,
    env_saturated,
    flat_low_clip,
    high_clip,
    kl_rising_pass_falling,
    no_signal,
    tool_errors,
)
from sweep.report.summary import EnvRow, env_status
from sweep.report.thresholds import Thresholds

TH = Thresholds()


def curves(**kw) -> TrialCurves:
    base = dict(trial_id="t", metric="eval/avg_pass_at_1", pass_at_1=[0.2, 0.3, 0.4], variance_per_prompt=[0.1, 0.1, 0.1],
                clip_frac=[0.05, 0.05, 0.05], kl=[0.01, 0.01, 0.01], entropy=[2.0, 2.0, 2.0], tool_error_rate=[0.1, 0.1, 0.1], lr=1e-3)
    base.update(kw)
    return TrialCurves(**base)


def test_a_healthy_learning_trial_fires_no_rule():
    assert [name for name, rule in TRIAL_RULES.items() if rule(curves(), TH)] == []


def test_no_signal_needs_zero_variance_at_every_step():
    finding, evidence = no_signal(curves(variance_per_prompt=[0.0, 0.0]), TH)
    assert "no learning signal" in finding and "at all 2 steps" in evidence
    assert no_signal(curves(variance_per_prompt=[0.0, 0.01]), TH) is None


def test_flat_with_clip_near_zero_points_at_a_low_lr():
    hit = flat_low_clip(curves(pass_at_1=[0.2, 0.21, 0.2], clip_frac=[0.0, 1e-4]), TH)
    assert hit and "LR likely too low" in hit[0] and "lr 0.001" in hit[1]
    assert flat_low_clip(curves(pass_at_1=[0.2, 0.3], clip_frac=[0.0]), TH) is None  # gain 0.1: not flat
    assert flat_low_clip(curves(pass_at_1=[0.2, 0.2], clip_frac=[0.01]), TH) is None  # clip above 1e-3
    assert flat_low_clip(curves(pass_at_1=[0.2, 0.2], clip_frac=[0.0], variance_per_prompt=[0.0]), TH) is None  # no signal: another rule


def test_kl_rising_while_pass_falls():
    hit = kl_rising_pass_falling(curves(kl=[0.01, 0.2], pass_at_1=[0.4, 0.3]), TH)
    assert hit and "0.01 → 0.2" in hit[1] and "0.400 → 0.300" in hit[1]
    assert kl_rising_pass_falling(curves(kl=[0.01, 0.2], pass_at_1=[0.4, 0.38]), TH) is None  # fell less than min_delta
    assert kl_rising_pass_falling(curves(kl=[0.2, 0.01], pass_at_1=[0.4, 0.1]), TH) is None  # KL falling


def test_clip_tool_errors_and_entropy_thresholds():
    assert high_clip(curves(clip_frac=[0.3, 0.4]), TH)[1].startswith("mean policy/clip_frac 0.350")
    assert high_clip(curves(clip_frac=[0.2]), TH) is None
    assert tool_errors(curves(tool_error_rate=[0.6, 0.8]), TH) is not None
    assert tool_errors(curves(tool_error_rate=[0.6, 0.8]), Thresholds(high_tool_errors=0.9)) is None
    assert entropy_collapse(curves(entropy=[2.0, 0.9]), TH) is not None
    assert entropy_collapse(curves(entropy=[2.0, 1.1]), TH) is None


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
    found = diagnose([curves(trial_id="x", variance_per_prompt=[0.0, 0.0])], [row(0.95, 1.0), row(0.2, 0.5)], TH)
    assert [(d.rule, d.subject) for d in found] == [("no_signal", "x"), ("env_saturated", "env hotel")]
    assert set(ENV_RULES) == {"env_saturated", "env_failing"}


def test_stop_reason_names_the_scheduler_when_known():
    from sweep.report.load import TrialData
    from sweep.report.summary import stop_reason

    trial = TrialData("t1", "f", {}, [{"training_iteration": 2}])
    assert stop_reason(trial, {}, 3, "median") == "median stopping"
    assert stop_reason(trial, {}, 3, None) == "stopped early (scheduler)"
    assert stop_reason(trial, {}, 2, None) == "finished"
    assert stop_reason(trial, {"t1": {"status": "zero signal"}}, 3, "asha") == "zero signal"
    assert stop_reason(TrialData("t2", "f", {}, [], error="boom"), {}, 3, "asha") == "error"
