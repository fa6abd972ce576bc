"""The policy update on a real tiny model: it moves the right way, clips off-policy, and measures KL."""

from __future__ import annotations

import pytest
import torch

from grpo.batching import collate
from grpo.policy import load_policy, token_logprobs
from grpo.update import UpdateSettings, policy_update
from grpo.warmstart import reference_conversation, supervised_example


def _batch(chat, tasks, advantages):
    examples = [supervised_example(chat, reference_conversation(t)) for t in tasks]
    return collate([e[0] for e in examples], [e[1] for e in examples], advantages, chat.pad_id)


def _own_logprob(model, batch, row):
    with torch.no_grad():
        logp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask)
    return (logp[row] * batch.loss_mask[row]).sum().item()


def _one_update(tiny_base, batch, advantage_sign):
    torch.manual_seed(0)
    policy = load_policy(tiny_base)
    batch.advantages = torch.full_like(batch.advantages, advantage_sign)
    before = _own_logprob(policy, batch, 0)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    settings = UpdateSettings(clip_low=0.2, clip_high=0.2, kl_coef=0.0, mini_batches=1, max_grad_norm=1.0, temperature=1.0)
    stats = policy_update(policy, None, optimizer, batch, settings, torch.Generator().manual_seed(0))
    return before, _own_logprob(policy, batch, 0), stats


def test_advantage_sign_sets_the_direction(tiny_base, chat, tasks):
    up_before, up_after, stats = _one_update(tiny_base, _batch(chat, tasks[:1], [1.0]), 1.0)
    down_before, down_after, _ = _one_update(tiny_base, _batch(chat, tasks[:1], [1.0]), -1.0)
    assert up_after > up_before and down_after < down_before
    assert stats["policy/clip_frac"] == 0.0  # one on-policy mini-batch: ratio 1, nothing to clip
    assert stats["policy/kl"] == 0.0 and stats["policy/grad_norm"] > 0


def test_later_mini_batches_are_clipped_and_kl_grows(tiny_base, chat, tasks):
    torch.manual_seed(0)
    policy = load_policy(tiny_base)
    reference = load_policy(tiny_base, trainable=False)
    batch = _batch(chat, tasks[:8], [1.0, -1.0] * 4)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=2e-2)
    settings = UpdateSettings(clip_low=0.1, clip_high=0.1, kl_coef=0.1, mini_batches=4, max_grad_norm=10.0, temperature=1.0, ppo_epochs=2)
    stats = policy_update(policy, reference, optimizer, batch, settings, torch.Generator().manual_seed(0))
    assert 0.0 < stats["policy/clip_frac"] <= 1.0
    assert stats["policy/clip_frac"] == pytest.approx(stats["policy/clip_frac_low"] + stats["policy/clip_frac_high"])
    assert stats["policy/kl"] > 0.0
    assert all(not p.requires_grad for p in reference.parameters())
