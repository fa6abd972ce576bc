"""Do dynamic sampling and the curriculum buy held-out pass@1 with fewer rollout episodes? Plain GRPO against both.

    python bench/learning_signal.py                       # 3 seeds x 3 arms on the learning space (hours on 2 cores)
    python bench/learning_signal.py --seeds 0 1 2 3 4     # more seeds, narrower intervals
    python bench/learning_signal.py --tiny                # 1 seed, 2 steps, small evals: checks the bench runs end to end

The learning space (``sweep/search_spaces/learning_cpu.yaml``): its shipped base, its held-out split, its
trainer, changed only by the arm's keys. Arms: ``plain``; ``dynamic`` (``algorithm.dynamic_sampling``,
3 rounds at most); ``curriculum`` (``data.curriculum``, seeded by a probe of the base made once with
``sweep forecast``'s own ``probe``, k samples per training task). Same budget: every arm stops once its
training rollouts reach the plain run's (``total_steps x prompts_per_step x n_samples_per_prompt``
episodes; dynamic sampling spends more per step, so it runs fewer steps on the same schedule). Held-out
evals every ``eval.interval`` steps, each at the training episodes spent by then (the base's at 0).

Per seed, the target is the plain run's best held-out pass@1 after training began; an arm's cost is the
training episodes it spent by its first eval at or above the target (a run that never gets there counts
at the budget, a lower bound, and is named). Printed per run, then per arm: the mean cost with a 95%
t-interval over seeds, the share of rolled-out groups with signal (``1 - reward/frac_zero_variance``)
and of trained groups (dynamic sampling trains only groups with signal unless a step found none); then
one JSON line ``{"bench": "signal", ..., "ratio": {arm: cost / plain's cost}}`` with a paired bootstrap
interval over seeds. Not a CI test; it leaves out the probe's own episodes from the curriculum's cost
(a sweep makes the probe once for all its trials).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPACE = ROOT / "sweep" / "search_spaces" / "learning_cpu.yaml"
ARMS: dict[str, dict[str, Any]] = {
    "plain": {},
    "dynamic": {"algorithm.dynamic_sampling": {"enabled": True, "max_rounds": 3}},
    "curriculum": {"data.curriculum": {"enabled": True}},  # prior_path: the bench's probe, set in run_arm
}
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}  # two-sided t quantiles, by df


class BudgetSpent(Exception):
    """Raised by the reporter once a run's training episodes reach the budget: the run stops there."""


class BudgetReporter:
    """Keeps each step's training episodes and signal shares; stops the run at the budget."""

    all_ranks = False

    def __init__(self, budget: int):
        self.budget, self.spent, self.steps = budget, 0, []

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        self.spent += int(metrics["rollout/episodes"])
        trained = metrics.get("dynamic/groups_trained")
        self.steps.append({
            "step": step, "episodes": self.spent,
            "rollout_signal": 1.0 - metrics["reward/frac_zero_variance"],
            "trained_signal": (0.0 if metrics["dynamic/no_signal"] else 1.0) if trained is not None else 1.0 - metrics["reward/frac_zero_variance"],
        })
        if self.spent >= self.budget:
            raise BudgetSpent


def eval_curve(steps: list[dict[str, Any]], evals: dict[int, float]) -> list[tuple[int, float]]:
    """(training episodes spent, held-out pass@1) at each eval (``evals``: global step to pass@1): the
    base's (step 0) at 0, then each eval at the episodes spent through its step."""
    spent = {0: 0, **{s["step"]: s["episodes"] for s in steps}}
    return sorted((spent[step], value) for step, value in evals.items() if step in spent)


def episodes_to_reach(curve: list[tuple[int, float]], target: float) -> int | None:
    """Training episodes spent by the first eval after the base at or above ``target``; None if none is."""
    return next((spent for spent, value in curve if spent > 0 and value >= target - 1e-12), None)


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and its 95% t-interval over seeds (the mean twice for one value)."""
    mean = fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = T95.get(len(values) - 1, 1.96) * stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def ratio_interval(costs: list[float], plain: list[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """mean(costs) / mean(plain) with a paired percentile bootstrap over seeds (95%)."""
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        pick = [rng.randrange(len(costs)) for _ in costs]
        ratios.append(fmean(costs[i] for i in pick) / fmean(plain[i] for i in pick))
    ratios.sort()
    return fmean(costs) / fmean(plain), ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def make_probe(folder: Path, k: int, tiny: dict[str, Any]) -> Path:
    """``sweep forecast``'s probe of the base on the training tasks, saved as the curriculum's prior."""
    from grpo.curriculum import write_probe
    from sweep.forecast import probe
    from sweep.spec.loader import load_trainer

    cfg, _ = load_trainer(SPACE, tiny)
    return write_probe(folder / "probe.json", probe(cfg, k), k)


def run_arm(arm: str, seed: int, steps: int, budget: int, probe_path: Path, tiny: dict[str, Any]) -> dict[str, Any]:
    from grpo.trainer import train
    from sweep.spec.loader import load_trainer

    out = probe_path.parent / f"{arm}_s{seed}"
    sets = {**tiny, "total_steps": steps, "seed": seed, "output_dir": str(out), **ARMS[arm]}
    if arm == "curriculum":
        sets["data.curriculum"] = {**sets["data.curriculum"], "prior_path": str(probe_path)}
    cfg, _ = load_trainer(SPACE, sets)
    reporter = BudgetReporter(budget)
    started = time.perf_counter()
    try:
        train(cfg, reporter)
    except BudgetSpent:
        pass
    lines = [json.loads(line) for line in (out / "aggregated_results.jsonl").read_text().splitlines()]
    evals = {int(e["global_step"]): float(e["eval/avg_pass_at_1"]) for e in lines}
    return {"arm": arm, "seed": seed, "minutes": round((time.perf_counter() - started) / 60, 1), "steps": reporter.steps, "evals": evals}


def summarize(runs: list[dict[str, Any]], seeds: list[int], steps: int, budget: int) -> dict[str, Any]:
    """Per arm: episodes to the plain run's best (per seed), signal shares; the ratio to plain."""
    by = {(r["arm"], r["seed"]): r for r in runs}
    target, cost, unreached = {}, {arm: [] for arm in ARMS}, {arm: [] for arm in ARMS}
    arms: dict[str, Any] = {}
    for seed in seeds:
        plain = by[("plain", seed)]
        target[seed] = max(value for spent, value in eval_curve(plain["steps"], plain["evals"]) if spent > 0)
        for arm in ARMS:
            run = by[(arm, seed)]
            reached = episodes_to_reach(eval_curve(run["steps"], run["evals"]), target[seed])
            cost[arm].append(float(reached if reached is not None else budget))
            if reached is None:
                unreached[arm].append(seed)
    for arm in ARMS:
        mean, low, high = mean_interval(cost[arm])
        shares = {kind: [fmean(s[kind] for s in by[(arm, seed)]["steps"]) for seed in seeds] for kind in ("rollout_signal", "trained_signal")}
        arms[arm] = {
            "episodes_to_target": round(mean, 1), "ci95": [round(low, 1), round(high, 1)], "never_reached_seeds": unreached[arm],
            **{f"{kind}_share": round(mean_interval(v)[0], 3) for kind, v in shares.items()},
            **{f"{kind}_share_ci95": [round(x, 3) for x in mean_interval(v)[1:]] for kind, v in shares.items()},
        }
    ratio = {arm: [round(x, 3) for x in ratio_interval(cost[arm], cost["plain"])] for arm in ARMS if arm != "plain"}
    return {"bench": "signal", "space": str(SPACE.relative_to(ROOT)), "seeds": seeds, "steps": steps, "budget_episodes": budget,
            "target": {str(s): round(t, 3) for s, t in target.items()}, "arms": arms,
            "ratio": {arm: r[0] for arm, r in ratio.items()}, "ratio_ci95": {arm: r[1:] for arm, r in ratio.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="RL seeds (the base and split stay the space's)")
    parser.add_argument("--steps", type=int, help="the plain run's GRPO steps, which set the budget (default: the space's)")
    parser.add_argument("--k", type=int, default=8, help="samples per training task in the curriculum's probe")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per run")
    parser.add_argument("--tiny", action="store_true", help="2 steps, 1 seed, small batches and evals, k=1: checks the bench end to end")
    parser.add_argument("--keep", type=Path, help="write the probe and every run's steps here")
    args = parser.parse_args()
    from sweep.spec.loader import load_trainer

    tiny = {"torch_threads": args.threads}
    seeds, k = args.seeds, args.k
    if args.tiny:
        tiny |= {"rollout.prompts_per_step": 2, "rollout.n_samples_per_prompt": 4, "eval.n_samples": 1, "eval.interval": 1}
        seeds, k = args.seeds[:1], 1
        args.steps = args.steps or 2
    cfg, _ = load_trainer(SPACE, tiny)
    steps = args.steps or cfg.total_steps
    budget = steps * cfg.rollout.prompts_per_step * cfg.rollout.n_samples_per_prompt
    folder = args.keep or Path(tempfile.mkdtemp(prefix="signal-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    probe_path = make_probe(folder, k, tiny)
    print(f"probe of the base ({k} samples per training task): {probe_path}; budget {budget} training episodes per run", flush=True)
    runs = []
    for seed in seeds:
        for arm in ARMS:
            run = run_arm(arm, seed, steps, budget, probe_path, tiny)
            runs.append(run)
            (folder / f"{arm}_s{seed}.json").write_text(json.dumps(run))
            last = run["steps"][-1]
            print(json.dumps({"arm": arm, "seed": seed, "minutes": run["minutes"], "steps": len(run["steps"]), "episodes": last["episodes"],
                              "curve": eval_curve(run["steps"], run["evals"]),
                              "rollout_signal_share": round(fmean(s["rollout_signal"] for s in run["steps"]), 3)}), flush=True)
    summary = summarize(runs, seeds, steps, budget)
    for arm, row in summary["arms"].items():
        print(f"{arm:>10}: {row['episodes_to_target']} episodes to the plain run's best (95% {row['ci95']}), "
              f"groups with signal {row['rollout_signal_share']} rolled out, {row['trained_signal_share']} trained"
              + (f"; never reached on seeds {row['never_reached_seeds']}" if row["never_reached_seeds"] else ""))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
