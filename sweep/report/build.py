"""Assemble a sweep report: load, summarise, judge, analyse, plot; ``render`` writes it out.

Reads a sweep through ``SweepStore`` (local or S3); writes only under the output directory.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sweep.report import plots
from sweep.report.coverage import Looked, looked
from sweep.report.envs import EnvRow, SweepEnv, env_advice, env_table, sweep_envs
from sweep.report.importance import MIN_COMPLETE, Importance, param_importance
from sweep.report.judge import TRAIN_WINDOW, Judged, judge, score_window
from sweep.report.load import SweepData, load_sweep, uses_eval
from sweep.report.rules import Diagnosis, diagnose
from sweep.report.store import SweepStore
from sweep.report.summary import TrialSummary, leaderboard, metric_key, pass_series, train_series
from sweep.report.trajectories import TrajectoryAnalysis, analyze, read_episodes
from sweep.verdict.summary import confirmation_text, verdict_text
from sweep.verdict.thresholds import Thresholds

CURVES = {  # title -> metric; the two KLs span decades, so they are drawn on a log scale
    "variance_per_prompt": "reward/variance_per_prompt",
    "update KL (before vs after each step)": "policy/update_kl",
    "KL to reference": "policy/kl",
}
LOG_PANELS = ("update KL (before vs after each step)", "KL to reference")
SIGNAL_CURVES = {  # drawn where some trial reported a non-zero value: the learning signal and what bought it
    "groups with mixed outcomes (signal)": "reward/frac_mixed",
    "dynamic sampling: extra episodes per step": "dynamic/extra_episodes",
    "curriculum: expected groups with signal": "curriculum/expected_signal",
    "tokens whose importance weight was truncated": "policy/tis_truncated_frac",
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
    env_rows: list[EnvRow]  # the winner's (its diagnoses)
    diagnoses: list[Diagnosis]
    importance: Importance
    trajectories: TrajectoryAnalysis
    judged: list[Judged] = field(default_factory=list)
    verdict: str = ""
    plots: dict[str, Path] = field(default_factory=dict)
    env_tables: dict[str, list[EnvRow]] = field(default_factory=dict)  # every trial's, by trial id, in the ranking's order
    envs: list[SweepEnv] = field(default_factory=list)  # each env across the sweep
    confirmation: dict | None = None  # confirm.json, once a confirm stage ran
    looked: list[Looked] = field(default_factory=list)  # each numeric swept key's widest stretch without a trial
    absent: list[str] = field(default_factory=list)  # trials the leaderboard ranks whose folders are gone

    @property
    def best(self) -> TrialSummary | None:
        return self.trials[0] if self.trials and self.judged and self.judged[0].score.gain is not None else None

    @property
    def base(self) -> float | None:
        """The shared base's held-out pass@1 (the winner's base, when trials had several)."""
        first = self.judged[0].evidence.base if self.judged else None
        return first.pass_at_1 if first else None


# every other stop: stopped early; a live sweep's trials still going are running (or pending)
STATUSES = {"finished": "finished", "zero signal": "zero signal", "error": "error", "running": "running", "pending": "pending"}


def _statuses(trials: list[TrialSummary]) -> dict[str, str]:
    return {t.trial_id: STATUSES.get(t.stop, "stopped early") for t in trials}


def signal_panels(sweep: SweepData) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """The ``SIGNAL_CURVES`` some trial reported a non-zero value of (dynamic sampling or the curriculum on,
    importance weights truncated), title -> trial -> (step, value)."""
    panels = {}
    for title, key in SIGNAL_CURVES.items():
        series = {t.trial_id: train_series(t, key) for t in sweep.trials}
        if any(value for points in series.values() for _, value in points):
            panels[title] = series
    return panels


def _plots(sweep: SweepData, rep: Report, out: Path) -> dict[str, Path]:
    labels = {j.trial_id: j.verdict.label for j in rep.judged}
    panels = {f"{rep.metric}": {t.trial_id: pass_series(t, rep.use_eval) for t in sweep.trials}}
    panels.update({title: {t.trial_id: train_series(t, key) for t in sweep.trials} for title, key in CURVES.items()})
    if not any(panels["update KL (before vs after each step)"].values()):  # a sweep from before the update was measured
        panels.pop("update KL (before vs after each step)")
        panels = {**panels, "clip fraction": {t.trial_id: train_series(t, "policy/clip_frac") for t in sweep.trials}}
    panels.update(signal_panels(sweep))
    made = {"learning curves": plots.learning_curves(panels, out / "learning_curves.png", labels, rep.base, LOG_PANELS)}
    scored = [(t.config, j.score.gain, j.score.low, j.score.high, j.verdict.label)
              for j in rep.judged for t in rep.trials if t.trial_id == j.trial_id and j.score.gain is not None]
    if scored and rep.swept_keys:
        made["score vs swept keys"] = plots.score_vs_params(scored, rep.swept_keys, out / "score_vs_params.png")
    if rep.importance.importances:
        made["hyperparameter importance"] = plots.importance_bars(rep.importance.importances, out / "importance.png")
    return made


def _importance(store: SweepStore, name: str, min_complete: int) -> Importance:
    with tempfile.TemporaryDirectory() as tmp:
        db = store.local_copy("optuna.db", Path(tmp) / "optuna.db")
        return param_importance(db, name, min_complete)


def build_report(uri: str, out: Path, th: Thresholds | None = None, min_complete: int = MIN_COMPLETE) -> Report:
    """Everything the report shows, its plots written under ``out``."""
    store = SweepStore(uri)
    sweep = load_sweep(store)
    return assemble(store, sweep, out, th, _importance(store, sweep.name, min_complete))


def assemble(store: SweepStore, sweep: SweepData, out: Path, th: Thresholds | None, importance: Importance) -> Report:
    """The report of ``sweep`` as it stands (a finished sweep's, or the live page's results so far), its plots
    written under ``out``; ``store`` holds the eval dumps."""
    th = th or Thresholds()
    use_eval = uses_eval(sweep)
    summaries = {t.trial_id: t for t in leaderboard(sweep)}
    judged = judge(sweep, _statuses(list(summaries.values())), th)
    trials = [summaries[j.trial_id] for j in judged]  # the verdict's order, the one ranking
    by_id = {t.trial_id: t for t in sweep.trials}
    size = score_window(sweep) if use_eval else TRAIN_WINDOW
    env_tables = {j.trial_id: env_table(by_id[j.trial_id], use_eval, size, th, j.score.budget) for j in judged}  # where each score reads
    # the sweep-wide view of each env (its signal, and whether any trial learned from it): every trial's whole run, so that
    # a trial whose first eval came after the episode budget (n swept) still counts
    whole = {j.trial_id: env_tables[j.trial_id] if j.score.budget is None else env_table(by_id[j.trial_id], use_eval, size, th) for j in judged}
    env_rows = env_tables[judged[0].trial_id] if judged and judged[0].score.gain is not None else []
    ranked = [(j.trial_id, {k: summaries[j.trial_id].config.get(k) for k in sweep.swept_keys}, j.score, j.verdict) for j in judged]
    rep = Report(
        name=sweep.name, uri=sweep.uri, metric=metric_key(use_eval), use_eval=use_eval, swept_keys=sweep.swept_keys, thresholds=th,
        trials=trials, env_rows=env_rows, diagnoses=diagnose(env_rows, th), importance=importance,
        trajectories=analyze(read_episodes(store, [t.trial_id for t in trials])),
        judged=judged, env_tables=env_tables, envs=sweep_envs(whole, {t.trial_id: t.steps for t in trials}),
        confirmation=sweep.confirmation, looked=looked(sweep.saved.get("space") or {}, [t.config for t in sweep.trials]),
        absent=sweep.absent,
    )
    rep.verdict = " ".join(filter(None, [verdict_text(ranked, rep.base), confirmation_text(rep.confirmation), env_advice(rep.envs)]))
    rep.plots = _plots(sweep, rep, out)
    return rep
