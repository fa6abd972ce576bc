"""Optuna samplers by name (``search.sampler``): one factory each, same signature, registered in a dict.

- ``tpe`` (default): any space, conditional keys included; ``constant_liar`` makes parallel trials spread
  out instead of piling onto the same promising point.
- ``gp``: a Gaussian-process sampler (Optuna's, on torch and scipy); sample-efficient on a few numeric keys.
- ``cmaes``: CMA-ES (the ``cmaes`` package) on numeric keys; choice keys are drawn at random. Trials
  stopped early count with their last value (``consider_pruned_trials``), since with ASHA most trials are.

Each runs ``n_startup_trials`` random trials before its model takes over, seeded by ``search.seed``; with
``search.startup: spread`` those trials are spread over every key's range instead (``sweep.trials.spread``).
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from sweep.spec.config import SearchConfig
from sweep.trials.spread import SpreadStart


def _tpe(search: SearchConfig) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=search.seed, n_startup_trials=search.n_startup_trials, constant_liar=search.constant_liar)


def _gp(search: SearchConfig) -> optuna.samplers.BaseSampler:
    return optuna.samplers.GPSampler(seed=search.seed, n_startup_trials=search.n_startup_trials)


def _cmaes(search: SearchConfig) -> optuna.samplers.BaseSampler:
    return optuna.samplers.CmaEsSampler(
        seed=search.seed,
        n_startup_trials=search.n_startup_trials,
        consider_pruned_trials=True,
        independent_sampler=optuna.samplers.RandomSampler(seed=search.seed),
    )


SAMPLERS: dict[str, Callable[[SearchConfig], optuna.samplers.BaseSampler]] = {"tpe": _tpe, "gp": _gp, "cmaes": _cmaes}


def make_sampler(search: SearchConfig) -> optuna.samplers.BaseSampler:
    if search.sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {search.sampler!r}; allowed: {', '.join(SAMPLERS)}")
    sampler = SAMPLERS[search.sampler](search)
    return SpreadStart(sampler, search.n_startup_trials, search.seed) if search.startup == "spread" else sampler
