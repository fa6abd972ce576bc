"""Do dynamic sampling and the curricula buy held-out pass@1 with fewer rollout episodes? Plain GRPO against each.

    python bench/learning_signal.py                                                    # the learning space (hotel), 3 seeds x 5 arms
    python bench/learning_signal.py --space sweep/search_spaces/fleet_mix_cpu.yaml    # the mix: saturated and failing envs among others
    python bench/learning_signal.py --tiny                                             # 1 seed, 2 steps, small evals: runs end to end

The space's base, held-out split and trainer, changed only by the arm's keys. Arms: ``plain``; ``dynamic``
(``algorithm.dynamic_sampling``, 3 rounds at most); ``curriculum`` (``data.curriculum``, task level) and
``env_curriculum`` (``data.curriculum.level: env``) and ``env_tasks`` (the same, each env weighted by its tasks' mean
potential, ``env_potential: tasks``), all three seeded by a probe of the base made once with
``sweep forecast``'s own ``probe``, k samples per training task; ``curriculum_sharp`` and ``env_tasks_sharp``
the same two with ``prior_counts: 0.1`` (the probe weighs more against the estimates' pseudo-counts). Same budget: every arm stops once its
training rollouts reach the plain run's (``total_steps x prompts_per_step x n_samples_per_prompt``
episodes; dynamic sampling spends more per step, so it runs fewer steps). Held-out evals every
``eval.interval`` steps, each at the training episodes spent by then; the base's at 0 is the plain run's,
which the seed's other arms start from as a sweep's trials share one base eval.

Per seed, the target is the plain run's *final* held-out pass@1: the mean of its last two evals (not its
best, a maximum over a noisy curve). Per arm and seed: the training episodes spent by its first eval at or
above the target (a run that never gets there counts at the budget and is named), its own final score
(the mean of its last two evals: the score at equal episodes), its final minus plain's with a 90% paired
bootstrap interval over held-out tasks (tasks resampled, then each task's passes from its binomial), and
the share of rolled-out groups with signal (``1 - reward/frac_zero_variance``) and of trained groups. Per
seed, never pooled into intervals over three seeds. The target (issue 34): some arm reaches plain's final
score in <= 0.6x the episodes on every seed, and its final score is not below plain's beyond that noise.
Every run's steps and evals go to ``bench/data/signal_*.jsonl`` (``bench/record.py``), the summary last. Not
a CI test; the probe's own episodes are left out of the curricula's cost (a sweep makes it once).

With ``--keep DIR`` the bench can be built over several sittings (a mix seed is hours on 2 cores): the probe
and each finished run (``{arm}_s{seed}.json``, with the commit that ran it) are kept there and reused by the
next call with the same settings (``bench.json``: the space, steps, k and the set keys, not ``--threads``;
other settings are refused), a run cut short is run again from its start; the summary names the runs reused
and their commits. Calls on other seeds may share the folder at once (each touches its own seeds' runs): two
one-thread calls use 2 cores better than one two-thread call.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from statistics import fmean
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import commit, record  # noqa: E402

SPACE = ROOT / "sweep" / "search_spaces" / "learning_cpu.yaml"
ARMS: dict[str, dict[str, Any]] = {
    "plain": {},
    "dynamic": {"algorithm.dynamic_sampling": {"enabled": True, "max_rounds": 3}},
    "curriculum": {"data.curriculum": {"enabled": True}},  # prior_path: the bench's probe, set in run_arm
    "env_curriculum": {"data.curriculum": {"enabled": True, "level": "env"}},
    "env_tasks": {"data.curriculum": {"enabled": True, "level": "env", "env_potential": "tasks"}},  # envs by their tasks' mean potential
    # the same two with the probe let speak: 0.1 pseudo-passes and fails, not 1 (a task solved 8 of 8 starts at 0.988, not 0.9)
    "curriculum_sharp": {"data.curriculum": {"enabled": True, "prior_counts": 0.1}},
    "env_tasks_sharp": {"data.curriculum": {"enabled": True, "level": "env", "env_potential": "tasks", "prior_counts": 0.1}},
}
FINAL = 2  # evals averaged into a run's final score
TARGET_RATIO = 0.6
LEVEL = 0.9


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


def final_score(evals: dict[int, float]) -> float:
    """The mean of the last ``FINAL`` trained evals' pass@1."""
    trained = [value for step, value in sorted(evals.items()) if step > 0]
    return fmean(trained[-FINAL:])


def final_rates(tasks: dict[int, dict[str, list[int]]]) -> dict[str, tuple[float, float]]:
    """Per held-out task, (passes, episodes) summed over the last ``FINAL`` trained evals."""
    steps = [step for step in sorted(tasks) if step > 0][-FINAL:]
    out: dict[str, list[float]] = {}
    for step in steps:
        for key, (passes, n) in tasks[step].items():
            acc = out.setdefault(key, [0.0, 0.0])
            acc[0] += passes
            acc[1] += n
    return {k: (p, n) for k, (p, n) in out.items()}


def paired_difference(arm: dict[str, tuple[float, float]], plain: dict[str, tuple[float, float]], draws: int = 2000,
                      seed: int = 0) -> tuple[float, float, float]:
    """The arm's final per-task pass rate minus plain's, averaged over tasks, with the verdict's 90% two-stage
    bootstrap (``sweep.verdict.score.task_interval``: tasks resampled the same for both, then each task's
    passes drawn again from its binomial)."""
    from sweep.verdict.score import task_interval

    return task_interval(arm, plain, draws, seed)


def make_probe(space: Path, folder: Path, k: int, tiny: dict[str, Any]) -> Path:
    """``sweep forecast``'s probe of the base on the training tasks, saved as the curricula's prior."""
    from grpo.curriculum import write_probe
    from sweep.forecast import probe
    from sweep.spec.loader import load_trainer

    cfg, _ = load_trainer(space, tiny)
    return write_probe(folder / "probe.json", probe(cfg, k), k)


def step0_signal(space: Path, probe_path: Path, arms: list[str], tiny: dict[str, Any]) -> dict[str, float]:
    """Per arm, the share of its first step's groups expected to carry signal: the arm's own sampler (its
    config, the probe as its prior) gives each training task's chance of a draw, and each task is scored by the
    probe's own rate (``1 - p^n - (1-p)^n``, p = its passes over its samples, not the prior-smoothed estimate
    the sampler weighs by). Plain and dynamic sampling draw evenly (dynamic then keeps the groups with signal)."""
    from grpo.curriculum import CurriculumSampler, CurriculumSettings, read_probe, signal_probability
    from grpo.data import trial_tasks
    from sweep.spec.loader import load_trainer

    prior = read_probe(probe_path)
    tasks, _ = trial_tasks(load_trainer(space, tiny)[0])  # every arm trains on the space's tasks
    rates = [prior[t.task_key][0] / sum(prior[t.task_key]) if sum(prior.get(t.task_key, (0, 0))) else 0.0 for t in tasks]
    out = {}
    for arm in arms:
        cfg, _ = load_trainer(space, arm_sets(arm, tiny, probe_path))
        n = cfg.rollout.n_samples_per_prompt
        chances = (CurriculumSampler(tasks, cfg.seed, CurriculumSettings.of(cfg), prior).probabilities()
                   if cfg.data.curriculum.enabled else [1 / len(tasks)] * len(tasks))
        out[arm] = round(sum(c * signal_probability(p, n) for c, p in zip(chances, rates)), 3)
    return out


def arm_sets(arm: str, sets: dict[str, Any], probe_path: Path) -> dict[str, Any]:
    """The arm's trainer keys over ``sets``, its curriculum (if any) seeded by the bench's probe."""
    out = {**sets, **ARMS[arm]}
    if "data.curriculum" in out:
        out["data.curriculum"] = {**out["data.curriculum"], "prior_path": str(probe_path)}
    return out


def run_arm(space: Path, arm: str, seed: int, steps: int, budget: int, probe_path: Path, tiny: dict[str, Any],
            base_eval: dict[str, Any] | None = None) -> dict[str, Any]:
    """One arm's run, stopped at the budget. ``base_eval``: the seed's plain run's step-0 eval line, which the
    other arms start from as a sweep's trials share one base eval (same base, same held-out tasks: one point,
    not one per arm)."""
    from grpo.trainer import train
    from sweep.spec.loader import load_trainer

    out = probe_path.parent / f"{arm}_s{seed}"
    shutil.rmtree(out, ignore_errors=True)  # a run cut short starts again: its budget counts from its first step
    cfg, _ = load_trainer(space, arm_sets(arm, {**tiny, "total_steps": steps, "seed": seed, "output_dir": str(out)}, probe_path))
    reporter = BudgetReporter(budget)
    started, ran_at = time.perf_counter(), commit()  # the code that starts the run, not what the checkout holds when it ends
    try:
        train(cfg, reporter, base_eval)
    except BudgetSpent:
        pass
    lines = [json.loads(line) for line in (out / "aggregated_results.jsonl").read_text().splitlines()]
    evals = {int(e["global_step"]): float(e["eval/avg_pass_at_1"]) for e in lines}
    tasks = {int(e["global_step"]): e.get("tasks") or {} for e in lines}
    envs = {int(e["global_step"]): {k.split("/")[1]: v for k, v in e.items() if k.startswith("eval/") and k.endswith("/pass_at_1") and k.count("/") == 2}
            for e in lines}
    return {"arm": arm, "seed": seed, "commit": ran_at, "minutes": round((time.perf_counter() - started) / 60, 1), "steps": reporter.steps,
            "evals": evals, "tasks": tasks, "env_evals": envs, "base_eval": step0_line(out)}


def step0_line(out: Path) -> dict[str, Any] | None:
    """A run's step-0 eval line (``aggregated_results.jsonl``), or None where its folder is gone."""
    path = out / "aggregated_results.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    return next(({k: v for k, v in line.items() if k != "shared"} for line in lines if int(line["global_step"]) == 0), None)


def read_run(path: Path) -> dict[str, Any]:
    """A kept run as ``run_arm`` returned it (JSON keeps the evals' and tasks' steps as strings)."""
    run = json.loads(path.read_text())
    return {**run, "evals": {int(step): v for step, v in run["evals"].items()}, "tasks": {int(step): v for step, v in run["tasks"].items()}}


def kept_settings(folder: Path, settings: dict[str, Any]) -> None:
    """Tie ``folder`` to the bench's settings (``bench.json``): a folder made with other settings is refused, by key."""
    path = folder / "bench.json"
    if not path.exists():
        path.write_text(json.dumps(settings, indent=1, sort_keys=True))
        return
    kept = json.loads(path.read_text())
    differ = [f"{key}: {kept.get(key)!r} there, {settings.get(key)!r} now" for key in sorted(set(kept) | set(settings)) if kept.get(key) != settings.get(key)]
    if differ:
        raise SystemExit(f"{path}: its runs were made with other settings ({'; '.join(differ)}); keep this run's in another folder")


def summarize(runs: list[dict[str, Any]], seeds: list[int], budget: int, arms: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per arm and seed: episodes to plain's final score, its own final score and the difference with its
    noise, the signal shares; and whether some arm met the target on every seed."""
    by = {(r["arm"], r["seed"]): r for r in runs}
    rows = []
    for seed in seeds:
        plain = by[("plain", seed)]
        target = final_score(plain["evals"])
        plain_cost = episodes_to_reach(eval_curve(plain["steps"], plain["evals"]), target) or budget
        for arm in arms:
            run = by[(arm, seed)]
            reached = episodes_to_reach(eval_curve(run["steps"], run["evals"]), target)
            diff, low, high = paired_difference(final_rates(run["tasks"]), final_rates(plain["tasks"]), seed=seed)
            rows.append({
                "arm": arm, "seed": seed, "target": round(target, 4), "episodes_to_target": reached if reached is not None else budget,
                "reached": reached is not None, "ratio": round((reached if reached is not None else budget) / plain_cost, 3),
                "final": round(final_score(run["evals"]), 4), "final_minus_plain": round(diff, 4), "low": round(low, 4), "high": round(high, 4),
                "rollout_signal_share": round(fmean(s["rollout_signal"] for s in run["steps"]), 3),
                "trained_signal_share": round(fmean(s["trained_signal"] for s in run["steps"]), 3),
            })
    met = {}
    for arm in arms:
        if arm == "plain":
            continue
        mine = [r for r in rows if r["arm"] == arm]
        met[arm] = all(r["reached"] and r["ratio"] <= TARGET_RATIO and r["high"] >= 0 for r in mine)
    summary = {"seeds": seeds, "budget_episodes": budget, "target_ratio": TARGET_RATIO,
               "per_seed": {f"{r['arm']}/s{r['seed']}": {k: r[k] for k in ("ratio", "final_minus_plain", "low", "high", "rollout_signal_share")}
                            for r in rows},
               "met_by": [arm for arm, ok in met.items() if ok], "target_met": any(met.values())}
    return rows, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--space", type=Path, default=SPACE, help="the space whose base, split and trainer the arms share (default: the learning space)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="RL seeds (the base and split stay the space's)")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), help="arms to run (plain always runs)")
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
    space = args.space.resolve()
    arms = ["plain", *[a for a in args.arms if a != "plain"]]
    cfg, _ = load_trainer(space, tiny)
    steps = args.steps or cfg.total_steps
    budget = steps * cfg.rollout.prompts_per_step * cfg.rollout.n_samples_per_prompt
    folder = args.keep or Path(tempfile.mkdtemp(prefix="signal-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    space_name = str(space.relative_to(ROOT)) if space.is_relative_to(ROOT) else str(space)
    what = {key: v for key, v in tiny.items() if key != "torch_threads"}  # threads set how fast, not what: sittings may differ in them
    kept_settings(folder, {"space": space_name, "steps": steps, "k": k, "sets": what})
    probe_path = folder / "probe.json"
    if not probe_path.exists():
        probe_path = make_probe(space, folder, k, tiny)
    print(f"probe of the base ({k} samples per training task): {probe_path}; budget {budget} training episodes per run", flush=True)
    expected = step0_signal(space, probe_path, arms, tiny)
    print(f"groups expected to carry signal at step 0, by the probe's rates: {expected}", flush=True)
    runs, reused = [], {}
    for seed in seeds:
        shared = None  # plain's base eval, the other arms' step 0
        for arm in arms:
            done = folder / f"{arm}_s{seed}.json"
            if done.exists():
                run = read_run(done)
                reused[done.stem] = run.get("commit", "unknown")
                print(f"{done.stem}: kept from an earlier call ({reused[done.stem]})", flush=True)
            else:
                run = run_arm(space, arm, seed, steps, budget, probe_path, tiny, shared)
                done.write_text(json.dumps(run))
            if arm == "plain":
                shared = run.get("base_eval")
            runs.append(run)
            print(json.dumps({"arm": arm, "seed": seed, "minutes": run["minutes"], "steps": len(run["steps"]), "episodes": run["steps"][-1]["episodes"],
                              "curve": eval_curve(run["steps"], run["evals"]), "final": round(final_score(run["evals"]), 4),
                              "rollout_signal_share": round(fmean(s["rollout_signal"] for s in run["steps"]), 3)}), flush=True)
    rows, summary = summarize(runs, seeds, budget, arms)
    for r in rows:
        print(f"seed {r['seed']} {r['arm']:>14}: {r['episodes_to_target']} episodes to plain's final {r['target']:.3f} ({r['ratio']}x plain's"
              f"{'' if r['reached'] else ', never reached'}), final {r['final']:.3f} ({r['final_minus_plain']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]), "
              f"groups with signal {r['rollout_signal_share']}")
    record("signal", [*runs, *rows], {"space": space_name, "steps": steps, **summary, "step0_expected_signal": expected, "reused": reused})
    return 0


if __name__ == "__main__":
    sys.exit(main())
