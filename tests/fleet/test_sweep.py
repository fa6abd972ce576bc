"""A whole sweep on Fleet: ``python -m sweep run`` with ``env.backend: {type: fleet}`` on Fleet-exported
tasks, OpenEnv's real ``FleetTaskEnv`` and the real ``fleet-python`` SDK, against the fake Fleet service
(``tests/support/fake_fleet.py``; Fleet's hosted service cannot be reached from here).

Two trials of two steps at once: every episode provisions an instance, the sweep's cap holds across both
trials (the fake counts the instances open at once), every instance is deleted, the task whose LLM judge
fails is left out of its group and counted as an environment error (never scored 0), and the API key is in
no file the sweep wrote and in nothing it printed. Runs in ``.venv-fleet``; skips with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.fleet_stack import require

OPENENV_SRC = require()

from sweep.report.build import build_report  # noqa: E402
from tests.conftest import TEST_MODEL  # noqa: E402
from tests.support.fake_fleet import FakeFleet, fleet_dataset, fleet_form  # noqa: E402
from toolenvs.task import load_tasks  # noqa: E402

pytestmark = [pytest.mark.fleet, pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "fake-fleet-sweep-key-91b3f2"
CAP = 3


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_sweep_on_fleet_caps_closes_counts_failed_judges_and_keeps_the_key(hotel_server, private_cache, tmp_path):
    import yaml

    booking = [t for t in load_tasks(ROOT / "toolenvs" / "data" / "hotel.jsonl") if (t.verifier or {}).get("type") == "booking_made"]
    train, failing, held_out = booking[:1], booking[1], booking[2:4]
    (tmp_path / "train.json").write_text(json.dumps([fleet_form(t) for t in train] + [fleet_form(failing, failure="judge_error")]))
    (tmp_path / "eval.json").write_text(json.dumps({"tasks": [fleet_form(t) for t in held_out]}))  # both export shapes
    space = {
        "name": "fleet_contract",
        "trainer": {"total_steps": 2, "model": TEST_MODEL,
                    "env": {"tasks_path": str(tmp_path / "train.json"), "backend": {"type": "fleet", "max_instances": CAP, "request_timeout_s": 30}},
                    "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2},
                    "eval": {"tasks_path": str(tmp_path / "eval.json"), "interval": 2, "n_samples": 1}},
        "space": {"optim.lr": {"grid": [1e-4, 1e-3]}},
        "search": {"searcher": "grid", "num_samples": 1},
        "resources": {"cpus_per_trial": 1},
        "logging": {"progress": False, "tensorboard": False},
        "max_concurrent_trials": 2,
        "storage": str(tmp_path / "results"),
    }
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    assert API_KEY not in (tmp_path / "space.yaml").read_text()
    datasets = {k: v for t in booking[:4] for k, v in fleet_dataset(t).items()}
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    with FakeFleet({"hotel": hotel_server.base_url}, datasets, API_KEY) as fake:
        env = {**os.environ, "FLEET_API_KEY": API_KEY, "FLEET_BASE_URL": fake.base_url, "OPENENV_PATH": str(OPENENV_SRC),
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", "GRPO_SWEEP_CACHE": str(private_cache),
               "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled"}
        try:
            run = subprocess.run([sys.executable, "-m", "sweep", "run", str(tmp_path / "space.yaml")], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=900)
        finally:
            shutil.rmtree(ray_tmp, ignore_errors=True)
        said = run.stdout + run.stderr
        assert run.returncode == 0, said[-4000:]
        created, deleted, peak, open_now = fake.created, fake.deleted, fake.peak_instances, fake.open_instances
        judged = {r["instance_id"] for r in fake.verifier_runs}
        assert fake.unexpected == [] and fake.bad_auth == []

    sweep = tmp_path / "results" / "fleet_contract"
    results = sorted(sweep.glob("*/result.json"))
    assert len(results) == 2
    rows = [_lines(r) for r in results]
    assert all([r["step"] for r in trial] == [1, 2] for trial in rows), [[(r["step"], r.get("trial_id")) for r in trial] for trial in rows]
    # a step: 2 tasks x 2 samples, the judge's task failing both times: left out and counted, never scored 0
    assert all(r["reward/env_error_frac"] == pytest.approx(0.5) for trial in rows for r in trial)
    assert all(r["reward/hotel/env_error_frac"] == pytest.approx(0.5) for trial in rows for r in trial)
    episodes = 2 * 2 * 4 + 2 + 2 * 2  # trials x steps x episodes, the base eval once, each trial's eval at step 2
    assert created == deleted == episodes and open_now == 0  # every instance deleted when its episode closed
    assert peak == CAP  # the cap holds across both trials, and is reached
    assert len(judged) == episodes  # Fleet scored every episode
    evals = [_lines(p) for p in sweep.glob("trajectories/*/aggregated_results.jsonl")]
    assert len(evals) == 2 and all([e["global_step"] for e in trial] == [0, 2] for trial in evals)
    assert all(e["eval/env_error_frac"] == 0 for trial in evals for e in trial)
    rep = build_report(str(sweep), tmp_path / "report")  # the report says so, per env
    assert [(r.env, r.env_error_frac) for r in rep.env_rows] == [("hotel", pytest.approx(0.5))]
    assert [d.subject for d in rep.diagnoses if d.rule == "env_errors"] == ["env hotel"]
    leaked = [str(p) for p in sweep.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()]
    assert leaked == [] and API_KEY not in said
