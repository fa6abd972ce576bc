"""Build the Ray Tune ``Tuner`` for a validated SweepConfig: searcher, scheduler, stoppers, resources, storage.

Imported only when a sweep runs (it imports Ray and Optuna at module level); ``sweep validate`` never
loads it.

Searchers (``sweep/trials/samplers.py``, ``sweep/spec/space.py``), schedulers (``sweep/trials/schedulers.py``) and logging
(``sweep/watch/loggers.py``, ``sweep/watch/live.py``) each live in their own module; this one wires them together.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState
from ray import tune
from ray.tune.search import BasicVariantGenerator
from ray.tune.search.optuna import OptunaSearch
from ray.tune.stopper import CombinedStopper, Stopper

from grpo.metrics import shown
from sweep.spec.config import SweepConfig
from sweep.spec.space import OptunaSpace, finite_points, grid_search_points, inactive_values, tune_param_space
from sweep.store.storage import open_storage
from sweep.store.study import optuna_db_path, push_study, studies_open_at
from sweep.trials.checkpoints import MarkPersisted
from sweep.trials.samplers import make_sampler
from sweep.trials.schedulers import make_scheduler
from sweep.trials.stoppers import VARIANCE, ZeroSignalStopper, no_signal
from sweep.trials.trial import run_trial
from sweep.watch.live_page import LiveFeed
from sweep.watch.loggers import logging_callbacks
from sweep.watch.notify import notifiers


def base_trainer_dict(cfg: SweepConfig) -> dict[str, Any]:
    """The base trainer config each trial starts from (its sampled keys are applied on top, and the trial
    parses the result once); torch threads follow the trial's CPU share unless the file sets them."""
    base = cfg.trainer.model_dump()
    if base["torch_threads"] is None:
        base["torch_threads"] = max(1, int(cfg.resources.cpus_per_trial))
    return base


def optuna_db(cfg: SweepConfig) -> Path:
    """The Optuna study's SQLite file, beside the sweep's results (a local copy synced there, with S3)."""
    path = optuna_db_path(open_storage(cfg.storage), cfg.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class HonestOptunaSearch(OptunaSearch):
    """OptunaSearch that records trials ended early (ASHA, zero signal) as PRUNED at their last step, and
    that does not run a config twice while the space still holds one not tried.

    Tune's OptunaSearch tells the study such a trial is COMPLETE with its last value, which makes a
    stopped trial look like a finished one to TPE and to later importance analysis. And TPE draws the same
    point again and again in a space of choices (4 of 10 trials in ``bench/sweep_efficiency.py``). With
    ``points`` (every config of a finite space, ``sweep.spec.space.finite_points``; None when a key is
    continuous) a repeat is told to the study as FAIL (``user_attrs["skipped"]``; samplers and the
    report's importance ignore FAIL trials) and drawn again; after ``REDRAWS`` repeats (a GP sampler can
    propose the same point every time) an untried config is queued instead, so none runs twice before all ran.
    """

    REDRAWS = 3
    # (storage URI, sweep name) of the sweep being restored, while ``restoring`` holds: where its study goes now
    restored_at: tuple[str, str] | None = None

    def __init__(self, *args: Any, total_steps: int, study_copy: tuple[str, str] | None = None, points: list[dict] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._total_steps = total_steps
        self._study_copy = study_copy  # (storage URI, sweep name): where the study goes after each save
        self._points = points

    def suggest(self, trial_id: str) -> dict | None:
        config = super().suggest(trial_id)
        for redraw in range(self.REDRAWS + 1):
            tried = {_frozen(t.params) for other, t in self._ot_trials.items() if other != trial_id}
            if config is None or _frozen(self._ot_trials[trial_id].params) not in tried:
                break
            # (a searcher restored from before it had points has none: no finite space to complete)
            untried = [p for p in getattr(self, "_points", None) or [] if _frozen(p) not in tried]
            if not untried:  # a continuous space, or every config has run: repeats are allowed
                break
            ot_trial = self._ot_trials.pop(trial_id)
            ot_trial.set_user_attr("skipped", "repeats a config already tried")
            self._ot_study.tell(ot_trial, state=TrialState.FAIL)
            if redraw == self.REDRAWS:  # the sampler keeps proposing tried configs: take an untried one
                self._ot_study.enqueue_trial(untried[0], user_attrs={"queued": "untried config after repeated draws"})
            config = super().suggest(trial_id)
        return config

    def save(self, checkpoint_path: str) -> None:
        """Tune saves the searcher with every experiment snapshot; the study is copied to storage right
        after (S3; a local one is already there), so no snapshot names an Optuna trial the stored study lacks."""
        super().save(checkpoint_path)
        if self._study_copy:
            push_study(open_storage(self._study_copy[0]), self._study_copy[1])

    def restore(self, checkpoint_path: str) -> None:
        """Tune's restore of the pickled searcher; its study's copies then go where the sweep is now (``restoring``)."""
        super().restore(checkpoint_path)
        if HonestOptunaSearch.restored_at is not None:
            self._study_copy = HonestOptunaSearch.restored_at

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """Ray reports every result to the study as an intermediate value; eval/score's placeholder 0 before a trial's
        first trained eval is none (a trial pruned then would be told to TPE as a gain of 0)."""
        if self.metric in result and shown(result, self.metric) is None:
            return
        super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        steps = (result or {}).get("training_iteration", self._total_steps)
        if error or trial_id in self._completed_trials or steps >= self._total_steps or self.metric not in (result or {}):
            super().on_trial_complete(trial_id, result, error)
            return
        ot_trial = self._ot_trials[trial_id]
        value = shown(result, self.metric)
        if value is not None:  # stopped before its first trained eval: eval/score's placeholder 0 is no value to learn from
            ot_trial.report(value, step=steps)
        self._ot_study.tell(ot_trial, state=TrialState.PRUNED)
        self._completed_trials.add(trial_id)


@contextmanager
def restoring(storage_uri: str, name: str) -> Iterator[None]:
    """While Tune restores a saved sweep (``Tuner.restore`` and its ``fit``): the pickled searcher's study opens
    this sweep's study file, and its copies go to this sweep's storage, wherever the sweep was first run."""
    HonestOptunaSearch.restored_at = (storage_uri, name)
    try:
        with studies_open_at(optuna_db_path(open_storage(storage_uri), name)):
            yield
    finally:
        HonestOptunaSearch.restored_at = None


def _frozen(params: dict[str, Any]) -> frozenset:
    """A config as a set, floats rounded so that 0.1 + 0.2 and Optuna's 0.3 of a ``quniform`` match."""
    return frozenset((key, repr(round(value, 12) if isinstance(value, float) else value)) for key, value in params.items())


def build_searcher(cfg: SweepConfig):
    if cfg.search.searcher == "optuna":
        return HonestOptunaSearch(
            space=OptunaSpace(cfg.space, inactive_values(cfg)),
            metric=cfg.search.metric,
            mode=cfg.search.mode,
            total_steps=cfg.trainer.total_steps,
            sampler=make_sampler(cfg.search),
            points_to_evaluate=cfg.search.points_to_evaluate or None,
            study_name=cfg.name,
            storage=optuna.storages.RDBStorage(f"sqlite:///{optuna_db(cfg)}"),
            study_copy=(cfg.storage, cfg.name),
            points=finite_points(cfg),
        )
    # Tune applies max_concurrent_trials to a Searcher only (it ignores it, with a warning, for these generators):
    # they take the cap themselves
    limit = cfg.max_concurrent_trials
    if cfg.search.searcher == "grid":  # every combination listed up front: conditional keys multiply only where active
        return BasicVariantGenerator(random_state=cfg.search.seed, points_to_evaluate=grid_search_points(cfg), max_concurrent=limit)
    return BasicVariantGenerator(random_state=cfg.search.seed, points_to_evaluate=cfg.search.points_to_evaluate or None, max_concurrent=limit)


def trial_count(cfg: SweepConfig) -> int:
    """Tune's num_samples: the grid searcher's trials are its listed points, each replacing one sample."""
    return len(grid_search_points(cfg)) if cfg.search.searcher == "grid" else cfg.search.num_samples


class TuneZeroSignalStopper(ZeroSignalStopper, Stopper):
    """The zero-signal rule as a Ray Tune stopper, over one value per step: a restarted trial redoes the steps
    after its checkpoint, and a redone step's report replaces the first one's, and those of the steps after it."""

    def __init__(self, threshold: float, patience: int):
        super().__init__(threshold, patience)
        self.by_step: dict[str, dict[int, float]] = {}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        step = result.get("training_iteration")
        if VARIANCE in result and step is not None:
            earlier = {s: v for s, v in self.by_step.get(trial_id, {}).items() if s < step}
            self.by_step[trial_id] = {**earlier, int(step): float(result[VARIANCE])}
            self.history[trial_id] = [v for _, v in sorted(self.by_step[trial_id].items())]
        return no_signal(self.history[trial_id], self.threshold, self.patience)


class StepLimit(Stopper):
    """Stop a trial at its last step, read from the step it reports. Tune's MaximumIterationStopper counts
    reports instead, so a restarted trial's redone steps counted twice and stopped it short of its last step."""

    def __init__(self, total_steps: int):
        self.total_steps = total_steps

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return int(result.get("training_iteration", 0)) >= self.total_steps

    def stop_all(self) -> bool:
        return False


def build_stopper(cfg: SweepConfig) -> Stopper | None:
    """Every trial stops at total_steps; with zero_signal on, also when GRPO has had no signal for a while.

    A multi-worker trial is not stopped at its last step: it ends by returning (its trainer stops at total_steps), so
    Ray Train removes its workers' placement group. Stopped by Tune, the trial's actor is ended under Ray Train, whose
    placement group stays reserved until Ray Train's cleaner, which needs Ray's state API, removes it
    (``sweep.spec.resource_checks.state_api_need``; ray-project/ray#54305)."""
    stoppers: list[Stopper] = []
    if cfg.resources.workers_per_trial == 1:
        stoppers.append(StepLimit(cfg.trainer.total_steps))
    if rule := cfg.stopping.zero_signal.rule():
        stoppers.append(TuneZeroSignalStopper(*rule))
    if len(stoppers) > 1:
        return CombinedStopper(*stoppers)
    return stoppers[0] if stoppers else None


def build_trainable(cfg: SweepConfig):
    """``run_trial`` with the base config, storage and resources bound (``sweep resume`` rebuilds the same), and
    a new run id: a trial that raised is not retried within its run, and is on ``sweep resume`` (``sweep.trials.attempts``)."""
    r = cfg.resources
    bound = tune.with_parameters(run_trial, base=base_trainer_dict(cfg), storage=cfg.storage, experiment=cfg.name,
                                workers=r.workers_per_trial, worker_resources=(r.cpus_per_trial, r.gpus_per_trial),
                                run=uuid.uuid4().hex[:12], max_restarts=cfg.failures.max_trial_restarts, trials_per_worker=r.trials_per_worker)
    if r.workers_per_trial > 1:  # the trial only drives; Ray Train asks for each worker's CPUs and GPUs itself
        return tune.with_resources(bound, {"cpu": 0.01})
    if r.trials_per_worker > 1:  # K trials' shares make one pack host's CPUs and GPU; the host asks for none (sweep.trials.packing)
        return tune.with_resources(bound, {"cpu": r.cpus_per_trial / r.trials_per_worker, "gpu": r.gpus_per_trial / r.trials_per_worker})
    return tune.with_resources(bound, {"cpu": r.cpus_per_trial, "gpu": r.gpus_per_trial})


def reuse_processes(cfg: SweepConfig) -> bool:
    """Does a CPU trial's process go on to run the next trial (Tune's ``reuse_actors``)?

    It spares each trial about 6 s: Ray starting a worker, and importing torch and the transformers model
    classes (measured in docs/decisions.md). Safe because Tune stops a trial between steps, when its thread
    waits in ``tune.report`` and leaves at once (``run_trial`` also gives a stop that would land mid-step
    120 s to finish instead of Tune's 2, as a margin). Not with GPUs or Ray Train workers: a vLLM
    engine and a process group are not known to let go of the GPU between trials (unverified there).
    """
    return cfg.resources.gpus_per_trial == 0 and cfg.resources.workers_per_trial == 1


def build_tuner(cfg: SweepConfig) -> tune.Tuner:
    store = open_storage(cfg.storage)
    return tune.Tuner(
        build_trainable(cfg),
        param_space=tune_param_space(cfg),
        tune_config=tune.TuneConfig(
            metric=cfg.search.metric,
            mode=cfg.search.mode,
            search_alg=build_searcher(cfg),
            scheduler=make_scheduler(cfg),
            num_samples=trial_count(cfg),
            max_concurrent_trials=cfg.max_concurrent_trials if cfg.search.searcher == "optuna" else None,  # (see build_searcher)
            reuse_actors=reuse_processes(cfg),
        ),
        run_config=tune.RunConfig(
            name=cfg.name,
            storage_path=store.root,
            storage_filesystem=None if store.is_local else store.fs,
            callbacks=[MarkPersisted(), *logging_callbacks(cfg), *notifiers(cfg), LiveFeed(cfg.trainer.total_steps, cfg.stopping.zero_signal.rule())],
            stop=build_stopper(cfg),
            # a trial whose process died starts again from its newest checkpoint; one that raised refuses to (sweep.trials.attempts)
            failure_config=tune.FailureConfig(max_failures=cfg.failures.max_trial_restarts),
            verbose=0 if cfg.logging.progress else 1,  # the live table replaces Tune's own progress output
        ),
    )
