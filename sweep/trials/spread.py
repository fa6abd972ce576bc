"""A spread start (``search.startup: spread``): the sampler's first trials cut each key's range into equal parts, one trial in each.

TPE, GP and CMA-ES draw their first ``search.n_startup_trials`` trials at random. With three or four of them a sweep
often leaves a stretch of a key's range unvisited before the sampler's model takes over, and the model's trials go
where the start's best went (``bench/startup_draws.py`` shows, seed by seed, where a sweep's start lands).
Spread draws those trials as a Latin hypercube instead: for every sampled key, the n startup trials fall one in each
n-th of its range (of its logarithm, for a log key; of its values, for a stepped or choice key), at one offset inside
every part drawn per key (a shifted lattice: no stretch wider than 1/n of the range lies between two of them), the
parts' order shuffled per key so that keys are not tied together. Each draw depends on ``search.seed``, the key's
name and the trial's number only: a resumed sweep draws the same start. Trials after the start are the wrapped
sampler's own.
"""

from __future__ import annotations

import math
import random
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution


def stratum(seed: int, name: str, number: int, n: int) -> int:
    """Which of the n equal parts of key ``name``'s range startup trial ``number`` falls in: a permutation per key."""
    order = random.Random(f"{seed}/{name}").sample(range(n), n)
    return order[number]


def fraction(seed: int, name: str, number: int, n: int) -> float:
    """Where in [0, 1) of key ``name``'s range startup trial ``number`` lies: its part, at the key's one offset."""
    offset = random.Random(f"{seed}/{name}/offset").random()
    return (stratum(seed, name, number, n) + offset) / n


def at(u: float, distribution: BaseDistribution) -> Any:
    """The value at fraction ``u`` in [0, 1) of a distribution's range: log scale for log keys, equal shares of the
    values for stepped and choice keys."""
    if isinstance(distribution, CategoricalDistribution):
        choices = distribution.choices
        return choices[min(int(u * len(choices)), len(choices) - 1)]
    low, high = distribution.low, distribution.high
    if isinstance(distribution, (FloatDistribution, IntDistribution)) and distribution.step is not None and not distribution.log:
        count = round((high - low) / distribution.step) + 1
        value = low + min(int(u * count), count - 1) * distribution.step
        return int(value) if isinstance(distribution, IntDistribution) else min(value, high)
    if isinstance(distribution, IntDistribution):  # log-scaled integers: equal parts of log [low, high + 1)
        return min(int(math.exp(math.log(low) + u * (math.log(high + 1) - math.log(low)))), high)
    if distribution.log:
        return min(math.exp(math.log(low) + u * (math.log(high) - math.log(low))), high)
    return low + u * (high - low)


class SpreadStart(optuna.samplers.BaseSampler):
    """Trials numbered below ``n`` drawn as a Latin hypercube; every later trial by ``sampler``."""

    def __init__(self, sampler: optuna.samplers.BaseSampler, n: int, seed: int):
        self.sampler = sampler
        self.n = n
        self.seed = seed

    def _starting(self, trial: optuna.trial.FrozenTrial) -> bool:
        return trial.number < self.n

    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return {} if self._starting(trial) else self.sampler.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return {} if self._starting(trial) else self.sampler.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name: str, param_distribution: BaseDistribution) -> Any:
        if not self._starting(trial):
            return self.sampler.sample_independent(study, trial, param_name, param_distribution)
        return at(fraction(self.seed, param_name, trial.number, self.n), param_distribution)

    def before_trial(self, study, trial) -> None:
        self.sampler.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self.sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.sampler.reseed_rng()
