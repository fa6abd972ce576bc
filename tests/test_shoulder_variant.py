"""bench/shoulder_variant.py: the rule (since 2026-12-01) keeps `too high` for a held trial with huge updates only
where a sign of a fall shows; the bench's old rule calls it too high either way, and puts the rule back after."""

from __future__ import annotations

from bench.shoulder_variant import decide, huge_alone_rule
from sweep.verdict import labels
from sweep.verdict.labels import TrialEvidence, UpdateScale, verdict
from sweep.verdict.score import EvalPoint, Score

SCALE = UpdateScale((("learner", (1e-3, 1e-3, 1e-3, 1e-3)),))
HELD = Score(gain=0.01, low=-0.05, high=0.07, steps=(4, 6))


def trial(entropy: list[float]) -> TrialEvidence:
    return TrialEvidence("t", base=EvalPoint(0, 0.4), evals=[EvalPoint(4, 0.41), EvalPoint(6, 0.41)],
                         update_kl=[5e-2] * 4, entropy=entropy)  # 50x the learner's updates


def test_the_rule_needs_a_sign_of_a_fall_and_the_old_rule_is_put_back():
    quiet, rising = trial([0.05, 0.05, 0.05, 0.06]), trial([0.05, 0.07, 0.09, 0.12])
    calm = verdict(quiet, HELD, scale=SCALE)
    assert (calm.label, calm.lr) == ("flat", "lower")  # held, above every learner's updates: a lower LR
    assert verdict(rising, HELD, scale=SCALE).label == "too high"  # entropy more than doubled
    rule = labels._held_too_high
    with huge_alone_rule():
        assert verdict(quiet, HELD, scale=SCALE).label == "too high" and verdict(rising, HELD, scale=SCALE).label == "too high"
    assert labels._held_too_high is rule and verdict(quiet, HELD, scale=SCALE).label == "flat"


def seed(rules: str, world: str, n: int, agree: list[bool], wrong: int = 0, top1: bool = True) -> dict:
    return {"rules": rules, "world": world, "seed": n, "agree": agree, "wrong_direction": wrong, "advice_wrong_direction": 0, "top1_in_top": top1}


def test_decide_takes_the_variant_only_if_it_agrees_more_adds_no_wrong_direction_and_keeps_number_one():
    current = [seed("current", "mix", 5, [True, False, True]), seed("current", "hotel", 0, [True, True])]
    better = [seed("fall_sign", "mix", 5, [True, True, True]), seed("fall_sign", "hotel", 0, [True, True])]
    taken = decide(current + better)
    assert taken["agreement"] == {"current": 0.8, "fall_sign": 1.0} and taken["variant_taken"]
    same = decide(current + [dict(r, rules="fall_sign") for r in current])
    assert not same["variant_taken"]  # no higher agreement: the rule stays
    wrong = decide(current + [better[0], seed("fall_sign", "hotel", 0, [True, True], wrong=1)])
    assert wrong["seeds_adding_wrong_direction"] == ["hotel 0"] and not wrong["variant_taken"]
    lost = decide(current + [better[0], seed("fall_sign", "hotel", 0, [True, True], top1=False)])
    assert lost["top1_in_truth_top"] == {"current": 2, "fall_sign": 1} and not lost["variant_taken"]
