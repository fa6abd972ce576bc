"""Pack variable-length episodes into padded tensors for the policy update."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch


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
