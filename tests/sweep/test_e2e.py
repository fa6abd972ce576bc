"""A small sweep through Ray Tune with the real MCP server: two trials, three steps each.

The same sweep checks that secrets reach trials through the environment only: it runs with fake
FLEET_API_KEY, WANDB_API_KEY, AWS keys and a webhook URL set and W&B offline, and none of them appears in any
file under its storage (Tune's experiment state, params, results, trial configs, trajectories, the Optuna
study, W&B's offline run files), in Ray's session logs or in the driver's output. The webhook, meanwhile,
hears the sweep start and end."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.conftest import TEST_MODEL
from tests.support.webhook import Webhook

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
def test_sweep_runs_trials_prints_a_leaderboard_and_leaks_no_secret(tmp_path, private_cache):
    import yaml

    space = {
        "name": "e2e",
        "trainer": {
            "total_steps": 3,
            "model": TEST_MODEL,
            "rollout": {"prompts_per_step": 2, "max_turns": 3},
            "eval": {"interval": 2, "max_tasks": 2, "n_samples": 2},
            "checkpoint": {"interval": 2},
        },
        "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}, "algorithm.kl_coef": {"choice": [0.0, 0.05]}, "rollout.n_samples_per_prompt": {"choice": [2, 3]}},
        "search": {
            "searcher": "optuna",
            "num_samples": 2,
            "n_startup_trials": 2,
            "seed": 1,
            "points_to_evaluate": [{"optim.lr": 1e-3, "algorithm.kl_coef": 0.05, "rollout.n_samples_per_prompt": 3}],
        },
        "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
        "logging": {"wandb": {"enabled": True, "mode": "offline"}},
        "resources": {"cpus_per_trial": 1},
        "max_concurrent_trials": 2,
        "storage": str(tmp_path / "results"),
    }
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    with Webhook() as hook:
        fake = secrets(f"{hook.url}-{uuid.uuid4().hex}")
        env = {**os.environ, **fake, "GRPO_SWEEP_CACHE": str(private_cache), "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled",
               "WANDB_MODE": "offline"}
        try:
            run = subprocess.run([sys.executable, "-m", "sweep", "run", str(path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
            ray_leaks = leaks(Path(ray_tmp), fake)
        finally:
            shutil.rmtree(ray_tmp, ignore_errors=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Leaderboard" in run.stdout
    check_no_secret_leaked(tmp_path / "results", ray_leaks, run.stdout + run.stderr, fake, hook.texts)

    rows = json.loads((tmp_path / "results" / "e2e" / "leaderboard.json").read_text())
    assert len(rows) == 2
    for row in rows:
        assert row["status"] in ("finished", "stopped early"), row
        assert 1 <= row["steps"] <= 3
        assert 0.0 <= row["best_metric"] <= 1.0
        assert 0.0 <= row["last_variance_per_prompt"] <= 0.25
        assert set(row["config"]) == {"optim.lr", "algorithm.kl_coef", "rollout.n_samples_per_prompt"}
    assert any(row["status"] == "finished" for row in rows)
    assert {"optim.lr": 1e-3, "algorithm.kl_coef": 0.05, "rollout.n_samples_per_prompt": 3} in [row["config"] for row in rows]

    # Tune's own per-trial results carry the dashboard metrics every step
    results = list((tmp_path / "results" / "e2e").glob("*/result.json"))
    assert len(results) == 2
    for result in results:
        reports = [json.loads(line) for line in result.read_text().splitlines()]
        assert [r["step"] for r in reports] == list(range(1, len(reports) + 1))
        for r in reports:
            for key in ("reward/avg_pass_at_1", "reward/avg_raw_reward", "reward/variance_per_prompt",
                        "reward/hotel/pass_at_1", "reward/hotel/variance_per_prompt", "policy/clip_frac", "policy/kl"):
                assert key in r and not math.isnan(r[key]), key
            assert 0.0 <= r["eval/avg_pass_at_1"] <= 1.0
        assert reports[0]["eval/score"] == 0.0  # before any trained eval: the shared base's point, no gain claimed
        if len(reports) >= 2:  # the first trained eval (step 2) minus the base's
            assert reports[1]["eval/score"] == pytest.approx(reports[1]["eval/avg_pass_at_1"] - reports[0]["eval/avg_pass_at_1"])

    # W&B charts eval/score from the first trained eval (step 2): Tune's placeholder 0 at step 1 is left out
    from tests.sweep.test_logging import wandb_records

    histories = [[{item.key or "/".join(item.nested_key) for item in r.history.item} for r in wandb_records(run_file)
                  if r.WhichOneof("record_type") == "history"]
                 for run_file in sorted((tmp_path / "results" / "e2e" / "wandb").glob("offline-run-*/run-*.wandb"))]
    trial_histories = [h for h in histories if h and "training_iteration" in h[0]]  # not the sweep's summary run
    assert len(trial_histories) == 2
    for history in trial_histories:
        assert "eval/score" not in history[0] and "eval/avg_pass_at_1" in history[0]
        assert all("eval/score" in h for h in history[1:])

    # checkpoints reach Tune (and so the sweep's storage): steps 2 and 3 of a finished trial
    finished = [r for r in rows if r["status"] == "finished"]
    for row in finished:
        trial_dir = next((tmp_path / "results" / "e2e").glob(f"run_trial_{row['trial']}_*"))
        saved = sorted(p.name for p in trial_dir.glob("checkpoint_*"))
        assert len(saved) == 2 and all((trial_dir / name / "trainer_state.json").is_file() for name in saved)

    # the Optuna study is persisted beside the results, one trial per Tune trial
    import optuna

    study = optuna.load_study(study_name="e2e", storage=f"sqlite:///{tmp_path / 'results' / 'e2e' / 'optuna.db'}")
    assert len(study.trials) == 2
    # a trial ASHA stopped is PRUNED in the study (not COMPLETE with its last value)
    states = sorted(t.state.name for t in study.trials)
    expected = sorted("PRUNED" if row["status"] == "stopped early" else "COMPLETE" for row in rows)
    assert states == expected

    # the base policy is evaluated once for the sweep, and every trial's curve starts from that point
    base_evals = list((tmp_path / "results" / "e2e" / "base_evals").iterdir())
    assert len(base_evals) == 1 and (base_evals[0] / "global_step_0" / "hotel.jsonl").is_file()
    base_line = json.loads((base_evals[0] / "aggregated_results.jsonl").read_text().splitlines()[0])
    assert "evaluating the base policy once for every trial (4 held-out episodes)" in run.stdout

    # eval trajectories land under the sweep's storage, per trial, per policy step (step 0 is the shared one)
    trials = sorted((tmp_path / "results" / "e2e" / "trajectories").iterdir())
    assert len(trials) == 2
    for trial in trials:
        evals = [json.loads(line) for line in (trial / "aggregated_results.jsonl").read_text().splitlines()]
        assert evals[0]["shared"] and evals[0]["eval/avg_pass_at_1"] == base_line["eval/avg_pass_at_1"]
        assert evals[0]["tasks"] == base_line["tasks"] and sum(n for _, n in evals[0]["tasks"].values()) == 4
        assert not (trial / "global_step_0").exists() and (trial / "global_step_2" / "hotel.jsonl").is_file()


def check_no_secret_leaked(storage: Path, ray_leaks: list[str], output: str, fake: dict[str, str], texts: list[str]) -> None:
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
    assert [name for name, value in fake.items() if value in output] == []

    assert texts[0].startswith("sweep e2e started") and texts[-1].startswith("sweep e2e ended")
    assert any("finished" in text for text in texts[1:-1])
