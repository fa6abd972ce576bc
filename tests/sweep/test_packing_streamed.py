"""Packed trials that roll out together, through Tune and Ray (``sweep.trials.packing``): two LoRA trials holding
shares of one GPU declared to Ray join one pack host, an actor whose step calls run in threads and wait for a round;
the host's one streaming engine (vLLM's, stood in by HF in the workers: ``streamed_pack_workers``) holds both
members' adapters in flight at once, in their rollouts and in their evals, and each trial reports, step for step,
what it reports trained alone. The GPU machine has no Ray, so this wiring is tested here only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import TEST_MODEL
from tests.sweep.streamed_pack_workers import LOG
from tests.sweep.tiny_sweep import fit, load_space, local_ray, tiny_trainer

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture
def ray_with_stand_in_engines(tiny_base, tmp_path):
    log = tmp_path / "engines"
    log.mkdir()
    path = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH")]))  # the workers import this checkout's tests
    env = {LOG: str(log), "PYTHONPATH": path}
    with local_ray(num_cpus=2, num_gpus=1, runtime_env={"env_vars": env, "worker_process_setup_hook": "tests.sweep.streamed_pack_workers.install"}):
        yield log


def test_members_of_a_streamed_pack_host_roll_out_and_evaluate_together_and_report_their_lone_runs(tmp_path, ray_with_stand_in_engines):
    from grpo.reporting import ListReporter
    from grpo.trainer import train
    from sweep.store.storage import open_storage
    from sweep.trials.base_evals import shared_base_eval
    from sweep.trials.trial import trial_config
    from sweep.tuner import base_trainer_dict
    from tests.grpo.test_lora_vllm import _streamed, hf_backed_streaming
    from tests.grpo.test_pack import _assert_same_reports

    space = {
        "name": "streamedpack",
        "trainer": tiny_trainer(total_steps=3, model={**TEST_MODEL, "lora": {"rank": 2, "alpha": 4.0}}, eval={"interval": 2, "n_samples": 1}),
        "space": {"optim.lr": {"grid": [1e-2, 3e-3]}},
        "search": {"searcher": "grid", "num_samples": 1, "metric": "policy/lr", "mode": "max"},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 2, "gpus_per_trial": 0, "trials_per_worker": 2},
        "max_concurrent_trials": 2,
    }
    cfg = load_space(tmp_path, space)
    cfg = cfg.model_copy(update={"resources": cfg.resources.model_copy(update={"gpus_per_trial": 1})})  # past the GPU packs' refusal
    results = fit(cfg)

    hosts = {pid for r in results for pid in r.metrics_dataframe["pack/host_pid"]}
    assert len(hosts) == 1, hosts  # both trials held half of GPU 0: one host
    assert max(r.metrics_dataframe["pack/members"].max() for r in results) == 2
    (engine,) = [json.loads(p.read_text()) for p in ray_with_stand_in_engines.glob("*.json")]  # the host's one engine
    assert engine == {"most_at_once": 2, "most_at_once_in_evals": 2}

    base = base_trainer_dict(cfg)
    for r in results:
        history = r.metrics_dataframe.to_dict("records")
        lone_cfg = _streamed(trial_config(base, {**r.config, "output_dir": str(tmp_path / "lone"), "checkpoint.dir": str(tmp_path / "ckpt")}))
        lone = ListReporter()
        with hf_backed_streaming():
            train(lone_cfg, lone, base_eval=shared_base_eval(open_storage(cfg.storage), cfg.name, lone_cfg))
        in_host = ListReporter()  # Tune's history, as the keys the lone run reports (one missing fails here)
        for row, (_, want) in zip(history, lone.reports):
            in_host.report(int(row["step"]), {k: row[k] for k in want})
        assert len(history) == len(lone.reports)
        _assert_same_reports(in_host, lone, f"LR {r.config['optim.lr']} in the host vs alone")
