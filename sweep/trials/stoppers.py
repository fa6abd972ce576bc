"""Stop rules beyond the scheduler's: the zero-signal rule (the seeds' "variance_per_prompt is 0, no
learning signal"). The rule is one pure function, used by the Tune stopper while the sweep runs and by
the leaderboard afterwards to say why a trial stopped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

VARIANCE = "reward/variance_per_prompt"


def no_signal(variances: Sequence[float], threshold: float, patience: int) -> bool:
    """True when the last ``patience`` values are all below ``threshold``: GRPO had nothing to learn from."""
    return len(variances) >= patience and all(v < threshold for v in variances[-patience:])


def fate(steps: int, total_steps: int, variances: Sequence[float], zero_signal: tuple[float, int] | None, errored: bool = False) -> str:
    """Why a trial ended: error, finished, zero signal (the rule above held at its end) or stopped early (the
    scheduler's stop). The leaderboard says it of Tune's results, the live page as each trial ends."""
    if errored:
        return "error"
    if steps >= total_steps:
        return "finished"
    return "zero signal" if zero_signal and no_signal(list(variances), *zero_signal) else "stopped early"


class ZeroSignalStopper:
    """A Tune stopper (``ray.tune.Stopper`` protocol) applying ``no_signal`` to each trial's history."""

    def __init__(self, threshold: float, patience: int):
        self.threshold = threshold
        self.patience = patience
        self.history: dict[str, list[float]] = defaultdict(list)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        if VARIANCE in result:
            self.history[trial_id].append(float(result[VARIANCE]))
        return no_signal(self.history[trial_id], self.threshold, self.patience)

    def stop_all(self) -> bool:
        return False
