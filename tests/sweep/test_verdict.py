"""The verdict on hand-made histories: the score, its noise, the ranking and one label per trial."""

from __future__ import annotations

import pytest

from sweep.report.judge import _middle_of_the_band
from sweep.verdict.labels import LABELS, TrialEvidence, Verdict, update_scale, verdict
from sweep.verdict.pick import middle_learner
from sweep.verdict.score import EvalPoint, Score, common_budget, rank, score_trials, window
from sweep.verdict.summary import verdict_text
from sweep.verdict.thresholds import Thresholds

TASKS = [f"hotel-{i:02d}" for i in range(20)]


def point(step: int, rate: float, episodes: float | None = None, n: int = 16, spread: float = 0.0) -> EvalPoint:
    """An eval of 20 tasks whose pass rates average ``rate`` (task i offset by ``spread`` x (i - 9.5) / 9.5),
    each task's passes drawn from its binomial with a seed of its own, as a real eval's would be."""
    import numpy as np

    rng = np.random.default_rng([step, round(rate * 1000), round(spread * 1000)])
    tasks = {}
    for i, key in enumerate(TASKS):
        p = min(1.0, max(0.0, rate + spread * (i - 9.5) / 9.5))
        tasks[key] = (int(rng.binomial(n, p)), n)
    mean = sum(c / v for c, v in tasks.values()) / len(tasks)
    return EvalPoint(step, mean, tasks, episodes)


BASE = point(0, 0.3, spread=0.25)


def test_the_score_is_the_window_mean_minus_the_base_by_hand():
    base = EvalPoint(0, 0.25, {"a": (1, 4), "b": (0, 4)})  # task rates 0.25 and 0
    evals = [EvalPoint(5, 0.875, {"a": (4, 4), "b": (3, 4)}), EvalPoint(10, 0.5, {"a": (2, 4), "b": (2, 4)}), EvalPoint(15, 0.25, {"a": (1, 4), "b": (1, 4)})]
    [s] = score_trials(base, {"t": evals}, size=2).values()
    # the last two evals: task a (0.5 + 0.25) / 2 = 0.375, task b (0.5 + 0.25) / 2 = 0.375; minus the base's 0.25 and 0
    assert s.gain == pytest.approx(((0.375 - 0.25) + (0.375 - 0.0)) / 2) and s.steps == (10, 15)
    assert s.low <= s.gain <= s.high
    without_tasks = score_trials(EvalPoint(0, 0.25), {"t": [EvalPoint(s_, p) for s_, p in ((5, 0.875), (10, 0.5), (15, 0.25))]}, size=2)
    assert without_tasks["t"].gain == pytest.approx(0.375 - 0.25) and without_tasks["t"].low is None  # no per-task results: no interval


def test_a_collapsed_trial_with_the_best_early_score_ranks_below_a_slow_learner():
    collapsed = [point(5, 0.55, spread=0.25), point(10, 0.05), point(15, 0.0)]  # the best single eval of the sweep, then gone
    slow = [point(5, 0.33, spread=0.25), point(10, 0.40, spread=0.25), point(15, 0.43, spread=0.25)]
    flat = [point(5, 0.3, spread=0.25), point(10, 0.31, spread=0.25), point(15, 0.29, spread=0.25)]
    scores = score_trials(BASE, {"collapsed": collapsed, "slow": slow, "flat": flat}, size=2)
    assert scores["collapsed"].moved == "fell" and scores["slow"].moved == "rose" and scores["flat"].moved == "held"
    assert rank(scores) == ["slow", "flat", "collapsed"]
    assert max(e.pass_at_1 for e in collapsed) > max(e.pass_at_1 for e in slow)  # a maximum would have crowned it
    assert verdict(TrialEvidence("collapsed", evals=collapsed, base=BASE), scores["collapsed"]).label == "too high"
    assert verdict(TrialEvidence("slow", evals=slow, base=BASE), scores["slow"]).label == "learns"


def test_a_fall_below_the_base_never_ranks_above_a_trial_that_held():
    scores = {"fell": Score(-0.02, -0.04, -0.005), "held": Score(-0.03, -0.09, 0.02), "none": Score(None)}
    assert rank(scores) == ["held", "fell", "none"]
    assert rank({"a": Score(0.2, 0.1, 0.3), "b": Score(0.1, 0.05, 0.2)}, errored={"a"}) == ["b", "a"]


def test_trials_within_noise_of_the_winner_are_ties():
    scores = score_trials(BASE, {
        "winner": [point(10, 0.45, spread=0.25), point(15, 0.46, spread=0.25)],
        "close": [point(10, 0.44, spread=0.25), point(15, 0.45, spread=0.25)],
        "behind": [point(10, 0.31, spread=0.25), point(15, 0.30, spread=0.25)],
    }, size=2)
    assert rank(scores)[0] == "winner" and not scores["winner"].tied
    assert scores["close"].tied and not scores["behind"].tied


def test_between_equal_gains_the_ranking_s_first_is_the_winner_and_the_other_is_tied():
    """Gains are counts over a fixed set of eval episodes, so two trials can score exactly the same: the one
    ranked first is the winner, never marked tied, and the other is tied with it (trial ids decide the order)."""
    evals = [point(10, 0.45, spread=0.25), point(15, 0.46, spread=0.25)]
    again = [EvalPoint(e.step, e.pass_at_1, {k: v for k, v in reversed(e.tasks.items())}) for e in evals]  # the same counts
    for first, second in (("a", "b"), ("b", "a")):
        scores = score_trials(BASE, {second: again, first: evals}, size=2)
        assert scores["a"].gain == scores["b"].gain and rank(scores) == ["a", "b"]
        assert not scores["a"].tied and scores["b"].tied


def test_a_trial_that_errored_sets_no_ties_and_is_within_noise_of_no_one():
    """Ranked last, an errored trial is not the gain ties are counted against, whatever its evals showed before it
    failed: the others' ties are what they are without it."""
    evals = {"errored": [point(10, 0.62, spread=0.25), point(15, 0.64, spread=0.25)],
             "winner": [point(10, 0.45, spread=0.25), point(15, 0.46, spread=0.25)],
             "close": [point(10, 0.44, spread=0.25), point(15, 0.45, spread=0.25)]}
    scores = score_trials(BASE, evals, size=2, errored={"errored"})
    assert rank(scores, {"errored"}) == ["winner", "close", "errored"]
    assert (scores["winner"].tied, scores["close"].tied, scores["errored"].tied) == (False, True, False)
    counted_against_it = score_trials(BASE, evals, size=2)
    assert not counted_against_it["close"].tied  # far below the errored trial's gain: what ties were before


def test_a_first_that_is_no_learner_says_so_and_names_the_learners_below_it():
    """#1 by gain labelled too high (its rise collapsed by its last eval) with a learner below it: the verdict names
    the learner rather than saying no trial rose; with no learner, it says so."""
    scores = {"collapsed": Score(0.34, 0.27, 0.42, steps=(8, 10)), "learner": Score(0.31, 0.23, 0.39, tied=True, steps=(8, 10)),
              "flat": Score(0.0, -0.05, 0.05)}
    verdicts = {"collapsed": Verdict("too high", "", "lower"), "learner": Verdict("learns", ""), "flat": Verdict("flat", "")}
    text = verdict_text([(k, {}, scores[k], verdicts[k]) for k in ("collapsed", "learner", "flat")], 0.31)
    assert "verdict: too high. Trials labelled learns rank below it (learner): read #1's verdict" in text
    assert "No trial rose" not in text
    none = {**verdicts, "learner": Verdict("undecided", "")}
    assert "verdict: too high. No trial learns." in verdict_text([(k, {}, scores[k], none[k]) for k in ("collapsed", "learner", "flat")], 0.31)
    held = {"flat": Score(0.01, -0.04, 0.06)}
    assert "No trial rose above the base by more than noise." in verdict_text([("flat", {}, held["flat"], verdicts["flat"])], 0.31)


def test_a_trials_interval_depends_on_its_evals_not_on_the_other_trials():
    """The same trial's evals get the same interval alone, beside others, and whatever order the sweep
    lists its trials in (trial ids are random per run, so an order-dependent draw would move it)."""
    slow = [point(5, 0.33, spread=0.25), point(10, 0.40, spread=0.25)]
    others = {"flat": [point(5, 0.3, spread=0.25), point(10, 0.31, spread=0.25)], "high": [point(5, 0.5, spread=0.25), point(10, 0.52, spread=0.25)]}
    alone = score_trials(BASE, {"slow": slow}, size=2)["slow"]
    after = score_trials(BASE, {**others, "slow": slow}, size=2)["slow"]
    before = score_trials(BASE, {"slow": slow, **others}, size=2)["slow"]
    assert (alone.low, alone.high) == (after.low, after.high) == (before.low, before.high)
    assert alone.low < alone.gain < alone.high
    assert score_trials(BASE, {"slow": slow}, size=2, seed=1)["slow"].low != alone.low  # the seed still draws


def test_trials_that_spend_more_per_step_are_compared_at_equal_episodes():
    cheap = [point(5, 0.35, episodes=160), point(10, 0.40, episodes=320)]
    dear = [point(5, 0.38, episodes=320), point(10, 0.45, episodes=640)]
    budget = common_budget({"cheap": cheap, "dear": dear}, finished={"cheap", "dear"})
    assert budget == 320 and [p.step for p in window(dear, 2, budget)] == [5]
    assert common_budget({"a": cheap, "b": cheap}, finished={"a", "b"}) is None  # equal cost: no cut
    dearest = [point(5, 0.5, episodes=1280), point(10, 0.6, episodes=2560)]  # n 8x the cheap trial's: its first eval is past 320
    scores = score_trials(BASE, {"cheap": cheap, "dearest": dearest}, size=2, budget=budget)
    said = verdict(TrialEvidence("dearest", evals=dearest, base=BASE), scores["dearest"])
    assert scores["dearest"].gain is None and said.label == "no eval"
    assert said.why.startswith("its first trained eval (step 5, 1280 episodes) came after the sweep's common budget of 320 episodes")
    assert "before its first trained eval" in verdict(TrialEvidence("x", status="stopped early", base=BASE), Score(None, budget=320)).why


def test_one_label_per_trial_even_where_the_old_rules_contradicted():
    """LR 1.2e-4 in the demo drew both "flat, clip ≈ 0: LR too low" and "KL rising while pass@1 falls: LR too high"."""
    evals = [point(5, 0.30, spread=0.25), point(10, 0.27, spread=0.25)]
    evidence = TrialEvidence("t", evals=evals, base=BASE, clip_frac=[0.0] * 10, kl=[0.001 * i for i in range(1, 11)],
                             variance_per_prompt=[0.1] * 10, update_kl=[2e-3] * 10)
    s = score_trials(BASE, {"t": evals}, size=2)["t"]
    v = verdict(evidence, s)
    assert v.label in LABELS and v.label == "flat" and "update KL" in v.why


def test_the_clip_rule_is_silent_with_one_on_policy_step_per_batch():
    """With one optimizer step per rollout batch the ratio is 1 and nothing is ever clipped, whatever the LR."""
    evals = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    s = score_trials(BASE, {"t": evals}, size=2)["t"]
    old_sweep = {"evals": evals, "base": BASE, "clip_frac": [0.0] * 10, "kl": [1e-6] * 10, "variance_per_prompt": [0.1] * 10}
    assert verdict(TrialEvidence("t", optimizer_steps=1, **old_sweep), s).label == "flat"
    assert verdict(TrialEvidence("t", optimizer_steps=2, **old_sweep), s).label == "too low"


@pytest.mark.parametrize("scale", [1.0, 1e-4])
def test_too_low_is_measured_against_the_sweep_s_own_update_size(scale):
    """The same sweep at two scales (a tiny model's update KLs, and the same times 1e-4, as a large model's
    might be): the same labels, because "too low" compares a trial's update with the gentlest update that
    moved held-out pass@1 in its own sweep, not with an absolute KL."""
    held = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    rose = [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)]
    fell = [point(5, 0.10, spread=0.25), point(10, 0.05, spread=0.25)]
    scores = score_trials(BASE, {"tiny": held, "slow": held, "mid": held, "learner": rose, "high": fell}, size=2)
    kls = {"tiny": 3e-8, "slow": 4e-4, "mid": 1e-3, "learner": 2e-3, "high": 5e-2}
    trials = {k: TrialEvidence(k, evals=ev, base=BASE, update_kl=[kls[k] * scale] * 10, update_norm=[1e-7] * 10, variance_per_prompt=[0.1] * 10)
              for k, ev in (("tiny", held), ("slow", held), ("mid", held), ("learner", rose), ("high", fell))}
    found = update_scale([(trials[k], scores[k]) for k in trials])
    assert [name for name, _ in found.learners] == ["learner"]  # the learner's; the one that fell says nothing of "too small"
    labels = {k: verdict(trials[k], scores[k], scale=found) for k in trials}
    assert {k: v.label for k, v in labels.items()} == {"tiny": "too low", "slow": "too low", "mid": "flat", "learner": "learns", "high": "too high"}
    assert "0.2x that of trial learner" in labels["slow"].why  # an LR under half the learner's: too low, not flat
    # 3e-8 / 2e-3 = 1.5e-5 of the learner's update, below 0.25x (an LR about half the learner's); 1e-3 is 0.5x: moved, not by enough to show
    assert "1.5e-05x that of trial learner" in labels["tiny"].why and "raise the LR" in labels["tiny"].why
    # flat below every learner's update: the advice points up, as "too low"'s does, with the same comparison
    assert "less than any learner did" in labels["mid"].why and "0.5x that of trial learner" in labels["mid"].why
    assert "a higher LR" in labels["mid"].why and "lower" not in labels["mid"].why
    assert {k: v.lr for k, v in labels.items()} == {"tiny": "raise", "slow": "raise", "mid": "raise", "learner": "", "high": "lower"}  # the advice's way, for the bench


@pytest.mark.parametrize("scale", [1.0, 1e-4])
def test_too_high_by_update_size_is_measured_against_the_largest_learner(scale):
    """Mirror of "too low": a trial that held with updates far above the largest that learned in its sweep, and a
    sign of a fall in its curves, is too high (the grid's LRs past the band hold a few steps, then fall); the same
    updates with no sign yet are flat, advised a lower LR (the rule taken 2026-12-01 on the tuning seeds); one a
    few times above is flat; and the same sweep at 1e-4 the scale gets the same labels."""
    th = Thresholds()
    held = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    rose = [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)]
    huge = 4e-3 * th.huge_update_ratio * 3
    kls = {"gentle": 1e-3, "bold": 4e-3, "big": 4e-3 * th.huge_update_ratio / 3, "huge": huge, "quiet": huge}
    evals = {"gentle": rose, "bold": rose, "big": held, "huge": held, "quiet": held}
    failing = {"huge": [0.22] * 9 + [0.42]}  # failed tool turns rising by 0.2: a sign of a fall (0.1 is the bar)
    scores = score_trials(BASE, evals, size=2)
    trials = {k: TrialEvidence(k, evals=evals[k], base=BASE, update_kl=[kls[k] * scale] * 10, variance_per_prompt=[0.1] * 10,
                               tool_error_rate=failing.get(k, [0.22] * 10)) for k in kls}
    found = update_scale([(trials[k], scores[k]) for k in trials])
    labels = {k: verdict(trials[k], scores[k], th, found) for k in trials}
    assert {k: v.label for k, v in labels.items()} == {"gentle": "learns", "bold": "learns", "big": "flat", "huge": "too high", "quiet": "flat"}
    assert f"{3 * th.huge_update_ratio:.2g}x that of trial bold" in labels["huge"].why and "lower the LR" in labels["huge"].why
    assert "failed tool turns 0.22 → 0.42" in labels["huge"].why
    assert "more than any learner did" in labels["quiet"].why and "a lower LR" in labels["quiet"].why
    # flat above every learner's update: the advice points down, with the comparison to the largest learner
    assert "more than any learner did" in labels["big"].why and f"{th.huge_update_ratio / 3:.2g}x that of trial bold" in labels["big"].why
    assert "a lower LR" in labels["big"].why and "higher LR" not in labels["big"].why
    assert {k: v.lr for k, v in labels.items()} == {"gentle": "", "bold": "", "big": "lower", "huge": "lower", "quiet": "lower"}
    alone = update_scale([(trials["huge"], scores["huge"])])  # no learner: nothing says how big is too big
    assert alone is None and verdict(trials["huge"], scores["huge"], th, alone).label == "flat"


def test_a_flat_trial_whose_updates_match_the_learners_is_not_sent_up_or_down():
    """Updates between the sweep's gentlest and largest learner's: its update size is not what held it, so the advice
    names neither a higher nor a lower LR."""
    held = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    rose = [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)]
    kls, evals = {"gentle": 1e-3, "bold": 4e-3, "between": 2e-3}, {"gentle": rose, "bold": rose, "between": held}
    scores = score_trials(BASE, evals, size=2)
    trials = {k: TrialEvidence(k, evals=evals[k], base=BASE, update_kl=[kls[k]] * 10, variance_per_prompt=[0.1] * 10) for k in kls}
    v = verdict(trials["between"], scores["between"], scale=update_scale([(trials[k], scores[k]) for k in trials]))
    assert v.label == "flat" and "as much as the learners did" in v.why and "2.0e-03" in v.why
    assert "higher LR" not in v.why and "lower LR" not in v.why and v.lr == ""


def test_update_sizes_are_compared_over_the_steps_both_ran():
    """Under a decaying LR schedule a 10-step learner's late steps are tiny, and a trial ASHA stopped at step 4
    never reaches them: median against median would call a 200x smaller update 50x larger (too high). Over the
    first 4 steps of both, it is 0.005x: too low."""
    held = [point(2, 0.30, spread=0.25), point(4, 0.30, spread=0.25)]
    rose = [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)]
    scores = score_trials(BASE, {"stopped": held, "learner": rose}, size=2)
    learner = TrialEvidence("learner", evals=rose, base=BASE, update_kl=[1e-3] * 4 + [1e-7] * 6, variance_per_prompt=[0.1] * 10)
    stopped = TrialEvidence("stopped", evals=held, base=BASE, update_kl=[5e-6] * 4, variance_per_prompt=[0.1] * 4)
    scale = update_scale([(learner, scores["learner"]), (stopped, scores["stopped"])])
    [c] = scale.against(stopped.update_kl)
    assert (c.steps, c.learner, c.kl, c.learner_kl) == (4, "learner", 5e-6, 1e-3) and c.ratio == pytest.approx(0.005)
    v = verdict(stopped, scores["stopped"], Thresholds(), scale)
    assert v.label == "too low" and "over its first 4 steps, 0.005x that of trial learner over the same steps" in v.why


def test_without_a_trial_that_moved_the_score_nothing_is_called_too_low():
    """No learner in the sweep: a held trial with a tiny update is flat, and the words say why nothing can tell."""
    held = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    s = score_trials(BASE, {"t": held}, size=2)["t"]
    tiny = TrialEvidence("t", evals=held, base=BASE, update_kl=[3e-8] * 10, variance_per_prompt=[0.1] * 10)
    assert update_scale([(tiny, s)]) is None
    v = verdict(tiny, s)
    assert v.label == "flat" and "no trial of this sweep learned" in v.why and "widen the LR range" in v.why
    assert v.lr == "raise"  # "upward first": the advice's way, as the bench counts it


def test_no_signal_env_limited_no_eval_and_error():
    evals = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    s = score_trials(BASE, {"t": evals}, size=2)["t"]
    assert verdict(TrialEvidence("t", evals=evals, base=BASE, variance_per_prompt=[0.0] * 8), s).label == "no signal"
    solved = point(0, 0.97)
    s2 = score_trials(solved, {"t": [point(5, 0.97), point(10, 0.96)]}, size=2)["t"]
    assert verdict(TrialEvidence("t", evals=[point(5, 0.97)], base=solved, variance_per_prompt=[0.01]), s2, Thresholds()).label == "env-limited"
    assert verdict(TrialEvidence("t", status="stopped early"), Score(None)).label == "no eval"
    assert verdict(TrialEvidence("t", status="error", error="OOM"), Score(None)) == verdict(TrialEvidence("t", status="error", error="OOM"), Score(None))
    assert verdict(TrialEvidence("t", status="error", error="OOM"), Score(None)).why == "OOM"


def test_a_change_worth_having_within_noise_is_undecided_not_flat():
    """One eval of a few episodes per task: +0.07 with an interval reaching below 0 is no evidence that the
    trial held (the bench's misses: ASHA-stopped learners called flat); a change under ``min_delta`` is."""
    curves = {"variance_per_prompt": [0.1] * 4, "update_kl": [2e-3] * 4}
    scores = score_trials(BASE, {"up": [point(4, 0.36, spread=0.25, n=4)], "down": [point(4, 0.20, spread=0.25, n=4)],
                                 "level": [point(4, 0.32, spread=0.25, n=4)]}, size=2)
    assert [scores[k].moved for k in ("up", "down", "level")] == ["held"] * 3
    assert scores["up"].gain >= 0.05 and scores["down"].gain <= -0.05 and abs(scores["level"].gain) < 0.05
    up, down, level = (verdict(TrialEvidence(k, evals=[point(4, r, spread=0.25, n=4)], base=BASE, **curves), scores[k])
                       for k, r in (("up", 0.36), ("down", 0.20), ("level", 0.32)))
    assert up.label == "undecided" and "a gain of ≥ 0.05" in up.why and "1 eval cannot" in up.why and "sweep confirm" in up.why
    assert down.label == "undecided" and "a loss of ≥ 0.05" in down.why
    assert level.label == "flat"
    wider = Thresholds(min_delta=0.1)  # the threshold is the report's --min-delta
    assert verdict(TrialEvidence("up", evals=[point(4, 0.36, spread=0.25, n=4)], base=BASE, **curves), scores["up"], wider).label == "flat"


@pytest.mark.parametrize("loss", ["gspo", "cispo"])
def test_the_clip_rules_read_ppos_clip_only(loss):
    """GSPO clips whole sequences in a band ~1,000 times narrower than PPO's (a high clip fraction is normal),
    and CISPO's clipped tokens keep their gradient: neither's clip fraction says the LR is too high or too low."""
    fell = [point(5, 0.10, spread=0.25), point(10, 0.05, spread=0.25)]
    s_fell = score_trials(BASE, {"t": fell}, size=2)["t"]
    busy = {"evals": fell, "base": BASE, "clip_frac": [0.6] * 10, "variance_per_prompt": [0.1] * 10, "optimizer_steps": 2}
    assert "mean clip fraction" in verdict(TrialEvidence("t", **busy), s_fell).why
    assert "clip fraction" not in verdict(TrialEvidence("t", policy_loss=loss, **busy), s_fell).why
    held = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    s_held = score_trials(BASE, {"t": held}, size=2)["t"]
    idle = {"evals": held, "base": BASE, "clip_frac": [0.0] * 10, "kl": [1e-6] * 10, "variance_per_prompt": [0.1] * 10, "optimizer_steps": 2}
    assert verdict(TrialEvidence("t", **idle), s_held).label == "too low"
    assert verdict(TrialEvidence("t", policy_loss=loss, **idle), s_held).label == "flat"


def test_ties_and_intervals_hold_whatever_the_trial_ids_and_their_order():
    """Random sweeps with random trial ids, some trials a copy of another's evals under a new id (equal gains
    happen: gains are counts over a fixed eval set): the ranking's #1 is never tied, a copy of it always is,
    and every trial's score is the same whatever order the sweep lists the trials in."""
    import random

    for case in range(12):
        rng = random.Random(case)
        trials = {}
        for _ in range(rng.randint(2, 5)):
            rates = sorted(rng.uniform(0.2, 0.6) for _ in range(2))
            trials[f"{rng.randrange(16**5):05x}"] = [point(10, rates[0], spread=0.25), point(15, rates[1], spread=0.25)]
        for name in rng.sample(sorted(trials), rng.randint(1, len(trials))):
            trials[f"{rng.randrange(16**5):05x}"] = trials[name]  # the same evals under another id
        scores = score_trials(BASE, trials, size=2)
        first = rank(scores)[0]
        assert not scores[first].tied, case
        assert all(scores[n].tied for n in trials if n != first and trials[n] is trials[first]), case
        shuffled = dict(rng.sample(sorted(trials.items()), len(trials)))
        assert score_trials(BASE, shuffled, size=2) == scores, case


def test_task_interval_of_one_eval_and_of_a_paired_difference():
    from sweep.verdict.score import task_interval

    assert task_interval({"a": (8, 8), "b": (0, 8)})[0] == 0.5  # (1 + 0) / 2
    p, low, high = task_interval({"a": (8, 8), "b": (8, 8)})
    assert (p, low, high) == (1.0, 1.0, 1.0)  # every episode passed: nothing to redraw
    p, low, high = task_interval({"a": (8, 8), "b": (0, 8)})
    assert low == 0.0 and high == 1.0  # two tasks drawn with replacement: both a (1), both b (0), one each (0.5)
    same = {"a": (4, 8), "b": (2, 8)}
    diff, low, high = task_interval(same, same)
    assert diff == 0.0 and low < 0 < high  # each eval's passes drawn again: noise around no difference
    diff, low, high = task_interval({"a": (6, 8), "b": (2, 8), "c": (1, 0)}, {"a": (4, 8), "b": (2, 8)})
    assert diff == 0.125 and low < diff < high  # (6/8 - 4/8 + 0) / 2; c has no episode and is left out
    assert all(x != x for x in task_interval({"a": (0, 0)}))  # no episode at all: NaNs, not a number that looks measured


@pytest.mark.parametrize("scale", [1.0, 1e-4])
def test_an_undecided_gain_between_two_learners_updates_learns(scale):
    """A gain worth having within noise (one eval of a few episodes a task) whose updates lie between two learners'
    is learning: pass@1 does not dip between two update sizes that both learn. Above every learner's, below every
    one's, a loss, or a single learner: still undecided. The same at 1e-4 the scale."""
    rose = [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)]
    up, down = [point(4, 0.36, spread=0.25, n=4)], [point(4, 0.20, spread=0.25, n=4)]
    evals = {"gentle": rose, "bold": rose, "between": up, "above": up, "below": up, "loss": down}
    kls = {"gentle": 1e-3, "bold": 4e-3, "between": 2e-3, "above": 8e-3, "below": 5e-4, "loss": 2e-3}
    scores = score_trials(BASE, evals, size=2)
    trials = {k: TrialEvidence(k, evals=evals[k], base=BASE, update_kl=[kls[k] * scale] * (10 if evals[k] is rose else 4),
                               variance_per_prompt=[0.1] * 4) for k in kls}
    found = update_scale([(trials[k], scores[k]) for k in trials])
    labels = {k: verdict(trials[k], scores[k], scale=found) for k in trials}
    assert {k: v.label for k, v in labels.items()} == {"gentle": "learns", "bold": "learns", "between": "learns", "above": "undecided",
                                                     "below": "undecided", "loss": "undecided"}
    why = labels["between"].why
    assert "within noise of the base alone" in why and "2x that of trial gentle" in why and "0.5x that of trial bold" in why
    assert "does not dip between two update sizes that both learn" in why and labels["between"].lr == ""
    alone = update_scale([(trials[k], scores[k]) for k in ("gentle", "between")])  # one learner: nothing brackets it
    assert verdict(trials["between"], scores["between"], scale=alone).label == "undecided"


@pytest.mark.parametrize("scale", [1.0, 1e-4])
def test_the_sweeps_first_is_the_middle_of_the_learners_within_noise_of_the_best(scale):
    """By hand: the best gain is the band's top edge (an early riser); among it and the learners tied with it,
    #1 is the middle by update size, compared over the first steps all of them ran; an even band takes the gentler
    middle; a tied trial that is not a learner, a best that is not one, or a member without updates: no move."""
    kl = {"riser": [8e-3] * 4 + [1e-9] * 6, "mid": [2e-3] * 6, "low": [1e-3] * 10, "flat": [2e-3] * 10}
    kl = {k: [x * scale for x in v] for k, v in kl.items()}
    learners = {"riser", "mid", "low"}
    # over the first 6 steps: riser 8e-3, mid 2e-3, low 1e-3 (the riser's whole median, 1e-9, would put it gentlest)
    assert middle_learner("riser", ["mid", "low"], learners, kl) == "mid"
    assert middle_learner("riser", ["mid"], learners, kl) == "mid"  # two: the gentler
    assert middle_learner("riser", ["flat", "mid"], learners, kl) == "mid"  # the flat one is not of the band
    assert middle_learner("riser", [], learners, kl) == "riser"
    assert middle_learner("flat", ["mid", "low"], learners, kl) == "flat"  # the best did not learn: nothing to pick among
    assert middle_learner("riser", ["mid", "low"], learners, {**kl, "low": []}) == "riser"  # an unmeasured member: the gain decides


def test_the_middle_of_the_band_leads_the_ranking_and_the_verdict_says_why():
    """The judged ranking puts the pick first, the rest by gain, the best gain beside it marked tied; the band holds
    only trials that rose beyond noise by their own evals and did not fail; the verdict's words name the best gain
    and why it is not #1."""
    scores = {"riser": Score(0.18, 0.09, 0.28), "failed": Score(0.16, 0.06, 0.26, tied=True), "bracketed": Score(0.14, -0.01, 0.25, tied=True),
              "mid": Score(0.13, 0.03, 0.23, tied=True), "low": Score(0.12, 0.02, 0.21, tied=True), "slow": Score(0.02, -0.05, 0.09)}
    verdicts = {k: Verdict("learns", "") for k in ("riser", "failed", "bracketed", "mid", "low")} | {"slow": Verdict("too low", "", "raise")}
    kls = {"riser": 8e-3, "failed": 3e-3, "bracketed": 2.5e-3, "mid": 2e-3, "low": 1e-3, "slow": 1e-5}
    evidences = {k: TrialEvidence(k, update_kl=[x] * 6) for k, x in kls.items()}
    ranked = ["riser", "bracketed", "mid", "low", "slow", "failed"]  # rank(): the failed trial last
    order, out = _middle_of_the_band(ranked, scores, verdicts, evidences, {"failed"})
    assert order == ["mid", "riser", "bracketed", "low", "slow", "failed"]  # of riser, mid, low: mid (not bracketed, 2.5e-3, nor failed)
    assert (out["mid"].tied, out["riser"].tied, out["low"].tied, out["slow"].tied) == (False, True, True, False)
    text = verdict_text([(k, {"optim.lr": 1e-4}, out[k], verdicts[k]) for k in order], 0.3)
    assert text.startswith("#1 is trial mid (lr=0.0001): held-out pass@1 +0.130")
    assert "the middle, by update size, of the learners within noise of the best gain (trial riser, +0.180): the evals cannot tell them apart" in text
    assert "3 more within noise of trial riser's gain (bracketed, low, failed)" in text and "1 too low" in text
    middle_best = {**scores, "mid": Score(0.19, 0.1, 0.29), "riser": Score(0.18, 0.09, 0.28, tied=True)}
    kept = ["mid", "riser", "bracketed", "low", "slow", "failed"]
    assert _middle_of_the_band(kept, middle_best, verdicts, evidences, {"failed"}) == (kept, middle_best)  # the best is the middle
    assert "within noise of it (riser, bracketed, low, failed)" in verdict_text([(k, {}, middle_best[k], verdicts[k]) for k in kept], 0.3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_an_update_that_overflowed_is_too_high_never_too_low(bad):
    """An update KL that is not a finite number (a sampled token's probability driven to 0 gives inf; NaN weights give
    NaN) says the update overflowed: a trial that held with one is too high, advised a lower LR, whatever its other
    steps' sizes. NaN compares false with everything, so read as a size it was "too low" (raise the LR: the wrong
    way). A learner with such a step gives the sweep no scale and is no member of the middle pick's band."""
    held = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    rose = [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)]
    evals = {"learner": rose, "overflowed": held, "broken learner": rose}
    scores = score_trials(BASE, evals, size=2)
    kls = {"learner": [2e-3] * 6, "overflowed": [1e-6, bad, bad, 1e-6, 1e-6, 1e-6], "broken learner": [1e-6, bad] + [2e-3] * 4}
    trials = {k: TrialEvidence(k, evals=evals[k], base=BASE, update_kl=kls[k], variance_per_prompt=[0.1] * 6) for k in kls}
    found = update_scale([(trials[k], scores[k]) for k in trials])
    assert [name for name, _ in found.learners] == ["learner"]
    v = verdict(trials["overflowed"], scores["overflowed"], scale=found)
    assert (v.label, v.lr) == ("too high", "lower")
    assert "with updates that overflowed (update KL not a finite number at steps 2, 3)" in v.why and "lower the LR" in v.why
    assert verdict(trials["overflowed"], scores["overflowed"], scale=None).label == "too high"  # no learner needed to see it
    assert verdict(trials["broken learner"], scores["broken learner"], scale=found).label == "learns"  # its evals rose: the outcome stands
    assert middle_learner("learner", ["broken learner"], {"learner", "broken learner"}, kls) == "learner"  # no size to place it by


def test_a_trial_that_failed_after_its_evals_is_an_error_its_evals_read_in_the_words():
    """A trial that rose, then failed (say out of memory at step 12): ranked last as errors are, so its label is error
    and the tally counts it failed, not among the learners behind the winner; the words keep what its evals showed."""
    rose = [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)]
    scores = score_trials(BASE, {"winner": rose, "crashed": rose}, size=2, errored={"crashed"})
    crashed = TrialEvidence("crashed", status="error", error="torch.OutOfMemoryError: CUDA out of memory", evals=rose, base=BASE)
    v = verdict(crashed, scores["crashed"])
    assert v.label == "error" and v.why.startswith("failed after its evals (torch.OutOfMemoryError: CUDA out of memory); until then: learns, ")
    assert "held-out pass@1 rose" in v.why
    fell = [point(5, 0.05, spread=0.25), point(10, 0.02, spread=0.25)]
    fallen = verdict(TrialEvidence("fallen", status="error", error="RuntimeError: x", evals=fell, base=BASE),
                     score_trials(BASE, {"fallen": fell}, size=2)["fallen"])
    assert (fallen.label, fallen.lr) == ("error", "") and "until then: too high" in fallen.why  # the failure first: no LR advice
    winner_v = verdict(TrialEvidence("winner", evals=rose, base=BASE), scores["winner"])
    text = verdict_text([("winner", {}, scores["winner"], winner_v), ("crashed", {}, scores["crashed"], v)], 0.3)
    assert "The others: 1 failed." in text and "learners behind" not in text


def test_a_trial_without_per_task_results_leaves_the_others_their_intervals():
    """One trial's eval dumps lost (its evals have pass@1 but no per-task results): it has no interval (its gain
    against the margin alone), and every other trial keeps the interval and ties it has without it; all trials lost
    their intervals before, and with them the labels that need one."""
    evals = {"winner": [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)],
             "close": [point(5, 0.54, spread=0.25), point(10, 0.58, spread=0.25)]}
    lost = [EvalPoint(p.step, p.pass_at_1) for p in (point(5, 0.5, spread=0.25), point(10, 0.52, spread=0.25))]
    alone = score_trials(BASE, evals, size=2)
    scores = score_trials(BASE, {**evals, "lost": lost}, size=2)
    assert {k: scores[k] for k in evals} == alone and alone["winner"].low is not None and alone["close"].tied
    assert scores["lost"].low is None and scores["lost"].moved == "rose" and not scores["lost"].tied
    assert scores["lost"].gain == pytest.approx((lost[0].pass_at_1 + lost[1].pass_at_1) / 2 - BASE.pass_at_1)


def test_trials_of_one_base_policy_share_an_update_scale_whatever_their_base_evals():
    """An eval-only key swept (`rollout.temperature`, each value its own base eval): the trials' scores are against
    their own base evals, but the update size that learns is the policy's. A trial with a tiny update whose base eval
    no learner shares is too low by the learner of the other eval, not flat with "no trial of this sweep learned";
    a trial of another base policy (another model) is measured on its own scale."""
    from sweep.report.judge import judge
    from sweep.report.load import SweepData, TrialData

    def trial(name: str, base_key: str, evals: list[EvalPoint], kl: float, model: str = "tiny-a") -> TrialData:
        lines = [{"global_step": p.step, "eval/avg_pass_at_1": p.pass_at_1, "tasks": {k: list(v) for k, v in p.tasks.items()},
                  **({"base_eval": base_key} if p.step == 0 else {})} for p in [BASE, *evals]]
        rows = [{"training_iteration": s, "policy/update_kl": kl, "reward/variance_per_prompt": 0.1} for s in range(1, 11)]
        return TrialData(name, name, {}, rows, lines, {"model": {"name_or_path": model}, "rollout": {"temperature": 0.7 if base_key == "a" else 1.0}})

    rose = [point(5, 0.55, spread=0.25), point(10, 0.60, spread=0.25)]
    held = [point(5, 0.30, spread=0.25), point(10, 0.30, spread=0.25)]
    sweep = SweepData("u", "s", [trial("learner", "a", rose, 2e-3), trial("tiny", "b", held, 3e-8),
                                 trial("other model", "c", held, 3e-8, model="tiny-b")], None, ["rollout.temperature"])
    verdicts = {j.trial_id: j.verdict for j in judge(sweep, {"learner": "finished", "tiny": "finished", "other model": "finished"})}
    assert verdicts["learner"].label == "learns"
    assert verdicts["tiny"].label == "too low" and "that of trial learner" in verdicts["tiny"].why
    assert verdicts["other model"].label == "flat" and "no trial of this sweep learned" in verdicts["other model"].why
