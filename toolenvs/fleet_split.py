"""Fleet's own train/eval split, rule for rule as SkyRL's ``integrations/fleet/prepare_dataset.py`` makes it,
so a user comparing against their runs on Fleet gets the same held-out tasks.

The rules, in their order: keep the ``env_keys`` asked for and the first ``max_tasks``; drop repeated
task keys (the first stays); drop excluded envs (``dropbox``) and a fixed list of task keys (Fleet's,
``toolenvs/data/fleet_skipped_tasks.txt``: tasks whose prompts lack a year their tools need); per env, in
sorted order: held-out envs go all to eval; else the target is ``min(int(n * eval_ratio), 20)`` eval
tasks, an env whose target is under 5 goes all to train, and otherwise a task is eval when the MD5 of its
key (first 8 bytes, big-endian, over 2**64) is below ``target / n`` (so an env can get a few more or
fewer than its target); then, past ``max_eval_prompts`` eval tasks in all, each env keeps its 4 lowest by
that hash and the rest are dealt round-robin over the envs in sorted order; last, no env keeps more than
``int(len(train) * max_env_ratio)`` training tasks (the lowest by hash). Checked against the script's own
output on its sample (tests). Leaves out the script's parquet output: the split is written as task files.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from toolenvs.task import Task

EXCLUDED_ENVS = ("dropbox",)
MIN_EVAL_SAMPLES = 5
MAX_EVAL_SAMPLES = 20
MAX_ENV_TRAIN_RATIO = 0.20
MAX_EVAL_PROMPTS = 60
EVAL_FLOOR_PER_ENV = 4
SKIPPED = Path(__file__).resolve().parent / "data" / "fleet_skipped_tasks.txt"


@dataclass
class FleetSplit:
    train: list[Task] = field(default_factory=list)
    eval: list[Task] = field(default_factory=list)
    dropped: list[Task] = field(default_factory=list)


def key_hash(task_key: str) -> float:
    """A task key's place in [0, 1): the first 8 bytes of its MD5, big-endian, over 2**64."""
    return int.from_bytes(hashlib.md5(task_key.encode()).digest()[:8], byteorder="big") / 2**64


def skipped_task_keys(path: Path = SKIPPED) -> set[str]:
    """Fleet's fixed list of task keys left out of both splits (comments and blank lines ignored)."""
    return {line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()}


def fleet_split(tasks: list[Task], eval_ratio: float = 0.2, max_env_ratio: float = MAX_ENV_TRAIN_RATIO,
                max_eval_prompts: int | None = MAX_EVAL_PROMPTS, env_keys: tuple[str, ...] = (), max_tasks: int | None = None,
                held_out_envs: tuple[str, ...] = (), excluded_envs: tuple[str, ...] = EXCLUDED_ENVS,
                skipped: set[str] | None = None) -> FleetSplit:
    """Train, eval and dropped tasks by Fleet's rules (the module's docstring)."""
    skipped = skipped_task_keys() if skipped is None else skipped
    out = FleetSplit()
    kept = [t for t in tasks if not env_keys or t.env_key in env_keys]
    if max_tasks is not None:
        out.dropped += kept[max_tasks:]
        kept = kept[:max_tasks]
    seen: set[str] = set()
    by_env: dict[str, list[Task]] = defaultdict(list)
    for task in kept:
        if task.task_key in seen or task.env_key in excluded_envs or task.task_key in skipped:
            out.dropped.append(task)
            continue
        seen.add(task.task_key)
        by_env[task.env_key].append(task)
    for env_key in sorted(by_env):
        env_tasks = by_env[env_key]
        if env_key in held_out_envs:
            out.eval += env_tasks
            continue
        target = min(int(len(env_tasks) * eval_ratio), MAX_EVAL_SAMPLES)
        if target < MIN_EVAL_SAMPLES:
            out.train += env_tasks
            continue
        for task in env_tasks:
            (out.eval if key_hash(task.task_key) < target / len(env_tasks) else out.train).append(task)
    if max_eval_prompts and len(out.eval) > max_eval_prompts:
        kept_eval = _cap_eval(out.eval, max_eval_prompts)
        keys = {t.task_key for t in kept_eval}
        out.dropped += [t for t in out.eval if t.task_key not in keys]
        out.eval = kept_eval
    if max_env_ratio < 1.0 and out.train:
        kept_train = _cap_train(out.train, max_env_ratio)
        keys = {t.task_key for t in kept_train}
        out.dropped += [t for t in out.train if t.task_key not in keys]
        out.train = kept_train
    return out


def _cap_eval(eval_tasks: list[Task], budget: int) -> list[Task]:
    """Each env's lowest-hash few, then round-robin over the envs in sorted order until ``budget``."""
    by_env: dict[str, list[Task]] = defaultdict(list)
    for task in eval_tasks:
        by_env[task.env_key].append(task)
    chosen: list[Task] = []
    rest: dict[str, list[Task]] = {}
    for env_key, env_tasks in by_env.items():
        ordered = sorted(env_tasks, key=lambda t: key_hash(t.task_key))
        chosen += ordered[:EVAL_FLOOR_PER_ENV]
        if len(ordered) > EVAL_FLOOR_PER_ENV:
            rest[env_key] = ordered[EVAL_FLOOR_PER_ENV:]
    order = sorted(rest)
    turn = 0
    while len(chosen) < budget and any(rest.values()):
        env_key = order[turn % len(order)]
        if rest[env_key]:
            chosen.append(rest[env_key].pop(0))
        turn += 1
    return chosen


def _cap_train(train: list[Task], max_env_ratio: float) -> list[Task]:
    """No env above ``int(len(train) * max_env_ratio)`` tasks: the lowest by hash stay."""
    cap = int(len(train) * max_env_ratio)
    by_env: dict[str, list[Task]] = defaultdict(list)
    for task in train:
        by_env[task.env_key].append(task)
    kept: list[Task] = []
    for env_tasks in by_env.values():
        kept += env_tasks if len(env_tasks) <= cap else sorted(env_tasks, key=lambda t: key_hash(t.task_key))[:cap]
    return kept
