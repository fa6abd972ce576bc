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

from grpo.algorithm import AGGREGATION_WEIGHTS, kl_estimator, loss_aggregation, masked_mean, ppo_clipped_loss, rescale_to_global
from grpo.batching import TrainBatch
from grpo.distributed import ONE_PROCESS, Ranks, sum_across
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


def policy_update(
    policy, reference, optimizer, batch: TrainBatch, settings: UpdateSettings, generator: torch.Generator, ranks: Ranks = ONE_PROCESS
) -> dict[str, float]:
    """Run the optimizer steps; returns ``policy/*`` metrics averaged over them (over all ranks' tokens).

    With several ranks every rank passes its own part of the step's batch (the same number of
    sequences on each, so every rank runs the same number of mini-batches: FSDP2 collectives need all).
    """
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
            stats = _step(policy, optimizer, batch.select(index), old_logprobs[index], ref, settings, ranks)
            for key, value in stats.items():
                totals[key] = totals.get(key, 0.0) + value
            steps += 1
    policy.eval()
    return {key: value / steps for key, value in totals.items()}


def _step(policy, optimizer, part: TrainBatch, old_logprobs, ref_logprobs, settings: UpdateSettings, ranks: Ranks) -> dict[str, float]:
    logprobs, entropy = token_logprobs(policy, part.input_ids, part.attention_mask, settings.temperature)
    mask = part.loss_mask
    clipped = ppo_clipped_loss(logprobs, old_logprobs, part.advantages, settings.clip_low, settings.clip_high)
    agg = loss_aggregation(settings.loss_agg)
    local_weight, local_tokens = float(AGGREGATION_WEIGHTS[settings.loss_agg](mask)), float(mask.sum())
    global_weight, global_tokens = sum_across([local_weight, local_tokens], ranks).tolist()

    def aggregate(values: torch.Tensor) -> torch.Tensor:
        """This rank's share of the aggregation over every rank's tokens."""
        return rescale_to_global(agg(values, mask, settings.norm_length), local_weight, global_weight)

    def token_share(values: torch.Tensor) -> torch.Tensor:
        return rescale_to_global(masked_mean(values.detach().float(), mask), local_tokens, global_tokens)

    loss = aggregate(clipped.loss)
    kl = aggregate(kl_estimator(settings.kl_estimator)(logprobs, ref_logprobs)) if ref_logprobs is not None else torch.zeros(())
    if ref_logprobs is not None and settings.kl_coef > 0:
        loss = loss + settings.kl_coef * kl
    if settings.entropy_coef > 0:
        loss = loss - settings.entropy_coef * aggregate(entropy)
    optimizer.zero_grad()
    (loss * ranks.world).backward()  # FSDP2 averages gradients over ranks; the shares already sum to the mean
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
    optimizer.step()
    shares = torch.stack(
        [
            loss.detach(),
            kl.detach(),
            token_share(clipped.clipped_low),
            token_share(clipped.clipped_high),
            token_share(entropy),
            token_share(torch.exp(logprobs.detach() - old_logprobs)),
        ]
    )
    loss_v, kl_v, low, high, entropy_v, ratio = sum_across(shares, ranks).tolist()
    return {
        "policy/loss": loss_v,
        "policy/clip_frac": low + high,
        "policy/clip_frac_low": low,
        "policy/clip_frac_high": high,
        "policy/kl": kl_v,
        "policy/entropy": entropy_v,
        "policy/grad_norm": _full(grad_norm),
        "policy/ratio_mean": ratio,
    }


def _full(value) -> float:
    """A float from a plain tensor or a DTensor (the global norm over the shards)."""
    return float(value.full_tensor() if hasattr(value, "full_tensor") else value)
