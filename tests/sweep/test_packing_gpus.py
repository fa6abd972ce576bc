"""Packed trials through Tune with GPUs declared to Ray (on CPU: Ray hands out their ids as for real ones).

A trial of a K-pack asks ``gpus_per_trial / K`` of a GPU, so Ray puts K trials on each GPU; the trials that
share a GPU share one pack host, which is pinned to that GPU though it asks Ray for none. The config still
refuses GPU packs (nothing has run one on a GPU yet): the test steps around that refusal to check what Tune
and the hosts do with GPUs, which is what lifting it will rest on.
"""

from __future__ import annotations

import pytest

from tests.conftest import TEST_MODEL
from tests.sweep.tiny_sweep import fit, load_space, local_ray, tiny_trainer

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def ray_with_two_gpus(tiny_base):
    with local_ray(num_cpus=4, num_gpus=2):
        yield


def _space(tmp_path, gpus: float) -> dict:
    return {
        "name": "gpupacks",
        "trainer": tiny_trainer(total_steps=2, model={**TEST_MODEL, "lora": {"rank": 2, "alpha": 4.0}}),
        "space": {"optim.lr": {"grid": [1e-2, 3e-3, 1e-3, 3e-4]}},
        "search": {"searcher": "grid", "num_samples": 1, "metric": "policy/lr", "mode": "max"},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 2, "gpus_per_trial": gpus, "trials_per_worker": 2},
        "max_concurrent_trials": 4,
    }


def test_the_config_still_refuses_gpu_packs(tmp_path):
    from configkit.base import ConfigError

    with pytest.raises(ConfigError, match="resources.gpus_per_trial"):
        load_space(tmp_path, _space(tmp_path, 1))


def test_trials_sharing_a_gpu_share_a_host_pinned_to_it(tmp_path, ray_with_two_gpus):
    cfg = load_space(tmp_path, _space(tmp_path, 0))
    cfg = cfg.model_copy(update={"resources": cfg.resources.model_copy(update={"gpus_per_trial": 1})})  # past the refusal
    results = fit(cfg)
    hosts: dict[float, set[float]] = {}
    for r in results:
        history = r.metrics_dataframe.to_dict("records")
        assert [row["training_iteration"] for row in history] == [1, 2]
        assert all(row["policy/lr"] == pytest.approx(r.config["optim.lr"]) for row in history)
        for row in history:
            hosts.setdefault(row["pack/host_pid"], set()).add(row["pack/gpu"])  # the GPU the host process sees
    # each trial asked for half a GPU: four ran at once, two on each GPU, each pair in one host pinned to its GPU
    # (a host that took a trial of the other GPU would have refused it, and the trial would have failed)
    assert len(hosts) == 2, hosts
    assert all(len(gpus) == 1 for gpus in hosts.values()), hosts
    assert set().union(*hosts.values()) == {0.0, 1.0}
    assert all(max(row["pack/members"] for row in r.metrics_dataframe.to_dict("records")) == 2 for r in results)
