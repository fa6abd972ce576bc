"""The numbers behind every status and verdict, in one place (each is a ``sweep report`` flag).

Per-env status (``sweep.report.envs.env_status``), comparing the env's pass@1 at the base with its last level
(the mean of the last evals) and that change's noise (a bootstrap over the env's held-out tasks):

- REGRESSED: below the base beyond noise, by at least ``min_delta``.
- SATURATED: the base at or above ``saturated`` — the base policy already solves it; its groups carry little signal.
- FAILING:   base and last at or below ``failing`` — never (or almost never) solved; its groups are all zeros.
- IMPROVED:  above the base beyond noise, by at least ``min_delta``.
- FLAT:      anything else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    min_delta: float = 0.05
    """pass@1 gain (absolute) that counts as IMPROVED; less is FLAT."""
    saturated: float = 0.9
    """pass@1 at the first point at or above which an env is SATURATED."""
    failing: float = 0.05
    """best pass@1 at or below which an env is FAILING."""
    low_clip: float = 1e-3
    """mean clip fraction below which the updates barely move the policy; read only where clipping can happen
    (more than one optimizer step per rollout batch: the first is on-policy and never clips)."""
    high_clip: float = 0.2
    """mean clip fraction above which the updates overshoot the trust region (LR likely too high)."""
    high_tool_errors: float = 0.5
    """share of tool turns that fail above which the agent mostly misuses its tools."""
    env_errors: float = 0.05
    """mean share of an env's training episodes that were environment errors (a server down, a verification
    Fleet could not run) above which the report says so: those episodes are left out, so its groups shrink."""
    no_signal: float = 1e-3
    """reward/variance_per_prompt at or below which a step had no learning signal (the zero-signal stopper's default)."""
    tiny_update_ratio: float = 0.25
    """a trial that held is too low when its median policy/update_kl (the policy before vs after each step's update)
    is below this fraction of that of every trial of its sweep (and base) that learned (rose above the base beyond
    noise), each pair compared over the steps both ran: a scale from the sweep itself, not an absolute one (a KL
    of 1e-5 means one thing for a tiny model and another for an 8B one). The KL of a small step grows about as
    the LR squared, so 0.25 is an LR about half the gentlest LR that learned; without a learner nothing is called
    too low. 0.01 (an LR 10x below) until 2026-11-29: chosen again on the verdict bench's tuning seeds, where 0.25,
    0.5 and 0.9 gave the same agreement and 0.01 left six trials whose truth is too low called flat (docs/decisions.md)."""
    huge_update_ratio: float = 10.0
    """a trial that held is too high when its median policy/update_kl is above this multiple of that of every trial
    of its sweep that learned, over the same steps (``tiny_update_ratio``'s mirror), and its curves show a sign of a
    fall (since 2026-12-01: ``labels._held_too_high``): an LR about 3x above the boldest learner, where the truth
    grid's runs begin to fall (3e-4 against a band ending at 1e-4)."""
    collapse: float = 0.1
    """a drop of held-out pass@1 from the trial's best trained eval to its last at least this large, ending
    at or below the base, is a collapse."""



EPS = 1e-9  # comparisons at a threshold hold despite float rounding (0.25 - 0.2 counts as 0.05)


# What each threshold may be (low, high, inclusive at both ends unless named in OPEN_BELOW): shares and pass@1
# levels are fractions; the update ratios compare a trial's updates with the learners'. ``sweep report`` refuses
# a value outside, by name, before it reads a sweep.
BOUNDS: dict[str, tuple[float, float]] = {
    "min_delta": (0.0, 1.0), "saturated": (0.0, 1.0), "failing": (0.0, 1.0), "low_clip": (0.0, 1.0), "high_clip": (0.0, 1.0),
    "high_tool_errors": (0.0, 1.0), "env_errors": (0.0, 1.0), "no_signal": (0.0, 1.0), "tiny_update_ratio": (0.0, 1.0),
    "huge_update_ratio": (1.0, float("inf")), "collapse": (0.0, 1.0),
}
OPEN_BELOW = ("saturated", "tiny_update_ratio", "huge_update_ratio")  # 0 (or 1x) would make every trial or env match


def threshold_problems(thresholds: Thresholds) -> list[str]:
    """Each threshold outside what it may be (NaN and infinities included), as ``--flag = value: allowed ...``."""
    problems = []
    for name, (low, high) in BOUNDS.items():
        value = getattr(thresholds, name)
        above = value > low if name in OPEN_BELOW else value >= low
        if not (math.isfinite(value) and above and value <= high):
            allowed = f"{'above' if name in OPEN_BELOW else 'at least'} {low:g}" + (f" and at most {high:g}" if math.isfinite(high) else "")
            problems.append(f"--{name.replace('_', '-')} = {value!r}: allowed: a number {allowed}")
    if thresholds.failing >= thresholds.saturated:
        problems.append(f"--failing = {thresholds.failing!r} is not below --saturated = {thresholds.saturated!r}: an env cannot be both")
    if thresholds.low_clip >= thresholds.high_clip:
        problems.append(f"--low-clip = {thresholds.low_clip!r} is not below --high-clip = {thresholds.high_clip!r}")
    return problems
