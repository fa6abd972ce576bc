"""Diagnoses as explicit rules: small pure functions over a trial's curves (or an env's row) that each
return a finding with the numbers that triggered it, or None.

Two registries, one signature each: ``TRIAL_RULES`` (``TrialCurves, Thresholds``) and ``ENV_RULES``
(``EnvRow, Thresholds``). A rule states a likely cause, not a proof; the evidence lets a reader judge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import fmean

from sweep.report.summary import EnvRow
from sweep.report.thresholds import EPS, Thresholds


@dataclass(frozen=True)
class TrialCurves:
    """What the rules read about one trial: per-step series, oldest first (empty when not reported)."""

    trial_id: str
    metric: str
    pass_at_1: list[float]
    variance_per_prompt: list[float] = field(default_factory=list)
    clip_frac: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    tool_error_rate: list[float] = field(default_factory=list)
    lr: float | None = None


@dataclass(frozen=True)
class Diagnosis:
    rule: str
    subject: str  # a trial id, or "env hotel"
    finding: str
    evidence: str


TrialRule = Callable[[TrialCurves, Thresholds], "tuple[str, str] | None"]
EnvRule = Callable[[EnvRow, Thresholds], "tuple[str, str] | None"]


def _gain(c: TrialCurves) -> float:
    return max(c.pass_at_1) - c.pass_at_1[0] if c.pass_at_1 else 0.0


def no_signal(c: TrialCurves, th: Thresholds) -> tuple[str, str] | None:
    if not c.variance_per_prompt or max(c.variance_per_prompt) > 0:
        return None
    return ("variance_per_prompt 0: no learning signal (every group's rewards were equal)",
            f"reward/variance_per_prompt = 0 at all {len(c.variance_per_prompt)} steps")


def flat_low_clip(c: TrialCurves, th: Thresholds) -> tuple[str, str] | None:
    if not c.pass_at_1 or not c.clip_frac or not c.variance_per_prompt or max(c.variance_per_prompt) <= 0:
        return None
    clip = fmean(c.clip_frac)
    if _gain(c) >= th.min_delta - EPS or clip >= th.low_clip:
        return None
    lr = f", lr {c.lr:.3g}" if c.lr is not None else ""
    return ("flat with clip fraction ≈ 0: LR likely too low",
            f"{c.metric} {c.pass_at_1[0]:.3f} → best {max(c.pass_at_1):.3f} (gain < {th.min_delta}), mean policy/clip_frac {clip:.2e} < {th.low_clip}{lr}")


def high_clip(c: TrialCurves, th: Thresholds) -> tuple[str, str] | None:
    if not c.clip_frac or fmean(c.clip_frac) <= th.high_clip:
        return None
    lr = f", lr {c.lr:.3g}" if c.lr is not None else ""
    return ("clip fraction high: updates overshoot the trust region, LR likely too high",
            f"mean policy/clip_frac {fmean(c.clip_frac):.3f} > {th.high_clip}{lr}")


def kl_rising_pass_falling(c: TrialCurves, th: Thresholds) -> tuple[str, str] | None:
    if len(c.kl) < 2 or len(c.pass_at_1) < 2:
        return None
    kl_up = c.kl[-1] > c.kl[0] and c.kl[-1] > 0
    falling = c.pass_at_1[-1] <= c.pass_at_1[0] - th.min_delta + EPS
    if not (kl_up and falling):
        return None
    return ("KL rising while pass@1 falls: the policy drifts from the reference and gets worse (LR too high or kl_coef too low)",
            f"policy/kl {c.kl[0]:.3g} → {c.kl[-1]:.3g}; {c.metric} {c.pass_at_1[0]:.3f} → {c.pass_at_1[-1]:.3f}")


def tool_errors(c: TrialCurves, th: Thresholds) -> tuple[str, str] | None:
    if not c.tool_error_rate or fmean(c.tool_error_rate) <= th.high_tool_errors:
        return None
    return ("most tool turns fail: malformed calls or bad arguments (see the trajectory failures)",
            f"mean rollout/tool_error_rate {fmean(c.tool_error_rate):.2f} > {th.high_tool_errors}")


def entropy_collapse(c: TrialCurves, th: Thresholds) -> tuple[str, str] | None:
    if len(c.entropy) < 2 or c.entropy[0] <= 0 or c.entropy[-1] >= 0.5 * c.entropy[0]:
        return None
    return ("entropy collapsed: samples of a prompt become identical, so groups stop carrying signal",
            f"policy/entropy {c.entropy[0]:.3g} → {c.entropy[-1]:.3g} (below half)")


def env_saturated(row: EnvRow, th: Thresholds) -> tuple[str, str] | None:
    if row.status != "SATURATED":
        return None
    return (f"env saturated at step {row.first_step}: no signal, nothing to learn",
            f"pass@1 {row.first:.3f} ≥ {th.saturated} at step {row.first_step}")


def env_failing(row: EnvRow, th: Thresholds) -> tuple[str, str] | None:
    if row.status != "FAILING":
        return None
    return ("env never solved: its groups are all zeros (easier tasks, more samples per prompt or a stronger base policy)",
            f"best pass@1 {row.best:.3f} ≤ {th.failing} (step {row.best_step})")


TRIAL_RULES: dict[str, TrialRule] = {
    "no_signal": no_signal,
    "flat_low_clip": flat_low_clip,
    "high_clip": high_clip,
    "kl_rising_pass_falling": kl_rising_pass_falling,
    "tool_errors": tool_errors,
    "entropy_collapse": entropy_collapse,
}
ENV_RULES: dict[str, EnvRule] = {"env_saturated": env_saturated, "env_failing": env_failing}


def diagnose(curves: list[TrialCurves], env_rows: list[EnvRow], th: Thresholds) -> list[Diagnosis]:
    """Every rule on every trial, then the env rules on the best trial's env table."""
    found = [Diagnosis(name, c.trial_id, *hit) for c in curves for name, rule in TRIAL_RULES.items() if (hit := rule(c, th))]
    found += [Diagnosis(name, f"env {row.env}", *hit) for row in env_rows for name, rule in ENV_RULES.items() if (hit := rule(row, th))]
    return found
