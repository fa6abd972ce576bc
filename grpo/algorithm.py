"""The GRPO math as pure functions: tensors in, tensors out, no config objects, no I/O.

Shapes: ``G`` prompt groups of ``n`` samples; ``B`` sequences; ``T`` target positions.
Variants are registries with one signature per family (policy losses, KL estimators, loss aggregations); an unknown
name raises with the list of valid names. One module on purpose, past 300 lines: the whole objective reads in one
place, as verl's ``core_algos.py`` does, and half of it is the shapes and formulas in docstrings; what the rest of
the code reads about a policy loss (its epsilon keys, whether its clip measures the update) is ``grpo.losses``.
"""

from __future__ import annotations

import math
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


def signal_by_group(rewards: torch.Tensor, group_ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Whether each sample's group carries signal: two of its valid samples have different rewards (its
    reward variance is not 0, so its advantages are not all 0). rewards, group_ids, valid: ``(B,)``, any
    order; invalid samples (environment errors) take no part, so a group with fewer than two valid samples
    has none. Returns ``(B,)`` bool."""
    ids, row = torch.unique(group_ids, return_inverse=True)
    inf = torch.tensor(float("inf"), dtype=rewards.dtype)
    highest = torch.full((len(ids),), -inf, dtype=rewards.dtype).scatter_reduce(0, row, torch.where(valid, rewards, -inf), "amax")
    lowest = torch.full((len(ids),), inf, dtype=rewards.dtype).scatter_reduce(0, row, torch.where(valid, rewards, inf), "amin")
    return (highest > lowest)[row]


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


def ppo_clip_policy_loss(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, eps_low: float | None, eps_high: float
) -> ClippedLoss:
    """The ``ppo_clip`` entry of ``POLICY_LOSSES``: ``ppo_clipped_loss`` per token (the mask is not needed,
    the aggregation applies it). ``eps_low`` None means the same as ``eps_high``."""
    return ppo_clipped_loss(logprobs, old_logprobs, advantages, eps_high if eps_low is None else eps_low, eps_high)


def sequence_log_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over each sequence's own (unmasked) tokens of ``logprobs - old_logprobs``: ``(B, T) -> (B,)``.
    0 for a sequence with no unmasked token. Gradient flows to every unmasked token's log-prob, 1/|y_i| each."""
    mask_f = mask.to(logprobs.dtype)
    return ((logprobs - old_logprobs) * mask_f).sum(-1) / mask_f.sum(-1).clamp(min=1.0)


def gspo_loss(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, eps_low: float | None, eps_high: float
) -> ClippedLoss:
    """GSPO (Group Sequence Policy Optimization, Qwen 2025): the PPO clip on a sequence-level ratio.

    logprobs, old_logprobs, mask: ``(B, T)``; advantages: ``(B,)``. s_i = exp(mean over sequence i's
    unmasked tokens of (logprobs - old)); loss_i = -min(s_i * A_i, clip(s_i, 1 - eps_low, 1 + eps_high) * A_i).
    Returned per token: every token of sequence i carries loss_i (``(B, T)``), so ``seq-mean-token-mean``
    gives the paper's objective (mean over sequences); ``token-mean`` weighs long sequences more. The clip
    flags are the sequence's, on all its tokens. ``eps_low`` None means the same as ``eps_high``.
    """
    eps_low = eps_high if eps_low is None else eps_low
    seq_ratio = torch.exp(sequence_log_ratio(logprobs, old_logprobs, mask))
    unclipped = seq_ratio * advantages
    clipped = torch.clamp(seq_ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    active = clipped < unclipped
    per_seq = -torch.minimum(unclipped, clipped)
    width = logprobs.shape[-1]
    return ClippedLoss(
        per_seq.unsqueeze(-1).expand(-1, width),
        (active & (advantages < 0)).unsqueeze(-1).expand(-1, width),
        (active & (advantages > 0)).unsqueeze(-1).expand(-1, width),
    )


def cispo_loss(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, eps_low: float | None, eps_high: float
) -> ClippedLoss:
    """CISPO (MiniMax-M1, 2025): a clipped, detached importance weight times the REINFORCE term.

    logprobs, old_logprobs: ``(B, T)``; advantages: ``(B,)``. r = exp(logprobs - old);
    loss = -sg(clip(r, 1 - eps_low, 1 + eps_high)) * A * logprobs, with no lower bound when ``eps_low`` is
    None (the paper tunes only the upper one). Every token keeps its gradient ``-w * A``: the clip bounds
    the weight, it never drops a token. ``clipped_high``/``clipped_low`` mark tokens whose weight was
    truncated above/below (whatever the advantage's sign). Its value is not PPO's (on-policy it is
    ``-A * logprobs``, not ``-A``); its gradient on-policy is the same.
    """
    ratio = torch.exp(logprobs.detach() - old_logprobs)
    low = None if eps_low is None else 1.0 - eps_low
    weight = torch.clamp(ratio, min=low, max=1.0 + eps_high)
    above = ratio > 1.0 + eps_high
    below = ratio < low if low is not None else torch.zeros_like(above)
    return ClippedLoss(-weight * advantages.unsqueeze(-1) * logprobs, below, above)


POLICY_LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float | None, float], ClippedLoss]] = {
    "ppo_clip": ppo_clip_policy_loss,
    "gspo": gspo_loss,
    "cispo": cispo_loss,
}


def policy_loss(name: str) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float | None, float], ClippedLoss]:
    """``(logprobs (B, T), old_logprobs (B, T), advantages (B,), mask (B, T), eps_low, eps_high) -> ClippedLoss``
    by name; the per-token loss is then aggregated (and masked) by the chosen loss aggregation."""
    if name not in POLICY_LOSSES:
        raise ValueError(f"unknown policy loss {name!r} (valid: {', '.join(POLICY_LOSSES)})")
    return POLICY_LOSSES[name]


class ImportanceWeights(NamedTuple):
    """Per-token weights ``(B, T)`` (detached) and where the cap truncated them ``(B, T)`` bool."""

    weight: torch.Tensor
    truncated: torch.Tensor


def truncated_importance_weights(old_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, cap: float | None) -> ImportanceWeights:
    """Token-level truncated importance sampling (TIS) from the sampler to the policy that is updated.

    old_logprobs (the policy's own, recomputed), sampler_logprobs (what vLLM or HF generate reported,
    NaN on tokens it did not sample): ``(B, T)``. w = min(exp(old - sampler), cap), detached; 1 where the
    sampler's log-prob is not finite (prompt, tool output, padding: masked anyway). ``cap`` None: no
    truncation (the plain ratio, for measuring). Multiplying each token's policy loss by w corrects the
    update for sampling from a slightly different distribution (bf16 vLLM, a stale engine).
    """
    log_ratio = (old_logprobs.detach() - sampler_logprobs).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
    ratio = torch.where(torch.isfinite(sampler_logprobs), torch.exp(log_ratio), torch.ones_like(log_ratio))
    if cap is None:
        return ImportanceWeights(ratio, torch.zeros_like(ratio, dtype=torch.bool))
    return ImportanceWeights(ratio.clamp(max=cap), ratio > cap)


def sequence_importance_mask(old_logprobs: torch.Tensor, sampler_logprobs: torch.Tensor, mask: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Which sequences to keep under sequence-level masked importance sampling: ``(B, T) x3 -> (B,)`` bool.

    The sequence's ratio is the geometric mean exp(mean over its sampled tokens of (old - sampler)) (the
    plain product explodes with length); a sequence is kept when it lies in ``[1 / cap, cap]``. A sequence
    without a finite sampler log-prob on its unmasked tokens has ratio 1 and is kept; ``cap`` None keeps all.
    """
    if cap is None:
        return torch.ones(old_logprobs.shape[0], dtype=torch.bool, device=old_logprobs.device)
    sampled = mask.to(torch.bool) & torch.isfinite(sampler_logprobs)
    mean_log_ratio = sequence_log_ratio(old_logprobs.detach(), sampler_logprobs.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0), sampled)
    return mean_log_ratio.abs() <= math.log(cap)


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
