"""Where a sweep looked (sweep/report/coverage.py): the widest stretch of each numeric key's range without a trial, by hand."""

from __future__ import annotations

import pytest

from sweep.report.coverage import looked


def test_a_log_key_on_a_log_scale_and_the_ranges_ends_count():
    space = {"optim.lr": {"type": "loguniform", "low": 1e-6, "high": 1e-1}}
    (lr,) = looked(space, [{"optim.lr": v} for v in (1e-3, 1e-6, 3e-2, 1e-4)])
    # log10: -6 (an end and a trial), -4, -3, -1.52, -1: the widest is -6 to -4, 2 decades of 5
    assert (lr.gap_low, lr.gap_high, lr.tried, lr.log) == (1e-6, 1e-4, 4, True)
    assert lr.decades == pytest.approx(2.0) and lr.share == pytest.approx(0.4)
    (alone,) = looked(space, [{"optim.lr": 1e-2}])  # one trial near the top: 1e-6 to 1e-2 untried
    assert (alone.gap_low, alone.gap_high) == (1e-6, 1e-2) and alone.share == pytest.approx(0.8)
    (none,) = looked(space, [])
    assert none.share == pytest.approx(1.0) and none.tried == 0


def test_linear_and_integer_keys_choices_left_out_and_conditions_held():
    space = {
        "algorithm.kl_coef": {"type": "uniform", "low": 0.0, "high": 0.1},
        "rollout.n_samples_per_prompt": {"type": "randint", "low": 2, "high": 11},  # 2 to 10
        "algorithm.kl_estimator": {"type": "choice", "values": ["k1", "k3"]},
        "algorithm.entropy_coef": {"type": "uniform", "low": 0.0, "high": 0.01, "when": {"algorithm.kl_coef": {"gt": 0}}},
    }
    configs = [{"algorithm.kl_coef": 0.0, "rollout.n_samples_per_prompt": 4, "algorithm.entropy_coef": 0.0},  # entropy inactive here
               {"algorithm.kl_coef": 0.02, "rollout.n_samples_per_prompt": 8, "algorithm.entropy_coef": 0.009},
               {"algorithm.kl_coef": 0.05, "rollout.n_samples_per_prompt": 9, "algorithm.entropy_coef": 0.008}]
    kl, n, entropy = looked(space, configs)
    assert kl.key == "algorithm.kl_coef" and (kl.gap_low, kl.gap_high) == (0.05, 0.1) and kl.share == pytest.approx(0.5)
    assert (n.low, n.high, n.gap_low, n.gap_high) == (2, 10, 4, 8) and n.share == pytest.approx(0.5) and n.decades is None
    assert entropy.tried == 2 and (entropy.gap_low, entropy.gap_high) == (0.0, 0.008)  # the inactive trial's 0.0 not counted
    assert looked({"optim.lr": {"type": "lognormal", "mu": 0}}, configs) == []  # a space from another version: nothing said
