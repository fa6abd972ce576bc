"""Tune trial schedulers by name (``scheduler.type``), all counting time in GRPO steps (``training_iteration``).

- ``fifo``: every trial runs to the end (or to a stop rule).
- ``asha``: stops the weaker trials at rungs grace_period * reduction_factor**k (asynchronous: which
  trials it stops depends on timing, not only on seeds).
- ``median``: stops a trial whose best result so far is below the median of the other trials' running
  averages at the same step, after ``grace_period`` steps.
- ``pbt``: every ``perturbation_interval`` steps, a trial in the bottom quantile restarts from a top
  trial's checkpoint (exploit) with the mutated keys perturbed or resampled (explore), kept inside their
  distributions. Donor checkpoints must stay on disk: the run keeps every Tune checkpoint under PBT.
  Asynchronous by default: a trial compares itself with the others' latest scores when it reaches a
  perturbation, so whether it exploits depends on timing; ``synch: true`` waits for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule, PopulationBasedTraining, TrialScheduler

from grpo.metrics import shown_values
from sweep.spec.config import Choice, QUniform, RandInt, SweepConfig, Uniform
from sweep.spec.space import pbt_mutations

STEPS = "training_iteration"  # one report per GRPO step


class KeepInBounds:
    """PBT's explore multiplies values by 0.8 or 1.2 without looking at bounds: clamp them back (and onto q's grid)."""

    def __init__(self, mutations: dict[str, Any]):
        self.mutations = mutations

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        for key, dist in self.mutations.items():
            value = config.get(key)
            if isinstance(dist, Choice) or not isinstance(value, int | float):
                continue
            if isinstance(dist, QUniform):
                value = dist.low + dist.q * round((value - dist.low) / dist.q)
            if isinstance(dist, RandInt):
                config[key] = int(min(max(round(value), dist.low), dist.high - 1))
            elif isinstance(dist, Uniform):
                config[key] = min(max(value, dist.low), dist.high)
        return config


class NeverYieldingMedian(MedianStoppingRule):
    """Median stopping that lets a trial run on while too few others have reached its step.

    Tune's rule pauses such a trial so that a pending one can run (whatever ``min_time_slice`` says, the
    first time): for a GRPO trial that means a checkpoint and a restart, or, without checkpoints, starting
    over from step 1.
    """

    def _on_insufficient_samples(self, tune_controller, trial, time: float) -> str:
        return TrialScheduler.CONTINUE

    def _best_result(self, trial):
        """The trial's best value, leaving out eval/score's placeholder 0 before its first trained eval (Tune's
        rule would count it: a trial whose every gain is negative would keep a best of 0 and never be stopped)."""
        values = shown_values(self._results[trial], self._metric)
        return self._compare_op(values) if values else super()._best_result(trial)


def _asha(cfg: SweepConfig) -> TrialScheduler:
    s = cfg.scheduler
    return ASHAScheduler(time_attr=STEPS, max_t=cfg.trainer.total_steps, grace_period=s.grace_period, reduction_factor=s.reduction_factor)


def _fifo(cfg: SweepConfig) -> TrialScheduler:
    return FIFOScheduler()


def _median(cfg: SweepConfig) -> TrialScheduler:
    s = cfg.scheduler
    return NeverYieldingMedian(time_attr=STEPS, grace_period=s.grace_period, min_samples_required=s.min_samples_required, hard_stop=True)


def _pbt(cfg: SweepConfig) -> TrialScheduler:
    s = cfg.scheduler
    return PopulationBasedTraining(
        time_attr=STEPS,
        perturbation_interval=s.perturbation_interval,
        hyperparam_mutations=pbt_mutations(cfg),
        quantile_fraction=s.quantile_fraction,
        resample_probability=s.resample_probability,
        custom_explore_fn=KeepInBounds(s.mutations),
        synch=s.synch,
    )


SCHEDULERS: dict[str, Callable[[SweepConfig], TrialScheduler]] = {"asha": _asha, "fifo": _fifo, "median": _median, "pbt": _pbt}


def make_scheduler(cfg: SweepConfig) -> TrialScheduler:
    if cfg.scheduler.type not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {cfg.scheduler.type!r}; allowed: {', '.join(SCHEDULERS)}")
    return SCHEDULERS[cfg.scheduler.type](cfg)
