"""What one step trains on: every episode of this rank with its group-relative advantage (``grpo.algorithm``),
packed from variable lengths into padded tensors for the policy update (``TrainBatch``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from grpo.algorithm import advantages_by_group, signal_by_group
from grpo.config import TrainerConfig
from grpo.episodes import Trajectory


def pad_right(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    """``(B, max_len)`` long tensor, each row padded on the right with ``value``."""
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [value] * (width - len(r)) for r in rows], dtype=torch.long)


@dataclass
class TrainBatch:
    """input_ids, attention_mask: ``(B, L)``; loss_mask and sampler_logprobs (the sampler's log-prob of each
    target, NaN where unknown): ``(B, L-1)``, aligned to targets ``input_ids[:, 1:]``; advantages: ``(B,)``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    advantages: torch.Tensor
    sampler_logprobs: torch.Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def select(self, index: torch.Tensor | slice) -> TrainBatch:
        return TrainBatch(*(getattr(self, f.name)[index] for f in fields(self)))

    def narrowed(self, width: int) -> TrainBatch:
        """The first ``width`` positions (``width - 1`` targets): right padding past every row's end dropped."""
        return TrainBatch(self.input_ids[:, :width], self.attention_mask[:, :width], self.loss_mask[:, : width - 1], self.advantages,
                          self.sampler_logprobs[:, : width - 1])

    def to(self, device: torch.device | str) -> TrainBatch:
        return TrainBatch(*(getattr(self, f.name).to(device) for f in fields(self)))


def collate(
    token_ids: Sequence[Sequence[int]],
    loss_masks: Sequence[Sequence[int]],
    advantages: Sequence[float],
    pad_id: int,
    sampler_logprobs: Sequence[Sequence[float]] | None = None,
) -> TrainBatch:
    """A right-padded batch; ``loss_masks[i][t]`` is 1 where token t of sequence i is the model's own, and
    ``sampler_logprobs[i][t]`` the sampler's log-prob of that token (NaN for tokens it did not sample)."""
    ids = pad_right(token_ids, pad_id)
    attention = pad_right([[1] * len(t) for t in token_ids], 0)
    mask = pad_right(loss_masks, 0)
    width = ids.shape[1]
    sampled = [list(r) + [math.nan] * (width - len(r)) for r in sampler_logprobs] if sampler_logprobs is not None else [[math.nan] * width for _ in token_ids]
    return TrainBatch(ids, attention, mask[:, 1:].float(), torch.tensor(advantages, dtype=torch.float32), torch.tensor(sampled, dtype=torch.float32)[:, 1:])


def training_batch(episodes: list[Trajectory], cfg: TrainerConfig, pad_id: int) -> TrainBatch:
    """Every episode of this rank with its group-relative advantage; those that failed in the environment
    keep their row with nothing to train on (so every rank has the same number of sequences and mini-batches),
    and so do those of groups without signal under ``algorithm.zero_variance_groups: mask``."""
    a = cfg.algorithm
    rewards, groups = torch.tensor([t.reward for t in episodes]), torch.tensor([t.group_id for t in episodes])
    valid = torch.tensor([not t.env_error for t in episodes])
    advantages = advantages_by_group(rewards, groups, valid, a.std_eps, a.normalize_std, a.std_floor).tolist()
    trains = valid & signal_by_group(rewards, groups, valid) if a.zero_variance_groups == "mask" else valid
    ids = [t.token_ids or [pad_id, pad_id] for t in episodes]
    masks = [t.loss_mask if keep else [0] * len(i) for t, i, keep in zip(episodes, ids, trains.tolist())]
    sampled = [t.sampler_logprobs if t.token_ids else [float("nan")] * 2 for t in episodes]
    return collate(ids, masks, [0.0 if t.env_error else adv for t, adv in zip(episodes, advantages)], pad_id, sampled)
