"""A step's rollouts: one round of ``rollout.prompts_per_step`` tasks, or, with dynamic sampling (DAPO),
more rounds until the step holds that many groups with signal.

A round draws its tasks from the task sampler (so a resumed run draws the same ones) and each rank runs
its share, ``batch[rank::world]``; a task's group id is its place among every round's tasks (round r's
start at ``r * prompts_per_step``), the same on every rank. Every rank sees every episode after the
gather, so all decide alike which groups train: the first ``prompts_per_step`` with signal, in draw
order; when none has any after ``max_rounds``, the first round's groups, as a step without dynamic
sampling trains (its advantages are 0; ``algorithm.zero_variance_groups`` says whether their KL term
stays). The groups that train are dealt to the ranks in turn and each rank's share is padded with empty
rows to the largest share, so every rank runs the same number of mini-batches (which is why
``seq-mean-token-sum-norm``, dividing by every sequence, is refused with several workers). Without
dynamic sampling a rank trains on its own episodes, exactly as before. Left out: drawing more than a
batch per round, or adapting the round size to the share of groups with signal seen so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from grpo.algorithm import signal_by_group
from grpo.build import Models
from grpo.config import TrainerConfig
from grpo.curriculum import CurriculumSampler
from grpo.data import TaskSampler
from grpo.distributed import gather_lists
from grpo.episodes import EpisodeLimits, Trajectory, collect
from toolenvs.seam import EnvBackend
from toolenvs.task import Task


@dataclass
class StepRollouts:
    everyone: list[Trajectory]  # every episode of the step, every rank's, every round's
    mine: list[Trajectory]  # what this rank trains on
    metrics: dict[str, float]  # dynamic/*: empty without dynamic sampling


def groups_with_signal(episodes: Sequence[Trajectory]) -> list[int]:
    """Ids of the groups whose valid rewards differ, ascending (draw order)."""
    if not episodes:
        return []
    ids = torch.tensor([t.group_id for t in episodes])
    signal = signal_by_group(torch.tensor([t.reward for t in episodes], dtype=torch.float64), ids, torch.tensor([not t.env_error for t in episodes]))
    return sorted(set(ids[signal].tolist()))


def kept_groups(with_signal: Sequence[int], first_round: Sequence[int], size: int) -> list[int]:
    """The groups a step trains on: the first ``size`` with signal; none with signal: the first round's."""
    return list(with_signal[:size]) if with_signal else list(first_round)


def rank_share(episodes: Sequence[Trajectory], groups: Sequence[int], rank: int, world: int) -> list[Trajectory]:
    """The episodes of ``groups[rank::world]`` (in their order in ``episodes``), padded with empty rows
    (an environment error: no tokens, no advantage) up to the largest rank's share."""
    rows: list[list[Trajectory]] = [[] for _ in range(world)]
    owner = {group: i % world for i, group in enumerate(groups)}
    for t in episodes:
        if t.group_id in owner:
            rows[owner[t.group_id]].append(t)
    width = max(len(r) for r in rows)
    padding = [Trajectory(task_key="", env_key="", group_id=-1, env_error=True, error="padding") for _ in range(width - len(rows[rank]))]
    return rows[rank] + padding


def dynamic_metrics(rounds: int, groups: int, with_signal: int, trained: int, episodes: int, first_round_episodes: int) -> dict[str, float]:
    return {
        "dynamic/rounds": float(rounds),
        "dynamic/extra_episodes": float(episodes - first_round_episodes),
        "dynamic/groups_filtered": float(groups - trained),
        "dynamic/groups_trained": float(trained),
        "dynamic/signal_share": with_signal / groups if groups else 0.0,
        "dynamic/no_signal": float(with_signal == 0),
    }


def one_round(cfg: TrainerConfig, models: Models, batch: list[Task], envs: EnvBackend, first_id: int) -> tuple[list[Trajectory], list[Trajectory]]:
    """(this rank's episodes, every rank's) of one round whose tasks' group ids start at ``first_id``."""
    ranks = models.ranks
    mine = list(range(len(batch)))[ranks.rank :: ranks.world]  # a task's place in the batch is its group's id, on every rank
    episodes = collect([batch[i] for i in mine], cfg.rollout.n_samples_per_prompt, envs, models.generator, models.chat,
                       EpisodeLimits.of(cfg.rollout), group_ids=[first_id + i for i in mine])
    return episodes, gather_lists(episodes, models.ranks)


def roll_out(cfg: TrainerConfig, models: Models, sampler: TaskSampler | CurriculumSampler, envs: EnvBackend) -> StepRollouts:
    """The step's rollouts (module docstring)."""
    size, dynamic = cfg.rollout.prompts_per_step, cfg.algorithm.dynamic_sampling
    own, everyone = one_round(cfg, models, sampler.next_batch(size), envs, 0)
    if not dynamic.enabled:
        return StepRollouts(everyone, own, {})
    first_round, rounds = len(everyone), 1
    while len(groups_with_signal(everyone)) < size and rounds < dynamic.max_rounds:
        everyone += one_round(cfg, models, sampler.next_batch(size), envs, rounds * size)[1]
        rounds += 1
    with_signal = groups_with_signal(everyone)
    kept = kept_groups(with_signal, range(size), size)
    mine = rank_share(everyone, kept, models.ranks.rank, models.ranks.world)
    return StepRollouts(everyone, mine, dynamic_metrics(rounds, rounds * size, len(with_signal), len(kept), len(everyone), first_round))
