"""GRPO on the mix, per environment: do the learnable envs rise while the saturated one holds?

    python bench/mix_learns.py                                # fleet_mix_cpu.yaml's trainer at LR 1e-4, RL seed 0
    python bench/mix_learns.py --lr 3e-5 --seeds 0 1 --keep /work/mix_runs
    python bench/mix_learns.py --signal bench/data/signal_mix   # the learning-signal bench's plain runs, one per RL seed
    python bench/mix_learns.py --space sweep/search_spaces/learning_cpu.yaml --lr 1e-6   # README's hotel table, a row

Each seed runs one trial from the space's base (``python -m sweep train``, its held-out evals every
``eval.interval`` steps, step 0 the base) and reads its evals as the report does: per env, the base, the
last (the mean of the last ``eval.score_window`` evals) and the change with its 90% interval from the
verdict's two-stage bootstrap over that env's held-out tasks (the report's own ``sweep.report.envs.env_table``), and the
report's status (``sweep.report.envs.env_status``). Then the issue's measure (34): the learnable envs
(the base's class LEARNABLE) pooled, their mean change with its interval, and whether the saturated envs held
(not REGRESSED). Target: the learnable envs +0.10 or more with the interval above zero, the saturated held.
One line per (seed, env) and per seed's pooled figures (with the held-out pass@1 of every eval, all envs: the
run's curve) to ``bench/data/``, then the summary line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import record  # noqa: E402
from sweep.report.envs import env_table, level_status, task_envs  # noqa: E402
from sweep.report.load import TrialData  # noqa: E402
from sweep.verdict.score import EvalPoint, score_trials  # noqa: E402
from sweep.verdict.thresholds import Thresholds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "sweep" / "search_spaces" / "fleet_mix_cpu.yaml"
TARGET = 0.10


def as_trial(evals: list[dict]) -> TrialData:
    """One run's eval lines as the report reads a trial."""
    return TrialData(trial_id="run", folder="", config={}, rows=[], evals=evals)


def env_rows(evals: list[dict], window: int, th: Thresholds) -> list[dict]:
    """Per env, the report's row (``sweep.report.envs.env_table``: base eval at step 0 against the last ``window``
    evals, the verdict's interval, the report's status), with the base's class beside it."""
    trial = as_trial(evals)
    owner = task_envs(trial)
    return [{"env": r.env, "tasks": sum(e == r.env for e in owner.values()), "base": round(r.base, 4), "last": round(r.last, 4),
             "delta": round(r.delta, 4), "low": round(r.low, 4), "high": round(r.high, 4), "base_class": level_status(r.base, th),
             "status": r.status} for r in env_table(trial, True, window, th)]


def pooled(evals: list[dict], window: int, envs: list[str]) -> dict:
    """The envs' held-out tasks as one set: the mean change over them, with the verdict's interval (``score_trials``)."""
    keys = {k for k, e in task_envs(as_trial(evals)).items() if e in envs}
    if not keys:
        return {"envs": envs, "tasks": 0}
    points = [EvalPoint(int(e["global_step"]), 0.0, {k: (int(v[0]), int(v[1])) for k, v in e["tasks"].items() if k in keys}) for e in evals]
    score = score_trials(points[0], {"run": points[1:]}, window)["run"]
    return {"envs": envs, "tasks": len(keys), "delta": round(score.gain, 4), "low": round(score.low, 4), "high": round(score.high, 4)}


def run_seed(space: Path, lr: float, seed: int, overrides: list[str], out: Path) -> tuple[list[dict], float]:
    sets = [f"optim.lr={lr}", f"seed={seed}", f"output_dir={out}", *overrides]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sweep", "train", str(space), *[a for s in sets for a in ("--set", s)]], check=True, cwd=ROOT)
    evals = [json.loads(line) for line in (out / "aggregated_results.jsonl").read_text().splitlines()]
    return sorted(evals, key=lambda e: e["global_step"]), time.perf_counter() - started


def own_runs(args: argparse.Namespace):
    """(name, lr, seed, evals, seconds) of one ``sweep train`` run per seed at ``--lr``."""
    for seed in args.seeds:
        with tempfile.TemporaryDirectory(prefix="mix-learns-") as scratch:
            out = (args.keep / f"seed{seed}") if args.keep else Path(scratch) / "run"
            evals, seconds = run_seed(args.space, args.lr, seed, args.set, out)
        yield f"lr{args.lr:g}_seed{seed}", args.lr, seed, evals, seconds


def sweep_runs(uri: str):
    """(name, lr, seed, evals, seconds) of each trial of a finished sweep, read as ``sweep report`` reads it."""
    from sweep.report.load import load_sweep
    from sweep.report.store import SweepStore

    for trial in sorted(load_sweep(SweepStore(uri)).trials, key=lambda t: t.trial_id):
        cfg = trial.trainer_config or {}
        evals = sorted(trial.evals, key=lambda e: e["global_step"])
        yield trial.trial_id, cfg.get("optim", {}).get("lr"), cfg.get("seed"), evals, trial.wall_s


def signal_runs(folder: Path, arm: str, lr: float | None):
    """(name, lr, seed, evals, seconds) of the learning-signal bench's kept runs of ``arm`` (``bench/learning_signal.py
    --keep``): the same trainer at the space's LR, one RL seed each, their eval lines rebuilt from the kept per-task
    counts and the base eval's task envs (runs kept before they carried it are skipped, by name)."""
    for path in sorted(folder.glob(f"{arm}_s*.json"), key=lambda p: int(p.stem.rsplit("_s", 1)[1])):
        run = json.loads(path.read_text())
        owners = (run.get("base_eval") or {}).get("task_envs")
        if not owners:
            print(f"{path}: no base eval with its tasks' envs kept; skipped", file=sys.stderr)
            continue
        evals = [{"global_step": int(step), "eval/avg_pass_at_1": run["evals"][step], "tasks": tasks, "task_envs": owners,
                  **{f"eval/{env}/pass_at_1": value for env, value in run["env_evals"][step].items()}}
                 for step, tasks in sorted(run["tasks"].items(), key=lambda kv: int(kv[0]))]
        yield f"{arm}_s{run['seed']}", lr, run["seed"], evals, run["minutes"] * 60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", type=Path, default=SPACE)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a trainer override, as sweep train --set")
    parser.add_argument("--keep", type=Path, help="keep each run's output here (default: a temporary directory)")
    parser.add_argument("--sweep", help="read a finished sweep's trials on the mix (their LRs, seeds and evals) instead of running any")
    parser.add_argument("--signal", type=Path, help="read the learning-signal bench's kept plain runs (its --keep folder, e.g. bench/data/signal_mix) instead of running any")
    args = parser.parse_args()
    from sweep.spec.loader import load_trainer, parse_sets

    trainer, _ = load_trainer(args.space, parse_sets(args.set))
    window, th = trainer.eval.score_window, Thresholds()
    rows, per_run = [], {}
    runs = sweep_runs(args.sweep) if args.sweep else signal_runs(args.signal, "plain", trainer.optim.lr) if args.signal else own_runs(args)
    for name, lr, seed, evals, seconds in runs:
        table = env_rows(evals, window, th)
        for row in table:
            rows.append({"run_of": name, "seed": seed, "lr": lr, **row, "steps": [e["global_step"] for e in evals], "seconds": round(seconds)})
            print(json.dumps(rows[-1]), flush=True)
        learnable = pooled(evals, window, [r["env"] for r in table if r["base_class"] == "LEARNABLE"])
        saturated = [r for r in table if r["base_class"] == "SATURATED"]
        held = bool(saturated) and all(r["status"] != "REGRESSED" for r in saturated)
        met = learnable.get("delta", 0) >= TARGET and learnable.get("low", 0) > 0 and held
        curve = [[e["global_step"], round(e["eval/avg_pass_at_1"], 4)] for e in evals]  # held-out pass@1 at each eval, every env
        per_run[name] = {"lr": lr, "seed": seed, "learnable": learnable, "saturated_held": held, "met": met, "curve": curve,
                         "seconds": round(seconds)}
        rows.append({"run_of": name, "seed": seed, "lr": lr, "pooled": "learnable", **learnable, "saturated_held": held, "curve": curve,
                     "seconds": round(seconds)})
    space = args.space.resolve()
    summary = {"space": str(space.relative_to(ROOT)) if space.is_relative_to(ROOT) else str(space), "sweep": args.sweep, "signal": str(args.signal) if args.signal else None, "overrides": args.set,
               "window": window, "target": f"learnable envs >= +{TARGET} with the interval above 0, saturated not REGRESSED", "runs_by_name": per_run,
               "target_met_by": sorted(n for n, r in per_run.items() if r["met"])}
    record("mix_learns", rows, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
