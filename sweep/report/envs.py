"""Per-environment tables: every trial's environments, base → last, with noise, and what the sweep as a
whole says about each environment.

A row compares an env's pass@1 at the base (the shared base eval, step 0; without held-out eval, step 1's
training rollouts) with its *last* level: the mean of the trial's last evals (the verdict's window), not its
best point (a maximum over a noisy curve favours the luckiest draw). The interval is the verdict's
two-stage task bootstrap (``sweep.verdict.score``) over that env's held-out tasks alone. The status rule is
``env_status`` (thresholds in ``sweep.verdict.thresholds``). The sweep-wide view (``sweep_envs``) names the
envs that gave no learning signal in any trial, which the verdict's words pass on with what to do.
Reading is ``load``'s job; the bootstrap is ``sweep.verdict``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from sweep.report.load import TrialData
from sweep.report.summary import train_series
from sweep.verdict.score import EvalPoint, score_trials, window, within
from sweep.verdict.thresholds import EPS, Thresholds

STATUSES = ("IMPROVED", "FLAT", "SATURATED", "FAILING", "REGRESSED")


@dataclass(frozen=True)
class EnvRow:
    env: str
    base: float  # pass@1 at the base
    base_step: int  # 0: the base eval; 1: step 1's training rollouts (no held-out eval)
    last: float  # the mean of the last points (the verdict's window)
    last_steps: tuple[int, ...]
    best: float  # the best trained point, shown beside the last (never judged on)
    best_step: int
    low: float | None  # 90% interval of last − base over the env's tasks (None: no per-task results)
    high: float | None
    status: str  # one of STATUSES (``env_status``)
    signal_frac: float | None  # share of training steps with the env's variance_per_prompt above ``no_signal``
    variance_mean: float | None
    env_error_frac: float | None = None  # mean share of its training episodes that were environment errors

    @property
    def delta(self) -> float:
        return self.last - self.base


def level_status(p: float, th: Thresholds) -> str:
    """An env's class from one pass rate (a base eval, ``sweep forecast``'s probe): SATURATED at or above
    ``saturated``, FAILING at or below ``failing``, else LEARNABLE."""
    if p >= th.saturated - EPS:
        return "SATURATED"
    if p <= th.failing + EPS:
        return "FAILING"
    return "LEARNABLE"


def env_status(base: float, last: float, low: float | None, high: float | None, th: Thresholds) -> str:
    """One env of one trial, base vs last and its noise (first rule that holds):

    - REGRESSED: last below the base by more than noise (interval below 0) and by at least ``min_delta``;
    - SATURATED: the base at or above ``saturated`` (and it did not regress): nothing left to learn;
    - FAILING: base and last at or below ``failing``: never solved, its groups all zeros;
    - IMPROVED: last above the base by more than noise and by at least ``min_delta``;
    - FLAT: anything else (a change within noise, or too small to count).

    Without an interval (no per-task results), a change counts as beyond noise when it is ``min_delta`` or more.
    """
    delta = last - base
    rose = low > 0 if low is not None else delta >= th.min_delta - EPS
    fell = high < 0 if high is not None else delta <= -th.min_delta + EPS
    if fell and delta <= -th.min_delta + EPS:
        return "REGRESSED"
    if level_status(base, th) == "SATURATED":
        return "SATURATED"
    if level_status(max(base, last), th) == "FAILING":
        return "FAILING"
    if rose and delta >= th.min_delta - EPS:
        return "IMPROVED"
    return "FLAT"


def envs_of(trial: TrialData) -> list[str]:
    keys = set().union(*(r.keys() for r in trial.rows), *(e.keys() for e in trial.evals)) if trial.rows or trial.evals else set()
    return sorted({k.split("/")[1] for k in keys if k.count("/") == 2 and k.endswith("/pass_at_1") and k.split("/")[0] in ("eval", "reward")})


def task_envs(trial: TrialData) -> dict[str, str]:
    """Each held-out task's env, from every eval line that recorded it (the shared base's line included)."""
    out: dict[str, str] = {}
    for line in trial.evals:
        out.update(line.get("task_envs") or {})
    return out


def env_points(trial: TrialData, env: str) -> tuple[EvalPoint | None, list[EvalPoint]]:
    """The env's (base, trained evals) from the trial's eval lines, each with the env's tasks' results and the
    episodes spent by then."""
    owner, spent = task_envs(trial), trial.episodes_by_step()
    base, trained = None, []
    for line in trial.evals:
        key = f"eval/{env}/pass_at_1"
        if key not in line or "global_step" not in line:
            continue
        tasks = {k: (int(v[0]), int(v[1])) for k, v in (line.get("tasks") or {}).items() if owner.get(k) == env} or None
        point = EvalPoint(int(line["global_step"]), float(line[key]), tasks, spent.get(int(line["global_step"])))
        if point.step == 0:
            base = point
        else:
            trained.append(point)
    return base, sorted(trained, key=lambda p: p.step)


def training_points(trial: TrialData, env: str) -> tuple[EvalPoint | None, list[EvalPoint]]:
    """Without held-out eval: step 1's training pass@1 (the untouched base's rollouts) and the later steps'."""
    series, spent = dict(train_series(trial, f"reward/{env}/pass_at_1")), trial.episodes_by_step()
    if 1 not in series:
        return None, []
    return EvalPoint(1, series[1]), [EvalPoint(step, value, None, spent.get(step)) for step, value in sorted(series.items()) if step >= 2]


def env_row(trial: TrialData, env: str, use_eval: bool, size: int, th: Thresholds, budget: float | None = None) -> EnvRow | None:
    """``size``: the points averaged into ``last`` (the verdict's window; its training window without eval); ``budget``:
    the episodes the verdict cut the trial's evals at (its score's, with ``n`` swept), so the table reads where the
    score does (none within it: no row)."""
    base, trained = env_points(trial, env) if use_eval else training_points(trial, env)
    if base is None and use_eval and trained:  # a sweep from before the base was evaluated: its first eval
        base, trained = trained[0], trained[1:]
    trained = within(trained, budget)
    if base is None or not trained:
        return None
    score = score_trials(base, {trial.trial_id: trained}, size)[trial.trial_id]
    points = window(trained, size)
    best = max(trained, key=lambda p: p.pass_at_1)
    variance = [v for _, v in train_series(trial, f"reward/{env}/variance_per_prompt")]
    errors = [v for _, v in train_series(trial, f"reward/{env}/env_error_frac")]
    last = fmean(p.pass_at_1 for p in points)
    return EnvRow(
        env=env, base=base.pass_at_1, base_step=base.step, last=last, last_steps=tuple(p.step for p in points),
        best=best.pass_at_1, best_step=best.step, low=score.low, high=score.high,
        status=env_status(base.pass_at_1, last, score.low, score.high, th),
        signal_frac=sum(v > th.no_signal for v in variance) / len(variance) if variance else None,
        variance_mean=fmean(variance) if variance else None,
        env_error_frac=fmean(errors) if errors else None,
    )


def env_table(trial: TrialData, use_eval: bool, size: int, th: Thresholds, budget: float | None = None) -> list[EnvRow]:
    return [row for env in envs_of(trial) if (row := env_row(trial, env, use_eval, size, th, budget))]


@dataclass(frozen=True)
class SweepEnv:
    """One env across the sweep's trials."""

    env: str
    statuses: Mapping[str, int]  # status -> trials
    trials: int
    signal_frac: float | None  # share of all its training steps, every trial, with signal
    base: float

    @property
    def no_signal(self) -> bool:
        """No trial learned from it: no step of any trial had signal, or it was SATURATED or FAILING in every trial."""
        stuck = sum(self.statuses.get(s, 0) for s in ("SATURATED", "FAILING")) == self.trials
        return (self.signal_frac is not None and self.signal_frac <= EPS) or stuck

    @property
    def kind(self) -> str:
        """What kept it silent, for the words: SATURATED, FAILING or without signal."""
        for status in ("SATURATED", "FAILING"):
            if self.statuses.get(status, 0) == self.trials:
                return status
        return "no signal"


def sweep_envs(tables: Mapping[str, Sequence[EnvRow]], steps: Mapping[str, int]) -> list[SweepEnv]:
    """Per env across the trials' tables (``steps``: each trial's training steps, to weigh its signal share)."""
    by_env: dict[str, list[tuple[str, EnvRow]]] = {}
    for trial_id, rows in tables.items():
        for row in rows:
            by_env.setdefault(row.env, []).append((trial_id, row))
    out = []
    for env, rows in sorted(by_env.items()):
        counts: dict[str, int] = {}
        for _, row in rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        weighed = [(row.signal_frac, steps.get(t, 0)) for t, row in rows if row.signal_frac is not None]
        total = sum(w for _, w in weighed)
        signal = sum(f * w for f, w in weighed) / total if total else None
        out.append(SweepEnv(env, counts, len(rows), signal, rows[0][1].base))
    return out


def env_advice(envs: Sequence[SweepEnv]) -> str:
    """The verdict's sentence on the envs no trial learned from, and what to do; empty when every env spoke
    (or the sweep had one env)."""
    silent = [e for e in envs if e.no_signal]
    if not silent or len(envs) < 2:  # one env: the trials' verdicts already say it
        return ""
    named = ", ".join(f"{e.env} ({e.kind.lower() if e.kind != 'no signal' else 'no step with signal'}, base {e.base:.2f})" for e in silent)
    they, them = ("it gives", "it") if len(silent) == 1 else ("they give", "them")
    return (f"No trial learned from {len(silent)} of {len(envs)} environments: {named}; {they} no learning signal and cost "
            f"rollouts. Leave {them} out of training (`env.env_keys` without {them}; the held-out eval loses {them} too) or weight "
            f"{them} down (`data.curriculum: {{enabled: true, level: env}}`).")


def describe(row: EnvRow) -> Mapping[str, Any]:
    """A row's numbers as plain values (W&B's table, JSON)."""
    return {"env": row.env, "base": row.base, "last": row.last, "best": row.best, "best_step": row.best_step, "delta": row.delta,
            "delta_low": row.low, "delta_high": row.high, "status": row.status, "steps_with_signal": row.signal_frac,
            "variance_per_prompt": row.variance_mean, "env_errors": row.env_error_frac}
