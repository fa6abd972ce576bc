"""The verdict on a loaded sweep: each trial's evidence from its records, its score against its base, its
label, and the one ranking that the end-of-run leaderboard, ``sweep report`` and ``sweep confirm`` use.

Trials are scored against the base their curve starts from: the sweep's shared base eval (the same for
every trial of one base), or, in sweeps from before it was shared, the trial's own step 0. The update size
that moves the score is measured among the trials of one base policy (``update_scale``, ``policy_key``): another
model moves on another scale, while another eval of the same model (an eval-only key swept) does not. Ties are
computed among the trials that share the winner's base (a paired bootstrap needs the same tasks).
Reading is ``sweep.report.load``'s job; the math is ``sweep.verdict``'s.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Any

from configkit.base import get_dotted
from sweep.report.load import TRAIN_METRIC, SweepData, TrialData, uses_eval
from sweep.spec.bases import BASE_KEYS
from sweep.store.results import step_of
from sweep.verdict.labels import TrialEvidence, Verdict, update_scale, verdict
from sweep.verdict.pick import middle_learner
from sweep.verdict.score import EvalPoint, Score, common_budget, rank, score_trials, winner
from sweep.verdict.thresholds import Thresholds

DEFAULT_WINDOW = 2


@dataclass(frozen=True)
class Judged:
    trial_id: str
    score: Score
    verdict: Verdict
    evidence: TrialEvidence
    base_key: str  # which base the trial was scored against

    @property
    def last(self) -> float | None:
        """The level the gain was measured at: the mean pass@1 of the evals in the score's window (the last
        evals, as the per-env tables' *last*), not the single final eval, so base → last reads as the gain."""
        window = set(self.score.steps)
        points = [p.pass_at_1 for p in self.evidence.evals if p.step in window]
        return fmean(points) if points else None


def _series(trial: TrialData, key: str) -> list[float]:
    return [float(r[key]) for r in trial.rows if key in r and r[key] is not None]


TRAIN_WINDOW = 3  # steps of training reward averaged when a sweep ran no held-out eval


def training_points(trial: TrialData) -> tuple[EvalPoint | None, list[EvalPoint], str]:
    """Without held-out eval: training pass@1, step 1's rollouts (sampled by the untouched base) as the
    base's point and later steps as trained ones; no per-task results, so no interval."""
    spent = trial.episodes_by_step()
    series = {step_of(r) or 0: float(r[TRAIN_METRIC]) for r in trial.rows if TRAIN_METRIC in r}
    if 1 not in series:
        return None, [], f"own:{trial.trial_id}"
    trained = [EvalPoint(step, value, None, spent.get(step)) for step, value in sorted(series.items()) if step >= 2]
    return EvalPoint(0, series[1]), trained, f"own:{trial.trial_id}"


def eval_points(trial: TrialData, training: bool = False) -> tuple[EvalPoint | None, list[EvalPoint], str]:
    """(the base's point, the trained evals, the base's key) from the trial's eval lines (``training``: from
    its training reward, for a sweep that ran no held-out eval)."""
    if training:
        return training_points(trial)
    spent = trial.episodes_by_step()
    points, base, key = [], None, f"own:{trial.trial_id}"
    for line in trial.evals:
        step, value = step_of({"step": line.get("global_step")}), line.get("eval/avg_pass_at_1")
        if step is None or isinstance(value, bool) or not isinstance(value, (int, float)):  # no eval line, or a damaged one
            continue
        tasks = {k: (int(v[0]), int(v[1])) for k, v in (line.get("tasks") or {}).items()} or None  # read whole by sweep.report.load
        point = EvalPoint(step, float(value), tasks, spent.get(step))
        if step == 0:
            base = point
            key = str(line.get("base_eval") or key)
        else:
            points.append(point)
    return base, sorted(points, key=lambda p: p.step), key


def evidence(trial: TrialData, status: str, training: bool = False) -> TrialEvidence:
    base, evals, _ = eval_points(trial, training)
    config = trial.trainer_config or {}
    algorithm = config.get("algorithm") or {}
    return TrialEvidence(
        trial_id=trial.trial_id, status=status, error=trial.error.splitlines()[-1] if trial.error else "",
        base=base, evals=evals,
        variance_per_prompt=_series(trial, "reward/variance_per_prompt"), update_kl=_series(trial, "policy/update_kl"),
        update_norm=_series(trial, "policy/update_norm"), clip_frac=_series(trial, "policy/clip_frac"), kl=_series(trial, "policy/kl"),
        entropy=_series(trial, "policy/entropy"), tool_error_rate=_series(trial, "rollout/tool_error_rate"),
        optimizer_steps=int(algorithm.get("mini_batches", 2)) * int(algorithm.get("ppo_epochs", 1)),
        policy_loss=str(algorithm.get("policy_loss", "ppo_clip")),  # sweeps from before it was a choice: PPO's clip
    )


def score_window(sweep: SweepData) -> int:
    trainer = (sweep.saved.get("trainer") or {}) if sweep.saved else {}
    return int(((trainer.get("eval") or {}).get("score_window")) or DEFAULT_WINDOW)


def judge(sweep: SweepData, statuses: dict[str, str], th: Thresholds | None = None) -> list[Judged]:
    """Every trial judged, #1 first (``sweep.verdict.pick``: the middle of the learners within noise of the best
    gain), then ``sweep.verdict.score.rank``'s order."""
    th = th or Thresholds()
    training = not uses_eval(sweep)
    size = TRAIN_WINDOW if training else score_window(sweep)
    groups: dict[str, list[TrialData]] = defaultdict(list)
    bases: dict[str, EvalPoint | None] = {}
    for trial in sweep.trials:
        base, _, key = eval_points(trial, training)
        groups[key].append(trial)
        bases[key] = bases.get(key) or base
    scores: dict[str, Score] = {}
    keys: dict[str, str] = {}
    errored = {name for name, status in statuses.items() if status == "error"}
    for key, members in groups.items():
        evals = {t.trial_id: eval_points(t, training)[1] for t in members}
        base = bases[key]
        if base is None:
            scores.update({t.trial_id: Score(None) for t in members})
        else:
            finished = {t.trial_id for t in members if statuses.get(t.trial_id) == "finished"}
            scores.update(score_trials(base, evals, size, common_budget(evals, finished), errored=errored))
        keys.update({t.trial_id: key for t in members})
    scores = _ties_only_beside_the_winner(scores, keys, errored)
    by_id = {t.trial_id: t for t in sweep.trials}
    evidences = {name: evidence(by_id[name], statuses.get(name, "finished"), training) for name in scores}
    policies = {t.trial_id: policy_key(t, keys[t.trial_id]) for t in sweep.trials}
    scales = {policy: update_scale([(evidences[n], scores[n]) for n in scores if policies[n] == policy], th) for policy in set(policies.values())}
    verdicts = {name: verdict(evidences[name], scores[name], th, scales[policies[name]]) for name in scores}
    order, scores = _middle_of_the_band(rank(scores, errored), scores, verdicts, evidences, errored)
    return [Judged(name, scores[name], verdicts[name], evidences[name], keys[name]) for name in order]


def policy_key(trial: TrialData, group: str) -> str:
    """Which base policy a trial trains: its saved trainer config's model recipe (``sweep.spec.bases.BASE_KEYS``). The
    update size that learns is the policy's, so trials of one base whose evals differ (an eval-only key swept, each
    value its own base eval) share one scale; a trial without a saved config keeps its base eval's ``group``."""
    if not trial.trainer_config:
        return group
    return json.dumps({key: get_dotted(trial.trainer_config, key) for key in sorted(BASE_KEYS)}, sort_keys=True, default=str)


def _middle_of_the_band(order: list[str], scores: dict[str, Score], verdicts: dict[str, Verdict],
                        evidences: dict[str, TrialEvidence], errored: set[str]) -> tuple[list[str], dict[str, Score]]:
    """The ranking with ``sweep.verdict.pick.middle_learner``'s #1 first, the rest by gain; the best gain, now
    beside it, marked tied (within noise of #1, as #1 is of it). The band's members: trials that did not fail,
    labelled learns, that rose beyond noise by their own evals."""
    if not order or scores[order[0]].gain is None:
        return order, scores
    best = order[0]
    rose = {n for n, v in verdicts.items() if v.label == "learns" and scores[n].moved == "rose" and n not in errored}
    first = middle_learner(best, [n for n in order[1:] if scores[n].tied], rose, {n: e.update_kl for n, e in evidences.items()})
    if first == best:
        return order, scores
    scores = {**scores, first: replace(scores[first], tied=False), best: replace(scores[best], tied=True)}
    return [first, *(n for n in order if n != first)], scores


def _ties_only_beside_the_winner(scores: dict[str, Score], keys: dict[str, str], errored: set[str]) -> dict[str, Score]:
    """Ties were computed within each base's group: keep them only in the overall winner's group."""
    first = winner(scores, errored)
    if first is None:
        return scores
    return {name: s if keys[name] == keys[first] else Score(**{**s.__dict__, "tied": False}) for name, s in scores.items()}


def row(j: Judged, config: dict[str, Any]) -> dict[str, Any]:
    """A judged trial as the leaderboard stores it."""
    s = j.score
    base = j.evidence.base.pass_at_1 if j.evidence.base else None
    return {"trial": j.trial_id, "config": config, "base": base, "last": j.last, "gain": s.gain, "low": s.low, "high": s.high,
            "tied": s.tied, "window": list(s.steps), "budget_episodes": s.budget, "verdict": j.verdict.label, "why": j.verdict.why,
            "lr_advice": j.verdict.lr}
