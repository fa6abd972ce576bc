"""The bench sweep's random start per searcher seed: which grid setting each of its first trials lands nearest.

    python bench/startup_draws.py --world mix --seeds 0 1 2 3 4 --against 10 11 ... 29

Optuna's TPE draws its first ``search.n_startup_trials`` trials at random from ``search.seed`` alone, before any
trial has run: what a bench seed's sweep starts from is known without running it. Drawn here by the sweep's own
searcher (``sweep.tuner.build_searcher`` on the bench's space file as ``bench/verdict.py`` writes it, its study in a
temporary folder); each draw named by its nearest truth-grid setting and that setting's 10-step truth. Reads no outcome of any bench seed, so it may be run on judging seeds. Per-seed rows, then one summary line
(seeds with a draw nearest each grid setting, for ``--seeds`` and ``--against``).
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
from sweep.spec.loader import load_space  # noqa: E402
from sweep.tuner import build_searcher  # noqa: E402


def startup_lrs(space_file: Path, seed: int) -> list[float]:
    """The learning rates of the sweep's random start for ``seed``: its searcher's first suggestions."""
    with tempfile.TemporaryDirectory() as storage:
        cfg = load_space(space_file, {"search.seed": seed, "storage": storage})
        searcher = build_searcher(cfg)
        searcher.set_search_properties(cfg.search.metric, cfg.search.mode, {})
        return [searcher.suggest(f"start{i}")["optim.lr"] for i in range(cfg.search.n_startup_trials)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", choices=sorted(WORLDS), default="mix")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--against", type=int, nargs="*", default=[], help="a second seed set, counted apart")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    world = WORLDS[args.world]
    settings = _truth(world)[str(args.steps)]["settings"]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        space_file = bench_space(world, Path(folder), args.steps)
        for group, seeds in (("seeds", args.seeds), ("against", args.against)):
            for seed in seeds:
                draws = [(lr, nearest(lr, settings)) for lr in startup_lrs(space_file, seed)]
                rows.append({"set": group, "seed": seed, "lrs": [lr for lr, _ in draws], "nearest": [s["lr"] for _, s in draws],
                             "truth": [s["label"] for _, s in draws]})
    summary: dict = {"world": world.key, "steps": args.steps}
    for group in ("seeds", "against"):
        mine = [r for r in rows if r["set"] == group]
        if mine:
            summary[group] = [r["seed"] for r in mine]
            summary[f"{group}_with_a_draw_nearest"] = {f"{s['lr']:.0e}": sum(s["lr"] in r["nearest"] for r in mine) for s in settings}
    record(f"startup_draws_{world.name}", rows, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
