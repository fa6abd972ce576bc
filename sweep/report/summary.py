"""Per-trial summaries of a loaded sweep: the leaderboard rows (per-env tables: ``envs``).

The headline metric is held-out ``eval/avg_pass_at_1`` when the sweep ran eval, else the training
``reward/avg_pass_at_1``; every table says which. Eval points come from ``aggregated_results.jsonl``
(which has the base policy's step 0), else from the result rows' ``eval/global_step``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweep.report.load import EVAL_METRIC, TRAIN_METRIC, SweepData, TrialData, uses_eval
from sweep.trials.stoppers import VARIANCE, fate

Series = list[tuple[int, float]]
EARLY_STOPS = {"asha": "ASHA", "median": "median stopping", "pbt": "PBT"}  # by the sweep's scheduler.type


def train_series(trial: TrialData, key: str) -> Series:
    """(step, value) of a per-step metric."""
    return [(int(r.get("training_iteration", r.get("step", i + 1))), float(r[key])) for i, r in enumerate(trial.rows) if key in r]


def eval_series(trial: TrialData, key: str) -> Series:
    """(global step, value) of an eval metric, each eval once: the trial's eval lines (those its record lost are read
    from its step rows when it is loaded: ``sweep.report.load.trial_from_rows``)."""
    return [(int(e["global_step"]), float(e[key])) for e in trial.evals if key in e]


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
    wall_s: float | None  # None: Tune's record of the last step lost
    error: str = ""
    restarts: int = 0  # times the trial started again after its process died
    mended: str = ""  # a lost or cut record read from elsewhere (``sweep.report.load``)


def _total_steps(sweep: SweepData) -> int:
    declared = [t.trainer_config.get("total_steps") for t in sweep.trials if t.trainer_config]
    return max([int(s) for s in declared if s] or [max(t.steps for t in sweep.trials)])


def stop_reason(trial: TrialData, board: dict[str, dict[str, Any]], total_steps: int, scheduler: str | None = None,
                zero_signal: tuple[float, int] | None = None) -> str:
    """Why the trial ended: the leaderboard's word when written, else from its files as the leaderboard decides it
    (``sweep.trials.stoppers.fate``: the sweep's zero-signal rule over its rows, before the live page has a leaderboard);
    a scheduler's early stop is named after the scheduler when the sweep saved its config."""
    if trial.trial_id in board:
        status = str(board[trial.trial_id].get("status", "")) or "unknown"
    elif not trial.rows and not trial.error:  # started, or its records lost: no scheduler's stop to name
        return "no step reported"
    else:
        status = fate(trial.steps, total_steps, [float(r[VARIANCE]) for r in trial.rows if VARIANCE in r], zero_signal, bool(trial.error))
    if status == "stopped early":
        return EARLY_STOPS.get(scheduler or "", "stopped early (scheduler)")
    return status


def summarize_trial(trial: TrialData, use_eval: bool, board: dict[str, dict[str, Any]], total_steps: int, scheduler: str | None,
                    zero_signal: tuple[float, int] | None = None) -> TrialSummary:
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
        stop=stop_reason(trial, board, total_steps, scheduler, zero_signal),
        wall_s=trial.wall_s,
        error=trial.error.splitlines()[-1] if trial.error else "",
        restarts=trial.restarts,
        mended=trial.mended,
    )


def leaderboard(sweep: SweepData) -> list[TrialSummary]:
    """One summary per trial, best first (trials without the metric last)."""
    use_eval = uses_eval(sweep)
    board = {str(r["trial"]): r for r in sweep.leaderboard or []}
    total = _total_steps(sweep)
    rows = [summarize_trial(t, use_eval, board, total, sweep.scheduler, sweep.zero_signal) for t in sweep.trials]
    return sorted(rows, key=lambda r: (r.best is None, -(r.best or 0.0), -r.steps, r.trial_id))
