"""The multi-environment base, per environment: does a recipe give the classes users see?

    python bench/mix_base.py                                   # fleet_mix_cpu.yaml's recipe, warm-start seeds 0 and 1
    python bench/mix_base.py --seeds 0 --set model.warmstart_steps=4800 --set model.warmstart_envs.outlook.weight=4

For each warm-start seed: build the base (``python -m grpo.warmstart``, or find it shipped or cached), evaluate
it on the held-out tasks (``python -m grpo.evaluation``, what a sweep's shared base eval runs), and per env
report pass@1 with a 90% bootstrap interval over its held-out tasks (tasks resampled, then each task's passes
from its binomial: the verdict's two stages), pass@1 by task difficulty, and its class: SATURATED (≥ 0.9),
FAILING (≤ 0.05), LEARNABLE (0.15 to 0.7) or BETWEEN. The recipe's goal (issue 34): at least one env
saturated, one failing and two learnable, on every seed. One line per (seed, env) to ``bench/data/``, then the
summary line. Build and eval times are in each line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import record  # noqa: E402
from sweep.verdict.score import task_interval  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "sweep" / "search_spaces" / "fleet_mix_cpu.yaml"
BANDS = {"SATURATED": (0.9, 1.0), "FAILING": (0.0, 0.05), "LEARNABLE": (0.15, 0.7)}


def env_class(p: float) -> str:
    for name, (low, high) in BANDS.items():
        if low - 1e-9 <= p <= high + 1e-9:
            return name
    return "BETWEEN"


def trainer_config(space: Path, overrides: list[str], seed: int):
    """The space's base trainer with ``--set`` overrides (as ``sweep train --set``) at this warm-start seed."""
    from sweep.spec.loader import load_trainer, parse_sets

    trainer, _ = load_trainer(space, parse_sets([*overrides, f"model.warmstart_seed={seed}"]))
    return trainer


def run_seed(space: Path, overrides: list[str], seed: int) -> list[dict]:
    from grpo.data import trial_tasks

    trainer = trainer_config(space, overrides, seed)
    _, held_out = trial_tasks(trainer)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grpo.warmstart", trainer.model_dump_json()], check=True, cwd=ROOT)
    built = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="mix-base-") as out:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "grpo.evaluation", trainer.model_copy(update={"torch_threads": None}).model_dump_json(), out],
                       check=True, cwd=ROOT)
        evaluated = time.perf_counter() - started
        line = json.loads((Path(out) / "aggregated_results.jsonl").read_text().splitlines()[0])
    by_env: dict[str, list[str]] = defaultdict(list)
    difficulty = {t.task_key: t.difficulty for t in held_out}
    for t in held_out:
        by_env[t.env_key].append(t.task_key)
    rows = []
    for env, keys in sorted(by_env.items()):
        counts = [tuple(line["tasks"].get(k, (0, 0))) for k in keys]
        p, low, high = task_interval(dict(zip(keys, counts)))  # the verdict's two-stage bootstrap
        if np.isnan(p):  # no episode of this env ran
            p, low, high = 0.0, 0.0, 0.0
        levels: dict[int, list[float]] = defaultdict(list)
        for k, c in zip(keys, counts):
            if c[1]:
                levels[int(difficulty[k] or 0)].append(c[0] / c[1])
        rows.append({"seed": seed, "env": env, "tasks": len(keys), "pass_at_1": round(p, 4), "low": round(low, 4), "high": round(high, 4),
                     "class": env_class(p), "by_difficulty": {str(d): round(float(np.mean(v)), 3) for d, v in sorted(levels.items())},
                     "build_s": round(built), "eval_s": round(evaluated)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=Path, default=SPACE, help="the space file whose base trainer to build (default: the mix's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="warm-start seeds (model.warmstart_seed)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="trainer override, as `sweep run --set`")
    args = parser.parse_args()
    rows = [row for seed in args.seeds for row in run_seed(args.space, args.set, seed)]
    per_seed = {}
    for seed in args.seeds:
        classes = [r["class"] for r in rows if r["seed"] == seed]
        per_seed[str(seed)] = {"classes": {r["env"]: r["class"] for r in rows if r["seed"] == seed},
                               "met": classes.count("SATURATED") >= 1 and classes.count("FAILING") >= 1 and classes.count("LEARNABLE") >= 2}
    space = args.space.resolve()
    summary = {"space": str(space.relative_to(ROOT)) if space.is_relative_to(ROOT) else str(space), "overrides": args.set, "seeds": per_seed,
               "target_met": all(s["met"] for s in per_seed.values())}
    record("mix_base", rows, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
