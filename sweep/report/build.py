"""Assemble a sweep report: load, summarise, diagnose, analyse, plot; ``render`` writes it out.

Reads a sweep through ``SweepStore`` (local or S3); writes only under the output directory.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sweep.report import plots
from sweep.report.importance import MIN_COMPLETE, Importance, param_importance
from sweep.report.load import SweepData, TrialData, load_sweep, uses_eval
from sweep.report.rules import Diagnosis, TrialCurves, diagnose
from sweep.report.store import SweepStore
from sweep.report.summary import EnvRow, TrialSummary, env_table, leaderboard, metric_key, pass_series, train_series
from sweep.report.thresholds import Thresholds
from sweep.report.trajectories import TrajectoryAnalysis, analyze, read_episodes

CURVES = {
    "variance_per_prompt": "reward/variance_per_prompt",
    "clip fraction": "policy/clip_frac",
    "KL to reference": "policy/kl",
}


@dataclass
class Report:
    name: str
    uri: str
    metric: str
    use_eval: bool
    swept_keys: list[str]
    thresholds: Thresholds
    trials: list[TrialSummary]
    env_rows: list[EnvRow]
    diagnoses: list[Diagnosis]
    importance: Importance
    trajectories: TrajectoryAnalysis
    plots: dict[str, Path] = field(default_factory=dict)

    @property
    def best(self) -> TrialSummary | None:
        return self.trials[0] if self.trials and self.trials[0].best is not None else None


def trial_curves(trial: TrialData, use_eval: bool) -> TrialCurves:
    def values(key: str) -> list[float]:
        return [v for _, v in train_series(trial, key)]

    lr = trial.config.get("optim.lr") or (trial.rows[0].get("policy/lr") if trial.rows else None)
    return TrialCurves(
        trial_id=trial.trial_id,
        metric=metric_key(use_eval),
        pass_at_1=[v for _, v in pass_series(trial, use_eval)],
        variance_per_prompt=values("reward/variance_per_prompt"),
        clip_frac=values("policy/clip_frac"),
        kl=values("policy/kl"),
        entropy=values("policy/entropy"),
        tool_error_rate=values("rollout/tool_error_rate"),
        lr=float(lr) if lr is not None else None,
    )


def _plots(sweep: SweepData, rep: Report, out: Path) -> dict[str, Path]:
    panels = {f"{rep.metric}": {t.trial_id: pass_series(t, rep.use_eval) for t in sweep.trials}}
    panels.update({title: {t.trial_id: train_series(t, key) for t in sweep.trials} for title, key in CURVES.items()})
    made = {"learning curves": plots.learning_curves(panels, out / "learning_curves.png")}
    scored = [(t.config, t.best, t.stop) for t in rep.trials if t.best is not None]
    if scored and rep.swept_keys:
        made["metric vs swept keys"] = plots.metric_vs_params(scored, rep.swept_keys, rep.metric, out / "metric_vs_params.png")
    if rep.importance.importances:
        made["hyperparameter importance"] = plots.importance_bars(rep.importance.importances, out / "importance.png")
    return made


def _importance(store: SweepStore, name: str, min_complete: int) -> Importance:
    with tempfile.TemporaryDirectory() as tmp:
        db = store.local_copy("optuna.db", Path(tmp) / "optuna.db")
        return param_importance(db, name, min_complete)


def build_report(uri: str, out: Path, th: Thresholds | None = None, min_complete: int = MIN_COMPLETE) -> Report:
    """Everything the report shows, its plots written under ``out``."""
    th = th or Thresholds()
    store = SweepStore(uri)
    sweep = load_sweep(store)
    use_eval = uses_eval(sweep)
    trials = leaderboard(sweep)
    by_id = {t.trial_id: t for t in sweep.trials}
    best = by_id[trials[0].trial_id] if trials and trials[0].best is not None else None
    env_rows = env_table(best, use_eval, th) if best else []
    rep = Report(
        name=sweep.name, uri=uri, metric=metric_key(use_eval), use_eval=use_eval, swept_keys=sweep.swept_keys, thresholds=th,
        trials=trials, env_rows=env_rows,
        diagnoses=diagnose([trial_curves(by_id[t.trial_id], use_eval) for t in trials], env_rows, th),
        importance=_importance(store, sweep.name, min_complete),
        trajectories=analyze(read_episodes(store, [t.trial_id for t in trials])),
    )
    rep.plots = _plots(sweep, rep, out)
    return rep
