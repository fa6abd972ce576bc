"""The GRPO math against numbers worked by hand, and vectorised code against a plain loop."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.algorithm import group_advantages, kl_k3, masked_mean, ppo_clipped_loss


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
    loss, clipped = ppo_clipped_loss(new, old, torch.tensor([1.0, 1.0, -1.0, -1.0]), clip_eps=0.2)
    assert loss.squeeze(-1).tolist() == pytest.approx([-1.2, -0.5, 0.8, 1.5], abs=1e-6)
    assert clipped.squeeze(-1).tolist() == [True, False, True, False]


def test_ppo_on_policy_is_minus_advantage_and_never_clipped():
    logp = torch.randn(3, 5)
    loss, clipped = ppo_clipped_loss(logp, logp.clone(), torch.tensor([2.0, -1.0, 0.5]), clip_eps=0.2)
    assert torch.allclose(loss, -torch.tensor([2.0, -1.0, 0.5]).unsqueeze(-1).expand(3, 5))
    assert not clipped.any()


def test_kl_k3_by_hand():
    # p = 0.5, q_ref = 0.25: d = ln(0.5) = -0.6931472; exp(d) - d - 1 = 0.5 + 0.6931472 - 1 = 0.1931472
    kl = kl_k3(torch.log(torch.tensor([[0.5, 0.3]])), torch.log(torch.tensor([[0.25, 0.3]])))
    assert kl.tolist()[0] == pytest.approx([0.1931472, 0.0], abs=1e-6)


def test_masked_mean():
    assert masked_mean(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1, 0, 1, 0])).item() == 2.0
    assert masked_mean(torch.tensor([1.0, 2.0]), torch.tensor([0, 0])).item() == 0.0
