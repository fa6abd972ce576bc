"""The GRPO math as pure functions: tensors in, tensors out, no config objects, no I/O.

Shapes: ``G`` prompt groups of ``n`` samples; ``B`` sequences; ``T`` target positions.
Leaves out (for now): Dr. GRPO, clip-higher, other KL estimators and loss aggregations (issue 4).
"""

from __future__ import annotations

import torch


def group_advantages(rewards: torch.Tensor, valid: torch.Tensor, std_eps: float = 1e-6) -> torch.Tensor:
    """Group-relative advantages ``(r - mean) / (std + eps)`` over the valid samples of each group.

    rewards, valid: ``(G, n)``; invalid samples (environment errors) take no part in their group's
    mean and std and get advantage 0. std is the population std of the valid rewards.
    Returns ``(G, n)``.
    """
    valid_f = valid.to(rewards.dtype)
    count = valid_f.sum(dim=1, keepdim=True).clamp(min=1.0)
    mean = (rewards * valid_f).sum(dim=1, keepdim=True) / count
    var = (((rewards - mean) ** 2) * valid_f).sum(dim=1, keepdim=True) / count
    advantages = (rewards - mean) / (var.sqrt() + std_eps)
    return advantages * valid_f


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (any shape); 0 when the mask is empty."""
    mask_f = mask.to(values.dtype)
    return (values * mask_f).sum() / mask_f.sum().clamp(min=1.0)


def ppo_clipped_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO clipped surrogate loss and where the clip was active.

    logprobs, old_logprobs: ``(B, T)``; advantages: ``(B,)``, one per sequence.
    loss = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) with ratio = exp(logprobs - old).
    Returns ``(loss (B, T), clipped (B, T) bool)``; clipped marks tokens whose gradient the clip removed.
    """
    adv = advantages.unsqueeze(-1)
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    loss = -torch.minimum(unclipped, clipped)
    return loss, clipped < unclipped


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(policy || reference): ``exp(d) - d - 1`` with ``d = ref - logprobs``.

    Non-negative, unbiased for samples from the policy, low variance (Schulman's k3). ``(B, T)`` in and out.
    """
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0
