"""Turn validated space distributions into what each searcher reads.

- optuna: a define-by-run function (``OptunaSpace``): unconditional keys first, then each conditional key
  only when its ``when`` holds, so the study never sees a value that did not matter;
- random: Tune domains, conditional keys through ``tune.sample_from``;
- grid: every combination listed up front (``grid_points``), conditional keys expanded only where active;
- PBT: the mutation block as Tune domains (numeric keys) and lists (choices, perturbed to a neighbour).

Wherever a conditional key is inactive, the trial gets the base trainer's value, written in its config so
the results say what ran. Imports Ray only inside the functions that build Tune objects.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from configkit.base import get_dotted
from sweep.spec.config import Choice, Fixed, Grid, LogUniform, QUniform, RandInt, SweepConfig, Uniform


def base_value(cfg: SweepConfig, key: str) -> Any:
    """The base trainer's value at a dotted key: what a trial runs with when the key is not sampled."""
    return get_dotted(cfg.trainer.model_dump(mode="json"), key)


def ordered(space: dict[str, Any]) -> list[tuple[str, Any]]:
    """Unconditional keys first, so a condition can always see the value it tests."""
    return sorted(space.items(), key=lambda item: bool(item[1].when))


def inactive_values(cfg: SweepConfig) -> dict[str, Any]:
    return {key: base_value(cfg, key) for key, dist in cfg.space.items() if dist.when}


def fixed_values(cfg: SweepConfig) -> dict[str, Any]:
    return {key: dist.value for key, dist in cfg.space.items() if isinstance(dist, Fixed)}


class OptunaSpace:
    """Define-by-run space for Optuna (a class, not a closure, so Tune can pickle the searcher's state)."""

    def __init__(self, space: dict[str, Any], inactive: dict[str, Any]):
        self.space = dict(ordered(space))
        self.inactive = inactive

    def __call__(self, trial) -> dict[str, Any]:
        values: dict[str, Any] = {}
        constants: dict[str, Any] = {}
        for key, dist in self.space.items():
            if isinstance(dist, Fixed):
                values[key] = constants[key] = dist.value
            elif dist.active(values):
                values[key] = suggest(trial, key, dist)
            else:
                constants[key] = self.inactive[key]
        return constants


def suggest(trial, key: str, dist: Any) -> Any:
    """One Optuna suggestion for a distribution."""
    if isinstance(dist, QUniform) and dist.whole:
        return trial.suggest_int(key, int(dist.low), int(dist.high), step=int(dist.q))
    if isinstance(dist, QUniform):
        return trial.suggest_float(key, dist.low, dist.high, step=dist.q)
    if isinstance(dist, Uniform):
        return trial.suggest_float(key, dist.low, dist.high, log=isinstance(dist, LogUniform))
    if isinstance(dist, RandInt):
        return trial.suggest_int(key, dist.low, dist.high - 1)
    assert isinstance(dist, Choice)
    return trial.suggest_categorical(key, list(dist.values))


def sample(dist: Any, rng: random.Random) -> Any:
    """One random draw (the random searcher's conditional keys, which Tune's domains cannot express)."""
    if isinstance(dist, QUniform):
        return dist.value(rng.randint(0, round((dist.high - dist.low) / dist.q)))
    if isinstance(dist, LogUniform):
        return math.exp(rng.uniform(math.log(dist.low), math.log(dist.high)))
    if isinstance(dist, Uniform):
        return rng.uniform(dist.low, dist.high)
    if isinstance(dist, RandInt):
        return rng.randrange(dist.low, dist.high)
    assert isinstance(dist, Choice)
    return rng.choice(list(dist.values))


class ConditionalSample:
    """``tune.sample_from`` body: sample the key when its condition holds in the trial's config, else the base value."""

    def __init__(self, dist: Any, inactive: Any, seed: int):
        self.dist = dist
        self.inactive = inactive
        self.rng = random.Random(seed)

    def __deepcopy__(self, memo: dict) -> ConditionalSample:
        return self  # Tune deep-copies the space for every trial; a copied generator would repeat the same draw

    def __call__(self, spec: Any) -> Any:
        config = spec["config"]
        values = {key: config[key] for key in self.dist.when}
        return sample(self.dist, self.rng) if self.dist.active(values) else self.inactive


def tune_domain(dist: Any, grid: bool = False) -> Any:
    from ray import tune

    if isinstance(dist, QUniform) and dist.whole:  # integers (tune.quniform gives floats: 8.0)
        return tune.qrandint(int(dist.low), int(dist.high), int(dist.q))
    if isinstance(dist, QUniform):
        return tune.quniform(dist.low, dist.high, dist.q)
    if isinstance(dist, LogUniform):
        return tune.loguniform(dist.low, dist.high)
    if isinstance(dist, Uniform):
        return tune.uniform(dist.low, dist.high)
    if isinstance(dist, RandInt):
        return tune.randint(dist.low, dist.high)
    if isinstance(dist, Grid) or (isinstance(dist, Choice) and grid):
        return tune.grid_search(list(dist.values))
    assert isinstance(dist, Choice)
    return tune.choice(list(dist.values))


def tune_param_space(cfg: SweepConfig) -> dict[str, Any]:
    """Tune's param_space: fixed values always; Tune domains only for the random searcher.

    Optuna samples from ``OptunaSpace`` and the grid searcher's trials are ``grid_points``, both given to
    the searcher itself, so their param_space holds only the fixed values.
    """
    from ray import tune

    space: dict[str, Any] = fixed_values(cfg)
    if cfg.search.searcher == "grid":  # Tune wants every key a listed point sets to be in the space: placeholders
        return {**{key: None for key in cfg.space}, **space}
    if cfg.search.searcher != "random":
        return space
    inactive = inactive_values(cfg)
    for i, (key, dist) in enumerate(cfg.space.items()):
        if isinstance(dist, Fixed):
            continue
        space[key] = tune.sample_from(ConditionalSample(dist, inactive[key], cfg.search.seed + i)) if dist.when else tune_domain(dist)
    return space


def grid_points(cfg: SweepConfig) -> list[dict[str, Any]]:
    """Every combination of the grid searcher's choice/grid keys; a conditional key multiplies only where it is active."""
    return combinations(cfg, {key: list(dist.values) for key, dist in cfg.space.items() if not isinstance(dist, Fixed)})


def combinations(cfg: SweepConfig, values: dict[str, list[Any]], inactive_as_base: bool = True) -> list[dict[str, Any]]:
    """Every combination of ``values`` (key -> its possible values); a conditional key multiplies only where
    it is active, and elsewhere takes the base trainer's value (or is left out: ``inactive_as_base=False``)."""
    absent = object()
    points: list[dict[str, Any]] = [{}]
    for key, dist in ordered(cfg.space):
        if isinstance(dist, Fixed):
            continue
        inactive = None if not dist.when else base_value(cfg, key) if inactive_as_base else absent
        points = [
            {**point, key: value}
            for point in points
            for value in (values[key] if dist.active({**fixed_values(cfg), **point}) else [inactive])
        ]
    return [{key: value for key, value in point.items() if value is not absent} for point in points]


def value_count(dist: Any) -> int | None:
    """How many values a distribution can take (Optuna's count for a ``quniform``), None when continuous."""
    if isinstance(dist, QUniform):
        return math.floor((dist.high - dist.low) / dist.q + 1e-9) + 1
    if isinstance(dist, Uniform):
        return None
    if isinstance(dist, RandInt):
        return dist.high - dist.low
    return len(dist.values)


def finite_values(dist: Any) -> list[Any]:
    """Every value of a distribution that has finitely many (``value_count`` is not None)."""
    if isinstance(dist, QUniform):
        return [dist.value(k) for k in range(value_count(dist) or 0)]
    if isinstance(dist, RandInt):
        return list(range(dist.low, dist.high))
    return list(dist.values)


def finite_points(cfg: SweepConfig, limit: int = 10_000) -> list[dict[str, Any]] | None:
    """Every config the space holds as Optuna sees it (swept keys only; a conditional key only where it is
    active), or None when a key is continuous or there would be more than ``limit`` (repeats then hardly happen).
    The counts are checked before any list is built: a ``randint`` over a billion values stays cheap."""
    swept = {key: dist for key, dist in cfg.space.items() if not isinstance(dist, Fixed)}
    counts = [value_count(dist) for dist in swept.values()]
    if any(n is None for n in counts) or math.prod(n for n in counts if n is not None) > limit:
        return None
    return combinations(cfg, {key: finite_values(dist) for key, dist in swept.items()}, inactive_as_base=False)


def pbt_mutations(cfg: SweepConfig) -> dict[str, Any]:
    """PBT's ``hyperparam_mutations``: numeric keys as Tune domains (perturbed by 0.8/1.2 or resampled), choices as lists."""
    mutations = getattr(cfg.scheduler, "mutations", {})
    return {key: list(dist.values) if isinstance(dist, Choice) else tune_domain(dist) for key, dist in mutations.items()}


def grid_search_points(cfg: SweepConfig) -> list[dict[str, Any]]:
    """The grid searcher's trials in order: the user's starting points, then the grid ``num_samples`` times.

    A key a starting point leaves out keeps the base trainer's value in that trial.
    """
    grid = grid_points(cfg)
    defaults = {key: base_value(cfg, key) for key, dist in cfg.space.items() if not isinstance(dist, Fixed)}
    starts = [{**defaults, **point} for point in cfg.search.points_to_evaluate]
    return [*starts, *itertools.chain.from_iterable(grid for _ in range(cfg.search.num_samples))]


def sampled_trial_count(cfg: SweepConfig) -> int:
    """How many trials the sweep will start."""
    if cfg.search.searcher == "grid":
        swept = [d for d in cfg.space.values() if not isinstance(d, Fixed)]
        if any(not hasattr(d, "values") for d in swept):  # a sampled key, which the grid searcher refuses by name
            return len(cfg.search.points_to_evaluate) + cfg.search.num_samples
        grid = math.prod(len(d.values) for d in swept) if not any(d.when for d in swept) else len(grid_points(cfg))  # counted, not built
        return len(cfg.search.points_to_evaluate) + grid * cfg.search.num_samples
    return math.prod(len(d.values) for d in cfg.space.values() if type(d) is Grid and not d.when) * cfg.search.num_samples
