"""SweepConfig: what to sweep, how to search and schedule, where results go; validated before any trial.

A space file names TrainerConfig keys by dotted path, each with a distribution (``sweep/distributions.py``)::

    space:
      optim.lr: {loguniform: [1.0e-4, 3.0e-3]}
      algorithm.kl_coef: {choice: [0.0, 0.01]}
      algorithm.kl_estimator: {choice: [k1, k3], when: {algorithm.kl_coef: {gt: 0}}}
      rollout.n_samples_per_prompt: 4            # a fixed value

``load_sweep_config`` checks the file's shape here and its meaning in ``sweep/checks.py`` (keys exist,
the trainer accepts every distribution's extremes, searcher, scheduler and metric agree, resources fit),
and reports every problem at once, each naming the file, the key and what is allowed, before Ray starts.
Imports no torch and no Ray.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from grpo.config import TrainerConfig
from grpo.configbase import ConfigError, StrictModel, describe_errors, read_yaml
from sweep.distributions import (  # noqa: F401  (re-exported: the grammar's types are part of this module's API)
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
    seed: int = 0
    n_startup_trials: int = Field(2, ge=1, description="Optuna: random trials before the sampler's model takes over.")
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


class WandbConfig(StrictModel):
    enabled: bool = False
    project: str = Field("grpo-sweep", description="W&B project; runs are grouped by the sweep's name, one per trial.")
    entity: str | None = Field(None, description="W&B team or user (default: the key's own).")
    mode: Literal["online", "offline", "disabled"] = Field("offline", description="online needs WANDB_API_KEY; offline writes local run files to sync later.")


class LoggingConfig(StrictModel):
    wandb: WandbConfig = WandbConfig()
    tensorboard: bool = Field(True, description="TensorBoard event files in each trial's folder.")
    progress: bool = Field(True, description="A live table of trials (state, step, pass@1, variance_per_prompt) in the terminal.")


class SweepConfig(StrictModel):
    name: str = Field("sweep", pattern=r"^[A-Za-z0-9_.-]+$", description="Experiment name (a directory under storage).")
    trainer: dict[str, Any] = Field(default_factory=dict, description="The base TrainerConfig every trial starts from.")
    space: dict[str, Distribution] = Field(default_factory=dict, description="Dotted trainer key -> distribution.")
    search: SearchConfig = SearchConfig()
    scheduler: Scheduler = AshaConfig()
    stopping: StoppingConfig = StoppingConfig()
    resources: ResourcesConfig = ResourcesConfig()
    logging: LoggingConfig = LoggingConfig()
    max_concurrent_trials: int = Field(2, ge=1)
    storage: str = Field("sweep_results", description="Local directory for results (relative to the working directory).")

    @model_validator(mode="before")
    @classmethod
    def _expand_space(cls, data: Any) -> Any:
        data = _expand_distributions(data, "space")
        if isinstance(data, dict) and isinstance(data.get("scheduler"), dict) and "type" not in data["scheduler"]:
            data = {**data, "scheduler": {"type": "asha", **data["scheduler"]}}  # asha is the default scheduler
        return data

    def base_trainer(self) -> TrainerConfig:
        return TrainerConfig.model_validate(self.trainer)


def _expand_distributions(data: Any, key: str) -> Any:
    if isinstance(data, dict) and isinstance(data.get(key), dict):
        data = {**data, key: {k: distribution_dict(v) for k, v in data[key].items()}}
    return data


def _resolve_paths(trainer: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Relative paths in the trainer section are relative to the space file (trials run in their own directories)."""
    trainer = dict(trainer)
    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, str) and not Path(value).expanduser().is_absolute():
            return str((base_dir / value).resolve())
        return value

    for section, key in (("env", "tasks_path"), ("model", "cache_dir")):
        block = dict(trainer.get(section) or {})
        if key in block:
            block[key] = resolve(block[key])
            trainer[section] = block
    return trainer


def _parse_distributions(data: dict[str, Any], source: str, problems: list[str]) -> None:
    """Turn the YAML shorthand into tagged dicts in place; a malformed entry is a problem and is dropped."""
    blocks = [("space", data.get("space"))]
    if isinstance(data.get("scheduler"), dict):
        blocks.append(("scheduler.mutations", data["scheduler"].get("mutations")))
    for where, block in blocks:
        if not isinstance(block, dict):
            continue
        for key, raw in list(block.items()):
            try:
                block[key] = distribution_dict(raw)
            except ValueError as exc:
                problems.append(f"{source}: key '{where}.{key}' = {raw!r}: {exc}")
                del block[key]


def _validate_shape(data: dict[str, Any], source: str, problems: list[str]) -> tuple[SweepConfig | None, set[str]]:
    """Validate the file's structure; a section with errors is reported, then dropped, so later checks still run.

    Returns the config (None if even that failed) and the top-level sections that were dropped (their
    defaults are not what the user wrote, so checks about them are skipped).
    """
    dropped: set[str] = set()
    for _ in range(len(SweepConfig.model_fields) + 1):
        try:
            return SweepConfig.model_validate(data), dropped
        except ValidationError as exc:
            problems.extend(_name_distribution_errors(describe_errors(exc, SweepConfig, source)).splitlines())
            for err in exc.errors():
                loc = err["loc"]
                if not loc:
                    return None, dropped
                if loc[0] == "space" and len(loc) > 1 and isinstance(data.get("space"), dict):
                    data["space"].pop(loc[1], None)
                else:
                    data.pop(loc[0], None)
                    dropped.add(str(loc[0]))
    return None, dropped


def load_sweep_config(path: str | Path, cluster: dict[str, float] | None = None) -> SweepConfig:
    """Read and fully validate a space file; every problem found is reported in one ConfigError.

    ``cluster``: the resources trials can get (``{"CPU": 8, "GPU": 1}``), checked when given
    (``sweep validate`` passes the cluster's or this machine's; ``sweep run`` checks the Ray it starts).
    """
    from sweep.checks import meaning_problems

    path = Path(path)
    data = read_yaml(path)
    source = str(path)
    problems: list[str] = []
    if isinstance(data.get("trainer"), dict):
        data["trainer"] = _resolve_paths(data["trainer"], path.parent)
    _parse_distributions(data, source, problems)
    cfg, dropped = _validate_shape(data, source, problems)
    if cfg is not None:
        problems.extend(meaning_problems(cfg, source, dropped, cluster))
    if problems:
        lines = list(dict.fromkeys(problems))  # the same problem found twice is reported once
        head = f"{source}: {len(lines)} problems\n" if len(lines) > 1 else ""
        raise ConfigError(head + "\n".join(lines))
    assert cfg is not None
    return cfg


def _name_distribution_errors(message: str) -> str:
    """Pydantic names union members in its locations (``space.x.loguniform``); keep only the user's key."""
    for name in (*DISTRIBUTIONS, "fixed", *SCHEDULERS):
        message = message.replace(f".{name}'", "'").replace(f".{name}.", ".")
    return message


def sampled_trial_count(cfg: SweepConfig) -> int:
    """How many trials the sweep will start."""
    if cfg.search.searcher == "grid":
        from sweep.space import grid_points

        return len(cfg.search.points_to_evaluate) + len(grid_points(cfg)) * cfg.search.num_samples
    return math.prod(len(d.values) for d in cfg.space.values() if type(d) is Grid and not d.when) * cfg.search.num_samples
