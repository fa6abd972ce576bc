"""One policy update on a rollout batch: old and reference log-probs, then ``ppo_epochs`` passes of
``mini_batches`` optimizer steps each.

The first mini-batch is on-policy (ratio 1, so the clip cannot engage); later ones see a policy that has
already moved, which is where PPO clipping matters. The loss is the chosen aggregation of the clipped
surrogate plus ``kl_coef`` times the chosen KL estimator minus ``entropy_coef`` times the entropy, over
the model's own tokens only. The trainer stays algorithm-blind: every choice arrives in ``UpdateSettings``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo.algorithm import kl_estimator, loss_aggregation, masked_mean, ppo_clipped_loss
from grpo.batching import TrainBatch
from grpo.policy import token_logprobs


@dataclass(frozen=True)
class UpdateSettings:
    clip_low: float
    clip_high: float
    kl_coef: float
    mini_batches: int
    max_grad_norm: float
    temperature: float
    kl_estimator: str = "k3"
    loss_agg: str = "token-mean"
    entropy_coef: float = 0.0
    ppo_epochs: int = 1
    norm_length: int = 1  # the constant seq-mean-token-sum-norm divides by (max_sequence_length)


def policy_update(policy, reference, optimizer, batch: TrainBatch, settings: UpdateSettings, generator: torch.Generator) -> dict[str, float]:
    """Run the optimizer steps; returns ``policy/*`` metrics averaged over them."""
    with torch.no_grad():
        old_logprobs, _ = token_logprobs(policy, batch.input_ids, batch.attention_mask, settings.temperature)
        ref_logprobs = (
            token_logprobs(reference, batch.input_ids, batch.attention_mask, settings.temperature)[0]
            if reference is not None
            else None
        )
    totals: dict[str, float] = {}
    steps = 0
    policy.train()
    for _ in range(settings.ppo_epochs):
        order = torch.randperm(len(batch), generator=generator)
        for index in (c for c in order.chunk(settings.mini_batches) if len(c)):
            ref = None if ref_logprobs is None else ref_logprobs[index]
            stats = _step(policy, optimizer, batch.select(index), old_logprobs[index], ref, settings)
            for key, value in stats.items():
                totals[key] = totals.get(key, 0.0) + value
            steps += 1
    policy.eval()
    return {key: value / steps for key, value in totals.items()}


def _step(policy, optimizer, part: TrainBatch, old_logprobs, ref_logprobs, settings: UpdateSettings) -> dict[str, float]:
    logprobs, entropy = token_logprobs(policy, part.input_ids, part.attention_mask, settings.temperature)
    mask = part.loss_mask
    clipped = ppo_clipped_loss(logprobs, old_logprobs, part.advantages, settings.clip_low, settings.clip_high)
    agg = loss_aggregation(settings.loss_agg)

    def aggregate(values: torch.Tensor) -> torch.Tensor:
        return agg(values, mask, settings.norm_length)

    loss = aggregate(clipped.loss)
    kl = aggregate(kl_estimator(settings.kl_estimator)(logprobs, ref_logprobs)) if ref_logprobs is not None else torch.zeros(())
    if ref_logprobs is not None and settings.kl_coef > 0:
        loss = loss + settings.kl_coef * kl
    if settings.entropy_coef > 0:
        loss = loss - settings.entropy_coef * aggregate(entropy)
    optimizer.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
    optimizer.step()
    low, high = masked_mean(clipped.clipped_low.float(), mask).item(), masked_mean(clipped.clipped_high.float(), mask).item()
    return {
        "policy/loss": loss.item(),
        "policy/clip_frac": low + high,
        "policy/clip_frac_low": low,
        "policy/clip_frac_high": high,
        "policy/kl": kl.item(),
        "policy/entropy": masked_mean(entropy.detach(), mask).item(),
        "policy/grad_norm": float(grad_norm),
        "policy/ratio_mean": masked_mean(torch.exp(logprobs.detach() - old_logprobs), mask).item(),
    }
