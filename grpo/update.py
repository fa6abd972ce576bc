"""One policy update on a rollout batch: old and reference log-probs, then ``mini_batches`` optimizer steps.

The first mini-batch is on-policy (ratio 1, so the clip cannot engage); later ones see a policy that has
already moved, which is where PPO clipping matters. The loss is the token mean of the clipped surrogate
plus ``kl_coef`` times the k3 KL to the reference, over the model's own tokens only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo.algorithm import kl_k3, masked_mean, ppo_clipped_loss
from grpo.batching import TrainBatch
from grpo.policy import token_logprobs


@dataclass(frozen=True)
class UpdateSettings:
    clip_eps: float
    kl_coef: float
    mini_batches: int
    max_grad_norm: float
    temperature: float


def policy_update(policy, reference, optimizer, batch: TrainBatch, settings: UpdateSettings, generator: torch.Generator) -> dict[str, float]:
    """Run the optimizer steps; returns ``policy/*`` metrics averaged over mini-batches."""
    with torch.no_grad():
        old_logprobs, _ = token_logprobs(policy, batch.input_ids, batch.attention_mask, settings.temperature)
        ref_logprobs = (
            token_logprobs(reference, batch.input_ids, batch.attention_mask, settings.temperature)[0]
            if reference is not None
            else None
        )
    order = torch.randperm(len(batch), generator=generator)
    totals: dict[str, float] = {}
    chunks = [c for c in order.chunk(settings.mini_batches) if len(c)]
    policy.train()
    for index in chunks:
        part = batch.select(index)
        stats = _step(policy, optimizer, part, old_logprobs[index], None if ref_logprobs is None else ref_logprobs[index], settings)
        for key, value in stats.items():
            totals[key] = totals.get(key, 0.0) + value / len(chunks)
    policy.eval()
    return totals


def _step(policy, optimizer, part: TrainBatch, old_logprobs, ref_logprobs, settings: UpdateSettings) -> dict[str, float]:
    logprobs, entropy = token_logprobs(policy, part.input_ids, part.attention_mask, settings.temperature)
    pg_loss, clipped = ppo_clipped_loss(logprobs, old_logprobs, part.advantages, settings.clip_eps)
    mask = part.loss_mask
    loss = masked_mean(pg_loss, mask)
    kl = masked_mean(kl_k3(logprobs, ref_logprobs), mask) if ref_logprobs is not None else torch.zeros(())
    if ref_logprobs is not None and settings.kl_coef > 0:
        loss = loss + settings.kl_coef * kl
    optimizer.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
    optimizer.step()
    return {
        "policy/loss": loss.item(),
        "policy/clip_frac": masked_mean(clipped.float(), mask).item(),
        "policy/kl": kl.item(),
        "policy/entropy": masked_mean(entropy.detach(), mask).item(),
        "policy/grad_norm": float(grad_norm),
        "policy/ratio_mean": masked_mean(torch.exp(logprobs.detach() - old_logprobs), mask).item(),
    }
