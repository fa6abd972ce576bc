"""bench/startup_draws.py: the random start it draws for a searcher seed is the one the sweep's own searcher draws."""

from __future__ import annotations

from bench.startup_draws import startup_lrs
from bench.verdict import bench_space
from bench.worlds import WORLDS
from sweep.spec.loader import load_space
from sweep.tuner import build_searcher


def test_the_start_drawn_is_the_sweeps_own(tmp_path):
    space_file = bench_space(WORLDS["mix"], tmp_path, 10)
    for seed in (4, 7):
        cfg = load_space(space_file, {"search.seed": seed, "storage": str(tmp_path / "runs")})
        searcher = build_searcher(cfg)
        searcher.set_search_properties(cfg.search.metric, cfg.search.mode, {})
        drawn = []
        for i in range(cfg.search.n_startup_trials):
            searcher.suggest(f"t{i}")
            drawn.append(searcher._ot_trials[f"t{i}"].params["optim.lr"])
        assert startup_lrs(space_file, seed) == drawn
    assert startup_lrs(space_file, 4) != startup_lrs(space_file, 7)
