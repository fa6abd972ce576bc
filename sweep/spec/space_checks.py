"""The space, the searcher and the scheduler, checked against each other and against the trainer.

Every swept key is a trainer key the trainer accepts at each extreme of its distribution; conditions name swept
keys and can hold; starting points lie inside the space; the metric is reported; the sampler fits the space; the
scheduler's periods fit the run and line up with eval and checkpoints; PBT has a population and keys to mutate.
Problems are lines, as in ``sweep.spec.checks``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from configkit.base import apply_overrides, describe_errors, dotted_keys
from configkit.redact import shown_repr
from configkit.suggest import did_you_mean
from grpo.config import TrainerConfig
from sweep.spec.config import Choice, Fixed, Grid, PbtConfig, SweepConfig
from sweep.spec.distributions import NUMERIC, QUniform
from sweep.spec.space import sampled_trial_count

UNSWEEPABLE = ("total_steps", "output_dir")


OPTUNA_CATEGORICAL = (type(None), bool, int, float, str)


def _refused(cfg: SweepConfig, key: str, value: Any, source: str) -> str | None:
    """The trainer's complaint about ``key = value`` on the base config, or None if it accepts it."""
    try:
        TrainerConfig.model_validate(apply_overrides(cfg.trainer.model_dump(), {key: value}))
    except ValidationError as exc:
        return describe_errors(exc, TrainerConfig, source)
    return None


def distribution_problems(cfg: SweepConfig, where: str, key: str, dist: Any, source: str) -> Iterator[str]:
    """A key is a known, sweepable trainer key and the trainer accepts every extreme of its distribution."""
    if key in UNSWEEPABLE:
        yield f"{source}: key '{where}.{key}' cannot be swept (ASHA and the stop rule use trainer.{key}); set it under trainer"
        return
    backend = cfg.trainer.env.backend
    if (key == "env.backend" or key.startswith("env.backend.")) and key.removeprefix("env.backend.") not in backend.PER_TRIAL:
        own = f" (its trials' own: {', '.join('env.backend.' + k for k in backend.PER_TRIAL)})" if backend.PER_TRIAL else ""
        yield (f"{source}: key '{where}.{key}' cannot be swept: the environment backend and its shared parts are the sweep's "
               f"(Fleet's instance cap holds across all its trials){own}; set it under trainer.env.backend")
        return
    if key.startswith("env.") and key.removeprefix("env.") in backend.MOVED_FROM_ENV:
        yield f"{source}: key '{where}.{key}' moved under the backend: sweep env.backend.{key.removeprefix('env.')}"
        return
    if key not in dotted_keys(TrainerConfig):
        yield f"{source}: {_not_a_key(f'{where}.{key}', key)}"
        return
    for value in dist.extremes():
        detail = _refused(cfg, key, value, source)
        if detail:
            if isinstance(dist, QUniform) and not dist.whole and float(value).is_integer() and not _refused(cfg, key, int(value), source):
                detail += (f"\n(a quniform draws whole numbers only when low, high and q are all whole: here q = {dist.q:g}, "
                           f"low = {dist.low:g}, high = {dist.high:g})")
            yield f"{source}: key '{where}.{key}' can give {shown_repr(key, value)}, which the trainer refuses:\n{detail}"
            return


def _not_a_key(written: str, key: str) -> str:
    """Why ``key`` cannot be swept: a section (its keys listed), or no key at all (the closest trainer key, and the
    keys of the nearest section that exists, or the trainer's top-level keys: not all hundred of them)."""
    keys = dotted_keys(TrainerConfig)
    sections = {k.rsplit(".", i)[0] for k in keys for i in range(1, k.count(".") + 1)}  # optim, model, model.lora, ...
    if key in sections:
        return f"key '{written}' is a section of the trainer; sweep its keys one by one: {', '.join(_keys_in(keys, key))}"
    section = key.rpartition(".")[0]
    while section and section not in sections:
        section = section.rpartition(".")[0]
    listed = (f"{section}'s keys: {', '.join(_keys_in(keys, section))}" if section
              else f"the trainer's top-level keys: {', '.join(TrainerConfig.model_fields)}; README's YAML reference lists every key")
    return f"unknown trainer key '{written}' ({did_you_mean(key, [*keys, *sorted(sections)])}{listed})"


def _keys_in(keys: list[str], section: str) -> list[str]:
    return [k for k in keys if k.startswith(f"{section}.")]


def space_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    searcher = cfg.search.searcher
    for key, dist in cfg.space.items():
        yield from distribution_problems(cfg, "space", key, dist, source)
        if isinstance(dist, Grid) and searcher == "optuna":
            yield f"{source}: key 'space.{key}' is a grid, which the optuna searcher cannot run (use choice, or searcher: grid or random)"
        if isinstance(dist, NUMERIC) and searcher == "grid":
            yield f"{source}: key 'space.{key}' is {dist.type}; the grid searcher needs grid, choice or fixed values"
        if isinstance(dist, Choice) and searcher == "optuna" and not all(isinstance(v, OPTUNA_CATEGORICAL) for v in dist.values):
            yield f"{source}: key 'space.{key}': Optuna's choices must be plain values (number, string, bool, null), got {shown_repr(key, dist.values)}"


def condition_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    """``when`` names swept, unconditional keys, and can hold for at least one of their values."""
    for key, dist in cfg.space.items():
        for parent, condition in (dist.when or {}).items():
            where = f"{source}: key 'space.{key}.when.{parent}'"
            if parent == key:
                yield f"{where}: a key cannot depend on itself"
            elif parent not in cfg.space:
                yield f"{where} names a key the space does not sweep (swept: {', '.join(k for k in cfg.space if k != key)})"
            elif cfg.space[parent].when:
                yield f"{where}: {parent} is itself conditional; conditions may only name unconditional keys"
            elif isinstance(cfg.space[parent], Choice | Fixed) and not any(condition.holds(v) for v in cfg.space[parent].extremes()):
                yield f"{where}: '{condition.describe()}' holds for none of {parent}'s values {cfg.space[parent].extremes()!r}, so {key} is never sampled"
        if dist.when and isinstance(dist, Grid) and cfg.search.searcher == "random":
            yield f"{source}: key 'space.{key}' is a conditional grid, which the random searcher cannot expand (use choice, or searcher: grid)"


def point_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    """Each starting point names only swept keys, with values inside their distributions, and makes a valid trial."""
    for i, point in enumerate(cfg.search.points_to_evaluate):
        where = f"{source}: key 'search.points_to_evaluate[{i}]'"
        unknown = sorted(set(point) - set(cfg.space))
        if unknown:
            yield f"{where} names {', '.join(unknown)}, which the space does not sweep (swept: {', '.join(cfg.space)})"
            continue
        for key, value in point.items():
            dist = cfg.space[key]
            if not dist.contains(value):
                yield f"{where}: {key} = {value!r} is outside its distribution {dist.model_dump(exclude_none=True)}"
            elif not dist.active(point):
                yield f"{where}: {key} is set, but its condition {_describe(dist.when)} does not hold in this point"
        try:
            TrainerConfig.model_validate(apply_overrides(cfg.trainer.model_dump(), point))
        except ValidationError as exc:
            yield f"{where} makes a trial config the trainer refuses:\n{describe_errors(exc, TrainerConfig, source)}"


def _describe(when: dict[str, Any] | None) -> str:
    return ", ".join(f"{k} {c.describe()}" for k, c in (when or {}).items())


def search_problems(cfg: SweepConfig, base: TrainerConfig, source: str) -> Iterator[str]:
    """The metric is one the trainer reports; the Optuna sampler fits the space."""
    from grpo.data import select_tasks
    from grpo.metrics import metric_names

    names = metric_names({t.env_key for t in select_tasks(base.env)}, base.eval.n_samples if base.eval.interval else None)
    search = cfg.search
    if search.metric not in names:
        hint = " (eval/* needs trainer.eval.interval > 0)" if search.metric.startswith("eval/") and not base.eval.interval else ""
        yield f"{source}: key 'search.metric' = {search.metric!r} is not reported{hint}; {did_you_mean(search.metric, names)}allowed: {', '.join(sorted(names))}"
    sampled = [d for d in cfg.space.values() if not isinstance(d, Fixed)]
    if search.searcher != "optuna":
        for key in ("sampler", "constant_liar", "n_startup_trials", "startup"):
            if getattr(search, key) != type(search).model_fields[key].default:
                yield f"{source}: key 'search.{key}' applies to the optuna searcher only (searcher is {search.searcher})"
        return
    if not sampled:
        yield f"{source}: key 'space' has nothing to search (no distribution); the optuna searcher needs one (or use searcher: random)"
    if not search.constant_liar and search.sampler != "tpe":
        yield f"{source}: key 'search.constant_liar' applies to the tpe sampler only (sampler is {search.sampler})"
    if search.sampler == "cmaes":
        if sampled and not any(isinstance(d, NUMERIC) for d in sampled):
            yield f"{source}: key 'search.sampler' = 'cmaes' samples numeric keys (uniform, loguniform, quniform, randint); the space has none (use tpe or gp)"
        conditional = [k for k, d in cfg.space.items() if d.when]
        if conditional:
            yield f"{source}: key 'search.sampler' = 'cmaes' needs the same keys in every trial; conditional keys {', '.join(conditional)} (use tpe or gp)"


def scheduler_problems(cfg: SweepConfig, base: TrainerConfig, source: str) -> Iterator[str]:
    """Schedulers count GRPO steps: their periods fit in the run and line up with eval and checkpoints."""
    sched = cfg.scheduler
    eval_metric = cfg.search.metric.startswith("eval/") and base.eval.interval
    period = getattr(sched, "grace_period", None) or getattr(sched, "perturbation_interval", None)
    name = "grace_period" if hasattr(sched, "grace_period") else "perturbation_interval"
    if period is not None and period > base.total_steps:
        yield (f"{source}: key 'scheduler.{name}' = {period} exceeds trainer.total_steps = {base.total_steps}; "
               f"lower it (--set scheduler.{name}={base.total_steps}) or raise total_steps")
    if period is not None and eval_metric and period % base.eval.interval:
        yield (f"{source}: key 'scheduler.{name}' = {period} is not a multiple of trainer.eval.interval = {base.eval.interval}: "
               f"the {sched.type} scheduler would compare stale eval results")
    if isinstance(sched, PbtConfig):
        yield from pbt_problems(cfg, sched, base, source)


def pbt_problems(cfg: SweepConfig, sched: PbtConfig, base: TrainerConfig, source: str) -> Iterator[str]:
    if cfg.search.searcher == "optuna":
        yield f"{source}: key 'scheduler.type' = 'pbt' picks and mutates configs itself; Tune refuses a search algorithm with it (use searcher: random or grid)"
    interval = base.checkpoint.interval
    if not interval or sched.perturbation_interval % interval:
        yield (f"{source}: key 'scheduler.perturbation_interval' = {sched.perturbation_interval}: PBT exploits by checkpoint, so "
               f"trainer.checkpoint.interval (now {interval}) must be > 0 and divide it")
    if not sched.mutations:
        yield f"{source}: key 'scheduler.mutations' is empty; PBT needs at least one key to mutate, e.g. optim.lr: {{loguniform: [1.0e-5, 1.0e-3]}}"
    for key, dist in sched.mutations.items():
        yield from distribution_problems(cfg, "scheduler.mutations", key, dist, source)
        if isinstance(dist, Fixed | Grid) or dist.when:
            yield f"{source}: key 'scheduler.mutations.{key}' must be uniform, loguniform, quniform, randint or choice, without when"
    if cfg.resources.workers_per_trial > 1:  # exploit copies a Tune checkpoint; a multi-worker trial's live in Ray Train
        yield f"{source}: key 'scheduler.type' = 'pbt' works with one worker per trial; resources.workers_per_trial is {cfg.resources.workers_per_trial}"
    if cfg.max_concurrent_trials < 2 or sampled_trial_count(cfg) < 2:
        yield f"{source}: key 'scheduler.type' = 'pbt' needs a population: at least 2 trials (search.num_samples) running at once (max_concurrent_trials)"
