"""One verdict per trial, with its evidence: the labels are mutually exclusive by construction.

The rules run in a fixed order and the first that holds decides, so a trial is never both "LR too low"
and "LR too high". A rule says a likely cause with the numbers that make it so; it never speaks where its
evidence cannot exist: the clip fraction is read only where clipping can happen (more than one optimizer
step per rollout batch; the first step is on-policy, its ratio is 1) and only under PPO's token clip
(``algorithm.policy_loss: ppo_clip``), and the update's size is measured directly (``policy/update_kl``:
the policy before vs after each step's update; ``policy/update_norm``), against the sweep's own learners over
the steps both ran (``UpdateScale``): no absolute scale, and no bias from a decaying LR schedule.

    error        the trial failed (after trained evals too: the rules' reading of them follows the error in its words)
    no eval      it stopped before its first trained eval: nothing held out to judge
    too high     held-out pass@1 fell below the base by more than noise, or rose and collapsed back
    no signal    every group's rewards were equal at every step: nothing to learn from
    learns       held-out pass@1 rose above the base by more than noise
    too high     it held, so far, its updates were far larger than the largest that learned in the same sweep, and its
                 curves show a sign of a fall (KL to the reference, entropy, clip fraction or failed tool turns rising);
                 or its update KL was not a finite number at some step (the update overflowed)
    too low      it held, and its updates were far smaller than the gentlest that learned in the same sweep
    env-limited  it held, and the base already solves (or never solves) the held-out tasks
    learns       it held within noise, its estimate a gain worth having (≥ ``min_delta``), and its updates lie
                 between two learners' of the same sweep (the LR order: no dip between two sizes that both learn)
    undecided    it held within noise, yet its estimate is a change worth having (|gain| ≥ ``min_delta``):
                 too few evals to tell learning (or harm) from noise
    flat         it held, by less than ``min_delta``, although the updates moved the policy (its advice by where its
                 updates stand among the learners': below them a higher LR, above them a lower one; so a trial with
                 huge updates and no sign of a fall yet is flat, advised a lower LR)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import fmean, median

from grpo.losses import POLICY_LOSS_SPECS
from sweep.verdict.score import EvalPoint, Score
from sweep.verdict.thresholds import EPS, Thresholds

LABELS = ("learns", "too low", "too high", "no signal", "env-limited", "undecided", "flat", "no eval", "error")


@dataclass(frozen=True)
class TrialEvidence:
    """What the rules read about one trial: its fate, its held-out evals (``base`` is step 0) and per-step
    training curves, oldest first (empty when not reported)."""

    trial_id: str
    status: str = "finished"
    error: str = ""
    base: EvalPoint | None = None
    evals: list[EvalPoint] = field(default_factory=list)
    variance_per_prompt: list[float] = field(default_factory=list)
    update_kl: list[float] = field(default_factory=list)
    update_norm: list[float] = field(default_factory=list)
    clip_frac: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    tool_error_rate: list[float] = field(default_factory=list)
    optimizer_steps: int = 1  # optimizer steps per rollout batch (mini_batches x ppo_epochs)
    policy_loss: str = "ppo_clip"  # algorithm.policy_loss (sweeps from before it was a choice: PPO's clip)


@dataclass(frozen=True)
class Comparison:
    """A trial's update size against one learner's, over the steps both ran (``UpdateScale.against``)."""

    ratio: float  # the trial's median update KL over those steps / the learner's
    kl: float  # the trial's median over them
    learner_kl: float  # the learner's
    learner: str
    steps: int


@dataclass(frozen=True)
class UpdateScale:
    """What update size learns in this sweep: the per-step update KLs of the trials (of one base) that rose above
    the base beyond noise. A trial is compared with each over the first steps both ran, never median against
    median: under a decaying LR schedule a trial ASHA stopped at step 6 never reaches the small late steps
    that pull a 10-step trial's median down (by 5-10x in the demo's cosine)."""

    learners: tuple[tuple[str, tuple[float, ...]], ...]

    def against(self, update_kl: Sequence[float]) -> list[Comparison]:
        """``update_kl`` (a trial's per-step series) against every learner's, each over their common first steps."""
        out = []
        for name, series in self.learners:
            k = min(len(update_kl), len(series))
            mine, theirs = median(update_kl[:k]), median(series[:k])
            out.append(Comparison(mine / theirs if theirs > 0 else float("inf"), mine, theirs, name, k))
        return out

    def extremes(self, update_kl: Sequence[float]) -> tuple[Comparison, Comparison]:
        """(against the gentlest learner, against the largest): the comparisons with the highest and the lowest ratio."""
        against = self.against(update_kl)
        return max(against, key=lambda c: c.ratio), min(against, key=lambda c: c.ratio)


def update_scale(trials: Sequence[tuple[TrialEvidence, Score]], th: Thresholds | None = None) -> UpdateScale | None:
    """The sweep's own scale of update size (``UpdateScale``), or None when no trial with a measured update learned
    (then nothing in the sweep says how big an update must be). Learners only: a trial that fell says how big
    an update may be, not how small."""
    th = th or Thresholds()
    learners = tuple(sorted((t.trial_id, tuple(t.update_kl)) for t, s in trials
                            if t.update_kl and not overflowed(t.update_kl) and s.moved == "rose" and not _collapse(t, th)))
    return UpdateScale(learners) if learners else None


@dataclass(frozen=True)
class Verdict:
    label: str
    why: str
    lr: str = ""  # which way its advice moves the learning rate: "raise", "lower", or "" (its advice is about something else)


def _interval(s: Score) -> str:
    spread = f", {100 * 0.9:.0f}% interval [{s.low:+.3f}, {s.high:+.3f}]" if s.low is not None and s.high is not None else ""
    return f"gain {s.gain:+.3f}{spread} over the base (evals at steps {', '.join(map(str, s.steps))})"


def _clip_speaks(t: TrialEvidence) -> bool:
    """Whether the clip fraction says how far the update went: under a loss whose clip measures it
    (``grpo.losses``: PPO's token clip), where clipping can happen (more than one optimizer step per batch)."""
    spec = POLICY_LOSS_SPECS.get(t.policy_loss)
    return bool(t.clip_frac) and t.optimizer_steps > 1 and spec is not None and spec.clip_measures_update


def overflowed(update_kl: Sequence[float]) -> list[int]:
    """The steps (1 first) whose update KL is not a finite number: the update overflowed (a token's probability
    driven to 0, or weights gone NaN). Such a series says nothing of size by its median (NaN sorts anywhere), so no
    rule compares it: it is a sign of a fall itself."""
    return [step for step, value in enumerate(update_kl, start=1) if not math.isfinite(value)]


def _steps(steps: Sequence[int]) -> str:
    shown = ", ".join(map(str, steps[:5])) + (f" and {len(steps) - 5} more" if len(steps) > 5 else "")
    return f"step{'s' if len(steps) > 1 else ''} {shown}"


def _blowup(t: TrialEvidence, th: Thresholds) -> str:
    """What went wrong with the policy, where the curves say so."""
    signs = []
    if bad := overflowed(t.update_kl):
        signs.append(f"update KL not a finite number at {_steps(bad)}")
    if len(t.kl) >= 2 and t.kl[-1] > 10 * max(t.kl[0], 1e-6):
        signs.append(f"KL to the reference {t.kl[0]:.2g} → {t.kl[-1]:.2g}")
    if len(t.entropy) >= 2 and t.entropy[0] > 0 and t.entropy[-1] > 2 * t.entropy[0]:
        signs.append(f"entropy {t.entropy[0]:.3g} → {t.entropy[-1]:.3g}")
    if _clip_speaks(t) and fmean(t.clip_frac) > th.high_clip:  # clipping can happen, and did, a lot
        signs.append(f"mean clip fraction {fmean(t.clip_frac):.2f} > {th.high_clip:g}")
    if len(t.tool_error_rate) >= 2 and t.tool_error_rate[-1] > t.tool_error_rate[0] + 0.1:
        signs.append(f"failed tool turns {t.tool_error_rate[0]:.2f} → {t.tool_error_rate[-1]:.2f}")
    return f" ({'; '.join(signs)})" if signs else ""


def _collapse(t: TrialEvidence, th: Thresholds) -> tuple[EvalPoint, EvalPoint] | None:
    """(peak, last) when the trial rose and fell back: the last eval at least ``collapse`` below its best
    trained one and at or below the base (plus ``min_delta``)."""
    trained = [e for e in t.evals if e.step >= 1]
    if len(trained) < 2 or t.base is None:
        return None
    peak, last = max(trained, key=lambda e: e.pass_at_1), trained[-1]
    if peak.pass_at_1 - last.pass_at_1 >= th.collapse - EPS and last.pass_at_1 <= t.base.pass_at_1 + th.min_delta + EPS and peak is not last:
        return peak, last
    return None


def _tiny_update(t: TrialEvidence, th: Thresholds, scale: UpdateScale | None) -> str | None:
    """The evidence that the updates were too small, or None: the measured update size against the sweep's own
    scale (``update_scale``) where reported; in sweeps from before it was, the clip fraction where clipping can
    happen, with a negligible KL."""
    if t.update_kl:
        if scale is None:
            return None
        gentlest, _ = scale.extremes(t.update_kl)  # the learner nearest the trial: it must be below all
        if gentlest.ratio >= th.tiny_update_ratio:
            return None
        norm = f", |Δθ|/|θ| {median(t.update_norm):.1e}" if t.update_norm else ""
        return _against_words(gentlest, norm, f"the gentlest update that learned in this sweep (below {th.tiny_update_ratio:g}x)")
    if _clip_speaks(t) and fmean(t.clip_frac) < th.low_clip and (not t.kl or max(t.kl) < 1e-4):
        return f"mean clip fraction {fmean(t.clip_frac):.1e} < {th.low_clip:g} over {t.optimizer_steps} optimizer steps per batch"
    return None


def _huge_update(t: TrialEvidence, th: Thresholds, scale: UpdateScale | None) -> str | None:
    """The evidence that the updates were too large for a trial that has not fallen yet, or None: its update KL
    against the largest that learned in this sweep (``update_scale``), over the same steps."""
    if not t.update_kl or scale is None:
        return None
    _, largest = scale.extremes(t.update_kl)  # the learner nearest the trial: it must be above all
    if largest.ratio <= th.huge_update_ratio:
        return None
    return _against_words(largest, "", f"the largest update that learned in this sweep (above {th.huge_update_ratio:g}x)")


def _held_too_high(t: TrialEvidence, th: Thresholds, scale: UpdateScale | None) -> str | None:
    """The evidence that a trial that held is too high, or None: updates far larger than any learner's and a sign of
    a fall in its curves. Huge updates alone go on to the later rules (flat, advised a lower LR): taken 2026-12-01 by
    the test written before mix tuning seeds 5-9 ran (docs/decisions.md; ``bench/shoulder_variant.py``)."""
    if overflowed(t.update_kl):
        return f"with updates that overflowed{_blowup(t, th)}"
    huge = _huge_update(t, th, scale)
    signs = _blowup(t, th) if huge else ""
    return f"with updates far larger than any that learned: {huge}{signs}" if huge and signs else None


def _against_words(c: Comparison, norm: str, what: str) -> str:
    """A comparison of update sizes in words, for both rules."""
    return (f"median update KL {c.kl:.1e}{norm} over its first {c.steps} steps, {c.ratio:.2g}x that of trial {c.learner} over the same steps "
            f"({c.learner_kl:.1e}), {what}")


def _unscored(t: TrialEvidence, s: Score) -> Verdict:
    """A trial with no trained eval to score: it failed, stopped before one, or (``n`` swept) its first cost more
    episodes than the sweep's common budget."""
    if t.status == "error":
        return Verdict("error", t.error or "the trial failed before its first trained eval")
    late = [e for e in sorted(t.evals, key=lambda e: e.step) if e.step >= 1 and e.episodes is not None]
    if s.budget is not None and late:  # its first trained eval cost more episodes than the cheapest trial's whole run
        return Verdict("no eval", f"its first trained eval (step {late[0].step}, {late[0].episodes:.0f} episodes) came after the sweep's "
                                  f"common budget of {s.budget:.0f} episodes (the cheapest finished trial's: trials are compared at "
                                  "equal episodes), so it has none to compare; an eval interval of fewer steps would give it one")
    return Verdict("no eval", f"{t.status} before its first trained eval: nothing held out to judge")


def verdict(t: TrialEvidence, s: Score, th: Thresholds | None = None, scale: UpdateScale | None = None) -> Verdict:
    """The first rule that holds, in the module's order; ``scale``: the sweep's own update size (``update_scale``).
    A trial that failed after trained evals is an error (ranked last, counted among the failed, no LR advice: the
    failure is what to mend first), its evals' reading kept in the words."""
    th = th or Thresholds()
    if s.gain is None:
        return _unscored(t, s)
    read = _scored(t, s, th, scale)
    if t.status == "error":
        return Verdict("error", f"failed after its evals ({t.error or 'no error message'}); until then: {read.label}, {read.why}")
    return read


def _scored(t: TrialEvidence, s: Score, th: Thresholds, scale: UpdateScale | None) -> Verdict:
    """The rules, in the module's order, for a trial with a trained eval."""
    collapsed = _collapse(t, th)
    if s.moved == "fell":
        return Verdict("too high", f"held-out pass@1 fell below the base: {_interval(s)}{_blowup(t, th)}; lower the LR or raise kl_coef", "lower")
    if collapsed:
        peak, last = collapsed
        return Verdict("too high", f"held-out pass@1 rose to {peak.pass_at_1:.3f} at step {peak.step}, then fell back to {last.pass_at_1:.3f} "
                                   f"at step {last.step} (base {t.base.pass_at_1:.3f}){_blowup(t, th)}; lower the LR or raise kl_coef", "lower")
    if t.variance_per_prompt and max(t.variance_per_prompt) <= th.no_signal + EPS:
        return Verdict("no signal", f"reward/variance_per_prompt ≤ {th.no_signal:g} at all {len(t.variance_per_prompt)} steps: every group's "
                                    "rewards were equal (other tasks, more samples per prompt or another base)")
    if s.moved == "rose":
        return Verdict("learns", f"held-out pass@1 rose: {_interval(s)}")
    if held := _held_too_high(t, th, scale):
        return Verdict("too high", f"held-out pass@1 held ({_interval(s)}), so far, {held}; "
                                   "lower the LR or raise kl_coef", "lower")
    if tiny := _tiny_update(t, th, scale):
        return Verdict("too low", f"held-out pass@1 held ({_interval(s)}) and the updates were too small to move it: {tiny}; raise the LR", "raise")
    base = t.base.pass_at_1 if t.base else None
    if base is not None and (base >= th.saturated - EPS or base <= th.failing + EPS):
        where = "already solves" if base >= th.saturated - EPS else "almost never solves"
        return Verdict("env-limited", f"held-out pass@1 held ({_interval(s)}); the base {where} the held-out tasks ({base:.3f})")
    if abs(s.gain) >= th.min_delta - EPS:  # "held" would claim more than the evals show: a single eval's interval is ~±0.1
        if s.gain > 0 and (between := _between_learners(t, scale)):
            return Verdict("learns", f"held-out pass@1 within noise of the base alone ({_interval(s)}), a gain of ≥ {th.min_delta:g}, and its "
                                     f"updates lie between those of two trials that rose beyond noise in this sweep: {between}")
        direction = "gain" if s.gain > 0 else "loss"
        evals = f"{len(s.steps)} eval{'s' if len(s.steps) != 1 else ''}"
        return Verdict("undecided", f"held-out pass@1 within noise of the base ({_interval(s)}), yet the estimate is a {direction} of "
                                    f"≥ {th.min_delta:g}: {evals} cannot tell it from noise; more steps (`sweep confirm`) or more eval tasks")
    where, lr = _flat_updates(t, scale)
    return Verdict("flat", f"held-out pass@1 held ({_interval(s)}){where}", lr)


def _between_learners(t: TrialEvidence, scale: UpdateScale | None) -> str | None:
    """The evidence that an undecided gain is learning, or None: the trial's updates at least as large as one
    learner's and at most as large as another's (each pair over the steps both ran). Held-out pass@1 does not
    dip between two update sizes that both learn (the LR order the truth grids show: one band of learners,
    too low below it and too high above): its own evals are too few to tell; its neighbours' can."""
    if not t.update_kl or scale is None:
        return None
    smaller, larger = scale.extremes(t.update_kl)
    if smaller is larger or smaller.ratio < 1 or larger.ratio > 1:
        return None
    return (f"median update KL {smaller.kl:.1e} over its first {smaller.steps} steps, {smaller.ratio:.2g}x that of trial {smaller.learner} "
            f"({smaller.learner_kl:.1e}), and {larger.ratio:.2g}x that of trial {larger.learner} over its first {larger.steps} steps "
            f"({larger.learner_kl:.1e}); pass@1 does not dip between two update sizes that both learn")


def _flat_updates(t: TrialEvidence, scale: UpdateScale | None) -> tuple[str, str]:
    """Where a flat trial's updates stand among the sweep's learners', and the advice that follows (the words after
    its interval, and the way they move the LR): no learner to compare with, widen the LR range upward; below every
    learner's (yet above "too low"), a higher LR; above every one (yet below "too high"), a lower LR; among them, or
    no update measured, the update size is not what held it."""
    if not t.update_kl:
        return " though the updates moved the policy: more steps, or another KL or n", ""
    if scale is None:
        return (f", median update KL {median(t.update_kl):.1e}; no trial of this sweep learned, so nothing here says whether that update is "
                "small: widen the LR range (upward first)", "raise")
    gentlest, largest = scale.extremes(t.update_kl)
    if gentlest.ratio < 1:
        return f" though the updates moved the policy, less than any learner did: {_against_words(gentlest, '', 'the gentlest update that learned in this sweep')}; a higher LR, or more steps", "raise"
    if largest.ratio > 1:
        return (f" though the updates moved the policy, more than any learner did: {_against_words(largest, '', 'the largest update that learned in this sweep')}; a lower LR or a "
                "higher kl_coef, or more steps to see whether it falls", "lower")
    return f" though the updates moved the policy as much as the learners did (median update KL {median(t.update_kl):.1e}, within theirs): more steps, or another KL or n", ""
