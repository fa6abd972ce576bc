"""A near miss gets one suggestion; a far one gets none."""

from __future__ import annotations

from configkit.suggest import did_you_mean


def test_only_a_near_miss_is_suggested():
    keys = ["optim.lr", "optim.weight_decay", "optim.warmup_steps", "algorithm.kl_coef"]
    assert did_you_mean("optim.lrr", keys) == "did you mean 'optim.lr'? "
    assert did_you_mean("optim.warmup_step", keys) == "did you mean 'optim.warmup_steps'? "
    assert did_you_mean("algorithm.kl_coeff", keys) == "did you mean 'algorithm.kl_coef'? "
    assert did_you_mean("maximize", ["max", "min"]) == ""  # 0.55 alike: a guess that would mislead
    assert did_you_mean("zilow", ["hotel"]) == "" and did_you_mean("x", []) == ""
    assert did_you_mean("trainer", ["trainer", "trainers"]) == ""  # allowed itself: the fault is elsewhere
