"""The Tune trainable: one trial = the base trainer config plus the sampled dotted overrides.

``run_trial`` validates the trial's config, then runs the GRPO trainer with a reporter that hands each
step's metrics to Tune (exactly once per step, so ASHA rungs count GRPO steps). A trial Tune restarts
(its process died, or ``sweep resume`` after the driver died) continues from its newest checkpoint
(``sweep.trials.checkpoints``), or from step 1 without one; the steps after it are redone and their new reports
replace the first ones (``sweep.store.results``, ``sweep.trials.attempts``), and so do their evals (``forget_evals_after``).
Each start is an attempt recorded in storage (``sweep.trials.attempts``); Tune's retry of a trial that raised is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from configkit import environ
from configkit.base import apply_overrides, validate
from grpo.config import TrainerConfig
from grpo.process import release_memory
from sweep.store.storage import DirMirror, open_storage, write_whole
from sweep.trials import attempts, checkpoints
from sweep.trials.scratch import remove_orphans, scratch_dir

AGGREGATE_FILE = "aggregated_results.jsonl"  # a trial's eval lines, appended by grpo.evaluation.append_aggregate


class TuneReporter:
    """Hands each step's metrics, and its checkpoint when there is one, to Tune (which keeps its own copy).

    With S3 storage, ``mirror`` uploads what the step wrote (eval trajectories) before Tune hears of the step.
    Before the last step is handed over, the attempt is marked ended (``record``): Tune stops a trial at its
    last step (the step limit, ASHA's max_t) without waiting for the function to return, and a process it
    does not reuse dies with it, so the end recorded on the way out would often be cut short.
    """

    def __init__(self, mirror: DirMirror | None = None, record: attempts.Recorder | None = None, last_step: int = 0):
        self.mirror, self.record, self.last_step = mirror, record, last_step
        self.attempt = record.attempt.number if record is not None else 0

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        if self.mirror is not None:
            self.mirror.push()
        result = {**metrics, "step": step, "training_iteration": step, attempts.ATTEMPT: self.attempt}  # Tune's clock is the step, even after a resume
        checkpoints.record_step(step, {**result, "timestamp": time.time(), "pid": os.getpid()})
        self._hand_over(step, result, checkpoint)

    def report_again(self, row: dict[str, Any]) -> None:
        """Hand Tune the trial's recorded last step once more (it resumed with nothing left to run): Tune's
        snapshot may predate that step, and the trial ends on its true last result, not an older one."""
        step = int(row["step"])
        self._hand_over(step, {k: v for k, v in row.items() if k not in ("timestamp", "pid")} | {attempts.ATTEMPT: self.attempt}, None)

    def _hand_over(self, step: int, result: dict[str, Any], checkpoint: str | None) -> None:
        from ray import tune

        if self.record is not None and step >= self.last_step:  # tune.report blocks until Tune asks for the next step,
            self.record.end()  # which it never does after the last: it stops the trial, and may end its process
        if checkpoint is None:
            tune.report(result)
        else:
            checkpoints.name_next(step)
            tune.report(result, checkpoint=tune.Checkpoint.from_directory(checkpoint))  # the driver marks it (checkpoints.MarkPersisted)
            shutil.rmtree(checkpoint, ignore_errors=True)  # Tune has persisted it to the sweep's storage


def trial_config(base: dict[str, Any], overrides: dict[str, Any]) -> TrainerConfig:
    return validate(TrainerConfig, apply_overrides(base, overrides), "trial config")


def run_trial(
    config: dict[str, Any], base: dict[str, Any], storage: str = "", experiment: str = "", workers: int = 1, worker_resources: tuple[float, float] = (1.0, 0.0),
    run: str = "", max_restarts: int = 1, trials_per_worker: int = 1,
) -> None:
    """The Tune function trainable. Eval trajectories go to ``{storage}/{experiment}/trajectories/{trial_id}``.

    With ``workers`` > 1 the trial runs them as Ray Train workers (``sweep.trials.multiworker``), which keep
    their checkpoints in Ray Train's storage under ``{storage}/{experiment}/ray_train/{trial_id}`` and
    restart after a worker's failure up to ``max_restarts`` times. ``run`` names the driver's run: a trial that
    raised is not started again within it, and is by ``sweep resume`` (``sweep.trials.attempts``). With
    ``trials_per_worker`` > 1 the trial's steps run in a pack host shared with other trials (``sweep.trials.packing``).
    """
    from ray import tune

    remove_orphans()  # what killed trials on this node left behind
    # a CPU trial's process may have run a trial before (sweep.tuner.reuse_processes): hand its memory back
    # here, not in that trial's finally, where the SystemExit Tune stops it with still holds train()'s frame
    release_memory()
    environ.TUNE_FUNCTION_THREAD_TIMEOUT_S.set_default("120")  # a reused process waits for a stopped trial's step to end
    record = attempts.Recorder.start(run)  # refused at once where this trial raised before in this run
    context = tune.get_context()
    experiment = experiment or context.get_experiment_name()
    with record.running():
        if workers > 1:
            return run_multiworker(config, base, storage, experiment, context.get_trial_id(), workers, worker_resources, max_restarts)
        run_one_process(config, base, storage, experiment, record, trials_per_worker, worker_resources[1])


def run_one_process(
    config: dict[str, Any], base: dict[str, Any], storage: str, experiment: str, record: attempts.Recorder, trials_per_worker: int = 1,
    gpus_per_trial: float = 0.0,
) -> None:
    """The trial in this process, from its newest checkpoint if Tune started it before (packed: its steps in a pack host)."""
    from ray import tune

    from grpo.trainer import train

    context = tune.get_context()
    overrides = dict(config)
    output_dir, mirror = trajectories_dir(storage, experiment, context.get_trial_id(), context.get_trial_dir())
    if base.get("output_dir") is None:
        overrides["output_dir"] = output_dir
    overrides["checkpoint.dir"] = scratch_dir("checkpoints")
    saved = checkpoints.newest(tune.get_checkpoint())
    if saved is not None:  # Tune restarted this trial (its process died, or sweep resume): continue where it stopped
        overrides["resume_from"] = checkpoints.download(saved, scratch_dir("resume"))
    record.resumes_from(saved.step if saved is not None else 0)
    if base.get("output_dir") is None:  # the trial's own folder: an earlier attempt's evals after the checkpoint go
        forget_evals_after(output_dir, overrides.get("resume_from"), mirror)
    cfg = trial_config(base, overrides)
    reporter = TuneReporter(mirror, record, cfg.total_steps)
    last = checkpoints.recorded(saved.step) if saved is not None and saved.step >= cfg.total_steps else None
    try:
        if last is not None:  # its last step ran and was saved before the driver died (Tune's snapshot missed it): none runs again
            reporter.report_again(last)
        elif trials_per_worker > 1:
            from sweep.trials.packing import run_packed_trial

            run_packed_trial(cfg, trial_config(base, {}), trials_per_worker, experiment, reporter, _shared_base_eval(storage, experiment, cfg),
                             gpus_per_trial)
        else:
            train(cfg, reporter, base_eval=_shared_base_eval(storage, experiment, cfg))
    finally:
        if mirror is not None:
            mirror.push()
        for scratch in (overrides["checkpoint.dir"], overrides.get("resume_from"), mirror and mirror.local):
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)


def run_multiworker(
    config: dict[str, Any], base: dict[str, Any], storage: str, experiment: str, trial_id: str, workers: int, worker_resources: tuple[float, float],
    max_restarts: int = 1,
) -> None:
    from sweep.trials.multiworker import run_sharded_trial

    store = open_storage(storage)
    output_dir, mirror = trajectories_dir(storage, experiment, trial_id, "")
    cfg = trial_config(base, {**config, "output_dir": base.get("output_dir") or output_dir})
    base_eval = _shared_base_eval(storage, experiment, cfg)
    try:  # the trial's driver and workers share this node's disk for eval trajectories (rank 0 writes them)
        run_sharded_trial(cfg, workers, *worker_resources, store.path(experiment, "ray_train"), trial_id, store.fs, base_eval, max_restarts)
    finally:
        if mirror is not None:
            mirror.push()
            shutil.rmtree(mirror.local, ignore_errors=True)


def forget_evals_after(output_dir: str, resume_from: str | None, mirror: DirMirror | None) -> None:
    """Keep, of the trial's eval lines (``aggregated_results.jsonl``) and dumps (``global_step_N/``), those of the
    steps its checkpoint holds: the attempt evaluates the others again, and appending would count them twice.
    Without a checkpoint none stay: the trial starts over, step 0's line included."""
    root, kept = Path(output_dir), _evals_held(resume_from)
    aggregate = root / AGGREGATE_FILE
    if aggregate.is_file():
        by_step: dict[int, str] = {}
        for line in aggregate.read_text().splitlines():
            try:
                step = int(json.loads(line)["global_step"])
            except (ValueError, KeyError, TypeError):  # cut short when a process died mid-write
                continue
            if kept(step):
                by_step[step] = line
        # whole: a process killed mid-rewrite would otherwise lose the evals kept so far
        write_whole(pafs.LocalFileSystem(), str(aggregate), "".join(f"{by_step[step]}\n" for step in sorted(by_step)).encode())
    for dump in root.glob("global_step_*"):
        if dump.is_dir() and not kept(int(dump.name.rsplit("_", 1)[1])):
            shutil.rmtree(dump, ignore_errors=True)
            if mirror is not None:
                mirror.store.delete_dir(*mirror.parts, dump.name)


def _evals_held(resume_from: str | None) -> Callable[[int], bool]:
    """Which eval steps a downloaded checkpoint holds (all up to its step where it predates eval histories)."""
    if resume_from is None:
        return lambda step: False
    state = json.loads((Path(resume_from) / checkpoints.STATE_FILE).read_text())
    if "evals" not in state:
        return lambda step: step <= int(state["step"])
    held = {int(step) for step in state["evals"].get("history", {})}
    return lambda step: step in held


def _shared_base_eval(storage: str, experiment: str, cfg: TrainerConfig) -> dict[str, Any] | None:
    """The sweep's one eval of this trial's base (``sweep.spec.bases``), which starts the trial's curve."""
    if not storage or not cfg.eval.interval:
        return None
    from sweep.trials.base_evals import shared_base_eval

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
