"""The sweep's bases and base evals, made before any trial starts and read by each trial.

The driver finds or builds every base the sweep needs (``sweep.spec.bases.base_variants``) and evaluates each once,
storing it under ``{storage}/{name}/base_evals/{key}/``; each trial starts its curve from it instead of evaluating
the base itself, and a resumed sweep finds them there. A base eval with too many environment errors stops the sweep
before it starts. Imports no torch: builds and evals run in child processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from typing import Any

from configkit.base import ConfigError
from grpo.config import TrainerConfig
from sweep.spec.bases import base_variants, eval_key
from sweep.spec.config import SweepConfig
from sweep.store.storage import BASE_EVALS_DIR, Storage

BASE_EVAL_FILE = "aggregated_results.jsonl"


def prepare_bases(cfg: SweepConfig, store: Storage | None = None) -> None:
    """``build_bases``, then with a store ``evaluate_bases``."""
    build_bases(cfg)
    if store is not None:
        evaluate_bases(cfg, store)


def build_bases(cfg: SweepConfig) -> None:
    """Every base the sweep needs, found or built (a shipped one needs neither), in a child process with every
    core: the driver imports no torch, and a driver killed meanwhile takes it along. Writes nothing in the
    sweep's folder (bases are cached apart), so a sweep ``--fresh`` replaces stays whole until they are ready."""
    from grpo.data import base_tasks
    from grpo.warmstart import shipped_base

    variants = base_variants(cfg)
    built: set[str] = set()
    for i, trainer in enumerate(variants, start=1):
        which = f" ({i} of {len(variants)})" if len(variants) > 1 else ""
        if trainer.model.name_or_path:
            continue
        shipped = shipped_base(trainer.model, base_tasks(trainer))
        if shipped is not None:
            if str(shipped) not in built:
                print(f"base policy{which}: {shipped} (ships with grpo-sweep; model.shipped_base: false builds it here)", flush=True)
            built.add(str(shipped))
            continue
        print(f"preparing the base policy{which} (built once, then cached)...", flush=True)
        subprocess.run([sys.executable, "-m", "grpo.warmstart", trainer.model_dump_json()], check=True)


def evaluate_bases(cfg: SweepConfig, store: Storage) -> None:
    """With eval on, each base's eval made once and stored in the sweep's folder for the trials (``evaluate_base``)."""
    if not cfg.trainer.eval.interval:
        return
    variants = base_variants(cfg)
    for i, trainer in enumerate(variants, start=1):
        evaluate_base(cfg, store, trainer, f" ({i} of {len(variants)})" if len(variants) > 1 else "")


def evaluate_base(cfg: SweepConfig, store: Storage, trainer: TrainerConfig, which: str = "") -> None:
    """The base policy's held-out eval, once per sweep and base (kept from an earlier start of this sweep);
    refused when too many of its episodes failed in the environment."""
    key = eval_key(trainer)
    if _first_line(store, cfg.name, key) is not None:
        print(f"base eval{which}: {store.display(cfg.name, 'base_evals', key)} (made before: kept)", flush=True)
    else:
        if store.exists(cfg.name, BASE_EVALS_DIR, key):  # cut by a kill mid-write, or emptied: every trial would read it
            print(f"base eval{which}: {store.display(cfg.name, 'base_evals', key, BASE_EVAL_FILE)} is missing, empty or damaged: made anew", flush=True)
            store.delete_dir(cfg.name, BASE_EVALS_DIR, key)
        _make_base_eval(cfg, store, trainer, which)
    refuse_biased_base_eval(store, cfg.name, trainer)


def _make_base_eval(cfg: SweepConfig, store: Storage, trainer: TrainerConfig, which: str) -> None:
    from grpo.data import trial_tasks

    key = eval_key(trainer)
    episodes = len(trial_tasks(trainer)[1]) * trainer.eval.n_samples
    print(f"evaluating the base policy{which} once for every trial ({episodes} held-out episodes)...", flush=True)
    config = trainer.model_copy(update={"torch_threads": None}).model_dump_json()
    if store.is_local:
        subprocess.run([sys.executable, "-m", "grpo.evaluation", config, store.path(cfg.name, BASE_EVALS_DIR, key)], check=True)
        return
    with tempfile.TemporaryDirectory(prefix="grpo-base-eval-") as local:
        subprocess.run([sys.executable, "-m", "grpo.evaluation", config, local], check=True)
        store.upload(local, cfg.name, BASE_EVALS_DIR, key)


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
    where = store.display(experiment, BASE_EVALS_DIR, key)
    store.delete_dir(experiment, BASE_EVALS_DIR, key)
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
    line = _first_line(store, experiment, eval_key(trainer)) if experiment else None
    return {**line, "base_eval": eval_key(trainer)} if line is not None else None


def _first_line(store: Storage, experiment: str, key: str) -> dict[str, Any] | None:
    """The base eval's record in the sweep's folder, or None when there is none or it does not read as one."""
    parts = (experiment, BASE_EVALS_DIR, key, BASE_EVAL_FILE)
    return base_eval_record(store.read_text(*parts)) if store.exists(*parts) else None


def base_eval_record(text: str | None) -> dict[str, Any] | None:
    """A base eval file's record (its first line), or None when it has none that reads as one (emptied, cut by a kill)."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    try:
        line = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        return None
    return line if isinstance(line, dict) else None
