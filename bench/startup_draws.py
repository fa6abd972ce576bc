"""The bench sweep's random start per searcher seed: which grid setting each of its first trials lands nearest.

    python bench/startup_draws.py --world mix --seeds 0 1 2 3 4 --against 10 11 ... 29
    python bench/startup_draws.py --world mix --seeds 0 1 ... 99 --startup random spread   # search.startup side by side

Optuna's TPE draws its first ``search.n_startup_trials`` trials at random from ``search.seed`` alone, before any
trial has run: what a bench seed's sweep starts from is known without running it. Drawn here by the sweep's own
searcher (``sweep.tuner.build_searcher`` on the bench's space file as ``bench/verdict.py`` writes it, its study in a
temporary folder); each draw named by its nearest truth-grid setting and that setting's 10-step truth. Reads no outcome of any bench seed, so it may be run on judging seeds. Per-seed rows, then one summary line
(seeds with a draw nearest each grid setting, for ``--seeds`` and ``--against``; with ``--startup random spread``, each
start side by side, and the widest stretch of the LR range, in decades, that a seed's start leaves without a trial:
its mean over seeds and the ratio spread / random).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import record  # noqa: E402
from bench.verdict import _truth, bench_space, nearest  # noqa: E402
from bench.worlds import WORLDS  # noqa: E402
from sweep.report.coverage import looked  # noqa: E402
from sweep.spec.loader import load_space  # noqa: E402
from sweep.tuner import build_searcher  # noqa: E402


def startup_lrs(space_file: Path, seed: int, startup: str = "random") -> list[float]:
    """The learning rates of the sweep's start for ``seed`` (``search.startup``): its searcher's first suggestions."""
    with tempfile.TemporaryDirectory() as storage:
        cfg = load_space(space_file, {"search.seed": seed, "search.startup": startup, "storage": storage})
        searcher = build_searcher(cfg)
        searcher.set_search_properties(cfg.search.metric, cfg.search.mode, {})
        return [searcher.suggest(f"start{i}")["optim.lr"] for i in range(cfg.search.n_startup_trials)]


def widest_gap(lrs: list[float], low: float, high: float) -> float:
    """The widest stretch of [low, high], in decades, with no draw in it: the report's ``sweep.report.coverage``."""
    (lr,) = looked({"optim.lr": {"type": "loguniform", "low": low, "high": high}}, [{"optim.lr": x} for x in lrs])
    return lr.decades


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", choices=sorted(WORLDS), default="mix")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--against", type=int, nargs="*", default=[], help="a second seed set, counted apart")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--startup", nargs="+", choices=["random", "spread"], default=["random"], help="search.startup, each in turn")
    args = parser.parse_args()
    world = WORLDS[args.world]
    settings = _truth(world)[str(args.steps)]["settings"]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        space_file = bench_space(world, Path(folder), args.steps)
        lr_range = load_space(space_file).space["optim.lr"]
        low, high = lr_range.low, lr_range.high
        for startup in args.startup:
            for group, seeds in (("seeds", args.seeds), ("against", args.against)):
                for seed in seeds:
                    lrs = startup_lrs(space_file, seed, startup)
                    draws = [(lr, nearest(lr, settings)) for lr in lrs]
                    rows.append({"set": group, "seed": seed, "startup": startup, "lrs": lrs, "nearest": [s["lr"] for _, s in draws],
                                 "truth": [s["label"] for _, s in draws], "widest_gap_decades": round(widest_gap(lrs, low, high), 4)})
    summary: dict = {"world": world.key, "steps": args.steps, "lr_range": [low, high]}
    for startup in args.startup:
        tail = "" if startup == "random" else f"_{startup}"
        for group in ("seeds", "against"):
            mine = [r for r in rows if r["set"] == group and r["startup"] == startup]
            if mine:
                summary[group] = [r["seed"] for r in mine]
                summary[f"{group}_with_a_draw_nearest{tail}"] = {f"{s['lr']:.0e}": sum(s["lr"] in r["nearest"] for r in mine) for s in settings}
                summary[f"{group}_widest_gap_decades{tail}"] = round(sum(r["widest_gap_decades"] for r in mine) / len(mine), 4)
    if {"random", "spread"} <= set(args.startup):
        summary["widest_gap_ratio_spread_to_random"] = round(summary["seeds_widest_gap_decades_spread"] / summary["seeds_widest_gap_decades"], 4)
    record(f"startup_draws_{world.name}", rows, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
