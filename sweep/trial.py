"""The Tune trainable: one trial = the base trainer config plus the sampled dotted overrides.

``run_trial`` validates the trial's config, then runs the GRPO trainer with a reporter that hands each
step's metrics to Tune (exactly once per step, so ASHA rungs count GRPO steps). A trial Tune restarts
(failure, or ``sweep resume`` after the driver died) continues from its newest checkpoint
(``sweep.checkpoints``); the steps after it are redone and their new reports replace the first ones
(``sweep.results``).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from configkit import environ
from configkit.base import apply_overrides, validate
from grpo.config import TrainerConfig
from grpo.process import release_memory
from sweep import checkpoints
from sweep.scratch import remove_orphans, scratch_dir
from sweep.storage import DirMirror, open_storage


class TuneReporter:
    """Hands each step's metrics, and its checkpoint when there is one, to Tune (which keeps its own copy).

    With S3 storage, ``mirror`` uploads what the step wrote (eval trajectories) before Tune hears of the step.
    """

    def __init__(self, mirror: DirMirror | None = None):
        self.mirror = mirror

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        from ray import tune

        if self.mirror is not None:
            self.mirror.push()
        result = {**metrics, "step": step, "training_iteration": step}  # Tune's clock is the step, even after a resume
        checkpoints.record_step(step, {**result, "timestamp": time.time(), "pid": os.getpid()})
        if checkpoint is None:
            tune.report(result)
            return
        checkpoints.name_next(step)
        tune.report(result, checkpoint=tune.Checkpoint.from_directory(checkpoint))
        checkpoints.mark_complete(tune.get_checkpoint(), step)
        shutil.rmtree(checkpoint, ignore_errors=True)  # Tune has persisted it to the sweep's storage


def trial_config(base: dict[str, Any], overrides: dict[str, Any]) -> TrainerConfig:
    return validate(TrainerConfig, apply_overrides(base, overrides), "trial config")


def run_trial(
    config: dict[str, Any], base: dict[str, Any], storage: str = "", experiment: str = "", workers: int = 1, worker_resources: tuple[float, float] = (1.0, 0.0)
) -> None:
    """The Tune function trainable. Eval trajectories go to ``{storage}/{experiment}/trajectories/{trial_id}``.

    With ``workers`` > 1 the trial runs them as Ray Train workers (``sweep.multiworker``), which keep
    their checkpoints in Ray Train's storage under ``{storage}/{experiment}/ray_train/{trial_id}``.
    """
    from ray import tune

    from grpo.trainer import train

    remove_orphans()  # what killed trials on this node left behind
    # a CPU trial's process may have run a trial before (sweep.tuner.reuse_processes): hand its memory back
    # here, not in that trial's finally, where the SystemExit Tune stops it with still holds train()'s frame
    release_memory()
    environ.TUNE_FUNCTION_THREAD_TIMEOUT_S.set_default("120")  # a reused process waits for a stopped trial's step to end
    context = tune.get_context()
    if workers > 1:
        return run_multiworker(config, base, storage, experiment or context.get_experiment_name(), context.get_trial_id(), workers, worker_resources)
    overrides = dict(config)
    output_dir, mirror = trajectories_dir(storage, experiment or context.get_experiment_name(), context.get_trial_id(), context.get_trial_dir())
    if base.get("output_dir") is None:
        overrides["output_dir"] = output_dir
    overrides["checkpoint.dir"] = scratch_dir("checkpoints")
    saved = checkpoints.newest(tune.get_checkpoint())
    if saved is not None:  # Tune restarted this trial (failure or sweep resume): continue where it stopped
        overrides["resume_from"] = checkpoints.download(saved, scratch_dir("resume"))
    cfg = trial_config(base, overrides)
    try:
        train(cfg, TuneReporter(mirror), base_eval=_shared_base_eval(storage, experiment or context.get_experiment_name(), cfg))
    finally:
        if mirror is not None:
            mirror.push()
        for scratch in (overrides["checkpoint.dir"], overrides.get("resume_from"), mirror and mirror.local):
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)


def run_multiworker(
    config: dict[str, Any], base: dict[str, Any], storage: str, experiment: str, trial_id: str, workers: int, worker_resources: tuple[float, float]
) -> None:
    from sweep.multiworker import run_sharded_trial

    store = open_storage(storage)
    output_dir, mirror = trajectories_dir(storage, experiment, trial_id, "")
    cfg = trial_config(base, {**config, "output_dir": base.get("output_dir") or output_dir})
    base_eval = _shared_base_eval(storage, experiment, cfg)
    try:  # the trial's driver and workers share this node's disk for eval trajectories (rank 0 writes them)
        run_sharded_trial(cfg, workers, *worker_resources, store.path(experiment, "ray_train"), trial_id, store.fs, base_eval)
    finally:
        if mirror is not None:
            mirror.push()
            shutil.rmtree(mirror.local, ignore_errors=True)


def _shared_base_eval(storage: str, experiment: str, cfg: TrainerConfig) -> dict[str, Any] | None:
    """The sweep's one eval of this trial's base (``sweep.bases``), which starts the trial's curve."""
    if not storage or not cfg.eval.interval:
        return None
    from sweep.bases import shared_base_eval

    return shared_base_eval(open_storage(storage), experiment, cfg)


def trajectories_dir(storage: str, experiment: str, trial_id: str, trial_dir: str) -> tuple[str, DirMirror | None]:
    """Where the trial writes trajectories, and the mirror that uploads them when storage is remote.

    Local storage: written in place. S3: written to a local directory that starts as a copy of what the
    bucket holds (a resumed trial appends to its ``aggregated_results.jsonl``) and is pushed every step.
    """
    if not storage:  # called without a storage (older tuners): beside the trial's directory
        return str(Path(trial_dir).parent / "trajectories" / trial_id), None
    store = open_storage(storage)
    parts = (experiment, "trajectories", trial_id)
    if store.is_local:
        return store.path(*parts), None
    mirror = DirMirror(scratch_dir("trajectories"), store, *parts)
    mirror.pull()
    return str(mirror.local), mirror
