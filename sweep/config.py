"""SweepConfig: what to sweep, how to search and schedule, where results go; validated before any trial.

A space file names TrainerConfig keys by dotted path, each with a distribution::

    space:
      optim.lr: {loguniform: [1.0e-4, 3.0e-3]}
      algorithm.kl_coef: {choice: [0.0, 0.01]}
      rollout.n_samples_per_prompt: 4            # a fixed value

Loading checks every key exists, every distribution is well formed, and that the trainer config accepts
the extreme values of every distribution, so a bad file fails with its file, key and allowed values
before Ray starts. Imports no torch and no Ray.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from grpo.config import TrainerConfig
from grpo.configbase import ConfigError, StrictModel, apply_overrides, describe_errors, dotted_keys, read_yaml, validate

DISTRIBUTIONS = ("uniform", "loguniform", "randint", "choice", "grid")


class Uniform(StrictModel):
    type: Literal["uniform"] = "uniform"
    low: float
    high: float

    def extremes(self) -> list[Any]:
        """The bounds and a value between them that is not round (an int-only key refuses it)."""
        return [self.low, self.high, self.low + (self.high - self.low) * 0.377]

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        return self


class LogUniform(Uniform):
    type: Literal["loguniform"] = "loguniform"  # type: ignore[assignment]

    @model_validator(mode="after")
    def _positive(self) -> LogUniform:
        if self.low <= 0:
            raise ValueError(f"low ({self.low}) must be > 0 for a log scale")
        return self


class RandInt(StrictModel):
    """Integers ``low <= x < high``."""

    type: Literal["randint"] = "randint"
    low: int
    high: int

    def extremes(self) -> list[Any]:
        return [self.low, self.high - 1]

    @model_validator(mode="after")
    def _ordered(self) -> RandInt:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high}); high is exclusive")
        return self


class Choice(StrictModel):
    type: Literal["choice"] = "choice"
    values: list[Any] = Field(min_length=1)

    def extremes(self) -> list[Any]:
        return list(self.values)


class Grid(Choice):
    """Every value is tried (with the ``grid`` or ``random`` searcher)."""

    type: Literal["grid"] = "grid"  # type: ignore[assignment]


class Fixed(StrictModel):
    type: Literal["fixed"] = "fixed"
    value: Any

    def extremes(self) -> list[Any]:
        return [self.value]


Distribution = Annotated[Uniform | LogUniform | RandInt | Choice | Grid | Fixed, Field(discriminator="type")]


def _distribution_dict(raw: Any) -> dict[str, Any]:
    """``{loguniform: [a, b]}`` -> ``{type: loguniform, low: a, high: b}``; a scalar is a fixed value."""
    if not isinstance(raw, dict):
        return {"type": "fixed", "value": raw}
    if len(raw) != 1 or next(iter(raw)) not in DISTRIBUTIONS:
        raise ValueError(f"a distribution is one of {{{', '.join(DISTRIBUTIONS)}}}: [...] or a plain value, got {raw!r}")
    (name, args), = raw.items()
    if name in ("choice", "grid"):
        return {"type": name, "values": args}
    if not isinstance(args, list) or len(args) != 2:
        raise ValueError(f"{name} takes [low, high], got {args!r}")
    return {"type": name, "low": args[0], "high": args[1]}


class SearchConfig(StrictModel):
    searcher: Literal["optuna", "random", "grid"] = Field("optuna", description="How trial configs are chosen.")
    num_samples: int = Field(4, ge=1, description="Trials to run (grid: repeats of the whole grid).")
    metric: str = Field("reward/avg_pass_at_1", description="The metric the searcher and scheduler optimise.")
    mode: Literal["max", "min"] = "max"
    seed: int = 0
    n_startup_trials: int = Field(2, ge=1, description="Optuna: random trials before TPE takes over.")
    points_to_evaluate: list[dict[str, Any]] = Field(
        default_factory=list, description="Configs tried first (dotted key -> value), e.g. the settings you run today."
    )



class SchedulerConfig(StrictModel):
    type: Literal["asha", "fifo"] = Field("asha", description="asha stops weak trials at rungs; fifo runs all to the end.")
    grace_period: int = Field(2, ge=1, description="ASHA: GRPO steps before a trial can be stopped.")
    reduction_factor: float = Field(2.0, gt=1, description="ASHA: keep 1/reduction_factor of trials at each rung.")


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
    cpus_per_trial: float = Field(1.0, gt=0, description="CPUs Ray reserves for each trial.")
    gpus_per_trial: float = Field(0.0, ge=0, description="GPUs Ray reserves for each trial.")


class SweepConfig(StrictModel):
    name: str = Field("sweep", pattern=r"^[A-Za-z0-9_.-]+$", description="Experiment name (a directory under storage).")
    trainer: dict[str, Any] = Field(default_factory=dict, description="The base TrainerConfig every trial starts from.")
    space: dict[str, Distribution] = Field(default_factory=dict, description="Dotted trainer key -> distribution.")
    search: SearchConfig = SearchConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    stopping: StoppingConfig = StoppingConfig()
    resources: ResourcesConfig = ResourcesConfig()
    max_concurrent_trials: int = Field(2, ge=1)
    storage: str = Field("sweep_results", description="Local directory for results (relative to the working directory).")

    @model_validator(mode="before")
    @classmethod
    def _expand_space(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("space"), dict):
            data = {**data, "space": {k: v if isinstance(v, dict) and "type" in v else _distribution_dict(v) for k, v in data["space"].items()}}
        return data

    def base_trainer(self) -> TrainerConfig:
        return TrainerConfig.model_validate(self.trainer)


def _check_search(cfg: SweepConfig, source: str) -> None:
    """Searcher, scheduler and metric agree with each other and with what the trainer reports."""
    from grpo.data import select_tasks
    from grpo.metrics import metric_names

    base = cfg.base_trainer()
    names = metric_names({t.env_key for t in select_tasks(base.env)}, base.eval.n_samples if base.eval.interval else None)
    if cfg.search.metric not in names:
        hint = " (eval/* needs trainer.eval.interval > 0)" if cfg.search.metric.startswith("eval/") and not base.eval.interval else ""
        raise ConfigError(f"{source}: key 'search.metric' = {cfg.search.metric!r} is not reported{hint}; allowed: {', '.join(sorted(names))}")
    if cfg.search.searcher == "optuna" and all(isinstance(d, Fixed) for d in cfg.space.values()):
        raise ConfigError(f"{source}: key 'space' has nothing to search (no distribution); the optuna searcher needs one (or use searcher: random)")
    if cfg.scheduler.type == "asha":
        if cfg.scheduler.grace_period > base.total_steps:
            raise ConfigError(f"{source}: key 'scheduler.grace_period' = {cfg.scheduler.grace_period} exceeds trainer.total_steps = {base.total_steps}")
        if cfg.search.metric.startswith("eval/") and cfg.scheduler.grace_period % base.eval.interval:
            raise ConfigError(
                f"{source}: key 'scheduler.grace_period' = {cfg.scheduler.grace_period} is not a multiple of trainer.eval.interval = "
                f"{base.eval.interval}: ASHA's rungs would compare stale eval results"
            )


def _check_points(cfg: SweepConfig, source: str) -> None:
    """Each starting point names only swept keys, with values inside their distributions, and makes a valid trial."""
    for i, point in enumerate(cfg.search.points_to_evaluate):
        where = f"{source}: key 'search.points_to_evaluate[{i}]'"
        unknown = sorted(set(point) - set(cfg.space))
        if unknown:
            raise ConfigError(f"{where} names {', '.join(unknown)}, which the space does not sweep (swept: {', '.join(cfg.space)})")
        for key, value in point.items():
            dist = cfg.space[key]
            inside = value in dist.values if isinstance(dist, Choice) else (
                dist.low <= value <= dist.high if isinstance(dist, (Uniform, RandInt)) else value == dist.value
            )
            if not inside:
                raise ConfigError(f"{where}: {key} = {value!r} is outside its distribution {dist.model_dump()}")
        try:
            TrainerConfig.model_validate(apply_overrides(cfg.trainer, point))
        except ValidationError as exc:
            raise ConfigError(f"{where} makes a trial config the trainer refuses:\n{describe_errors(exc, TrainerConfig, source)}") from None


def _check_space(cfg: SweepConfig, source: str) -> None:
    known = dotted_keys(TrainerConfig)
    for key, dist in cfg.space.items():
        if key in ("total_steps", "output_dir"):
            raise ConfigError(f"{source}: key 'space.{key}' cannot be swept (ASHA and the stop rule use trainer.{key}); set it under trainer")
        if key not in known:
            raise ConfigError(f"{source}: unknown trainer key 'space.{key}' (allowed: {', '.join(known)})")
        for value in dist.extremes():
            try:
                TrainerConfig.model_validate(apply_overrides(cfg.trainer, {key: value}))
            except ValidationError as exc:
                detail = describe_errors(exc, TrainerConfig, source)
                raise ConfigError(f"{source}: key 'space.{key}' can give {value!r}, which the trainer refuses:\n{detail}") from None
        if isinstance(dist, Grid) and cfg.search.searcher == "optuna":
            raise ConfigError(f"{source}: key 'space.{key}' is a grid, which the optuna searcher cannot run (use choice, or searcher: grid or random)")
        if isinstance(dist, (Uniform, RandInt)) and cfg.search.searcher == "grid":
            raise ConfigError(f"{source}: key 'space.{key}' is {dist.type}; the grid searcher needs grid, choice or fixed values")


def _resolve_paths(trainer: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """Relative paths in the trainer section are relative to the space file (trials run in their own directories)."""
    trainer = dict(trainer)
    for section, key in (("env", "tasks_path"), ("model", "cache_dir")):
        block = dict(trainer.get(section) or {})
        if isinstance(block.get(key), str) and not Path(block[key]).expanduser().is_absolute():
            block[key] = str((base_dir / block[key]).resolve())
            trainer[section] = block
    return trainer


def load_sweep_config(path: str | Path) -> SweepConfig:
    """Read and fully validate a space file; every problem is a ConfigError naming the file and the key."""
    path = Path(path)
    data = read_yaml(path)
    source = str(path)
    if isinstance(data.get("trainer"), dict):
        data["trainer"] = _resolve_paths(data["trainer"], path.parent)
    if isinstance(data.get("space"), dict):
        for key, raw in data["space"].items():
            try:
                data["space"][key] = _distribution_dict(raw)
            except ValueError as exc:
                raise ConfigError(f"{source}: key 'space.{key}' = {raw!r}: {exc}") from None
    try:
        cfg = validate(SweepConfig, data, source)
    except ConfigError as exc:
        raise ConfigError(_name_distribution_errors(str(exc))) from None
    validate(TrainerConfig, cfg.trainer, source, prefix="trainer.")
    _check_space(cfg, source)
    _check_points(cfg, source)
    _check_search(cfg, source)
    return cfg


def _name_distribution_errors(message: str) -> str:
    """Pydantic names union members in its locations (``space.x.loguniform``); keep only the user's key."""
    for name in ("uniform", "loguniform", "randint", "choice", "grid", "fixed"):
        message = message.replace(f".{name}'", "'").replace(f".{name}.", ".")
    return message


def sampled_trial_count(cfg: SweepConfig) -> int:
    """How many trials the sweep will start."""
    expanded = (Grid, Choice) if cfg.search.searcher == "grid" else (Grid,)
    return math.prod(len(d.values) for d in cfg.space.values() if type(d) in expanded) * cfg.search.num_samples
