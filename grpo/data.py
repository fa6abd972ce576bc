"""Task selection and a deterministic task sampler (shuffled epochs, seeded)."""

from __future__ import annotations

import random

from envs.task import Task, load_tasks
from grpo.config import EnvConfig


def select_tasks(cfg: EnvConfig) -> list[Task]:
    """The trial's tasks: the file's records, filtered by env_key, capped at max_tasks."""
    tasks = load_tasks(cfg.tasks_path)
    if cfg.env_keys is not None:
        tasks = [t for t in tasks if t.env_key in cfg.env_keys]
    if cfg.max_tasks is not None:
        tasks = tasks[: cfg.max_tasks]
    if not tasks:
        raise ValueError(f"{cfg.tasks_path}: no tasks left after env_keys={cfg.env_keys} and max_tasks={cfg.max_tasks}")
    return tasks


class TaskSampler:
    """Draws tasks without replacement, reshuffling each epoch; the order depends only on the seed."""

    def __init__(self, tasks: list[Task], seed: int):
        self.tasks = tasks
        self.rng = random.Random(seed)
        self.queue: list[Task] = []

    def next_batch(self, size: int) -> list[Task]:
        batch: list[Task] = []
        while len(batch) < size:
            if not self.queue:
                self.queue = self.rng.sample(self.tasks, len(self.tasks))
            batch.append(self.queue.pop())
        return batch
