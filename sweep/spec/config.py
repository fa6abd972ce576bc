"""SweepConfig: what to sweep, how to search and schedule, where results go; the schema only.

A space file names TrainerConfig keys by dotted path, each with a distribution (``sweep/spec/distributions.py``)::

    space:
      optim.lr: {loguniform: [1.0e-4, 3.0e-3]}
      algorithm.kl_coef: {choice: [0.0, 0.01]}
      algorithm.kl_estimator: {choice: [k1, k3], when: {algorithm.kl_coef: {gt: 0}}}
      rollout.n_samples_per_prompt: 4            # a fixed value

The base trainer is a typed ``TrainerConfig``, parsed with the file. Reading a file (or a saved sweep),
applying command-line overrides and running the meaning checks is ``sweep.spec.loader``'s job, the one door;
this module imports neither it nor the checks. Imports no torch and no Ray.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from configkit.base import FILE_NAME_WORDS, StrictModel, is_file_name
from grpo.config import MAX_SEED, TrainerConfig
from sweep.spec.distributions import (  # noqa: F401  (re-exported: the grammar's types are part of this module's API)
    DISTRIBUTIONS,
    Choice,
    Condition,
    Distribution,
    Fixed,
    Grid,
    LogUniform,
    QUniform,
    RandInt,
    Uniform,
    distribution_dict,
)


class SearchConfig(StrictModel):
    searcher: Literal["optuna", "random", "grid"] = Field("optuna", description="How trial configs are chosen.")
    sampler: Literal["tpe", "gp", "cmaes"] = Field(
        "tpe", description="Optuna's sampler: tpe (any space), gp (Gaussian process), cmaes (numeric keys; choices sampled at random)."
    )
    constant_liar: bool = Field(True, description="TPE: treat running trials as bad so parallel trials spread out.")
    num_samples: int = Field(4, ge=1, description="Trials to run (grid: repeats of the whole grid).")
    metric: str = Field("reward/avg_pass_at_1", description="The metric the searcher and scheduler optimise.")
    mode: Literal["max", "min"] = "max"
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seeds the searcher's suggestions.")
    n_startup_trials: int = Field(2, ge=1, description="Optuna: random trials before the sampler's model takes over.")
    startup: Literal["random", "spread"] = Field(
        "random",
        description="Optuna: how the startup trials are drawn: random, or spread (a Latin hypercube: each key's range, "
        "log scale for log keys, cut into n_startup_trials equal parts, one trial in each).",
    )
    points_to_evaluate: list[dict[str, Any]] = Field(
        default_factory=list, description="Configs tried first (dotted key -> value), e.g. the settings you run today."
    )


class AshaConfig(StrictModel):
    type: Literal["asha"] = "asha"
    grace_period: int = Field(2, ge=1, description="GRPO steps before a trial can be stopped.")
    reduction_factor: float = Field(2.0, gt=1, description="Keep 1/reduction_factor of trials at each rung.")


class FifoConfig(StrictModel):
    type: Literal["fifo"] = "fifo"


class MedianConfig(StrictModel):
    type: Literal["median"] = "median"
    grace_period: int = Field(2, ge=1, description="GRPO steps before a trial can be stopped.")
    min_samples_required: int = Field(3, ge=1, description="Other trials' results needed at a step before comparing.")


class PbtConfig(StrictModel):
    type: Literal["pbt"] = "pbt"
    perturbation_interval: int = Field(2, ge=1, description="GRPO steps between exploit/explore decisions.")
    mutations: dict[str, Distribution] = Field(default_factory=dict, description="Dotted trainer key -> distribution to mutate within.")
    quantile_fraction: float = Field(0.25, gt=0, le=0.5, description="Bottom share of trials that copy a top-share trial's checkpoint.")
    resample_probability: float = Field(0.25, ge=0, le=1, description="Chance a mutated key is resampled rather than perturbed.")
    synch: bool = Field(
        False, description="Wait for every trial at each perturbation (exploits do not depend on timing; trials pause and restart there)."
    )

    @model_validator(mode="before")
    @classmethod
    def _expand(cls, data: Any) -> Any:
        return _expand_distributions(data, "mutations")


Scheduler = Annotated[AshaConfig | FifoConfig | MedianConfig | PbtConfig, Field(discriminator="type")]
SCHEDULERS = ("asha", "fifo", "median", "pbt")


class ZeroSignalConfig(StrictModel):
    """Stop a trial whose reward/variance_per_prompt stays below ``threshold`` for ``patience`` steps in a row."""

    enabled: bool = False
    threshold: float = Field(1e-3, gt=0, description="variance_per_prompt below this counts as no signal.")
    patience: int = Field(3, ge=1, description="Consecutive steps without signal before the trial stops.")

    def rule(self) -> tuple[float, int] | None:
        """``(threshold, patience)`` when enabled, else None: what the stopper and the leaderboard apply."""
        return (self.threshold, self.patience) if self.enabled else None


class StoppingConfig(StrictModel):
    zero_signal: ZeroSignalConfig = ZeroSignalConfig()


class ResourcesConfig(StrictModel):
    cpus_per_trial: float = Field(1.0, gt=0, description="CPUs Ray reserves for each trial (for each worker when workers_per_trial > 1).")
    gpus_per_trial: float = Field(
        0.0, ge=0, description="GPUs Ray reserves for each trial (for each worker when workers_per_trial > 1); a worker uses at most one."
    )
    workers_per_trial: int = Field(
        1, ge=1, description="FSDP2 ranks per trial. Above 1 the trial runs Ray Train's TorchTrainer with this many workers, each given cpus_per_trial CPUs and gpus_per_trial GPUs."
    )
    trials_per_worker: int = Field(
        1, ge=1, description="LoRA trials packed in one process over one copy of the frozen base (grpo.pack): each keeps its own adapter, "
        "optimizer, RNG, data order and checkpoint, and Tune still sees (and stops) each trial. Needs trainer.model.lora, one worker, "
        "HF rollouts on CPU; keys that make the base (model.*, env.*, the eval split) cannot be swept in a pack."
    )


class FailuresConfig(StrictModel):
    """What happens to a trial whose own process dies: out of memory, a killed worker, a lost node."""

    max_trial_restarts: int = Field(
        2, ge=0, description="Times such a trial starts again in a new process, from its newest checkpoint (from step 1 without one); "
        "0: never. A trial that raises an exception (a bug, a config error) is not restarted; one lost to a preempted node "
        "restarts without counting against this (Ray's rule)."
    )


class WandbConfig(StrictModel):
    enabled: bool = False
    project: str = Field("grpo-sweep", description="W&B project; runs are grouped by the sweep's name, one per trial.")
    entity: str | None = Field(None, description="W&B team or user (default: the key's own).")
    mode: Literal["online", "offline", "disabled"] = Field("offline", description="online needs WANDB_API_KEY; offline writes local run files to sync later.")


class LoggingConfig(StrictModel):
    wandb: WandbConfig = WandbConfig()
    tensorboard: bool = Field(True, description="TensorBoard event files in each trial's folder.")
    progress: bool = Field(True, description="A live table of trials (state, step, pass@1, variance_per_prompt) in the terminal.")


class ConfirmConfig(StrictModel):
    """A confirm stage that ``sweep run`` runs when the sweep ends (``sweep.confirm``; the same as ``sweep
    confirm``): a sweep ranks each setting by one seed at a short horizon, where an early riser can pass a
    setting that keeps climbing. Off by default: it costs top x seeds trials of ``steps`` steps."""

    top: int = Field(0, ge=0, description="Settings to confirm, best first (0: no confirm stage).")
    seeds: int = Field(2, ge=1, description="Fresh RL seeds per setting.")
    steps: int | None = Field(None, ge=1, description="GRPO steps per confirming trial (None: twice the sweep's total_steps).")


class SweepConfig(StrictModel):
    name: str = Field("sweep", description="Experiment name (a directory under storage).")
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description="The base trainer config every trial starts from (validated once, here).")
    space: dict[str, Distribution] = Field(default_factory=dict, description="Dotted trainer key -> distribution.")
    search: SearchConfig = SearchConfig()
    scheduler: Scheduler = AshaConfig()
    stopping: StoppingConfig = StoppingConfig()
    resources: ResourcesConfig = ResourcesConfig()
    failures: FailuresConfig = FailuresConfig()
    logging: LoggingConfig = LoggingConfig()
    confirm: ConfirmConfig = Field(default_factory=ConfirmConfig, description="The top settings again with fresh seeds over a longer horizon, when the sweep ends (off by default).")
    max_concurrent_trials: int = Field(2, ge=1)
    storage: str = Field("sweep_results", description="Results: a local directory (relative to the working directory) or s3://bucket/prefix.")

    @field_validator("name")
    @classmethod
    def _a_directory_name(cls, name: str) -> str:
        if not is_file_name(name):
            raise ValueError(f"{name!r} is not a name ({FILE_NAME_WORDS}): the sweep is the directory storage/name, which --fresh deletes")
        return name

    @model_validator(mode="before")
    @classmethod
    def _expand_space(cls, data: Any) -> Any:
        data = _expand_distributions(data, "space")
        if isinstance(data, dict) and isinstance(data.get("scheduler"), dict) and "type" not in data["scheduler"]:
            data = {**data, "scheduler": {"type": "asha", **data["scheduler"]}}  # asha is the default scheduler
        return data


def _expand_distributions(data: Any, key: str) -> Any:
    if isinstance(data, dict) and isinstance(data.get(key), dict):
        data = {**data, key: {k: distribution_dict(v) for k, v in data[key].items()}}
    return data
