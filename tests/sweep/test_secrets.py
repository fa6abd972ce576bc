"""Secrets reach trials through the environment only: a real sweep runs with fake FLEET_API_KEY, WANDB_API_KEY,
AWS keys and a webhook URL set, and none of them appears in any file under its storage (Tune's experiment
state, params, results, trial configs, trajectories, the Optuna study, W&B's offline run files), in Ray's
session logs or in the driver's output. The webhook, meanwhile, hears the sweep start and end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import TEST_MODEL
from tests.sweep.test_notify import Webhook

ROOT = Path(__file__).resolve().parents[2]


def secrets(webhook_url: str) -> dict[str, str]:
    tag = uuid.uuid4().hex[:12]
    return {
        "FLEET_API_KEY": f"fleet-fake-{tag}",
        "WANDB_API_KEY": f"wandbfake{tag}" * 3,  # W&B keys are 40 characters
        "AWS_ACCESS_KEY_ID": f"AKIAFAKE{tag.upper()}",
        "AWS_SECRET_ACCESS_KEY": f"aws-secret-fake-{tag}",
        "GRPO_SWEEP_SLACK_WEBHOOK": webhook_url,
    }


def leaks(root: Path, values: dict[str, str]) -> list[str]:
    """``path: NAME`` for every file under ``root`` that holds a secret's value (the webhook also by its token)."""
    needles = {name: value.encode() for name, value in values.items()}
    needles["webhook token"] = values["GRPO_SWEEP_SLACK_WEBHOOK"].rsplit("/", 1)[-1].encode()
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {name}" for name, needle in needles.items() if needle in data]
    return found


@pytest.mark.slow
@pytest.mark.e2e
def test_no_secret_lands_in_results_logs_or_wandb(tmp_path, private_cache):
    storage = tmp_path / "results"
    space = {
        "name": "secrets",
        "trainer": {"total_steps": 2, "model": TEST_MODEL, "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2},
                    "eval": {"interval": 2, "max_tasks": 1, "n_samples": 2}, "checkpoint": {"interval": 2}},
        "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}},
        "search": {"searcher": "optuna", "num_samples": 1, "n_startup_trials": 1},
        "scheduler": {"type": "fifo"},
        "logging": {"wandb": {"enabled": True, "mode": "offline"}},
        "resources": {"cpus_per_trial": 1},
        "max_concurrent_trials": 1,
        "storage": str(storage),
    }
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    ray_tmp = tempfile.mkdtemp(prefix="rs", dir="/tmp")
    with Webhook() as hook:
        fake = secrets(f"{hook.url}-{uuid.uuid4().hex}")
        env = {**os.environ, **fake, "GRPO_SWEEP_CACHE": str(private_cache), "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled",
               "WANDB_MODE": "offline"}
        try:
            run = subprocess.run([sys.executable, "-m", "sweep", "run", str(path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
            ray_leaks = leaks(Path(ray_tmp), fake)
        finally:
            shutil.rmtree(ray_tmp, ignore_errors=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    files = [p for p in storage.rglob("*") if p.is_file()]
    assert any(p.name == "result.json" for p in files) and any(p.name == "trainer_config.json" for p in files)
    assert any("wandb" in p.parts for p in files), "W&B wrote no offline run files to scan"
    assert leaks(storage, fake) == []
    # Ray's own session logs: only the runtime-env agent's record of the actors' runtime_env, which holds what
    # Ray itself puts there (Tune copies AWS keys into trial actors, Ray's W&B callback the W&B key into its
    # logging actor). Ours (Fleet key, webhook) never reach it. On a cluster: IAM roles instead of AWS keys.
    ray_channel = {f"{log}: {name}" for log in {leak.split(": ")[0] for leak in ray_leaks}
                   for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY")}
    assert all(leak.endswith("/logs/runtime_env_agent.log: " + leak.split(": ")[1]) for leak in ray_leaks), ray_leaks
    assert set(ray_leaks) <= ray_channel, ray_leaks
    output = run.stdout + run.stderr
    assert [name for name, value in fake.items() if value in output] == []

    assert hook.texts[0].startswith("sweep secrets started") and hook.texts[-1].startswith("sweep secrets ended")
    assert any("finished" in text for text in hook.texts[1:-1])
