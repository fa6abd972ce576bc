"""Helpers for tests that talk to a Ray head over its dashboard: the job client, its HTTP API,
and the tiny space they submit."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from tests.conftest import TEST_MODEL


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def wait_for_client(address: str, deadline_s: float = 90):
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return JobSubmissionClient(address)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def tiny_space(name: str, storage: Path) -> dict:
    """One trial of 2 GRPO steps on the tiny test model, one CPU."""
    return {
        "name": name,
        "trainer": {"total_steps": 2, "model": TEST_MODEL, "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2}},
        "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}},
        "search": {"searcher": "random", "num_samples": 1, "seed": 0},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 1},
        "max_concurrent_trials": 1,
        "storage": str(storage),
    }
