"""Reward metrics against numbers worked by hand."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from grpo.metrics import (
    SampleOutcome,
    eval_metrics,
    frac_zero_variance,
    pass_at_k,
    reward_metrics,
    rollout_metrics,
    variance_per_prompt,
)


def test_variance_per_prompt_by_hand():
    # [1,0,0,0]: variance 0.1875; [1,1,1,1]: 0; mean 0.09375. [1,1,0,0] is the binary maximum 0.25.
    assert variance_per_prompt([[1, 0, 0, 0], [1, 1, 1, 1]]) == pytest.approx(0.09375)
    assert variance_per_prompt([[1, 1, 0, 0]]) == pytest.approx(0.25)
    assert variance_per_prompt([]) == 0.0


def test_frac_zero_variance():
    assert frac_zero_variance([[1, 0], [1, 1], [0, 0], [0, 1]]) == 0.5


def test_reward_metrics_overall_and_per_env():
    outcomes = [
        # hotel group 0: 1,0,0,0 -> pass 0.25, variance 0.1875
        *[SampleOutcome("hotel", 0, r) for r in (1.0, 0.0, 0.0, 0.0)],
        # hotel group 1: 1,1 and an env error, left out -> pass 1.0, variance 0
        SampleOutcome("hotel", 1, 1.0),
        SampleOutcome("hotel", 1, 1.0),
        SampleOutcome("hotel", 1, 0.0, env_error=True),
        # mail group 2: 1,1,0,0 -> pass 0.5, variance 0.25
        *[SampleOutcome("mail", 2, r) for r in (1.0, 1.0, 0.0, 0.0)],
    ]
    m = reward_metrics(outcomes)
    # overall over the 10 valid samples: 5 passes
    assert m["reward/avg_pass_at_1"] == pytest.approx(0.5)
    assert m["reward/avg_raw_reward"] == pytest.approx(0.5)
    assert m["reward/variance_per_prompt"] == pytest.approx((0.1875 + 0.0 + 0.25) / 3)
    assert m["reward/frac_zero_variance"] == pytest.approx(1 / 3)
    assert m["reward/env_error_frac"] == pytest.approx(1 / 11)
    assert m["reward/hotel/pass_at_1"] == pytest.approx(3 / 6)
    assert m["reward/hotel/variance_per_prompt"] == pytest.approx(0.1875 / 2)
    assert m["reward/mail/pass_at_1"] == pytest.approx(0.5)
    assert m["reward/mail/variance_per_prompt"] == pytest.approx(0.25)
    # groups: hotel 0 mixed, hotel 1 all correct (its env error left out), mail 2 mixed
    assert (m["reward/frac_all_good"], m["reward/frac_all_bad"], m["reward/frac_mixed"]) == pytest.approx((1 / 3, 0, 2 / 3))
    assert (m["reward/hotel/frac_all_good"], m["reward/hotel/frac_mixed"], m["reward/mail/frac_mixed"]) == pytest.approx((0.5, 0.5, 1.0))


def test_group_outcome_shares_by_hand():
    from grpo.metrics import group_outcome_shares

    assert group_outcome_shares([[1, 1], [0, 0, 0], [1, 0], [0.4, 0.6], [0.2]]) == pytest.approx((1 / 5, 2 / 5, 2 / 5))  # 0.5 passes
    assert group_outcome_shares([]) == (0.0, 0.0, 0.0)


def test_rollout_metrics():
    trajs = [
        SimpleNamespace(num_turns=2, tool_calls=1, tool_errors=1, loss_mask=[0, 1, 1], stop_reason="done", overlong=False),
        SimpleNamespace(num_turns=4, tool_calls=3, tool_errors=0, loss_mask=[0, 1, 1, 1, 1], stop_reason="max_turns", overlong=True),
    ]
    m = rollout_metrics(trajs)
    assert m["rollout/num_turns"] == 3.0
    assert m["rollout/tool_calls"] == 2.0
    assert m["rollout/tool_error_rate"] == pytest.approx(1 / 6)
    assert m["rollout/response_tokens"] == 3.0
    assert m["rollout/stop_done_frac"] == 0.5
    assert m["rollout/overlong_frac"] == 0.5


def test_pass_at_k_by_hand():
    # n=4, c=1: pass@1 = 1/4; pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5; pass@4 = 1
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(4, 0, 4) == 0.0
    # n=5, c=2, k=3: 1 - C(3,3)/C(5,3) = 1 - 1/10 = 0.9
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)


def test_eval_metrics_average_over_tasks():
    outcomes = [
        *[SampleOutcome("hotel", 0, r) for r in (1, 0, 0, 0)],  # pass@1 .25, pass@4 1
        *[SampleOutcome("hotel", 1, r) for r in (0, 0, 0, 0)],  # 0, 0
        *[SampleOutcome("mail", 2, r) for r in (1, 1, 1, 0)],  # .75, 1
    ]
    m = eval_metrics(outcomes, k=4)
    assert m["eval/hotel/pass_at_1"] == pytest.approx(0.125)
    assert m["eval/hotel/pass_at_4"] == pytest.approx(0.5)
    assert m["eval/mail/pass_at_4"] == pytest.approx(1.0)
    assert m["eval/avg_pass_at_1"] == pytest.approx((0.25 + 0 + 0.75) / 3)


def test_eval_gain_is_a_window_mean_minus_the_base_by_hand():
    from grpo.metrics import eval_gain

    assert eval_gain([0.40, 0.50, 0.30], base=0.316, window=2) == pytest.approx((0.50 + 0.30) / 2 - 0.316)
    assert eval_gain([0.45], base=0.316, window=2) == pytest.approx(0.45 - 0.316)  # fewer evals than the window
    assert eval_gain([], base=0.316, window=2) == 0.0  # nothing trained yet: no gain claimed
    assert eval_gain([0.9, 0.1, 0.1], base=0.3, window=2) == pytest.approx(-0.2)  # an early lucky eval does not count


def test_the_score_is_shown_only_once_a_trained_eval_exists():
    from grpo.metrics import shown

    base_only = {"eval/score": 0.0, "eval/global_step": 0.0, "eval/avg_pass_at_1": 0.312}
    assert shown(base_only, "eval/score") is None  # Tune's placeholder, no gain
    assert shown(base_only, "eval/avg_pass_at_1") == 0.312  # the base's own pass@1 is a result
    assert shown({**base_only, "eval/score": 0.0, "eval/global_step": 4.0}, "eval/score") == 0.0  # a real gain of 0
    assert shown({"eval/score": 0.125}, "eval/score") is None  # no eval step reported: nothing to score
    assert shown({"reward/avg_pass_at_1": 1}, "reward/avg_pass_at_1") == 1.0
    assert shown({"reward/avg_pass_at_1": True}, "reward/avg_pass_at_1") is None
    assert shown({}, "reward/avg_pass_at_1") is None


def test_a_trials_evals_carry_the_score_and_survive_a_checkpoint():
    from grpo.evaluation import Evals

    evals = Evals(window=2)
    assert evals.metrics() == {}
    evals.add(0, {"eval/avg_pass_at_1": 0.3, "eval/hotel/pass_at_1": 0.3})
    assert evals.metrics()["eval/score"] == 0.0
    evals.add(5, {"eval/avg_pass_at_1": 0.5, "eval/hotel/pass_at_1": 0.5})
    evals.add(10, {"eval/avg_pass_at_1": 0.4, "eval/hotel/pass_at_1": 0.4})
    assert evals.metrics() == {"eval/avg_pass_at_1": 0.4, "eval/hotel/pass_at_1": 0.4, "eval/score": pytest.approx(0.15)}
    again = Evals(window=2)
    again.restore(json.loads(json.dumps(evals.state())))  # as a checkpoint's JSON holds it
    assert again.metrics() == evals.metrics() and again.has(5) and not again.has(3)


def test_an_evals_own_seeds_draw_what_the_reseeded_global_rng_draws(monkeypatch):
    """``sample_eval`` as a lone trial runs it (in a fork of torch's RNG, reseeded) and as a packed member's thread does
    (``own_seeds``: its streaming generator's seeds from ``eval_seeds``): the same rollout seed drawn, the global RNG
    untouched, the generator's seeds unset after; and refused for a generator that does not stream."""
    from types import SimpleNamespace

    import pytest
    import torch

    import grpo.evaluation
    from grpo.config import TrainerConfig
    from grpo.evaluation import sample_eval
    from grpo.rollout import draw_rollout_seed

    monkeypatch.setattr(grpo.evaluation, "collect", lambda tasks, n, backend, generator, chat, limits: [draw_rollout_seed(generator.seeds)])
    cfg, generator = TrainerConfig.model_validate({"seed": 7}), SimpleNamespace(streams=True, seeds=None)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    forked = sample_eval(cfg, generator, None, [], None)
    assert torch.equal(torch.get_rng_state(), before)
    own = sample_eval(cfg, generator, None, [], None, own_seeds=True)
    assert own == forked and generator.seeds is None and torch.equal(torch.get_rng_state(), before)
    assert sample_eval(TrainerConfig.model_validate({"seed": 8}), generator, None, [], None, own_seeds=True) != forked
    with pytest.raises(ValueError, match="streaming generator"):
        sample_eval(cfg, SimpleNamespace(streams=False, seeds=None), None, [], None, own_seeds=True)
