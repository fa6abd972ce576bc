"""What one step trains on: every episode of this rank with its group-relative advantage (``grpo.algorithm``),
collated into a ``TrainBatch`` (``grpo.batching``)."""

from __future__ import annotations

import torch

from grpo.algorithm import advantages_by_group, signal_by_group
from grpo.batching import TrainBatch, collate
from grpo.config import TrainerConfig
from grpo.episodes import Trajectory


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
