"""Placement with real Ray on CPU, with GPUs declared to Ray (it hands out their ids as for real ones):
each Ray Train worker's vLLM engine gets a GPU of its own, and an actor given no GPU gets a clear error.

Ray Train sets ``CUDA_VISIBLE_DEVICES`` of every worker on a node to all of the node's workers' GPUs and
gives each a local rank; ``engine_visible_devices`` must pick a different one per rank (not device 0 for
all). An actor with ``num_gpus=0`` (Ray leaves ``CUDA_VISIBLE_DEVICES`` unset or empty) must not get "all".
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture
def ray_with_four_gpus():
    import ray

    tmp = tempfile.mkdtemp(prefix="rp", dir="/tmp")  # Ray's socket paths must stay short
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_AUTH_MODE")}
    os.environ.update(RAY_TMPDIR=tmp, RAY_AUTH_MODE="disabled")
    ray.init(num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        shutil.rmtree(tmp, ignore_errors=True)


def _worker_loop(config):
    import ray.train

    from grpo.distributed import ray_gpu_ids
    from grpo.rollout.vllm import engine_visible_devices

    context = ray.train.get_context()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    engine = engine_visible_devices(context.get_local_rank(), visible, ray_gpu_ids())
    record = {"local_rank": context.get_local_rank(), "visible": visible, "engine": engine, "ray_gpus": ray_gpu_ids()}
    Path(config["out"], f"rank{context.get_world_rank()}.json").write_text(json.dumps(record))


def test_each_train_worker_engine_gets_its_own_gpu(ray_with_four_gpus, tmp_path):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trainer = TorchTrainer(
        _worker_loop,
        train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=True, resources_per_worker={"CPU": 0.5, "GPU": 1}),
        torch_config=TorchConfig(backend="gloo"),  # the GPUs are declared, not real: no NCCL
        run_config=RunConfig(name="placement", storage_path=str(tmp_path / "ray")),
    )
    trainer.fit()
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert len(records) == 2
    engines = {r["engine"] for r in records}
    assert len(engines) == 2, records  # two engines, two different GPUs
    for r in records:
        assert r["engine"] in r["visible"].split(","), r  # a GPU Ray gave this node's workers
        assert r["engine"] in r["ray_gpus"], r  # and the one Ray assigned to this very worker


def test_an_actor_without_gpus_gets_an_error_not_every_gpu(ray_with_four_gpus):
    ray = ray_with_four_gpus

    @ray.remote(num_gpus=0, num_cpus=0.5)
    def engine_device():
        from grpo.distributed import ray_gpu_ids
        from grpo.rollout.vllm import engine_visible_devices

        try:
            return ray_gpu_ids(), engine_visible_devices(0, os.environ.get("CUDA_VISIBLE_DEVICES"), ray_gpu_ids())
        except RuntimeError as exc:
            return ray_gpu_ids(), str(exc)

    ids, outcome = ray.get(engine_device.remote())
    assert ids == []  # so grpo.distributed.on_gpu() is False there: a CPU trial on a GPU node trains on the CPU
    assert "num_gpus=0" in outcome
    assert ray_gpu_ids_outside_ray() is None


def ray_gpu_ids_outside_ray():
    from grpo.distributed import ray_gpu_ids

    return ray_gpu_ids()  # the driver is not a Ray worker
