"""Helpers for the slow searcher/scheduler/logging tests: one local Ray per test module, tiny sweeps in-process.

A tiny sweep trains the session's cached tiny base policy (``tiny_base``) for a few GRPO steps of
2 prompts x 2 samples x 2 turns on the real hotel MCP server, so each trial takes seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from configkit import environ
from tests.conftest import TEST_MODEL
from tests.support.ports import free_port


def tiny_trainer(total_steps: int = 2, **sections: Any) -> dict[str, Any]:
    trainer: dict[str, Any] = {
        "total_steps": total_steps,
        "model": TEST_MODEL,
        "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2, "max_generate_length": 32},
        "algorithm": {"mini_batches": 1},
    }
    for name, block in sections.items():
        trainer[name] = {**trainer.get(name, {}), **block}
    return trainer


@pytest.fixture(scope="module")
def ray_session(tiny_base: str) -> Iterator[None]:
    """One local Ray (2 CPUs) for the whole module; workers inherit GRPO_SWEEP_CACHE, so trials find the base policy."""
    with local_ray(num_cpus=2):
        yield


@contextlib.contextmanager
def local_ray(num_cpus: int, num_gpus: int = 0, runtime_env: dict[str, Any] | None = None, dashboard: bool = False) -> Iterator[None]:
    """A local Ray with these resources (GPUs declared: Ray hands out their ids as for real ones) and the job's
    ``runtime_env`` (every worker's); with ``dashboard``, Ray's dashboard on 127.0.0.1 (any free port), which serves
    Ray's state API, named in ``RAY_API_SERVER_ADDRESS`` for every process of it."""
    import ray

    tmp = tempfile.mkdtemp(prefix="rs", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_AUTH_MODE", "TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", environ.RAY_API_SERVER_ADDRESS.name)}
    os.environ.update(RAY_TMPDIR=tmp, RAY_AUTH_MODE="disabled", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    where = {"dashboard_host": "127.0.0.1", "dashboard_port": free_port()} if dashboard else {}
    if dashboard:  # as sweep.run.local_ray names it: with another test's Ray on this machine, Ray cannot guess which is ours
        os.environ[environ.RAY_API_SERVER_ADDRESS.name] = f"http://127.0.0.1:{where['dashboard_port']}"
    ray.init(num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=dashboard, **where, log_to_driver=False, configure_logging=False, runtime_env=runtime_env)
    try:
        yield
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(tmp, ignore_errors=True)


def load_space(tmp_path: Path, space: dict[str, Any]):
    """Write a space file and load it through the full validation (as ``sweep run`` does)."""
    from sweep.spec.loader import load_space

    path = tmp_path / f"{space['name']}.yaml"
    path.write_text(yaml.safe_dump({"storage": str(tmp_path / "results"), "resources": {"cpus_per_trial": 1}, **space}))
    return load_space(path)


def two_worker_trials_in_turn(tmp_path: Path, name: str, total_steps: int, **sections: Any):
    """Two trials (two LRs) of two workers each, one at a time, each worker 0.99 CPU: on a 2-CPU Ray the second
    trial's workers fit only once the first's placement group is gone."""
    return load_space(tmp_path, {
        "name": name,
        "trainer": tiny_trainer(total_steps=total_steps, eval={"interval": 0}),
        "space": {"optim.lr": {"grid": [1e-3, 1e-2]}},
        "search": {"searcher": "random", "num_samples": 1, "seed": 0},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 0.99, "workers_per_trial": 2},
        "max_concurrent_trials": 1,
        **sections,
    })


def fit(cfg):
    """Run the sweep exactly as ``sweep run`` builds it; returns Tune's ResultGrid (no trial may error)."""
    from sweep.tuner import build_tuner

    results = build_tuner(cfg).fit()
    errors = [str(r.error) for r in results if r.error]
    assert not errors, errors
    return results


def leaderboard_rows(cfg, results) -> list:
    from sweep import leaderboard

    rule = cfg.stopping.zero_signal.rule()
    return [leaderboard.trial_row(r, cfg.search.metric, cfg.search.mode, cfg.trainer.total_steps, list(cfg.space), rule) for r in results]


def study(cfg):
    import optuna

    db = Path(cfg.storage) / cfg.name / "optuna.db"
    return optuna.load_study(study_name=cfg.name, storage=f"sqlite:///{db}")
