"""Where results go besides Tune's own ``result.json``/``progress.csv``: W&B, TensorBoard, the live table.

W&B: one run per trial, grouped by the sweep's name, its config the trial's swept keys (never anything
that looks like a secret; secrets live in the environment only). ``mode: offline`` needs no key and writes
run files under ``{storage}/{name}/wandb`` for ``wandb sync`` later. TensorBoard: event files in each
trial's folder (tensorboardX). The finished sweep's own summaries (HParams tab, one W&B run with the leaderboard
and verdict) are written once at the end by ``sweep.watch.summary_logs``, from the report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ray.air.integrations.wandb import WandbLoggerCallback, _WandbLoggingActor
from ray.tune import Callback
from ray.tune.logger import TBXLoggerCallback

from configkit import environ
from grpo.metrics import SCORE, shown
from sweep.spec.config import SweepConfig

SECRET = re.compile(r"key|token|secret|password|credential", re.IGNORECASE)


def charted(result: dict) -> dict:
    """A result as charts take it: without eval/score while it is Tune's placeholder 0 (no trained eval yet), so a
    curve starts at the first gain and a trial stopped before one ends with none, not with 0."""
    return result if SCORE not in result or shown(result, SCORE) is not None else {k: v for k, v in result.items() if k != SCORE}


class SweepTensorBoard(TBXLoggerCallback):
    """Tune's TensorBoard logger, charting ``charted`` results."""

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        super().log_trial_result(iteration, trial, charted(result))


class FlushingWandbActor(_WandbLoggingActor):
    """Ray's per-trial W&B actor, waiting for W&B's service to write everything before the actor is killed.

    ``wandb.finish()`` returns before wandb-core has flushed the run file, and Ray kills the actor as soon as
    ``run`` returns: an early trial's offline run then lacks its history (seen with wandb 0.31).
    """

    def run(self) -> None:
        super().run()
        self._wandb.teardown()


class SweepWandb(WandbLoggerCallback):
    """Ray's W&B callback, with offline mode that needs no key.

    Ray checks for an API key in the driver unless ``WANDB_MODE`` is offline/disabled in the environment,
    and ``mode=`` alone does not satisfy that check, so the mode is exported before the check runs.
    """

    _logger_actor_cls = FlushingWandbActor

    def setup(self, *args: Any, **kwargs: Any) -> None:
        if self._offline():
            environ.WANDB_MODE.set(self.kwargs["mode"])
        super().setup(*args, **kwargs)

    def _offline(self) -> bool:
        return self.kwargs.get("mode") in ("offline", "disabled")

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        super().log_trial_result(iteration, trial, charted(result))

    def _start_logging_actor(self, trial, exclude_results: list[str], **wandb_init_kwargs: Any) -> None:
        """Offline runs need no key: keep it out of the actor's runtime_env (which Ray records) altogether."""
        key = environ.WANDB_API_KEY.pop() if self._offline() else None
        try:
            super()._start_logging_actor(trial, exclude_results, **wandb_init_kwargs)
        finally:
            if key is not None:
                environ.WANDB_API_KEY.set(key)


class NoTensorBoard(TBXLoggerCallback):
    """Stands in for Tune's default TensorBoard logger (Tune adds one unless one is present) and writes nothing."""

    def __init__(self) -> None:  # noqa: D107 - nothing to set up, and tensorboardX need not be imported
        pass

    def log_trial_start(self, trial) -> None:
        pass

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        pass

    def log_trial_end(self, trial, failed: bool = False) -> None:
        pass


def wandb_dir(cfg: SweepConfig) -> Path:
    """Local W&B run files (``wandb sync`` reads them): in the sweep's directory when storage is local, else
    under ``wandb_runs/{name}`` in the working directory (W&B writes local files only)."""
    from sweep.store.storage import open_storage

    store = open_storage(cfg.storage)
    path = (Path(store.root) if store.is_local else Path("wandb_runs")).resolve() / cfg.name
    path.mkdir(parents=True, exist_ok=True)
    return path


def wandb_callback(cfg: SweepConfig) -> SweepWandb:
    w = cfg.logging.wandb
    swept = [*cfg.space, *getattr(cfg.scheduler, "mutations", {})]
    return SweepWandb(
        project=w.project,
        group=cfg.name,
        excludes=[key for key in swept if SECRET.search(key)],
        log_config=False,
        upload_checkpoints=False,
        mode=w.mode,
        dir=str(wandb_dir(cfg)),
        **({"entity": w.entity} if w.entity else {}),
    )


def logging_callbacks(cfg: SweepConfig) -> list[Callback]:
    """The callbacks the ``logging`` block asks for (Tune adds its CSV and JSON loggers itself)."""
    from sweep.watch.live import LiveProgress

    callbacks: list[Callback] = [SweepTensorBoard() if cfg.logging.tensorboard else NoTensorBoard()]
    if cfg.logging.wandb.enabled:
        callbacks.append(wandb_callback(cfg))
    if cfg.logging.progress:
        keys = [*cfg.space, *getattr(cfg.scheduler, "mutations", {})]
        callbacks.append(LiveProgress(cfg.search.metric, cfg.trainer.total_steps, keys, cfg.stopping.zero_signal.rule()))
    return callbacks
