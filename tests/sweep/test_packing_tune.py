"""Packed trials through Tune (``resources.trials_per_worker``): two LoRA trials share a pack host, ASHA stops
one by itself at its first rung, the next trial takes the freed place, and every trial reports its own steps;
a host that dies costs its members a restart from their checkpoints, nothing more."""

from __future__ import annotations

import threading
import time
from pathlib import Path

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
        "scheduler": {"type": "asha", "grace_period": 2, "reduction_factor": 2},  # 1e-6 reaches the rung after the others
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


def _kill_pack_hosts_once_a_step_is_reported(storage: Path, done: threading.Event, killed: list[str]) -> None:
    """As an out-of-memory kill would: every pack host dies once a member has reported its second step."""
    import ray

    while not done.is_set() and not killed:
        if any(storage.glob("**/steps/step_000002.json")):
            for actor in ray.util.list_named_actors(all_namespaces=True):
                if actor["name"].startswith("pack-"):
                    ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=True)
                    killed.append(actor["name"])
        time.sleep(0.05)


def test_a_pack_host_that_dies_takes_no_member_with_it(tmp_path):
    """Its members' attempts end as lost processes, Tune restarts them within the run, and each joins a new
    host from its newest checkpoint: every step once, one restart each."""
    from sweep.store.results import trial_history
    from sweep.trials import attempts

    cfg = load_space(tmp_path, {
        "name": "hostdies",
        "trainer": tiny_trainer(total_steps=4, model={**TEST_MODEL, "lora": {"rank": 2, "alpha": 4.0}}, checkpoint={"interval": 1}),
        "space": {"optim.lr": {"grid": [1e-2, 1e-3]}},
        "search": {"searcher": "grid", "num_samples": 1, "metric": "policy/lr", "mode": "max"},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 2, "trials_per_worker": 2},
        "failures": {"max_trial_restarts": 1},
    })
    done, killed = threading.Event(), []
    watcher = threading.Thread(target=_kill_pack_hosts_once_a_step_is_reported, args=(tmp_path / "results", done, killed), daemon=True)
    watcher.start()
    try:
        results = fit(cfg)
    finally:
        done.set()
        watcher.join(timeout=10)
    assert killed, "no pack host was killed"
    restarted = 0
    for r in results:
        tried = attempts.read(r.filesystem, r.path)
        history = attempts.current_rows(trial_history(r.path, r.filesystem), tried)
        assert [row["training_iteration"] for row in history] == [1, 2, 3, 4], (r.config, history)
        assert all(a.raised is None for a in tried) and tried[-1].ended is not None
        restarted += attempts.restarts(tried)
        if attempts.restarts(tried):
            assert tried[-1].resumed_from >= 1  # from its checkpoint, not from step 1
    assert restarted >= 1
