"""Learning-rate multiplier per step: linear warm-up, then constant, linear or cosine decay. Pure; the one
schedule of the project (the RL steps and the base policy's warm-start both use it).

Decays are a registry with one signature, ``(elapsed, span, min_ratio) -> multiplier``: ``elapsed`` steps
since the first step after warm-up, out of ``span`` (at ``elapsed == span`` the decay reaches ``min_ratio``).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def constant(elapsed: int, span: int, min_ratio: float) -> float:
    return 1.0


def linear(elapsed: int, span: int, min_ratio: float) -> float:
    """From 1 to ``min_ratio`` in a straight line."""
    return min_ratio + (1.0 - min_ratio) * (1.0 - min(elapsed / span, 1.0))


def cosine(elapsed: int, span: int, min_ratio: float) -> float:
    """Half a cosine from 1 to ``min_ratio``: the midpoint plus the half-range times cos(pi * elapsed / span)."""
    return (1.0 + min_ratio) / 2 + (1.0 - min_ratio) / 2 * math.cos(math.pi * min(elapsed, span) / span)


DECAYS: dict[str, Callable[[int, int, float], float]] = {"constant": constant, "linear": linear, "cosine": cosine}


def lr_multiplier(step: int, total_steps: int, warmup_steps: int = 0, schedule: str = "constant", min_ratio: float = 0.0) -> float:
    """Multiplier of the peak LR at 1-based ``step``.

    Warm-up: ``step / warmup_steps`` for steps up to ``warmup_steps``. Then the decay falls from 1 right
    after warm-up to ``min_ratio`` at ``total_steps``.
    """
    if schedule not in DECAYS:
        raise ValueError(f"unknown lr schedule {schedule!r} (valid: {', '.join(DECAYS)})")
    if warmup_steps and step <= warmup_steps:
        return step / warmup_steps
    return DECAYS[schedule](max(step - warmup_steps - 1, 0), max(total_steps - warmup_steps - 1, 1), min_ratio)
