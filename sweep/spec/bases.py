"""One base, one split and one base eval per sweep: which keys change them, and what a space may sweep.

Every trial of a sweep should start from the same policy and meet the same test set, so that they differ by the
setting alone. Which base a trial trains and which tasks it holds out depend on a few trainer keys (``BASE_KEYS``,
``SPLIT_KEYS``), none of them the RL run's ``seed`` (``model.warmstart_seed`` and ``eval.split_seed`` seed those).
A space may sweep such a key over a choice or a grid: the sweep then needs one base per value (``base_variants``),
each built before the trials start (a continuous distribution over one would build a base inside each trial:
refused). The base eval depends on a few more keys (``EVAL_ONLY_KEYS``: sampling and the eval's size); ``eval_key``
names which one a trial shares. Making them is ``sweep.trials.base_evals``'.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from typing import Any

from configkit.base import apply_overrides, dotted_keys, get_dotted, validate
from grpo.config import EVAL_SPLIT_KEYS, TrainerConfig
from grpo.warmstart import RECIPE_MODEL_FIELDS
from sweep.spec.config import Choice, Fixed, SweepConfig

BASE_KEYS = frozenset({f"model.{name}" for name in RECIPE_MODEL_FIELDS} | {"model.warmstart_seed", "model.shipped_base", "model.cache_dir"})


SPLIT_KEYS = frozenset({"env.tasks_path", "env.env_keys", "env.max_tasks", *EVAL_SPLIT_KEYS})


EVAL_ONLY_KEYS = frozenset({
    "eval.n_samples", "rollout.temperature", "rollout.max_turns", "rollout.max_generate_length", "rollout.max_input_length",
    "rollout.max_sequence_length", "rollout.backend",
})


BASE_EVAL_PREFIXES = ("rollout.vllm.", "env.backend.")


def changes_base(key: str) -> bool:
    return key in BASE_KEYS or key in SPLIT_KEYS


def changes_base_eval(key: str) -> bool:
    return changes_base(key) or key in EVAL_ONLY_KEYS or key.startswith(BASE_EVAL_PREFIXES)


def eval_key(trainer: TrainerConfig) -> str:
    """Which base eval a trial shares: a hash of every key its base eval depends on (not its RL seed)."""
    data = trainer.model_dump(mode="json")
    fields = {}
    for key in dotted_keys(TrainerConfig):
        if changes_base_eval(key):
            fields[key] = get_dotted(data, key)
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def swept_base_keys(cfg: SweepConfig) -> dict[str, list[Any] | None]:
    """Swept keys that change the base eval, each with its values (None: continuous, cannot be enumerated)."""
    found: dict[str, list[Any] | None] = {}
    for key, dist in cfg.space.items():
        if changes_base_eval(key):
            found[key] = [dist.value] if isinstance(dist, Fixed) else list(dist.values) if isinstance(dist, Choice) else None
    return found


def base_problems(cfg: SweepConfig, source: str) -> Iterator[str]:
    """A key that changes the base or the split must take finitely many values, each built before the trials."""
    for key, values in swept_base_keys(cfg).items():
        if values is None and changes_base(key):
            yield (f"{source}: key 'space.{key}' changes the base policy or the held-out split, so every value needs a base built "
                   "before the trials; a continuous distribution has no end of values (use choice or grid)")
    mutations = getattr(cfg.scheduler, "mutations", {})
    for key in mutations:
        if changes_base_eval(key):
            yield f"{source}: key 'scheduler.mutations.{key}' changes the base or its eval: PBT would mutate a trial onto another base (mutate training keys only)"


def base_notes(cfg: SweepConfig) -> list[str]:
    """What ``sweep validate`` says about the bases a sweep needs."""
    swept = swept_base_keys(cfg)
    variants = base_variants(cfg)
    notes = []
    for key, values in swept.items():
        if values is None:
            notes.append(f"{key} is swept continuously and changes the base eval: each trial evaluates the base itself")
        elif changes_base(key):
            notes.append(f"{key} changes the base policy or the held-out split: {len(values)} values")
        else:
            notes.append(f"{key} changes the base eval: {len(values)} values")
    if cfg.trainer.eval.interval:
        notes.append(f"{len(variants)} base eval(s), made once before the trials; every trial's curve starts from its own base's")
    return notes


def base_variants(cfg: SweepConfig) -> list[TrainerConfig]:
    """The distinct trainer configs that fix a base and its eval (the base trainer alone when none is swept)."""
    enumerable = {key: values for key, values in swept_base_keys(cfg).items() if values is not None}
    if not enumerable:
        return [cfg.trainer]
    base = cfg.trainer.model_dump()
    variants: dict[str, TrainerConfig] = {}
    for combination in itertools.product(*enumerable.values()):
        trainer = validate(TrainerConfig, apply_overrides(base, dict(zip(enumerable, combination))), "base variant")
        variants.setdefault(eval_key(trainer), trainer)
    return list(variants.values())
