"""Packed trials through Tune (``resources.trials_per_worker``): two LoRA trials share a pack host, the median
scheduler stops one by itself, the next trial takes the freed place, and every trial reports its own steps."""

from __future__ import annotations

import pytest

from tests.conftest import TEST_MODEL
from tests.sweep.tiny_sweep import fit, leaderboard_rows, load_space, ray_session, tiny_trainer  # noqa: F401 (ray_session is a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.usefixtures("ray_session")]


def test_packed_trials_share_a_host_and_are_scheduled_one_by_one(tmp_path):
    cfg = load_space(tmp_path, {
        "name": "packed",
        "trainer": tiny_trainer(total_steps=3, model={**TEST_MODEL, "lora": {"rank": 2, "alpha": 4.0}}),
        "space": {"optim.lr": {"grid": [1e-2, 1e-3, 1e-6]}},
        "search": {"searcher": "grid", "num_samples": 1, "metric": "policy/lr", "mode": "max"},
        "scheduler": {"type": "median", "grace_period": 2, "min_samples_required": 1},
        "resources": {"cpus_per_trial": 2, "trials_per_worker": 2},  # each trial asks for 1 CPU: two at once on 2
    })
    results = fit(cfg)
    rows = {row.config["optim.lr"]: row for row in leaderboard_rows(cfg, results)}
    assert rows[1e-2].status == "finished" and rows[1e-2].steps == 3
    assert rows[1e-6].status == "stopped early" and rows[1e-6].steps == 2
    hosts = {}
    for r in results:
        history = r.metrics_dataframe.to_dict("records")
        assert [row["training_iteration"] for row in history] == list(range(1, len(history) + 1))
        assert all(row["policy/lr"] == pytest.approx(r.config["optim.lr"]) for row in history)  # its own optimizer, its own LR
        hosts[r.config["optim.lr"]] = {row["pack/host_pid"] for row in history}
        assert all(1 <= row["pack/members"] <= 2 for row in history)
    assert any(row["pack/members"] == 2 for r in results for row in r.metrics_dataframe.to_dict("records"))  # they did share
    assert len(set().union(*hosts.values())) < 3  # three trials, fewer host processes
