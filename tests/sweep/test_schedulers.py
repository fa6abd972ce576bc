"""Median stopping, PBT and the zero-signal stopper through real Ray Tune on the tiny policy.

FIFO runs in every test of test_searchers.py and ASHA in test_e2e.py. The scheduler tests optimise
``policy/lr`` (the trainer reports its learning rate every step, constant here), so which trial is worse is
known in advance whatever the tiny policy happens to learn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sweep.tiny_sweep import fit, leaderboard_rows, load_space, ray_session, tiny_trainer  # noqa: F401 (ray_session is a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.usefixtures("ray_session")]


def test_median_stops_the_trial_below_the_others(tmp_path):
    """Two at a time: the lowest LR starts after a full trial and is stopped right after its grace period."""
    cfg = load_space(tmp_path, {
        "name": "median",
        "trainer": tiny_trainer(total_steps=3),
        "space": {"optim.lr": {"grid": [1e-2, 1e-3, 1e-6]}},
        "search": {"searcher": "grid", "num_samples": 1, "metric": "policy/lr", "mode": "max"},
        "scheduler": {"type": "median", "grace_period": 2, "min_samples_required": 1},
    })
    results = fit(cfg)
    for r in results:  # no trial was paused and started over while waiting for others (Tune's rule would)
        steps = list(r.metrics_dataframe["training_iteration"])
        assert steps == list(range(1, len(steps) + 1)), steps
    rows = {row.config["optim.lr"]: row for row in leaderboard_rows(cfg, results)}
    assert rows[1e-2].status == "finished" and rows[1e-2].steps == 3
    assert rows[1e-6].status == "stopped early" and rows[1e-6].steps == 2
    from sweep.store.results import trial_history

    pids = {r.config["optim.lr"]: {row["pid"] for row in trial_history(r.path)} for r in results}
    assert pids[1e-6] <= pids[1e-2] | pids[1e-3]  # the third trial ran in a process a finished trial left (reuse_processes)


def test_pbt_exploits_a_better_trials_checkpoint(tmp_path):
    """At step 2 (synchronous PBT) the weak trial takes the strong one's checkpoint and config, its LR perturbed."""
    cfg = load_space(tmp_path, {
        "name": "pbt",
        "trainer": tiny_trainer(total_steps=4, checkpoint={"interval": 2}),
        "space": {"optim.lr": {"choice": [1e-4, 1e-2]}, "rollout.n_samples_per_prompt": {"choice": [2, 4]}},
        "search": {"searcher": "random", "num_samples": 2, "metric": "policy/lr", "mode": "max",
                   "points_to_evaluate": [{"optim.lr": 1e-4, "rollout.n_samples_per_prompt": 4}, {"optim.lr": 1e-2, "rollout.n_samples_per_prompt": 2}]},
        "scheduler": {"type": "pbt", "perturbation_interval": 2, "quantile_fraction": 0.5, "resample_probability": 0.0, "synch": True,
                      "mutations": {"optim.lr": {"loguniform": [1e-5, 5e-2]}}},
    })
    results = fit(cfg)
    experiment = Path(cfg.storage) / cfg.name
    exploits = (experiment / "pbt_global.txt").read_text().splitlines()
    assert exploits, "PBT never exploited"
    lrs = sorted(r.config["optim.lr"] for r in results)
    assert 1e-4 not in lrs and lrs[0] >= 8e-3 * 0.999, lrs  # the weak LR was replaced by the donor's, times 0.8 or 1.2
    for r in results:  # both reached the end, no step twice: the exploiting one went on from the donor's step 2, not from 1
        steps = [row["step"] for row in r.metrics_dataframe.to_dict("records")]  # (Tune may skip a paused step's row, or
        assert steps[-1] == 4 and steps == sorted(set(steps)), steps  # start the exploiting trial's log afresh)
    for r in results:
        assert r.metrics["policy/lr"] == pytest.approx(r.config["optim.lr"])
        assert r.config["rollout.n_samples_per_prompt"] == 2  # the whole config came from the donor; only the LR was perturbed


def test_zero_signal_stops_a_trial_that_cannot_learn(tmp_path):
    """LR ~0 and near-greedy sampling: every group's rewards are equal, so the rule stops it after `patience` steps."""
    cfg = load_space(tmp_path, {
        "name": "zero",
        "trainer": tiny_trainer(total_steps=4, rollout={"temperature": 0.01}),
        "space": {"optim.lr": 1e-12},
        "search": {"searcher": "random", "num_samples": 1},
        "scheduler": {"type": "fifo"},
        "stopping": {"zero_signal": {"enabled": True, "threshold": 1e-3, "patience": 2}},
    })
    results = fit(cfg)
    (row,) = leaderboard_rows(cfg, results)
    assert row.status == "zero signal" and row.steps == 2 and row.last_variance_per_prompt == 0.0
