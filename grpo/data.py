"""Task selection and a deterministic task sampler (shuffled epochs, seeded; or the curriculum's, ``make_sampler``)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from configkit.base import ConfigError
from configkit.suggest import did_you_mean
from grpo.config import EnvConfig, TrainerConfig
from grpo.curriculum import CurriculumSampler, curriculum_sampler
from toolenvs.task import Task, load_task_files


def select_tasks(cfg: EnvConfig) -> list[Task]:
    """The trial's tasks: the file's records, filtered by env_key, capped at max_tasks. An env_key the
    files have no task of (a typo, or a file that lacks it) is a ConfigError naming those they have."""
    paths = [cfg.tasks_path] if isinstance(cfg.tasks_path, str) else cfg.tasks_path
    try:
        tasks = load_task_files(paths)
    except ConfigError as exc:
        raise ConfigError(f"key 'env.tasks_path': {exc}") from None
    if not tasks:
        raise ConfigError(f"key 'env.tasks_path' = {cfg.tasks_path!r}: no tasks in the file(s)")
    if cfg.env_keys is not None:
        present = sorted({t.env_key for t in tasks})
        unknown = list(dict.fromkeys(key for key in cfg.env_keys if key not in present))
        if unknown or not cfg.env_keys:
            what = (f"no tasks of env.tasks_path {cfg.tasks_path!r} have env_key {', '.join(map(repr, unknown))}" if unknown
                    else "an empty list selects no tasks")
            hints = {key: did_you_mean(key, present) for key in unknown}
            near = "".join(hint if len(unknown) == 1 else f"{key!r}: {hint}" for key, hint in hints.items() if hint)
            raise ConfigError(f"key 'env.env_keys' = {cfg.env_keys!r}: {what}; {near}theirs: {', '.join(present)} (leave env_keys out for all)")
        tasks = [t for t in tasks if t.env_key in cfg.env_keys]
    if cfg.max_tasks is not None:
        tasks = tasks[: cfg.max_tasks]
    return tasks


def held_out_split(
    tasks: list[Task], ratio: float, seed: int, max_eval: int | None = None, max_per_env: int | None = None
) -> tuple[list[Task], list[Task]]:
    """(train, eval): ``ratio`` of the tasks, at least one and at most ``max_eval`` (and ``max_per_env`` of
    each env_key), held out by seed."""
    count = max(1, round(len(tasks) * ratio))
    if max_eval is not None:
        count = min(count, max_eval)
    if count >= len(tasks):
        raise ValueError(f"holding out {count} of {len(tasks)} tasks leaves none to train on: lower eval.ratio")
    if max_per_env is None:
        held = set(t.task_key for t in random.Random(seed).sample(tasks, count))
    else:
        held = _held_out_per_env(random.Random(seed).sample(tasks, len(tasks)), count, max_per_env)
    return [t for t in tasks if t.task_key not in held], [t for t in tasks if t.task_key in held]


def _held_out_per_env(shuffled: list[Task], count: int, max_per_env: int) -> set[str]:
    """The first ``count`` tasks of a shuffled list, skipping those whose env_key already has ``max_per_env``."""
    per_env: dict[str, int] = {}
    held: set[str] = set()
    for task in shuffled:
        if len(held) == count:
            break
        if per_env.get(task.env_key, 0) < max_per_env:
            per_env[task.env_key] = per_env.get(task.env_key, 0) + 1
            held.add(task.task_key)
    return held


class TaskSampler:
    """Draws tasks without replacement, reshuffling each epoch; the order depends only on the seed."""

    def __init__(self, tasks: list[Task], seed: int):
        self.tasks = tasks
        self.rng = random.Random(seed)
        self.queue: list[Task] = []

    def state(self) -> dict:
        """The position in the current epoch and the shuffle RNG, JSON-able."""
        version, internal, gauss = self.rng.getstate()
        return {"queue": [t.task_key for t in self.queue], "rng": [version, list(internal), gauss]}

    def restore(self, state: dict) -> None:
        if "queue" not in state:
            raise ValueError("the checkpoint's task sampler is the curriculum's, and this config leaves data.curriculum off: resume with the config it was saved with")
        by_key = {t.task_key: t for t in self.tasks}
        self.queue = [by_key[k] for k in state["queue"]]
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))

    def next_batch(self, size: int) -> list[Task]:
        batch: list[Task] = []
        while len(batch) < size:
            if not self.queue:
                self.queue = self.rng.sample(self.tasks, len(self.tasks))
            batch.append(self.queue.pop())
        return batch

    def observe(self, episodes: Iterable[Any]) -> None:
        """Shuffled epochs learn nothing from outcomes (``grpo.curriculum.CurriculumSampler`` does)."""

    def metrics(self) -> dict[str, float]:
        return {}


def make_sampler(cfg: TrainerConfig, tasks: list[Task]) -> TaskSampler | CurriculumSampler:
    """The trial's task sampler: shuffled epochs, or the curriculum's weighted draws (``data.curriculum``)."""
    if cfg.data.curriculum.enabled:
        return curriculum_sampler(cfg, tasks)
    return TaskSampler(tasks, cfg.seed)


def trial_tasks(cfg: TrainerConfig) -> tuple[list[Task], list[Task]]:
    """(train, eval) for a trial; eval is empty when eval.interval is 0. The base policy sees train only.
    With ``eval.tasks_path`` the held-out tasks are that file's (filtered and capped as the rest)."""
    tasks = select_tasks(cfg.env)
    if not cfg.eval.interval:
        return tasks, []
    if cfg.eval.tasks_path is not None:
        return tasks, held_out_file(cfg, {t.task_key for t in tasks})
    return held_out_split(tasks, cfg.eval.ratio, cfg.eval.split_seed, cfg.eval.max_tasks, cfg.eval.max_tasks_per_env)


def base_tasks(cfg: TrainerConfig, train: Sequence[Task] | None = None) -> list[Task]:
    """The tasks the tiny base is warm-started on (and hashed by): the training tasks (``train``, when the caller
    holds them), then the held-out tasks of every env whose ``model.warmstart_envs`` entry sets ``held_out`` (an
    env made saturated by having seen them). The task files are read once."""
    seen = {env for env, c in cfg.model.warmstart_envs.items() if c.held_out}
    if train is not None and not seen:
        return list(train)
    own, held_out = trial_tasks(cfg)
    return [*(own if train is None else train), *(t for t in held_out if t.env_key in seen)]


def held_out_file(cfg: TrainerConfig, training: set[str]) -> list[Task]:
    """The eval file's tasks (the env selection's filters and the eval caps applied); a task that is also a
    training task is refused by name (it would not be held out)."""
    paths = [cfg.eval.tasks_path] if isinstance(cfg.eval.tasks_path, str) else list(cfg.eval.tasks_path or [])
    try:
        tasks = [t for t in load_task_files(paths) if cfg.env.env_keys is None or t.env_key in cfg.env.env_keys]
    except ConfigError as exc:
        raise ConfigError(f"key 'eval.tasks_path': {exc}") from None
    both = sorted(t.task_key for t in tasks if t.task_key in training)
    if both:
        raise ValueError(f"eval.tasks_path {paths}: {len(both)} task(s) are also training tasks in env.tasks_path, so not held out: {', '.join(both[:5])}")
    if cfg.eval.max_tasks_per_env is not None:
        per_env: dict[str, int] = {}
        kept = []
        for task in tasks:
            per_env[task.env_key] = per_env.get(task.env_key, 0) + 1
            if per_env[task.env_key] <= cfg.eval.max_tasks_per_env:
                kept.append(task)
        tasks = kept
    tasks = tasks[: cfg.eval.max_tasks] if cfg.eval.max_tasks is not None else tasks
    if not tasks:
        raise ValueError(f"eval.tasks_path {paths}: no tasks left after env.env_keys={cfg.env.env_keys}")
    return tasks
