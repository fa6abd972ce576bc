"""The numbers behind every status and diagnosis in a report, in one place (each is a CLI flag).

Per-env status, comparing the env's pass@1 at its first point (step 0: the base policy, when eval ran
before training) with its best point:

- SATURATED: first ≥ ``saturated`` — the base policy already solves it; its groups carry little signal.
- FAILING:   best ≤ ``failing`` — never (or almost never) solved; its groups are all zeros.
- IMPROVED:  best − first ≥ ``min_delta``.
- FLAT:      anything else.
"""

from __future__ import annotations

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
    """mean clip fraction below which the updates barely move the policy (LR likely too low)."""
    high_clip: float = 0.2
    """mean clip fraction above which the updates overshoot the trust region (LR likely too high)."""
    high_tool_errors: float = 0.5
    """share of tool turns that fail above which the agent mostly misuses its tools."""



EPS = 1e-9  # comparisons at a threshold hold despite float rounding (0.25 - 0.2 counts as 0.05)
