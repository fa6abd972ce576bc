"""Turn validated space distributions into a Ray Tune param space (Optuna reads Tune's domains too)."""

from __future__ import annotations

from typing import Any

from sweep.config import Choice, Fixed, Grid, LogUniform, RandInt, SweepConfig, Uniform


def tune_param_space(cfg: SweepConfig) -> dict[str, Any]:
    """Dotted key -> Tune domain. With the grid searcher, choices are expanded as grids."""
    from ray import tune

    space: dict[str, Any] = {}
    for key, dist in cfg.space.items():
        if isinstance(dist, LogUniform):
            space[key] = tune.loguniform(dist.low, dist.high)
        elif isinstance(dist, Uniform):
            space[key] = tune.uniform(dist.low, dist.high)
        elif isinstance(dist, RandInt):
            space[key] = tune.randint(dist.low, dist.high)
        elif isinstance(dist, Grid) or (isinstance(dist, Choice) and cfg.search.searcher == "grid"):
            space[key] = tune.grid_search(list(dist.values))
        elif isinstance(dist, Choice):
            space[key] = tune.choice(list(dist.values))
        else:
            assert isinstance(dist, Fixed)
            space[key] = dist.value
    return space
