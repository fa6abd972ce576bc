"""A trial with several workers: Ray Train's ``TorchTrainer`` inside the Tune trial (Ray Train V2 pattern).

Tune schedules the trial (a token CPU for its driver); the trial starts ``workers`` Ray Train workers,
each one rank of the FSDP2 trainer (``grpo.distributed`` finds the process group Ray Train set up).
Every rank calls ``ray.train.report`` once per GRPO step, as Ray Train requires; the metrics are rank
0's, which the trainer has already computed over every rank's episodes, and ``TuneReportCallback``
forwards them to Tune, so ASHA and the zero-signal stopper see one report per step, as with one worker.
Checkpoints go through Ray Train's storage (every rank uploads its shards of the distributed
checkpoint); a restarted trial (failure, or ``sweep resume``) finds the newest one with
``ray.train.get_checkpoint()`` and continues at its next step.
"""

from __future__ import annotations

from typing import Any

from grpo.config import TrainerConfig
from sweep.trials.scratch import scratch_dir


class TrainWorkerReporter:
    """The trainer's reporter on a Ray Train worker: every rank reports, rank 0's metrics are kept."""

    all_ranks = True

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        import ray.train

        result = {**metrics, "step": step, "training_iteration": step}
        ray.train.report(result, checkpoint=ray.train.Checkpoint.from_directory(checkpoint) if checkpoint else None)


def worker_loop(config: dict[str, Any]) -> None:
    """One rank: the trainer config, resumed from Ray Train's newest checkpoint if there is one."""
    import ray.train

    from grpo.trainer import train

    cfg: TrainerConfig = config["trainer"]  # parsed once, in the trial; Ray pickles the typed config to its workers
    saved = ray.train.get_checkpoint()
    updates: dict[str, Any] = {"checkpoint": cfg.checkpoint.model_copy(update={"dir": shared_scratch_dir()})}
    if saved is not None:
        updates["resume_from"] = saved.to_directory(scratch_dir("resume"))
    train(cfg.model_copy(update=updates), TrainWorkerReporter(), base_eval=config.get("base_eval"))


def shared_scratch_dir() -> str:
    """One scratch path for every rank (rank 0 picks it): ranks on one node write one checkpoint there."""
    import torch.distributed as dist

    path = [scratch_dir("checkpoints") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(path, src=0)
    return str(path[0])


def run_sharded_trial(
    cfg: TrainerConfig, workers: int, cpus_per_worker: float, gpus_per_worker: float, storage_path: str, name: str, filesystem=None,
    base_eval: dict[str, Any] | None = None, max_failures: int = 1,
) -> None:
    """Train ``cfg`` on ``workers`` Ray Train workers from inside the current Tune trial; after a worker's failure
    Ray Train starts them again from the newest checkpoint, up to ``max_failures`` times (any failure: it cannot
    tell an exception from a lost worker)."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    per_worker = {"CPU": cpus_per_worker, **({"GPU": gpus_per_worker} if gpus_per_worker else {})}
    trainer = TorchTrainer(
        worker_loop,
        train_loop_config={"trainer": cfg, "base_eval": base_eval},
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=gpus_per_worker > 0, resources_per_worker=per_worker),
        run_config=RunConfig(
            name=name,
            storage_path=storage_path,
            storage_filesystem=filesystem,
            callbacks=[TuneReportCallback()],
            checkpoint_config=CheckpointConfig(num_to_keep=max(1, cfg.checkpoint.keep_last)),
            failure_config=FailureConfig(max_failures=max_failures),
        ),
    )
    trainer.fit()
