"""A trial with two FSDP2 workers: Ray Train's TorchTrainer inside the Tune trial, one report per GRPO step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sweep.tiny_sweep import fit, load_space, ray_session, tiny_trainer, two_worker_trials_in_turn  # noqa: F401 (ray_session is a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.usefixtures("ray_session")]


def test_a_two_worker_trial_reports_each_step_once_with_both_ranks_episodes(tmp_path):
    cfg = load_space(tmp_path, {
        "name": "two_workers",
        "trainer": tiny_trainer(total_steps=2, checkpoint={"interval": 1}),
        "space": {"optim.lr": 1e-3},
        "search": {"searcher": "random", "num_samples": 1, "seed": 0},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 0.5, "workers_per_trial": 2},  # Ray Train's own actors need room beside the 2 x 0.5 CPU workers
    })
    [result] = list(fit(cfg))
    history = result.metrics_dataframe
    assert list(history["step"]) == [1, 2]  # rank 0's report only, once per step
    assert list(history["rollout/episodes"]) == [4.0, 4.0]  # 2 prompts x 2 samples, one prompt per rank
    assert (history["policy/entropy"] > 0).all()  # the update ran over both ranks' tokens
    runs = Path(cfg.storage) / cfg.name / "ray_train"
    saved = sorted(p.name for p in runs.rglob("rng_1.pt"))  # both ranks' parts of the checkpoints reached Ray Train's storage
    assert saved, list(runs.rglob("*"))[:20]
    assert json.loads(next(runs.rglob("trainer_state.json")).read_text())["world"] == 2


@pytest.mark.timeout(300)  # the bug this guards against is a hang
def test_two_multi_worker_trials_one_after_the_other_both_finish(tmp_path):
    """Stopped by Tune at its last step, a multi-worker trial's actor was ended under Ray Train, whose workers'
    placement group stayed reserved: the second trial waited for its workers for good. Now such a trial ends by
    returning (``sweep.tuner.build_stopper``); on this 2-CPU machine the second trial fits only once the first's
    placement group is gone."""
    cfg = two_worker_trials_in_turn(tmp_path, "two_in_turn", total_steps=2)
    results = list(fit(cfg))
    assert sorted(r.metrics["training_iteration"] for r in results) == [2, 2] and not any(r.error for r in results)


def test_a_ray_without_its_dashboard_is_refused_for_multi_worker_trials_stopped_early(tmp_path):
    """This module's Ray has no dashboard, so no state API: ``sweep run`` refuses there once Ray has started (the
    case ``--no-dashboard`` cannot name: a cluster's head, or a dashboard that failed to start). On it, such trials
    hung (tests/sweep/test_multiworker_stopped.py runs them on a Ray with its dashboard)."""
    from configkit.base import ConfigError
    from sweep.run import check_state_api
    from sweep.spec.resource_checks import state_api_problem

    assert state_api_problem().startswith("Ray's state API does not answer (")
    space = {"name": "asha_two_workers", "trainer": tiny_trainer(total_steps=2), "space": {"optim.lr": 1e-3},
             "search": {"searcher": "random", "num_samples": 1}, "resources": {"cpus_per_trial": 0.5, "workers_per_trial": 2}}
    with pytest.raises(ConfigError, match=r"= 2 with scheduler.type = 'asha': .*Ray's state API does not answer \(\w+: .*\), on the Ray started here: or set"):
        check_state_api(load_space(tmp_path, space))
    check_state_api(load_space(tmp_path, {**space, "scheduler": {"type": "fifo"}}))  # runs every trial to its end: no need
