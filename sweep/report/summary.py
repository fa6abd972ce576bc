"""Per-trial and per-env summaries of a loaded sweep: the leaderboard rows and the best trial's env table.

The headline metric is held-out ``eval/avg_pass_at_1`` when the sweep ran eval, else the training
``reward/avg_pass_at_1``; every table says which. Eval points come from ``aggregated_results.jsonl``
(which has the base policy's step 0), else from the result rows' ``eval/global_step``.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Any

from sweep.report.load import EVAL_METRIC, TRAIN_METRIC, SweepData, TrialData, uses_eval
from sweep.verdict.thresholds import EPS, Thresholds

Series = list[tuple[int, float]]
EARLY_STOPS = {"asha": "ASHA", "median": "median stopping", "pbt": "PBT"}  # by the sweep's scheduler.type


def train_series(trial: TrialData, key: str) -> Series:
    """(step, value) of a per-step metric."""
    return [(int(r.get("training_iteration", r.get("step", i + 1))), float(r[key])) for i, r in enumerate(trial.rows) if key in r]


def eval_series(trial: TrialData, key: str) -> Series:
    """(global step, value) of an eval metric, each eval once (rows repeat the newest eval until the next)."""
    if trial.evals:
        return [(int(e["global_step"]), float(e[key])) for e in trial.evals if key in e]
    seen: dict[int, float] = {}
    for r in trial.rows:
        if key in r and "eval/global_step" in r:
            seen.setdefault(int(r["eval/global_step"]), float(r[key]))
    return sorted(seen.items())


def metric_key(use_eval: bool, env: str | None = None) -> str:
    if env is None:
        return EVAL_METRIC if use_eval else TRAIN_METRIC
    return f"eval/{env}/pass_at_1" if use_eval else f"reward/{env}/pass_at_1"


def pass_series(trial: TrialData, use_eval: bool, env: str | None = None) -> Series:
    key = metric_key(use_eval, env)
    return eval_series(trial, key) if use_eval else train_series(trial, key)


@dataclass
class TrialSummary:
    trial_id: str
    config: dict[str, Any]
    metric: str
    first: float | None
    best: float | None
    best_step: int | None
    last: float | None
    steps: int
    stop: str  # finished | ASHA | median stopping | PBT | stopped early (scheduler) | zero signal | error
    wall_s: float
    error: str = ""
    restarts: int = 0  # times the trial started again after its process died


def _total_steps(sweep: SweepData) -> int:
    declared = [t.trainer_config.get("total_steps") for t in sweep.trials if t.trainer_config]
    return max([int(s) for s in declared if s] or [max(t.steps for t in sweep.trials)])


def stop_reason(trial: TrialData, board: dict[str, dict[str, Any]], total_steps: int, scheduler: str | None = None) -> str:
    """Why the trial ended: the leaderboard's word when written, else from its files; a scheduler's early
    stop is named after the scheduler when the sweep saved its config."""
    if trial.trial_id in board:
        status = str(board[trial.trial_id].get("status", "")) or "unknown"
    elif trial.error:
        status = "error"
    else:
        status = "finished" if trial.steps >= total_steps else "stopped early"
    if status == "stopped early":
        return EARLY_STOPS.get(scheduler or "", "stopped early (scheduler)")
    return status


def summarize_trial(trial: TrialData, use_eval: bool, board: dict[str, dict[str, Any]], total_steps: int, scheduler: str | None) -> TrialSummary:
    points = pass_series(trial, use_eval)
    trained = [p for p in points if p[0] >= 1] or points
    best = max(trained, key=lambda p: p[1], default=None)
    return TrialSummary(
        trial_id=trial.trial_id,
        config={k: v for k, v in trial.config.items()},
        metric=metric_key(use_eval),
        first=points[0][1] if points else None,
        best=best[1] if best else None,
        best_step=best[0] if best else None,
        last=points[-1][1] if points else None,
        steps=trial.steps,
        stop=stop_reason(trial, board, total_steps, scheduler),
        wall_s=trial.wall_s,
        error=trial.error.splitlines()[-1] if trial.error else "",
        restarts=trial.restarts,
    )


def leaderboard(sweep: SweepData) -> list[TrialSummary]:
    """One summary per trial, best first (trials without the metric last)."""
    use_eval = uses_eval(sweep)
    board = {str(r["trial"]): r for r in sweep.leaderboard or []}
    total = _total_steps(sweep)
    rows = [summarize_trial(t, use_eval, board, total, sweep.scheduler) for t in sweep.trials]
    return sorted(rows, key=lambda r: (r.best is None, -(r.best or 0.0), -r.steps, r.trial_id))


@dataclass
class EnvRow:
    env: str
    first: float
    first_step: int
    best: float
    best_step: int
    delta: float
    status: str
    signal_frac: float | None  # share of steps with the env's variance_per_prompt > 0
    variance_mean: float | None
    env_error_frac: float | None = None  # mean share of its training episodes that were environment errors


def env_status(first: float, best: float, th: Thresholds) -> str:
    """SATURATED, FAILING, IMPROVED or FLAT (see ``thresholds.py``)."""
    if first >= th.saturated - EPS:
        return "SATURATED"
    if best <= th.failing + EPS:
        return "FAILING"
    return "IMPROVED" if best - first >= th.min_delta - EPS else "FLAT"


def envs_of(trial: TrialData) -> list[str]:
    keys = set().union(*(r.keys() for r in trial.rows), *(e.keys() for e in trial.evals)) if trial.rows or trial.evals else set()
    return sorted({k.split("/")[1] for k in keys if k.count("/") == 2 and k.endswith("/pass_at_1") and k.split("/")[0] in ("eval", "reward")})


def env_row(trial: TrialData, env: str, use_eval: bool, th: Thresholds) -> EnvRow | None:
    points = pass_series(trial, use_eval, env) or pass_series(trial, False, env)
    if not points:
        return None
    best = max(points, key=lambda p: p[1])
    variance = [v for _, v in train_series(trial, f"reward/{env}/variance_per_prompt")]
    errors = [v for _, v in train_series(trial, f"reward/{env}/env_error_frac")]
    return EnvRow(
        env=env,
        first=points[0][1],
        first_step=points[0][0],
        best=best[1],
        best_step=best[0],
        delta=best[1] - points[0][1],
        status=env_status(points[0][1], best[1], th),
        signal_frac=sum(v > 0 for v in variance) / len(variance) if variance else None,
        variance_mean=fmean(variance) if variance else None,
        env_error_frac=fmean(errors) if errors else None,
    )


def env_table(trial: TrialData, use_eval: bool, th: Thresholds) -> list[EnvRow]:
    return [row for env in envs_of(trial) if (row := env_row(trial, env, use_eval, th))]
