"""The GRPO math as pure functions: tensors in, tensors out, no config objects, no I/O.

Shapes: ``G`` prompt groups of ``n`` samples; ``B`` sequences; ``T`` target positions.
Variants are registries with one signature per family (KL estimators, loss aggregations); an unknown
name raises with the list of valid names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch


def group_advantages(
    rewards: torch.Tensor, valid: torch.Tensor, std_eps: float = 1e-6, normalize_std: bool = True, std_floor: float = 0.0
) -> torch.Tensor:
    """Group-relative advantages over the valid samples of each group.

    ``(r - mean) / (max(std, std_floor) + std_eps)`` when ``normalize_std`` (GRPO), else ``r - mean``
    (Dr. GRPO: no per-group std division, so easy and hard groups weigh alike). rewards, valid:
    ``(G, n)``; invalid samples (environment errors) take no part in their group's mean and std and get
    advantage 0. std is the population std of the valid rewards. Returns ``(G, n)``.
    """
    valid_f = valid.to(rewards.dtype)
    count = valid_f.sum(dim=1, keepdim=True).clamp(min=1.0)
    mean = (rewards * valid_f).sum(dim=1, keepdim=True) / count
    centred = rewards - mean
    if normalize_std:
        var = ((centred**2) * valid_f).sum(dim=1, keepdim=True) / count
        centred = centred / (var.sqrt().clamp(min=std_floor) + std_eps)
    return centred * valid_f


def advantages_by_group(
    rewards: torch.Tensor, group_ids: torch.Tensor, valid: torch.Tensor, std_eps: float = 1e-6, normalize_std: bool = True, std_floor: float = 0.0
) -> torch.Tensor:
    """``group_advantages`` for samples that name their group: any order, any group sizes.

    rewards, group_ids, valid: ``(B,)``. Samples of one group id are gathered (in their order) into a row
    of a ``(G, n_max)`` table, padded with invalid entries, which take no part in a group's mean and std;
    each sample's advantage is scattered back to its place. Returns ``(B,)``.
    """
    ids, row = torch.unique(group_ids, return_inverse=True)
    order = torch.argsort(row, stable=True)
    sizes = torch.bincount(row, minlength=len(ids))
    starts = torch.cumsum(sizes, 0) - sizes
    column = torch.empty_like(row)
    column[order] = torch.arange(len(row)) - starts[row[order]]
    width = int(sizes.max()) if len(sizes) else 0
    table = torch.zeros(len(ids), width, dtype=rewards.dtype)
    mask = torch.zeros(len(ids), width, dtype=torch.bool)
    table[row, column] = rewards
    mask[row, column] = valid
    return group_advantages(table, mask, std_eps, normalize_std, std_floor)[row, column]


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (any shape); 0 when the mask is empty."""
    mask_f = mask.to(values.dtype)
    return (values * mask_f).sum() / mask_f.sum().clamp(min=1.0)


class ClippedLoss(NamedTuple):
    """Per-token loss ``(B, T)`` and where each side of the clip removed the gradient ``(B, T)`` bool."""

    loss: torch.Tensor
    clipped_low: torch.Tensor
    clipped_high: torch.Tensor


def ppo_clipped_loss(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, clip_low: float, clip_high: float | None = None
) -> ClippedLoss:
    """Per-token PPO clipped surrogate, with separate low and high clip ranges (DAPO clip-higher).

    logprobs, old_logprobs: ``(B, T)``; advantages: ``(B,)``, one per sequence. ratio = exp(logprobs - old);
    loss = -min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A). ``clipped_high`` marks tokens
    with A > 0 whose ratio passed 1 + clip_high, ``clipped_low`` tokens with A < 0 below 1 - clip_low:
    exactly where the clip took the gradient away.
    """
    clip_high = clip_low if clip_high is None else clip_high
    adv = advantages.unsqueeze(-1)
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    active = clipped < unclipped
    return ClippedLoss(-torch.minimum(unclipped, clipped), active & (adv < 0), active & (adv > 0))


def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k1 = log p - log q_ref: unbiased, high variance, can be negative. As a loss term its gradient is
    zero in expectation on-policy (E[grad log p] = 0), so it mostly measures; k2 or k3 penalise."""
    return logprobs - ref_logprobs


def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k2 = (log p - log q_ref)^2 / 2: biased, low variance, non-negative."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k3 = exp(d) - d - 1 with d = log q_ref - log p: unbiased for samples from p, low variance, >= 0."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}


def kl_estimator(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Per-token KL(policy || reference) estimator by name, ``(B, T), (B, T) -> (B, T)``."""
    if name not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {name!r} (valid: {', '.join(KL_ESTIMATORS)})")
    return KL_ESTIMATORS[name]


def agg_token_mean(loss: torch.Tensor, mask: torch.Tensor, norm_length: int = 1) -> torch.Tensor:
    """Mean over every unmasked token of the batch: long sequences weigh more (DAPO)."""
    return masked_mean(loss, mask)


def agg_seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor, norm_length: int = 1) -> torch.Tensor:
    """Mean over sequences of each sequence's token mean (original GRPO); empty sequences are skipped."""
    mask_f = mask.to(loss.dtype)
    tokens = mask_f.sum(-1)
    per_seq = (loss * mask_f).sum(-1) / tokens.clamp(min=1.0)
    return masked_mean(per_seq, tokens > 0)


def agg_seq_mean_token_sum_norm(loss: torch.Tensor, mask: torch.Tensor, norm_length: int = 1) -> torch.Tensor:
    """Sum over each sequence's tokens divided by a constant ``norm_length``, then mean over sequences (Dr.
    GRPO). The constant (the trainer passes max_sequence_length) keeps the gradient scale the same for
    every mini-batch, whatever its padded width."""
    mask_f = mask.to(loss.dtype)
    return ((loss * mask_f).sum(-1) / norm_length).mean()


LOSS_AGGREGATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]] = {
    "token-mean": agg_token_mean,
    "seq-mean-token-mean": agg_seq_mean_token_mean,
    "seq-mean-token-sum-norm": agg_seq_mean_token_sum_norm,
}


def weight_tokens(mask: torch.Tensor) -> torch.Tensor:
    """What token-mean divides by: the unmasked tokens."""
    return mask.sum()


def weight_nonempty_sequences(mask: torch.Tensor) -> torch.Tensor:
    """What seq-mean-token-mean divides by: sequences with at least one unmasked token."""
    return (mask.sum(-1) > 0).sum()


def weight_sequences(mask: torch.Tensor) -> torch.Tensor:
    """What seq-mean-token-sum-norm divides by: every sequence."""
    return torch.tensor(mask.shape[0])


AGGREGATION_WEIGHTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "token-mean": weight_tokens,
    "seq-mean-token-mean": weight_nonempty_sequences,
    "seq-mean-token-sum-norm": weight_sequences,
}


def rescale_to_global(local_value: torch.Tensor, local_weight: float, global_weight: float) -> torch.Tensor:
    """A rank's share of the mean over all ranks: ``local_value * local_weight / global_weight``.

    Each aggregation is (sum of terms) / (its weight). Summing these shares over ranks gives the
    aggregation of the combined batch, however unevenly tokens fall on the ranks; the trainer multiplies
    by the world size before backward because FSDP averages gradients across ranks.
    """
    if global_weight <= 0:
        return local_value * 0.0
    return local_value * (local_weight / global_weight)


def loss_aggregation(name: str) -> Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]:
    """``(loss (B, T), mask (B, T), norm_length) -> scalar`` by name; only the Dr. GRPO sum uses norm_length."""
    if name not in LOSS_AGGREGATIONS:
        raise ValueError(f"unknown loss aggregation {name!r} (valid: {', '.join(LOSS_AGGREGATIONS)})")
    return LOSS_AGGREGATIONS[name]
