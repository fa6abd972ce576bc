"""ASHA + TPE against a full grid over the same space, on CPU: trial-steps each spends to reach the grid's
best held-out pass@1, and the harness's own share of the wall time.

    .venv/bin/python bench/sweep_efficiency.py                          # 5 LRs x 2 KL coefficients, 10 steps each (about 35 min on 2 cores: grid 13, each ASHA+TPE seed 7)
    .venv/bin/python bench/sweep_efficiency.py --space sweep/search_spaces/demo_cpu.yaml --steps 4 --lrs 1e-4 3e-3 --kl 0 0.1 --n 4

Both sweeps start from the trainer block of ``--space`` (default ``sweep/search_spaces/learning_cpu.yaml``,
whose base policy learns on held-out tasks) with held-out eval on (``eval/avg_pass_at_1`` is the searched
metric). The grid runs every combination of ``--lrs`` x ``--kl`` x ``--n`` to the end (FIFO, no early
stop): the hand-made sweep, a log-spaced sample of the learning rate's range. ASHA + Optuna TPE gets the
same space as a space file writes it: the learning rate log-uniform over the grid's range (``--tpe-lr
grid``: the grid's values as a ``choice``), the other keys as ``choice``s; the same number of trials,
ASHA's grace period ``--grace`` steps, and the zero-signal stop (threshold 1e-3, patience 3).

Trial-steps to the target (the grid's best eval pass@1 - ``--tolerance``): for ASHA + TPE, every report in
the order it happened (each trial records a wall-clock timestamp per step), counted until one carries eval
pass@1 >= the target. For the grid, whose order is arbitrary, two figures: the same count in the order it
happened to run, and its expectation over every order of its trials run one after another,
``steps x (trials - hits) / (hits + 1) + mean first-hit step of the hits`` (``hits``: trials that reach the
target); the ratio is against the expectation, so a lucky grid order does not decide it.

Harness overhead: the share of the trial slots' wall time (``fit`` wall x concurrent trials) not spent
inside the trainer (``timing/step_s`` of each step plus ``timing/eval_s`` of each eval), leaving out the
tail, when the last trials run and the other slots have no trial left to start. It is split into inside
a trial (imports, model load, env servers, checkpoints: Tune's ``time_total_s`` less the trainer's time) and
between trials (a worker's start or a reused one's reset, Tune's bookkeeping). ``ray.init`` and the base policy build are timed apart.
Prints a table, then one line of JSON ``{"bench": "sweep_efficiency", ...}``.
ASHA + TPE runs once per ``--seeds`` searcher seed (default 3): one draw is luck. The ratio is printed per
seed and as their mean (a seed that never reaches the target counts with every trial-step it spent, a lower
bound). The grid is run once: its trials are seeded, so ``--grid-from`` can take it from an earlier
``--keep`` folder. Leaves out: ASHA's own timing luck (it is asynchronous: which trials it stops depends on
which report first).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import record  # noqa: E402
from configkit.base import apply_overrides  # noqa: E402
from sweep.spec.config import SweepConfig  # noqa: E402
from sweep.spec.loader import load_space, parse_sets  # noqa: E402
from sweep.store.results import trial_history  # noqa: E402

LEARNING = ROOT / "sweep" / "search_spaces" / "learning_cpu.yaml"
METRIC = "eval/avg_pass_at_1"
GRID_OUTCOME = "grid_outcome.json"
KEYS = {"lrs": "optim.lr", "kl": "algorithm.kl_coef", "n": "rollout.n_samples_per_prompt"}


def space_file(args: argparse.Namespace, kind: str, folder: Path, seed: int = 0) -> Path:
    """The space file, turned into the grid arm or the ASHA + TPE arm (the same range or values, the same trial count)."""
    data = yaml.safe_load(args.space.read_text())
    trials = len(args.lrs) * len(args.kl) * len(args.n)
    trainer = apply_overrides(data["trainer"], {"total_steps": args.steps, "eval.interval": args.eval_interval,
                                                "eval.n_samples": args.eval_samples, **parse_sets(args.set)})
    distribution = "grid" if kind == "grid" else "choice"
    space = {KEYS[name]: {distribution: getattr(args, name)} for name in KEYS}
    if kind != "grid" and args.tpe_lr == "range" and len(args.lrs) > 1:  # the range the grid's values are a log-spaced sample of
        space[KEYS["lrs"]] = {"loguniform": [min(args.lrs), max(args.lrs)]}
    name = f"efficiency_{kind}" if kind == "grid" else f"efficiency_{kind}_s{seed}"
    data.update(
        name=name,
        trainer=trainer,
        space=space,
        storage=str(folder / "results"),
        logging={"progress": False, "tensorboard": False},
    )
    if kind == "grid":
        data.update(search={"searcher": "grid", "num_samples": 1, "metric": METRIC, "mode": "max", "seed": 0},
                    scheduler={"type": "fifo"}, stopping={"zero_signal": {"enabled": False}})
    else:
        data["search"] = {"searcher": "optuna", "num_samples": trials, "n_startup_trials": min(3, trials), "metric": METRIC,
                          "mode": "max", "seed": seed}
        data["scheduler"] = {"type": "asha", "grace_period": args.grace, "reduction_factor": 2}
        data["stopping"] = {"zero_signal": {"enabled": True, "threshold": 1e-3, "patience": 3}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(cfg: SweepConfig) -> dict[str, Any]:
    """The sweep exactly as ``sweep run`` builds it; the fit timed apart from ray.init and the base policy."""
    import ray

    from sweep.resume import save_config, start_fresh
    from sweep.run import check_resources, prepare_environment
    from sweep.store.storage import open_storage
    from sweep.trials.base_evals import prepare_bases
    from sweep.tuner import build_tuner

    store = open_storage(cfg.storage)
    cfg = cfg.model_copy(update={"storage": store.uri})
    start_fresh(store, cfg.name, fresh=True, space="")
    prepare_environment()
    started = time.perf_counter()
    prepare_bases(cfg, store)
    base_s = time.perf_counter() - started
    save_config(store, cfg)
    started = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    init_s = time.perf_counter() - started
    try:
        check_resources(cfg, ray.cluster_resources())
        slots = min(cfg.max_concurrent_trials, int(ray.cluster_resources().get("CPU", 1) // cfg.resources.cpus_per_trial))
        started = time.perf_counter()
        results = build_tuner(cfg).fit()
        fit_s = time.perf_counter() - started
    finally:
        ray.shutdown()
    histories = [trial_history(r.path, r.filesystem) for r in results if r.path]
    return {"histories": histories, "fit_s": fit_s, "slots": slots, "ray_init_s": init_s, "base_policy_s": base_s}


def best_eval(histories: list[list[dict]]) -> float:
    return max((row[METRIC] for rows in histories for row in rows if METRIC in row), default=0.0)


def steps_to_reach(histories: list[list[dict]], target: float) -> int | None:
    """Trial-steps spent, in the order they happened, until one report carries eval pass@1 >= target."""
    reports = sorted((row["timestamp"], row.get(METRIC, -1.0)) for rows in histories for row in rows)
    for spent, (_, value) in enumerate(reports, start=1):
        if value >= target:
            return spent
    return None


def expected_steps_to_reach(histories: list[list[dict]], target: float) -> float | None:
    """Trial-steps to the target averaged over every order of the trials run one after another.

    Before the first trial that reaches the target come, on average, (misses) / (hits + 1) of the others,
    each run whole; then the first hit runs up to its first step at the target (the mean over the hits).
    """
    first_hit = [next((i for i, row in enumerate(rows, start=1) if row.get(METRIC, -1.0) >= target), None) for rows in histories]
    hits = [step for step in first_hit if step is not None]
    if not hits:
        return None
    misses = [len(rows) for rows, step in zip(histories, first_hit) if step is None]
    mean_miss = sum(misses) / len(misses) if misses else 0.0
    return len(misses) * mean_miss / (len(hits) + 1) + sum(hits) / len(hits)


def trial_spans(histories: list[list[dict]]) -> list[tuple[float, float]]:
    """Each trial's (start, end) wall clock: its last report's timestamp less Tune's time_total_s, and that timestamp."""
    return [(rows[-1]["timestamp"] - rows[-1]["time_total_s"], float(rows[-1]["timestamp"])) for rows in histories]


def tail_idle_seconds(spans: list[tuple[float, float]], slots: int) -> float:
    """Slot-seconds idle after the last trial started: no trial was left to fill them."""
    if not spans:
        return 0.0
    last_start, end = max(start for start, _ in spans), max(stop for _, stop in spans)
    busy = sum(max(0.0, stop - max(start, last_start)) for start, stop in spans)
    return max(0.0, slots * (end - last_start) - busy)


def trainer_seconds(histories: list[list[dict]]) -> tuple[float, float]:
    """Time inside the trainer: (GRPO steps, evals). Each report carries the newest eval; count each eval once, and
    not the base policy's (step 0): the sweep runs it once, before the fit (``base_policy_s``), and every trial's
    reports carry it until their first own eval (counted per trial until 2026-12-02, which made the overhead negative)."""
    steps = sum(row.get("timing/step_s", 0.0) for rows in histories for row in rows)
    evals = 0.0
    for rows in histories:
        seen: set[float] = {0.0}
        for row in rows:
            if "eval/global_step" in row and row["eval/global_step"] not in seen:
                seen.add(row["eval/global_step"])
                evals += row.get("timing/eval_s", 0.0)
    return steps, evals


def summary(name: str, outcome: dict[str, Any], target: float) -> dict[str, Any]:
    histories = [rows for rows in outcome["histories"] if rows]
    step_s, eval_s = trainer_seconds(histories)
    spans = trial_spans(histories)
    in_trials = sum(rows[-1]["time_total_s"] for rows in histories)
    tail = tail_idle_seconds(spans, outcome["slots"])
    slot_s = outcome["fit_s"] * outcome["slots"] - tail

    def share(seconds: float) -> float | None:
        return round(seconds / slot_s, 4) if slot_s > 0 else None

    expected = expected_steps_to_reach(histories, target)
    return {
        "arm": name,
        "trials": len(histories),
        "trial_steps": sum(len(rows) for rows in histories),
        "steps_to_target": steps_to_reach(histories, target),
        "expected_steps_to_target": None if expected is None else round(expected, 1),
        "best_eval_pass_at_1": round(best_eval(histories), 4),
        "fit_s": round(outcome["fit_s"], 1),
        "slot_s": round(slot_s, 1),
        "overhead_s": round(slot_s - step_s - eval_s, 1),
        "overhead_share": share(slot_s - step_s - eval_s),
        "overhead_inside_trials_share": share(in_trials - step_s - eval_s),
        "overhead_between_trials_share": share(slot_s - in_trials),
        "overhead_share_steps_only": share(slot_s - step_s),
        "tail_idle_s": round(tail, 1),
        "eval_s": round(eval_s, 1),
        "ray_init_s": round(outcome["ray_init_s"], 1),
        "base_policy_s": round(outcome["base_policy_s"], 1),
    }


def render(rows: list[dict[str, Any]], target: float) -> None:
    print(f"\ntarget: grid's best eval pass@1 {target:.3f} (within tolerance)")
    print(f"{'arm':12} {'trials':>6} {'trial-steps':>11} {'to target':>9} {'expected':>8} {'best':>6} {'fit s':>7} "
          f"{'overhead':>8} {'in trials':>9} {'between':>8} {'tail idle s':>11}")
    for r in rows:
        reach = "-" if r["steps_to_target"] is None else str(r["steps_to_target"])
        expected = "-" if r["expected_steps_to_target"] is None or r["arm"] != "grid" else f"{r['expected_steps_to_target']:.1f}"
        print(f"{r['arm']:12} {r['trials']:>6} {r['trial_steps']:>11} {reach:>9} {expected:>8} {r['best_eval_pass_at_1']:>6.3f} "
              f"{r['fit_s']:>7.1f} {r['overhead_share']:>8.1%} {r['overhead_inside_trials_share']:>9.1%} "
              f"{r['overhead_between_trials_share']:>8.1%} {r['tail_idle_s']:>11.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--space", type=Path, default=LEARNING, help="the space file whose trainer block both arms use")
    parser.add_argument("--steps", type=int, default=10, help="GRPO steps per trial")
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-6, 1e-5, 1e-4, 1e-3, 1e-2], help="learning rates (grid values)")
    parser.add_argument("--kl", type=float, nargs="+", default=[0.0, 0.1], help="KL coefficients")
    parser.add_argument("--n", type=int, nargs="+", default=[8], help="samples per prompt")
    parser.add_argument("--eval-interval", type=int, default=2, help="eval every this many steps")
    parser.add_argument("--tpe-lr", choices=["range", "grid"], default="range",
                        help="ASHA+TPE's learning rate: log-uniform over the grid's range (as a space file says it), or the grid's values as choices")
    parser.add_argument("--grace", type=int, default=4, help="ASHA's grace period in steps (its rungs: 4, 8, ...)")
    parser.add_argument("--eval-samples", type=int, default=8, help="samples per held-out task")
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="ASHA+TPE runs once per searcher seed (the grid has no luck to average)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="trainer override for both arms, repeatable")
    parser.add_argument("--keep", type=Path, help="keep the sweeps' results here (default: a temporary directory)")
    parser.add_argument("--grid-from", type=Path, help="take the grid arm from an earlier run's --keep folder with the same arguments "
                        "(its trials are seeded, so it runs the same again) instead of running it")
    parser.add_argument("--from", dest="data", type=Path, help="run nothing: recompute the figures from a data file this bench "
                        "wrote (its arms' histories), with this checkout's code, and print them")
    args = parser.parse_args()
    if args.data:
        return recompute(args.data)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    load_before = os.getloadavg()[0]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="sweep-efficiency-"))
    folder.mkdir(parents=True, exist_ok=True)
    grid_args = {k: v for k, v in vars(args).items() if k not in ("seeds", "keep", "grid_from", "tpe_lr", "grace")}
    grid_args = json.loads(json.dumps(grid_args, default=str))
    if args.grid_from:
        grid = json.loads((args.grid_from / GRID_OUTCOME).read_text())
        if grid.get("args") != grid_args:
            parser.error(f"--grid-from {args.grid_from}: its grid ran with {grid.get('args')}, not {grid_args}")
    else:
        grid = {**run(load_space(space_file(args, "grid", folder))), "args": grid_args}
    (folder / GRID_OUTCOME).write_text(json.dumps(grid))
    target = best_eval(grid["histories"]) - args.tolerance
    rows = [summary("grid", grid, target)]
    outcomes = [grid]
    for seed in args.seeds:
        outcomes.append(run(load_space(space_file(args, "asha_tpe", folder, seed))))
        rows.append(summary(f"asha_tpe s{seed}", outcomes[-1], target))
    # per arm: its summary and every trial's eval history, from which the ratios are recomputed
    runs = [{**row, "histories": outcome["histories"]} for row, outcome in zip(rows, outcomes)]
    record("sweep_efficiency", runs, {
        "cpus": os.cpu_count(), "loadavg_1m_before": round(load_before, 2),
        "steps": args.steps, "grace": args.grace, "tpe_lr": args.tpe_lr, "eval_samples": args.eval_samples,
        "space": {KEYS[k]: getattr(args, k) for k in KEYS}, "set": args.set, "grid_from": str(args.grid_from or ""),
        **conclude(rows, target, args.tolerance), "seeds": args.seeds, "results": str(folder)})
    return 0


def conclude(rows: list[dict[str, Any]], target: float, tolerance: float) -> dict[str, Any]:
    """Print the table and the ratios; the summary's figures (``rows[0]``: the grid, then one per searcher seed)."""
    render(rows, target + tolerance)
    expected, searched = rows[0]["expected_steps_to_target"], rows[1:]
    ratios = [round(r["steps_to_target"] / expected, 3) if r["steps_to_target"] and expected else None for r in searched]
    # a seed that never reached the target counts with every trial-step it spent: a lower bound on its ratio
    bounded = [ratio if ratio is not None else r["trial_steps"] / expected for ratio, r in zip(ratios, searched)] if expected else []
    mean = round(sum(bounded) / len(bounded), 3) if bounded else None
    overhead = round(sum(r["overhead_s"] for r in searched) / sum(r["slot_s"] for r in searched), 4)
    reached = sum(ratio is not None for ratio in ratios)
    print(f"ASHA+TPE trial-steps to target / the grid's expectation over orders ({expected}): per seed {ratios}, mean "
          f"{mean}{'' if reached == len(ratios) else ' (a lower bound: not reached counts every trial-step spent)'} "
          f"(target <= 0.333; the grid in its own order: {rows[0]['steps_to_target']}); harness overhead "
          f"{rows[0]['overhead_share']:.1%} grid, {overhead:.1%} ASHA+TPE (target <= 5%)")
    return {"target_eval_pass_at_1": round(target + tolerance, 4), "tolerance": tolerance, "ratio_steps_to_target": mean,
            "ratios_per_seed": ratios, "seeds_reached": reached, "overhead_share_grid": rows[0]["overhead_share"],
            "overhead_share_asha_tpe": overhead}


def recompute(data: Path) -> int:
    """``--from``: the figures of a data file's runs by this checkout's code, printed with the file they came from."""
    try:
        *runs, kept = [json.loads(line) for line in data.read_text().splitlines()]
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--from {data}: not a data file this bench wrote ({exc})") from None
    if not isinstance(kept, dict) or kept.get("bench") != "sweep_efficiency" or not runs:
        raise SystemExit(f"--from {data}: not a data file this bench wrote (its last line is no sweep_efficiency summary)")
    # the concurrent trials: slot_s was fit_s x slots less the idle tail (fit_s is kept to 0.1 s)
    outcomes = [{"histories": r["histories"], "fit_s": r["fit_s"], "slots": round((r["slot_s"] + r["tail_idle_s"]) / r["fit_s"]) if r["fit_s"] else 1,
                 "ray_init_s": r["ray_init_s"], "base_policy_s": r["base_policy_s"]} for r in runs]
    target = best_eval(outcomes[0]["histories"]) - kept["tolerance"]
    rows = [summary(r["arm"], outcome, target) for r, outcome in zip(runs, outcomes)]
    figures = conclude(rows, target, kept["tolerance"])
    print(json.dumps({"bench": "sweep_efficiency", "recomputed_from": str(data), "ran_at": kept["commit"], **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
