"""The GRPO math against numbers worked by hand, and vectorised code against a plain loop."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.algorithm import (
    AGGREGATION_WEIGHTS,
    POLICY_LOSSES,
    advantages_by_group,
    cispo_loss,
    group_advantages,
    gspo_loss,
    kl_estimator,
    kl_k1,
    kl_k2,
    kl_k3,
    loss_aggregation,
    masked_mean,
    policy_loss,
    ppo_clipped_loss,
    rescale_to_global,
    sequence_importance_mask,
    truncated_importance_weights,
)


def test_advantages_one_success_in_four():
    # mean 0.25; population variance (0.75^2 + 3 * 0.25^2) / 4 = 0.1875; std 0.4330127
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), torch.ones(1, 4, dtype=torch.bool), std_eps=0.0)
    assert adv.tolist()[0] == pytest.approx([1.7320508, -0.5773503, -0.5773503, -0.5773503], abs=1e-6)


def test_advantages_equal_rewards_are_zero():
    adv = group_advantages(torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]), torch.ones(2, 4, dtype=torch.bool))
    assert adv.abs().max().item() == 0.0


def test_advantages_leave_out_invalid_samples():
    # valid rewards 1, 0, 1: mean 2/3, variance 2/9, std 0.4714045; the invalid sample gets 0
    rewards = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    valid = torch.tensor([[True, True, True, False]])
    adv = group_advantages(rewards, valid, std_eps=0.0)
    assert adv.tolist()[0] == pytest.approx([0.7071068, -1.4142136, 0.7071068, 0.0], abs=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_advantages_match_a_loop(seed):
    gen = torch.Generator().manual_seed(seed)
    groups, n = 3 + seed, 2 + seed
    rewards = torch.rand(groups, n, generator=gen)
    valid = torch.rand(groups, n, generator=gen) > 0.2
    fast = group_advantages(rewards, valid, std_eps=1e-6)
    for g in range(groups):
        kept = [rewards[g, i].item() for i in range(n) if valid[g, i]]
        mean = sum(kept) / len(kept) if kept else 0.0
        std = math.sqrt(sum((r - mean) ** 2 for r in kept) / len(kept)) if kept else 0.0
        for i in range(n):
            expected = (rewards[g, i].item() - mean) / (std + 1e-6) if valid[g, i] else 0.0
            assert fast[g, i].item() == pytest.approx(expected, abs=1e-4)


def test_ppo_clip_cases():
    # ratios 1.5, 0.5, 0.5, 1.5 with advantages +1, +1, -1, -1 and eps 0.2:
    #   r=1.5,A=+1: min(1.5, 1.2) = 1.2 -> loss -1.2, clipped
    #   r=0.5,A=+1: min(0.5, 0.8) = 0.5 -> loss -0.5, not clipped
    #   r=0.5,A=-1: min(-0.5, -0.8) = -0.8 -> loss 0.8, clipped
    #   r=1.5,A=-1: min(-1.5, -1.2) = -1.5 -> loss 1.5, not clipped
    ratios = torch.tensor([1.5, 0.5, 0.5, 1.5])
    old = torch.full((4, 1), -1.0)
    new = old + torch.log(ratios).unsqueeze(-1)
    out = ppo_clipped_loss(new, old, torch.tensor([1.0, 1.0, -1.0, -1.0]), clip_low=0.2)
    assert out.loss.squeeze(-1).tolist() == pytest.approx([-1.2, -0.5, 0.8, 1.5], abs=1e-6)
    assert out.clipped_high.squeeze(-1).tolist() == [True, False, False, False]
    assert out.clipped_low.squeeze(-1).tolist() == [False, False, True, False]


def test_clip_higher_widens_only_the_upper_side():
    # eps_low 0.2, eps_high 0.28: r=1.25,A=+1 is inside [0.8, 1.28] -> loss -1.25, not clipped
    #   (it would be clipped at 1.2 with a symmetric 0.2); r=1.5,A=+1 -> clipped at 1.28 -> loss -1.28;
    #   r=0.7,A=-1 -> min(-0.7, -0.8) = -0.8 -> loss 0.8, clipped low
    ratios = torch.tensor([1.25, 1.5, 0.7])
    old = torch.zeros(3, 1)
    out = ppo_clipped_loss(torch.log(ratios).unsqueeze(-1), old, torch.tensor([1.0, 1.0, -1.0]), clip_low=0.2, clip_high=0.28)
    assert out.loss.squeeze(-1).tolist() == pytest.approx([-1.25, -1.28, 0.8], abs=1e-6)
    assert out.clipped_high.squeeze(-1).tolist() == [False, True, False]
    assert out.clipped_low.squeeze(-1).tolist() == [False, False, True]


def test_ppo_on_policy_is_minus_advantage_and_never_clipped():
    logp = torch.randn(3, 5)
    out = ppo_clipped_loss(logp, logp.clone(), torch.tensor([2.0, -1.0, 0.5]), clip_low=0.2)
    assert torch.allclose(out.loss, -torch.tensor([2.0, -1.0, 0.5]).unsqueeze(-1).expand(3, 5))
    assert not out.clipped_low.any() and not out.clipped_high.any()


def test_kl_k3_by_hand():
    # p = 0.5, q_ref = 0.25: d = ln(0.5) = -0.6931472; exp(d) - d - 1 = 0.5 + 0.6931472 - 1 = 0.1931472
    kl = kl_k3(torch.log(torch.tensor([[0.5, 0.3]])), torch.log(torch.tensor([[0.25, 0.3]])))
    assert kl.tolist()[0] == pytest.approx([0.1931472, 0.0], abs=1e-6)


def test_masked_mean():
    assert masked_mean(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1, 0, 1, 0])).item() == 2.0
    assert masked_mean(torch.tensor([1.0, 2.0]), torch.tensor([0, 0])).item() == 0.0


def test_dr_grpo_advantages_are_centred_rewards():
    # no std division: [1, 0, 0, 0] - 0.25
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), torch.ones(1, 4, dtype=torch.bool), normalize_std=False)
    assert adv.tolist()[0] == pytest.approx([0.75, -0.25, -0.25, -0.25])


def test_std_floor_bounds_the_division():
    # rewards [0.6, 0.4]: std 0.1, floored to 0.5 -> advantages +-0.1 / 0.5 = +-0.2
    adv = group_advantages(torch.tensor([[0.6, 0.4]]), torch.ones(1, 2, dtype=torch.bool), std_eps=0.0, std_floor=0.5)
    assert adv.tolist()[0] == pytest.approx([0.2, -0.2], abs=1e-6)


def test_k1_and_k2_by_hand():
    # log p = ln 0.5, log q = ln 0.25: d' = log p - log q = ln 2 = 0.6931472; k1 = 0.6931472, k2 = 0.2402265
    p, q = torch.log(torch.tensor([[0.5]])), torch.log(torch.tensor([[0.25]]))
    assert kl_k1(p, q).item() == pytest.approx(0.6931472, abs=1e-6)
    assert kl_k2(p, q).item() == pytest.approx(0.2402265, abs=1e-6)
    assert kl_estimator("k3") is kl_k3


def test_loss_aggregations_by_hand():
    # sequence 0: tokens 1, 2, 3 (all kept); sequence 1: tokens 10, [20 masked]; width T = 3 (last pad)
    loss = torch.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    assert loss_aggregation("token-mean")(loss, mask).item() == pytest.approx((1 + 2 + 3 + 10) / 4)  # 4.0
    assert loss_aggregation("seq-mean-token-mean")(loss, mask).item() == pytest.approx((2.0 + 10.0) / 2)  # 6.0
    # Dr. GRPO divides each sequence's sum by a constant (here 8), not by the padded width
    assert loss_aggregation("seq-mean-token-sum-norm")(loss, mask, 8).item() == pytest.approx((6 / 8 + 10 / 8) / 2)


@pytest.mark.parametrize("name", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_rank_shares_sum_to_the_aggregation_of_the_whole_batch(name):
    # the batch of test_loss_aggregations_by_hand plus a third sequence, split over two "ranks": rows {0} and {1, 2}
    loss = torch.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 0.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 0, 0]])
    agg, weight = loss_aggregation(name), AGGREGATION_WEIGHTS[name]
    whole = agg(loss, mask, 8).item()
    parts = [(loss[:1], mask[:1]), (loss[1:], mask[1:])]
    total_weight = sum(weight(m).item() for _, m in parts)
    assert total_weight == weight(mask).item()  # tokens 6, non-empty sequences 3, sequences 3
    shares = [rescale_to_global(agg(v, m, 8), weight(m).item(), total_weight).item() for v, m in parts]
    assert sum(shares) == pytest.approx(whole)
    # by hand for token-mean: rank 0 holds 1+2+3 over 3 tokens, rank 1 holds 10+4 over 2: (6 + 14) / 5
    if name == "token-mean":
        assert shares == pytest.approx([6 / 5, 14 / 5]) and whole == pytest.approx(4.0)


def test_a_rank_with_no_tokens_contributes_nothing():
    assert rescale_to_global(torch.tensor(3.0), 0.0, 5.0).item() == 0.0


def test_unknown_variant_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="k1, k2, k3"):
        kl_estimator("k4")
    with pytest.raises(ValueError, match="token-mean, seq-mean-token-mean, seq-mean-token-sum-norm"):
        loss_aggregation("sum")


def test_advantages_by_group_follow_the_group_id_not_the_position():
    """A group is its id: shuffled episodes, unequal groups and env errors get the advantages by hand."""
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    groups = torch.tensor([7, 7, 3, 3, 3])  # group 7: {1, 0}; group 3: {1, 1, 0} with the last one an env error
    valid = torch.tensor([True, True, True, True, False])
    by_hand = torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0]) / (1 + 1e-6)  # group 7: mean 0.5, std 0.5; group 3: no signal
    got = advantages_by_group(rewards, groups, valid)
    assert torch.allclose(got, by_hand)
    for seed in range(5):
        order = torch.randperm(5, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(advantages_by_group(rewards[order], groups[order], valid[order]), got[order])


def test_advantages_by_group_equal_the_table_form_exactly():
    """Consecutive groups of n, as the trainer lays them out: bit for bit what the (G, n) form gives."""
    gen = torch.Generator().manual_seed(0)
    rewards = torch.randint(0, 2, (6, 4), generator=gen).float()
    valid = torch.rand(6, 4, generator=gen) > 0.2
    flat = advantages_by_group(rewards.flatten(), torch.arange(24) // 4, valid.flatten())
    assert torch.equal(flat, group_advantages(rewards, valid).flatten())


def test_gspo_clips_the_sequence_ratio_by_hand():
    # mask [[1,1,0],[1,1,1],[1,1,1]], old = 0, eps 0.05 both sides:
    #   seq 0: log-ratios 0.2, 0.0 (5.0 masked) -> mean 0.1 -> s = exp(0.1) = 1.1051709, A=+1:
    #          min(1.1051709, 1.05) = 1.05 -> loss -1.05 on every token, clipped high, no gradient
    #   seq 1: log-ratios -0.3, 0, 0 -> mean -0.1 -> s = 0.9048374, A=-2: min(-1.8096748, 0.95 * -2 = -1.9)
    #          -> loss 1.9, clipped low, no gradient
    #   seq 2: log-ratios 0.02, 0.04, 0 -> mean 0.02 -> s = 1.0202013, A=+1, inside [0.95, 1.05] ->
    #          loss -1.0202013; d loss / d logp_t = -A * s / 3 = -0.3400671 on each of its 3 tokens
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    logp = torch.tensor([[0.2, 0.0, 5.0], [-0.3, 0.0, 0.0], [0.02, 0.04, 0.0]], requires_grad=True)
    out = gspo_loss(logp, torch.zeros(3, 3), torch.tensor([1.0, -2.0, 1.0]), mask, 0.05, 0.05)
    assert out.loss[:, 0].tolist() == pytest.approx([-1.05, 1.9, -1.0202013], abs=1e-6)
    assert (out.loss == out.loss[:, :1]).all()  # one value per sequence, on all its tokens
    assert out.clipped_high[:, 0].tolist() == [True, False, False] and out.clipped_low[:, 0].tolist() == [False, True, False]
    out.loss[:, 0].sum().backward()  # each sequence's loss once
    assert logp.grad[2].tolist() == pytest.approx([-0.3400671] * 3, abs=1e-6)
    assert (logp.grad[:2] == 0).all()  # both clipped sequences, and seq 0's masked token


def test_gspo_with_seq_mean_token_mean_is_the_mean_over_sequences():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    logp = torch.tensor([[0.01, -0.01, 3.0], [0.0, 0.0, 0.0]])
    out = gspo_loss(logp, torch.zeros(2, 3), torch.tensor([1.0, -1.0]), mask, 3e-4, 4e-4)
    # seq 0: mean log-ratio 0 -> s = 1 -> loss -1; seq 1: s = 1 -> loss +1; mean 0
    assert loss_aggregation("seq-mean-token-mean")(out.loss, mask, 1).item() == pytest.approx(0.0, abs=1e-7)
    assert out.loss[:, 0].tolist() == pytest.approx([-1.0, 1.0])


@pytest.mark.parametrize("seed", range(5))
def test_gspo_matches_a_loop(seed):
    gen = torch.Generator().manual_seed(seed)
    b, t = 4, 6
    logp, old = torch.randn(b, t, generator=gen) * 0.01, torch.randn(b, t, generator=gen) * 0.01
    mask = (torch.rand(b, t, generator=gen) > 0.3).float()
    mask[0] = 0.0  # an empty sequence: ratio 1
    adv = torch.randn(b, generator=gen)
    out = gspo_loss(logp, old, adv, mask, 0.002, 0.003)
    for i in range(b):
        diffs = [float(logp[i, j] - old[i, j]) for j in range(t) if mask[i, j] == 1]
        s = math.exp(sum(diffs) / len(diffs)) if diffs else 1.0
        expected = -min(s * float(adv[i]), min(max(s, 1 - 0.002), 1 + 0.003) * float(adv[i]))
        assert out.loss[i].tolist() == pytest.approx([expected] * t, abs=1e-6)


def test_cispo_clips_the_weight_and_keeps_every_gradient_by_hand():
    # old = 0; ratios seq 0: 1.5, 1.0, 0.5 (A=+1); seq 1: 2.0, 0.8, 1.0 (A=-1); eps_high 0.28, no lower bound.
    #   weights: seq 0: 1.28, 1.0, 0.5; seq 1: 1.28, 0.8, 1.0
    #   loss = -w * A * logp: seq 0: -1.28 * ln 1.5 = -0.5189953, 0, -0.5 * ln 0.5 = 0.3465736
    #                         seq 1:  1.28 * ln 2 = 0.8872284, 0.8 * ln 0.8 = -0.1785148, 0
    #   gradient -w * A: seq 0: -1.28, -1.0, -0.5; seq 1: 1.28, 0.8, 1.0 (the clipped tokens keep theirs)
    ratios = torch.tensor([[1.5, 1.0, 0.5], [2.0, 0.8, 1.0]])
    logp = torch.log(ratios).requires_grad_(True)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    out = cispo_loss(logp, torch.zeros(2, 3), torch.tensor([1.0, -1.0]), mask, None, 0.28)
    assert out.loss.tolist()[0] == pytest.approx([-0.5189953, 0.0, 0.3465736], abs=1e-6)
    assert out.loss.tolist()[1] == pytest.approx([0.8872284, -0.1785148, 0.0], abs=1e-6)
    out.loss.sum().backward()
    assert logp.grad.tolist()[0] == pytest.approx([-1.28, -1.0, -0.5], abs=1e-6)
    assert logp.grad.tolist()[1] == pytest.approx([1.28, 0.8, 1.0], abs=1e-6)
    assert out.clipped_high.tolist() == [[True, False, False], [True, False, False]] and not out.clipped_low.any()
    # with a lower bound 1 - 0.3 = 0.7, seq 0's 0.5 becomes 0.7: gradient -0.7, flagged low
    low = torch.log(ratios).requires_grad_(True)
    bounded = cispo_loss(low, torch.zeros(2, 3), torch.tensor([1.0, -1.0]), mask, 0.3, 0.28)
    bounded.loss.sum().backward()
    assert low.grad[0, 2].item() == pytest.approx(-0.7) and bounded.clipped_low.tolist()[0] == [False, False, True]
    # where PPO's clip drops the token (r = 1.5 > 1.28, A > 0), CISPO still pushes it
    ppo_logp = torch.log(ratios).requires_grad_(True)
    ppo_clipped_loss(ppo_logp, torch.zeros(2, 3), torch.tensor([1.0, -1.0]), 0.2, 0.28).loss.sum().backward()
    assert ppo_logp.grad[0, 0].item() == 0.0 and logp.grad[0, 0].item() != 0.0


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_policy_losses_on_policy_give_the_reinforce_gradient(name):
    """On-policy (old = the policy's own, detached) every policy loss has the REINFORCE gradient: with
    token-mean, -A / (the batch's unmasked tokens) on each token (GSPO's through its sequence mean)."""
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.7, -1.1]], requires_grad=True)
    adv = torch.tensor([1.0, -2.0])
    out = policy_loss(name)(logp, logp.detach(), adv, mask, 0.2, 0.28)
    loss_aggregation("token-mean")(out.loss, mask, 1).backward()
    assert not out.clipped_low.any() and not out.clipped_high.any()
    # token-mean over 5 tokens: -A / 5 per token. GSPO too: sequence i's loss sits on its n_i tokens and
    # d loss_i / d logp_t = -A * s / n_i with s = 1, so n_i * (-A / n_i) / 5 = -A / 5
    expected = [[-1 / 5, -1 / 5, 0.0], [2 / 5, 2 / 5, 2 / 5]]
    assert logp.grad.tolist() == [pytest.approx(row, abs=1e-6) for row in expected]


def test_truncated_importance_weights_by_hand():
    # w = min(exp(old - sampler), 1.5): exp(0.5) = 1.6487 -> 1.5 (truncated); exp(0) = 1; exp(-0.4) = 0.6703200;
    # NaN (a token the sampler did not write) -> 1; exp(2) = 7.389 -> 1.5 (truncated)
    old = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, -1.0]])
    sampler = torch.tensor([[-1.5, -2.0, -0.1], [math.nan, -3.0, math.nan]])
    out = truncated_importance_weights(old, sampler, 1.5)
    assert out.weight.tolist() == [pytest.approx(row, abs=1e-6) for row in ([1.5, 1.0, 0.6703200], [1.0, 1.5, 1.0])]
    assert out.truncated.tolist() == [[True, False, False], [False, True, False]]
    plain = truncated_importance_weights(old, sampler, None)  # off: the plain ratio, nothing truncated
    assert plain.weight[0, 0].item() == pytest.approx(1.6487213) and plain.weight[1, 1].item() == pytest.approx(7.3890561)
    assert not plain.truncated.any()
    assert not out.weight.requires_grad


def test_sequence_importance_mask_by_hand():
    # cap 1.5 -> keep |mean log-ratio| <= ln 1.5 = 0.4054651 over each sequence's sampled, unmasked tokens:
    #   seq 0: old - sampler = 0.5, 0.1 (0.9 masked out) -> mean 0.3 -> kept
    #   seq 1: 0.5, 0.5 (NaN: not sampled) -> mean 0.5 -> masked
    #   seq 2: -0.6, -0.4 -> mean -0.5 -> masked (ratio 0.61 < 1 / 1.5)
    #   seq 3: nothing sampled -> ratio 1 -> kept
    old = torch.zeros(4, 3)
    sampler = torch.tensor([[-0.5, -0.1, -0.9], [-0.5, -0.5, math.nan], [0.6, 0.4, 0.0], [math.nan] * 3])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    assert sequence_importance_mask(old, sampler, mask, 1.5).tolist() == [True, False, False, True]
    assert sequence_importance_mask(old, sampler, mask, None).all()


def test_unknown_policy_loss_lists_the_valid_ones():
    with pytest.raises(ValueError, match="ppo_clip, gspo, cispo"):
        policy_loss("grpo")


def test_the_config_literal_names_exactly_the_registered_policy_losses():
    from typing import get_args

    from grpo.config import AlgorithmConfig
    from grpo.losses import POLICY_LOSS_SPECS

    names = set(get_args(AlgorithmConfig.model_fields["policy_loss"].annotation))
    assert names == set(POLICY_LOSSES) == set(POLICY_LOSS_SPECS)
    for spec in POLICY_LOSS_SPECS.values():  # each names epsilon keys the config has
        assert all(key in AlgorithmConfig.model_fields for key in spec.eps_keys)


CATEGORICAL_THETA = torch.tensor([0.5, -0.2, 0.1, -0.6, 0.3])  # the policy: softmax over five one-token answers
CATEGORICAL_SAMPLER = torch.tensor([-0.3, 0.4, 0.1, 0.2, -0.2])  # deliberately another distribution (pi / mu from 0.44 to 2.19)
CATEGORICAL_REWARDS = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0])


def _categorical_gradient(seed: int, cap: float | None, n: int = 64) -> torch.Tensor:
    """One batch of ``n`` one-token episodes drawn from the sampler: the ascent direction the update takes
    (PPO clip on policy, old = the policy's own; each token's loss times its truncated importance weight
    when ``cap`` is given, as ``grpo.update`` applies ``algorithm.tis_cap``). Advantage: the reward itself."""
    g = torch.Generator().manual_seed(seed)
    actions = torch.multinomial(torch.softmax(CATEGORICAL_SAMPLER, 0), n, replacement=True, generator=g)
    theta = CATEGORICAL_THETA.clone().requires_grad_(True)
    logp = torch.log_softmax(theta, 0)[actions].unsqueeze(1)
    sampler = torch.log_softmax(CATEGORICAL_SAMPLER, 0)[actions].unsqueeze(1)
    mask = torch.ones(n, 1)
    out = policy_loss("ppo_clip")(logp, logp.detach(), CATEGORICAL_REWARDS[actions], mask, 0.2, 0.28)
    loss = out.loss * truncated_importance_weights(logp.detach(), sampler, cap).weight if cap is not None else out.loss
    loss_aggregation("token-mean")(loss, mask, 1).backward()
    return -theta.grad


def test_importance_correction_recovers_the_exact_on_policy_gradient():
    """J = sum_a pi(a) r(a), so dJ/dtheta_k = pi_k (r_k - J) exactly. Sampling from mu != pi, the plain
    estimate converges to sum_a mu(a) r(a) grad log pi(a) instead (measured: 0.13 off, 56% of |grad J|, over
    400 batches of 64); weighting each token by pi / mu recovers grad J up to Monte Carlo noise (0.005 with
    cap 5, never reached here), and truncating at 2 (pi / mu reaches 2.19) keeps a small bias (0.025)."""
    pi = torch.softmax(CATEGORICAL_THETA, 0)
    exact = pi * (CATEGORICAL_REWARDS - (pi * CATEGORICAL_REWARDS).sum())
    error = {cap: (torch.stack([_categorical_gradient(seed, cap) for seed in range(400)]).mean(0) - exact).norm().item()
             for cap in (None, 2.0, 5.0)}
    size = exact.norm().item()
    assert error[None] > 0.4 * size  # uncorrected: biased toward the sampler
    assert error[5.0] < 0.05 * size  # corrected: the exact gradient, to noise
    assert error[2.0] < 0.25 * error[None]  # truncated: most of the bias gone, variance bounded
