"""Run a validated sweep on a local Ray: build the base policy once, check resources, fit, leaderboard.

Imports Ray and Tune only when called, so the CLI module stays light.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from grpo.configbase import ConfigError
from sweep.config import SweepConfig


def run_sweep(cfg: SweepConfig) -> int:
    """Run a validated sweep on a local Ray, print and save the leaderboard; 1 if every trial failed."""
    import ray

    from sweep import leaderboard
    from sweep.tuner import build_tuner, storage_path

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if os.environ.get("GRPO_SWEEP_CACHE"):  # trials run in their own directories
        os.environ["GRPO_SWEEP_CACHE"] = str(Path(os.environ["GRPO_SWEEP_CACHE"]).expanduser().resolve())
    prepare_base_policy(cfg)
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        check_resources(cfg, ray.cluster_resources())
        results = build_tuner(cfg).fit()
    finally:
        ray.shutdown()
    total, zero = cfg.base_trainer().total_steps, cfg.stopping.zero_signal.rule()
    rows = [leaderboard.trial_row(r, cfg.search.metric, cfg.search.mode, total, list(cfg.space), zero) for r in results]
    rows = leaderboard.rank(rows, cfg.search.mode)
    leaderboard.render(rows, cfg.search.metric)
    saved = leaderboard.save(rows, storage_path(cfg) / cfg.name / "leaderboard.json")
    print(f"results: {saved.parent}")
    return 1 if rows and all(r.status == "error" for r in rows) else 0


def check_resources(cfg: SweepConfig, available: dict[str, float]) -> None:
    """A trial that asks for more than the cluster has would wait forever: say so instead."""
    wanted = {"CPU": cfg.resources.cpus_per_trial, "GPU": cfg.resources.gpus_per_trial}
    for kind, amount in wanted.items():
        if amount > available.get(kind, 0.0):
            raise ConfigError(
                f"resources: each trial asks for {amount:g} {kind}, the Ray cluster has {available.get(kind, 0.0):g}; "
                f"lower resources.{kind.lower()}s_per_trial"
            )


def prepare_base_policy(cfg: SweepConfig) -> None:
    """Build the base trainer's policy once with every core before trials start (they find it cached).

    A separate process, so the driver itself never imports torch.
    """
    print("preparing the base policy (built once, then cached)...", flush=True)
    subprocess.run([sys.executable, "-m", "grpo.warmstart", json.dumps(cfg.trainer)], check=True)
