"""Run (or resume) a validated sweep on a local Ray: its bases and base evals first, check resources, fit, leaderboard,
report, and the end-of-sweep TensorBoard/W&B summaries (``sweep.summary_logs``).

Imports Ray and Tune only when called, so the CLI module stays light.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from configkit import environ
from configkit.base import ConfigError
from sweep.config import SweepConfig
from sweep.storage import Storage, open_storage

if TYPE_CHECKING:
    from sweep.report.build import Report


def run_sweep(cfg: SweepConfig, fresh: bool = False, space: str = "SPACE", base_evals_from: str | None = None) -> int:
    """Run a validated sweep on a local Ray, print and save the leaderboard; 1 if every trial failed.

    A sweep of the same name already in storage is refused (``sweep resume`` continues it) unless ``fresh``.
    ``base_evals_from``: another sweep in the same storage whose base evals this one shares (``sweep confirm``).
    """
    from sweep.bases import prepare_bases
    from sweep.resume import save_config, start_fresh

    store = open_storage(cfg.storage)
    cfg = cfg.model_copy(update={"storage": store.uri})  # absolute: trials run in their own directories
    start_fresh(store, cfg.name, fresh, space)
    if base_evals_from and store.exists(base_evals_from, "base_evals"):
        store.copy((base_evals_from, "base_evals"), (cfg.name, "base_evals"))
    prepare_environment()
    prepare_bases(cfg, store)
    save_config(store, cfg)
    from sweep.tuner import build_tuner

    return _fit_and_report(cfg, store, lambda: build_tuner(cfg))


def resume_sweep(uri: str) -> int:
    """Continue a sweep whose driver died, from its directory or ``s3://`` URI alone (any machine).

    Unfinished and errored trials continue from their last checkpoint; finished ones are kept as they are.
    """
    from sweep.bases import prepare_bases
    from sweep.results import keep_before_resume
    from sweep.resume import experiment_uri, load_config
    from sweep.storage import pull_study, split_experiment

    storage_uri, name = split_experiment(uri)
    store = open_storage(storage_uri)
    cfg = load_config(store, name)
    prepare_environment()
    prepare_bases(cfg, store)
    pull_study(store, name)  # before the restore unpickles the searcher, which opens the study
    keep_before_resume(store.fs, store.path(name))  # Tune's restore starts each result.json afresh
    print(f"resuming {experiment_uri(store.uri, name)}", flush=True)

    def restore():
        from ray import tune

        from sweep.tuner import build_trainable

        return tune.Tuner.restore(
            store.path(name),
            build_trainable(cfg),
            resume_unfinished=True,
            resume_errored=True,
            storage_filesystem=None if store.is_local else store.fs,
        )

    return _fit_and_report(cfg, store, restore)


def _fit_and_report(cfg: SweepConfig, store: Storage, make_tuner: Callable[[], Any]) -> int:
    import ray

    from sweep import leaderboard
    from sweep.notify import notifiers
    from sweep.storage import push_study

    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        check_resources(cfg, ray.cluster_resources())
        slots = start_fleet_slots(cfg)  # noqa: F841 - held while the trials run
        results = make_tuner().fit()
    except Exception as exc:  # Tune's callbacks never see the driver's own failure: tell the webhook here
        for notifier in notifiers(cfg):
            notifier.sweep_failed(exc)
        raise
    finally:
        ray.shutdown()
    push_study(store, cfg.name)
    total, zero = cfg.trainer.total_steps, cfg.stopping.zero_signal.rule()
    fates = [leaderboard.trial_row(r, cfg.search.metric, cfg.search.mode, total, list(cfg.space), zero) for r in results]
    rows = leaderboard.judged_rows(fates, store, cfg.name)
    leaderboard.render(rows)
    leaderboard.save(rows, store, cfg.name)
    print(f"results: {store.display(cfg.name)}")
    report = write_report(store, cfg.name)
    if report is not None:
        from sweep.summary_logs import log_sweep_end

        log_sweep_end(report, cfg, store)
    return 1 if fates and all(r.status == "error" for r in fates) else 0


def write_report(store: Storage, name: str) -> Report | None:
    """The sweep's report (``sweep report``'s), written where that command writes it; returned for the loggers'
    end-of-sweep summaries. The sweep's results stand whatever happens here, so a failure is said, not raised."""
    from sweep.report import build_and_write, default_out
    from sweep.resume import experiment_uri

    uri = experiment_uri(store.uri, name)
    try:
        report, page, _ = build_and_write(uri, default_out(uri))
    except Exception as exc:  # noqa: BLE001 - the results are stored; say how to retry
        print(f"warning: the report could not be written ({type(exc).__name__}: {exc}); retry with `python -m sweep report {uri}`")
        return None
    print(f"report: {page}")
    return report


def prepare_environment() -> None:
    """Settings every trial inherits (Ray workers copy the driver's environment)."""
    from sweep.resume import snapshot_often

    environ.TOKENIZERS_PARALLELISM.set_default("false")
    environ.HF_HUB_OFFLINE.set_default("1")
    if environ.GRPO_SWEEP_CACHE.is_set():  # trials run in their own directories
        environ.GRPO_SWEEP_CACHE.set(str(Path(environ.GRPO_SWEEP_CACHE.get() or "").expanduser().resolve()))
    snapshot_often()


def start_fleet_slots(cfg: SweepConfig) -> Any:
    """On Fleet, the actor capping the sweep's open instances (``toolenvs.fleet_slots``); else None."""
    backend = cfg.trainer.env.backend
    if backend.type != "fleet":
        return None
    from toolenvs.fleet_slots import start

    return start(backend.max_instances, backend.ttl_s)


def check_resources(cfg: SweepConfig, available: dict[str, float]) -> None:
    """A trial that asks for more than the cluster has would wait forever: say so instead (the check ``sweep validate`` runs)."""
    from sweep.checks import resource_problems

    problems = resource_problems(cfg, available)
    if problems:
        raise ConfigError("\n".join(problems))
