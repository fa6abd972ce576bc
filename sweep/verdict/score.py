"""A trial's score and the sweep's ranking: pure functions over eval points, hand-tested.

The score is the gain of held-out pass@1 over the shared base: the mean of the trial's last ``window``
trained evals minus the base's, never a maximum (a maximum over a noisy curve crowns the luckiest draw,
and one that includes step 0 crowns the base itself). Noise: the evals are over a fixed set of held-out
tasks, and a task's episodes are correlated (a binomial over episodes alone would be far too narrow), so
the interval is a two-stage bootstrap: each resample draws tasks with replacement (the same tasks for the
base, every eval and every trial: paired), then each drawn task's passes again from its binomial (its
episodes, at its observed rate), for the base and each eval apart. The second stage matters because every
eval samples with the same seed: a policy that barely moved draws nearly the same episodes as the base,
and a bootstrap over tasks alone would call a +0.01 "above noise" (it did, on the ground truth's LR 1e-6).
A trial's interval depends on its evals, the base's and the seed, not on the sweep's other trials.
Ties: a trial is tied with the best gain when the best's lead over it is not above zero in 95% of resamples
(the sweep's #1 is the middle of the learners so tied: ``sweep.verdict.pick``). Cost: when trials spend different rollout episodes per step (``n`` swept), the window
is cut at the episodes the cheapest finished trial spent, so trials are compared at equal compute.
Ranking by gain: trials that fell below the base by more than noise come after every trial that held or rose;
errors and trials without a trained eval come last.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.9  # the interval's coverage
BOOTSTRAP = 2000
TIE_QUANTILE = 0.05  # tied unless the winner leads in 95% of resamples
UNPAIRED_MARGIN = 0.05  # without per-task results (no interval), a gain within this of 0 counts as held


@dataclass(frozen=True)
class EvalPoint:
    """One held-out eval: after ``step`` updates (0: the base), its pass@1 over tasks, the per-task
    ``(passes, valid episodes)`` when known, and the rollout episodes the trial had spent by then."""

    step: int
    pass_at_1: float
    tasks: Mapping[str, tuple[int, int]] | None = None
    episodes: float | None = None


@dataclass(frozen=True)
class Score:
    gain: float | None  # None: no trained eval to score
    low: float | None = None  # the interval (None without per-task results)
    high: float | None = None
    steps: tuple[int, ...] = ()  # the evals averaged
    budget: float | None = None  # episodes the window was cut at (None: no cut)
    tied: bool = False  # within noise of the best gain (the best itself: False, until another is #1: ``sweep.report.judge``)

    @property
    def moved(self) -> str:
        """``rose`` (interval above 0), ``fell`` (below), ``held`` (contains it), ``unknown``."""
        if self.gain is None:
            return "unknown"
        if self.low is None or self.high is None:
            return "rose" if self.gain >= UNPAIRED_MARGIN else "fell" if self.gain <= -UNPAIRED_MARGIN else "held"
        return "rose" if self.low > 0 else "fell" if self.high < 0 else "held"


def window(evals: Sequence[EvalPoint], size: int, budget: float | None = None) -> list[EvalPoint]:
    """The last ``size`` trained evals (step ≥ 1) spent within ``budget`` episodes."""
    return within(evals, budget)[-size:]


def within(evals: Sequence[EvalPoint], budget: float | None) -> list[EvalPoint]:
    """The trained evals (step ≥ 1), oldest first, spent within ``budget`` episodes (None: all; an eval whose
    episodes are unknown counts as within)."""
    trained = [e for e in sorted(evals, key=lambda e: e.step) if e.step >= 1]
    return trained if budget is None else [e for e in trained if e.episodes is None or e.episodes <= budget + 1e-9]


def common_budget(trials: Mapping[str, Sequence[EvalPoint]], finished: set[str]) -> float | None:
    """The episodes the cheapest finished trial spent by its last eval, when finished trials spent
    different amounts (else None: steps are already equal compute)."""
    spent = {max(e.episodes for e in evals) for name, evals in trials.items() if name in finished for e in evals[-1:]
             if all(p.episodes is not None for p in evals)}
    return min(spent) if len(spent) > 1 else None


def _counts(points: Sequence[EvalPoint], tasks: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(passes, valid)`` per point and task, ``(W, K)`` each (0 valid where a point has no episode of a task)."""
    passes = np.zeros((len(points), len(tasks)))
    valid = np.zeros((len(points), len(tasks)))
    for i, point in enumerate(points):
        for j, task in enumerate(tasks):
            passes[i, j], valid[i, j] = (point.tasks or {}).get(task, (0, 0))
    return passes, valid


def _window_rates(passes: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per task (last axis), its pass rate averaged over the points (axis -2); NaN where no point has an episode of it."""
    with np.errstate(all="ignore"):
        return np.nanmean(np.where(valid > 0, passes / np.where(valid > 0, valid, 1), np.nan), axis=-2)


def _redrawn(passes: np.ndarray, valid: np.ndarray, picks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``(B, K)``: per resample, the picked tasks' window rates with each point's passes drawn again from its
    binomial (stage two of the bootstrap)."""
    n = valid[:, picks]  # (W, B, K)
    rate = np.where(n > 0, passes[:, picks] / np.where(n > 0, n, 1), 0.0)
    drawn = rng.binomial(n.astype(np.int64), rate)
    return _window_rates(np.moveaxis(drawn, 0, -2), np.moveaxis(n, 0, -2))


def _stream(seed: int, counts: tuple[np.ndarray, np.ndarray]) -> np.random.Generator:
    """A trial's own draws for stage two, keyed by its eval counts: its interval depends on its evals, the
    base's and the seed alone, not on which other trials the sweep holds or the order it lists them in."""
    passes, valid = counts
    return np.random.default_rng([seed, zlib.crc32(passes.tobytes() + valid.tobytes())])


def task_interval(counts: Mapping[str, tuple[int, int]], minus: Mapping[str, tuple[int, int]] | None = None,
                  draws: int = BOOTSTRAP, seed: int = 0) -> tuple[float, float, float]:
    """One eval's mean per-task pass rate (``counts``: task -> (passes, episodes)), or its difference from
    another eval's over the tasks both have (``minus``, paired by task), with the 90% interval of the same
    two-stage bootstrap: tasks drawn with replacement (the same for both), then each drawn task's passes
    again from its binomial. Tasks without an episode are left out; none left: NaNs."""
    tasks = sorted(k for k in counts if counts[k][1] > 0 and (minus is None or (k in minus and minus[k][1] > 0)))
    if not tasks:
        return float("nan"), float("nan"), float("nan")

    def arrays(c: Mapping[str, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        return np.array([[c[t][0] for t in tasks]], float), np.array([[c[t][1] for t in tasks]], float)

    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(tasks), (draws, len(tasks)))
    first = arrays(counts)
    rates, resampled = _window_rates(*first), _redrawn(*first, picks, rng)
    if minus is not None:
        second = arrays(minus)
        rates, resampled = rates - _window_rates(*second), resampled - _redrawn(*second, picks, rng)
    low, high = np.quantile(resampled.mean(axis=1), [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(rates.mean()), float(low), float(high)


def score_trials(base: EvalPoint, trials: Mapping[str, Sequence[EvalPoint]], size: int, budget: float | None = None,
                 draws: int = BOOTSTRAP, seed: int = 0, errored: set[str] | None = None) -> dict[str, Score]:
    """Every trial's score against one base, the intervals from one two-stage bootstrap over the base's
    tasks (a trial whose window lacks per-task results, its eval dumps lost, has no interval: the others keep
    theirs); the winner (``rank``'s first, ``errored`` trials last) gets the others' ties."""
    tasks = sorted(base.tasks or {})
    windows = {name: window(evals, size, budget) for name, evals in trials.items()}
    scores: dict[str, Score] = {}
    resampled: dict[str, np.ndarray] = {}
    if tasks:
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, len(tasks), (draws, len(tasks)))
        base_counts = _counts([base], tasks)
        base_rates, base_draws = _window_rates(*base_counts), _redrawn(*base_counts, picks, rng)
    for name, points in windows.items():
        if not points:
            scores[name] = Score(None, budget=budget)
        elif tasks and all(p.tasks for p in points):
            counts = _counts(points, tasks)
            with np.errstate(all="ignore"):
                gain = float(np.nanmean(_window_rates(*counts) - base_rates))
                resampled[name] = np.nanmean(_redrawn(*counts, picks, _stream(seed, counts)) - base_draws, axis=1)
            low, high = np.nanquantile(resampled[name], [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
            scores[name] = Score(gain, float(low), float(high), tuple(p.step for p in points), budget)
        else:
            gain = float(np.mean([p.pass_at_1 for p in points]) - base.pass_at_1)
            scores[name] = Score(gain, steps=tuple(p.step for p in points), budget=budget)
    return _with_ties(scores, resampled, errored)


def winner(scores: Mapping[str, Score], errored: set[str] | None = None) -> str | None:
    """The best gain by ``rank``'s order among trials with a gain (the one ties are counted against, also between equal
    gains; a trial that errored, ranked last, is none); the sweep's #1 is chosen among it and its ties
    (``sweep.verdict.pick``)."""
    scored = {name: s for name, s in scores.items() if s.gain is not None}
    return rank(scored, errored)[0] if scored else None


def _with_ties(scores: dict[str, Score], resampled: Mapping[str, np.ndarray], errored: set[str] | None) -> dict[str, Score]:
    first = winner(scores, errored)
    if first not in resampled:  # no winner, or no per-task results to resample
        return scores
    out = dict(scores)
    for name in resampled:
        if name != first and name not in (errored or ()):  # an errored trial is ranked last, within noise of no one
            lead = resampled[first] - resampled[name]
            out[name] = Score(**{**scores[name].__dict__, "tied": bool(np.nanquantile(lead, TIE_QUANTILE) <= 0)})
    return out


def rank(scores: Mapping[str, Score], errored: set[str] | None = None) -> list[str]:
    """Best first: rose or held by gain, then fell by gain, then trials without a trained eval; errors last."""
    errored = errored or set()

    def key(name: str) -> tuple:
        s = scores[name]
        return (name in errored, s.gain is None, s.moved == "fell", -(s.gain or 0.0), name)

    return sorted(scores, key=key)
