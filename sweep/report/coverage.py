"""Where a sweep looked: for each numeric swept key, the widest stretch of its range with no trial in it.

A sweep's answer holds only where it tried something: eight trials over three decades of learning rate can leave a
decade untried beside the winner, and no verdict can speak for it. Pure arithmetic over the saved space
(``sweep_config.json``) and the trials' configs: a log key is measured on a log scale, the range's ends count as
edges, and a conditional key counts only the trials where its condition held. Choice keys are left out (every
value either ran or did not: the leaderboard shows which).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from sweep.spec.distributions import NUMERIC, Distribution, LogUniform, RandInt

_PARSE = TypeAdapter(Distribution)


@dataclass(frozen=True)
class Looked:
    key: str
    low: float
    high: float
    log: bool
    tried: int  # trials with a value of this key
    gap_low: float  # the widest stretch without a trial: its ends
    gap_high: float
    share: float  # of the range, on the key's scale

    @property
    def decades(self) -> float | None:
        return math.log10(self.gap_high / self.gap_low) if self.log else None


def looked(space: Mapping[str, Any], configs: Sequence[Mapping[str, Any]]) -> list[Looked]:
    """Each numeric key of ``space`` (saved distributions, by dotted key) against the trials' ``configs``."""
    out = []
    for key, raw in space.items():
        try:
            dist = _PARSE.validate_python(raw)
        except ValidationError:  # a space saved by another version: say nothing of it rather than guess
            continue
        if not isinstance(dist, NUMERIC):
            continue
        low, high = float(dist.low), float(dist.high - 1 if isinstance(dist, RandInt) else dist.high)
        log = isinstance(dist, LogUniform)
        scale = math.log if log else float
        values = [float(c[key]) for c in configs if isinstance(c.get(key), int | float) and dist.active(dict(c)) and low <= c[key] <= high]
        edges = sorted([low, *values, high])
        gap_low, gap_high = max(zip(edges, edges[1:]), key=lambda pair: scale(pair[1]) - scale(pair[0]))
        share = (scale(gap_high) - scale(gap_low)) / (scale(high) - scale(low)) if high > low else 0.0
        out.append(Looked(key, low, high, log, len(values), gap_low, gap_high, share))
    return out
