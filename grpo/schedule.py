"""Learning-rate multiplier per GRPO step: linear warm-up, then constant, linear or cosine decay. Pure."""

from __future__ import annotations

import math


def lr_multiplier(step: int, total_steps: int, warmup_steps: int = 0, schedule: str = "constant", min_ratio: float = 0.0) -> float:
    """Multiplier of the peak LR at 1-based ``step``.

    Warm-up: ``step / warmup_steps`` for steps up to ``warmup_steps``. Then ``constant`` stays at 1;
    ``linear`` and ``cosine`` fall from 1 right after warm-up to ``min_ratio`` at ``total_steps``.
    """
    if warmup_steps and step <= warmup_steps:
        return step / warmup_steps
    if schedule == "constant":
        return 1.0
    span = max(total_steps - warmup_steps, 1)
    progress = min(max(step - warmup_steps - 1, 0) / max(span - 1, 1), 1.0)
    if schedule == "linear":
        decay = 1.0 - progress
    elif schedule == "cosine":
        decay = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        raise ValueError(f"unknown lr schedule {schedule!r} (valid: constant, linear, cosine)")
    return min_ratio + (1.0 - min_ratio) * decay
