"""One base, one split and one base eval per sweep, made before any trial starts.

Every trial of a sweep should start from the same policy and meet the same test set, so that they differ
by the setting alone. Which base a trial trains and which tasks it holds out depend on a few trainer keys
(``BASE_KEYS``, ``SPLIT_KEYS``), none of them the RL run's ``seed`` (``model.warmstart_seed`` and
``eval.split_seed`` seed those). A space may sweep such a key over a choice or a grid: the sweep then needs
one base per value, and every one is built before the trials start (a continuous distribution over one
would build a base inside each trial: refused). The base eval depends on a few more keys
(``BASE_EVAL_KEYS``: sampling and the eval's size); the driver evaluates each base once, stores it under
``{storage}/{name}/base_evals/{key}/``, and each trial starts its curve from it instead of evaluating the
base itself. A resumed sweep finds them there. Imports no torch: builds and evals run in child processes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from configkit.base import ConfigError, apply_overrides, dotted_keys, validate
from grpo.config import EVAL_SPLIT_KEYS, TrainerConfig
from grpo.warmstart import RECIPE_MODEL_FIELDS
from sweep.config import Choice, Fixed, SweepConfig
from sweep.storage import Storage

BASE_KEYS = frozenset({f"model.{name}" for name in RECIPE_MODEL_FIELDS} | {"model.warmstart_seed", "model.shipped_base", "model.cache_dir"})
SPLIT_KEYS = frozenset({"env.tasks_path", "env.env_keys", "env.max_tasks", *EVAL_SPLIT_KEYS})
EVAL_ONLY_KEYS = frozenset({
    "eval.n_samples", "rollout.temperature", "rollout.max_turns", "rollout.max_generate_length", "rollout.max_input_length",
    "rollout.max_sequence_length", "rollout.backend",
})
BASE_EVAL_PREFIXES = ("rollout.vllm.", "env.backend.")
BASE_EVAL_FILE = "aggregated_results.jsonl"


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
            node: Any = data
            for part in key.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            fields[key] = node
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


def prepare_bases(cfg: SweepConfig, store: Storage | None = None) -> None:
    """Every base the sweep needs, found or built (a shipped one needs neither), then, with eval on and a
    store, each base's eval made once and stored for the trials. Child processes with every core: the
    driver imports no torch, and a driver killed meanwhile takes them along."""
    from grpo.data import trial_tasks
    from grpo.warmstart import shipped_base

    variants = base_variants(cfg)
    built: set[str] = set()
    for i, trainer in enumerate(variants, start=1):
        which = f" ({i} of {len(variants)})" if len(variants) > 1 else ""
        if trainer.model.name_or_path:
            continue
        shipped = shipped_base(trainer.model, trial_tasks(trainer)[0])
        if shipped is not None:
            if str(shipped) not in built:
                print(f"base policy{which}: {shipped} (ships with grpo-sweep; model.shipped_base: false builds it here)", flush=True)
            built.add(str(shipped))
            continue
        print(f"preparing the base policy{which} (built once, then cached)...", flush=True)
        subprocess.run([sys.executable, "-m", "grpo.warmstart", trainer.model_dump_json()], check=True)
    if store is not None and cfg.trainer.eval.interval:
        for i, trainer in enumerate(variants, start=1):
            evaluate_base(cfg, store, trainer, f" ({i} of {len(variants)})" if len(variants) > 1 else "")


def evaluate_base(cfg: SweepConfig, store: Storage, trainer: TrainerConfig, which: str = "") -> None:
    """The base policy's held-out eval, once per sweep and base (kept from an earlier start of this sweep);
    refused when too many of its episodes failed in the environment."""
    key = eval_key(trainer)
    if store.exists(cfg.name, "base_evals", key, BASE_EVAL_FILE):
        print(f"base eval{which}: {store.display(cfg.name, 'base_evals', key)} (made before: kept)", flush=True)
    else:
        _make_base_eval(cfg, store, trainer, which)
    refuse_biased_base_eval(store, cfg.name, trainer)


def _make_base_eval(cfg: SweepConfig, store: Storage, trainer: TrainerConfig, which: str) -> None:
    from grpo.data import trial_tasks

    key = eval_key(trainer)
    episodes = len(trial_tasks(trainer)[1]) * trainer.eval.n_samples
    print(f"evaluating the base policy{which} once for every trial ({episodes} held-out episodes)...", flush=True)
    config = trainer.model_copy(update={"torch_threads": None}).model_dump_json()
    if store.is_local:
        subprocess.run([sys.executable, "-m", "grpo.evaluation", config, store.path(cfg.name, "base_evals", key)], check=True)
        return
    with tempfile.TemporaryDirectory(prefix="grpo-base-eval-") as local:
        subprocess.run([sys.executable, "-m", "grpo.evaluation", config, local], check=True)
        store.upload(local, cfg.name, "base_evals", key)


def refuse_biased_base_eval(store: Storage, experiment: str, trainer: TrainerConfig) -> None:
    """Every trial's gain is measured from the base eval, and the episodes that failed in the environment are
    left out of it: the long, multi-call ones fail that way most, so a base eval with many of them reads
    low and flatters every trial. Above ``eval.max_base_env_errors`` the sweep does not start, and the base
    eval is deleted so the next start makes a new one."""
    line = shared_base_eval(store, experiment, trainer)
    share, limit = float((line or {}).get("eval/env_error_frac", 0.0)), trainer.eval.max_base_env_errors
    if share <= limit:
        return
    key = eval_key(trainer)
    where = store.display(experiment, "base_evals", key)
    store.delete_dir(experiment, "base_evals", key)
    raise ConfigError(
        f"{where}: {share:.1%} of the base eval's held-out episodes failed in the environment, above "
        f"eval.max_base_env_errors={limit:g}: the base pass@1 every trial's gain is measured from would lean low. "
        "Find the cause (the base eval's log above names the first error; a loaded machine times out local servers), "
        "then start again: the base eval is made anew (it was deleted). Raise eval.max_base_env_errors only for "
        "environments that fail this often by nature"
    )


def shared_base_eval(store: Storage, experiment: str, trainer: TrainerConfig) -> dict[str, Any] | None:
    """The sweep's eval of this trial's base, if the driver made one (a trial whose base eval depends on a
    continuously swept key, or a sweep started by an older version, has none and evaluates the base itself)."""
    parts = (experiment, "base_evals", eval_key(trainer), BASE_EVAL_FILE)
    if not experiment or not store.exists(*parts):
        return None
    lines = [line for line in store.read_text(*parts).splitlines() if line.strip()]
    return {**json.loads(lines[0]), "base_eval": eval_key(trainer)} if lines else None
