"""Run (or resume) a validated sweep on a local Ray: its bases and base evals first, check resources, fit, leaderboard,
report, and the end-of-sweep TensorBoard/W&B summaries (``sweep.watch.summary_logs``). While it fits, Ray's dashboard and
the live page (``sweep.watch.live_page``) are served on loopback, as ``Watch`` says.

Imports Ray and Tune only when called, so the CLI module stays light.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from configkit import environ
from configkit.base import ConfigError
from sweep.spec.config import SweepConfig
from sweep.store.storage import Storage, open_storage

if TYPE_CHECKING:
    from sweep.report.build import Report
    from sweep.watch.live_page import LiveSite
    from sweep.watch.live_server import Watch


def run_sweep(cfg: SweepConfig, fresh: bool = False, space: str = "SPACE", base_evals_from: str | None = None,
              watch: Watch | None = None, start_over: str | None = None) -> int:
    """Run a validated sweep on a local Ray, print and save the leaderboard; 1 if every trial failed.

    A sweep of the same name already in storage is refused (``sweep resume`` continues it) unless ``fresh``.
    ``base_evals_from``: another sweep in the same storage whose base evals this one shares (``sweep confirm``).
    ``watch``: Ray's dashboard and the live page (default: both on, on loopback; ``sweep.watch.live_server``).
    ``start_over``: the command the refusal names to start it over (default: ``sweep run`` of ``space`` with ``--fresh``).
    """
    from sweep.resume import clear, failed_start, forget_failed_start, refuse_foreign, refuse_overwrite, save_config
    from sweep.store.driver import DRIVER_FILE, driving, holds, release, still_held
    from sweep.store.storage import BASE_EVALS_DIR
    from sweep.trials.base_evals import build_bases, evaluate_bases

    check_machine(cfg, watch)
    store = open_storage(cfg.storage)
    cfg = cfg.model_copy(update={"storage": store.uri})  # absolute: trials run in their own directories
    refuse_foreign(store, cfg.name)  # a folder of the user's: never written in
    with driving(store, cfg.name, "sweep run") as me:  # before the old folder goes (on S3, a large one's deletion takes minutes)
        refuse_overwrite(store, cfg.name, fresh or failed_start(store, cfg.name), space, start_over)
        try:
            prepare_environment()
            build_bases(cfg)  # minutes, and the sweep --fresh replaces still whole: stopped or failed here, it stays
            still_held(me)  # taken over meanwhile (its beats failing): the folder is the other driver's to keep
            clear(store, cfg.name, keep=(DRIVER_FILE,))
            if base_evals_from and store.exists(base_evals_from, BASE_EVALS_DIR):
                store.copy((base_evals_from, BASE_EVALS_DIR), (cfg.name, BASE_EVALS_DIR))
            evaluate_bases(cfg, store)
            still_held(me)  # and during the base evals' minutes
            save_config(store, cfg)
            from sweep.tuner import build_tuner

            return _fit_and_report(cfg, store, lambda: build_tuner(cfg), watch)
        except BaseException:
            mine = holds(me)
            release(me)  # the beat stopped before the folder goes: it would write the marker back
            if mine:  # a folder another driver took over is not this start's to remove
                forget_failed_start(store, cfg.name)
            raise


def resume_sweep(uri: str, watch: Watch | None = None) -> int:
    """Continue a sweep whose driver died, from its directory or ``s3://`` URI alone (any machine).

    Unfinished and errored trials continue from their last checkpoint; finished ones are kept as they are.
    """
    from sweep.resume import check_snapshot, experiment_uri, load_config
    from sweep.store.driver import driving
    from sweep.store.results import keep_before_resume
    from sweep.store.storage import split_experiment
    from sweep.store.study import pull_study
    from sweep.trials.base_evals import prepare_bases

    storage_uri, name = split_experiment(uri)
    store = open_storage(storage_uri)
    cfg = load_config(store, name)
    check_snapshot(store, name)
    check_machine(cfg, watch)
    with driving(store, name, "sweep resume"):  # resume is for a driver that died, on this machine or another
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

        from sweep.tuner import restoring

        with restoring(store.uri, name):  # its study is here now, wherever the sweep was first run
            return _fit_and_report(cfg, store, restore, watch)


def _fit_and_report(cfg: SweepConfig, store: Storage, make_tuner: Callable[[], Any], watch: Watch | None) -> int:
    """Fit on a local Ray, with the live page served meanwhile; then the leaderboard, the report and the summaries."""
    from sweep.watch.live_server import default_watch

    watch = watch or default_watch()
    live = start_live_page(cfg, store, watch)
    try:
        status = _leaderboard_and_report(cfg, store, _fit(cfg, make_tuner, watch), live)
    except KeyboardInterrupt as stopped:
        from sweep.resume import experiment_uri
        from sweep.store.signals import signal_of

        raise Interrupted(experiment_uri(store.uri, cfg.name), signal_of(stopped)) from None
    finally:
        if live is not None:
            live.close()
    return status


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP: ``sweep.store.signals``) while a sweep ran: it stops as a driver that died does (no
    leaderboard, report or confirm stage for a sweep that did not end); ``uri``: the sweep ``resume`` continues;
    ``signum``: the signal that stopped it."""

    def __init__(self, uri: str, signum: int = signal.SIGINT):
        super().__init__(uri)
        self.uri, self.signum = uri, signum


def _fit(cfg: SweepConfig, make_tuner: Callable[[], Any], watch: Watch) -> Any:
    """Tune's results, on a local Ray started here (with its dashboard unless ``watch`` says not) and shut down after."""
    import ray

    from sweep.spec.resource_checks import state_api_need
    from sweep.watch.notify import notifiers

    try:
        with local_ray(watch, state_api=state_api_need(cfg) is not None):
            try:
                check_resources(cfg, ray.cluster_resources())
                check_state_api(cfg)
                with cfg.trainer.env.backend.sweep_wide():  # what the backend shares across trials (Fleet's instance slots)
                    return make_tuner().fit()
            except Exception as exc:  # Tune's callbacks never see the driver's own failure: tell the webhook here
                for notifier in notifiers(cfg):
                    notifier.sweep_failed(exc)
                raise
    except KeyboardInterrupt as stopped:  # nor its stop (Ctrl-C, SIGTERM: sweep.store.signals); told once Ray is down
        from sweep.store.signals import overtaken, signal_of

        for notifier in notifiers(cfg):
            notifier.sweep_interrupted(None if overtaken() else signal.Signals(signal_of(stopped)).name)
        raise


@contextmanager
def local_ray(watch: Watch, state_api: bool = False) -> Iterator[str | None]:
    """A local Ray for the sweep, its dashboard's URL (None when off) printed and yielded; shut down after. ``state_api``:
    its trials need Ray's state API (``state_api_need``): a Ray started here gets its dashboard on a port chosen first,
    named in ``RAY_API_SERVER_ADDRESS`` for every process of it (``configkit.environ``)."""
    import ray

    from sweep.spec.resource_checks import joins_a_cluster
    from sweep.store.signals import handlers_kept
    from sweep.watch.live_server import dashboard_port, free_port

    port = dashboard_port(watch.dashboard_port)
    pinned = state_api and watch.dashboard and not joins_a_cluster()
    if pinned and port is None:  # Ray's own choice is known only once it has started, after its processes
        port = free_port("127.0.0.1", watch.dashboard_port)
    where = {"dashboard_host": "127.0.0.1", "dashboard_port": port} if watch.dashboard else {}
    with ExitStack() as stack:
        if pinned:
            stack.enter_context(environ.RAY_API_SERVER_ADDRESS.temporarily(f"http://127.0.0.1:{port}"))
        try:  # a Ray stopped while it starts is shut down too
            with handlers_kept():  # Ray's SIGTERM handler is a silent exit 15: the driver's stops as Ctrl-C does
                context = ray.init(include_dashboard=watch.dashboard, **where, log_to_driver=False, configure_logging=False)
            url = None
            if context.dashboard_url:
                url = context.dashboard_url if "://" in context.dashboard_url else f"http://{context.dashboard_url}"
                moved = f" (port {watch.dashboard_port} was taken)" if urlsplit(url).port != watch.dashboard_port else ""
                print(f"Ray dashboard: {url}{moved}", flush=True)
            yield url
        finally:
            ray.shutdown()


def start_live_page(cfg: SweepConfig, store: Storage, watch: Watch) -> LiveSite | None:
    """The live page (``sweep.watch.live_page``) on ``watch``'s address, its URL printed; None when it is off."""
    if not watch.live:
        return None
    from sweep.resume import experiment_uri
    from sweep.watch.live_page import LiveSite

    site = LiveSite(experiment_uri(store.uri, cfg.name), list(cfg.space), watch.live_host, watch.live_port, environ.GRPO_SWEEP_LIVE_TOKEN.get())
    moved = f" (port {site.server.moved_from} was taken)" if site.server.moved_from else ""
    print(f"live page: {site.url}{moved}", flush=True)
    return site


def _leaderboard_and_report(cfg: SweepConfig, store: Storage, results: Any, live: LiveSite | None) -> int:
    from sweep import leaderboard
    from sweep.report import default_out
    from sweep.resume import experiment_uri
    from sweep.store.study import push_study

    push_study(store, cfg.name)
    total, zero = cfg.trainer.total_steps, cfg.stopping.zero_signal.rule()
    fates = [leaderboard.trial_row(r, cfg.search.metric, cfg.search.mode, total, list(cfg.space), zero) for r in results]
    rows = leaderboard.judged_rows(fates, store, cfg.name)
    leaderboard.render(rows)
    leaderboard.save(rows, store, cfg.name)
    print(f"results: {store.display(cfg.name)}")
    report = write_report(store, cfg.name)
    if live is not None:  # the page becomes the final report
        live.finish(default_out(experiment_uri(store.uri, cfg.name)) / "index.html" if report is not None else None)
    if report is not None:
        from sweep.watch.summary_logs import log_sweep_end

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
    environ.TUNE_DISABLE_SIGINT_HANDLER.set("1")  # Ctrl-C: ``Interrupted``, not a run that looks finished


def check_machine(cfg: SweepConfig, watch: Watch | None = None) -> None:
    """Before anything starts: a ``RAY_ADDRESS`` nothing answers at, a trial the Ray to be started here could not
    hold (``local_resources``), or multi-worker trials stopped early on a Ray started here without its dashboard
    (``state_api_need``), refused."""
    from sweep.spec.resource_checks import STATE_API_FIX, joins_a_cluster, local_resources, ray_address_problem, state_api_need
    from sweep.watch.live_server import default_watch

    if environ.RAY_ADDRESS.get() and (problem := ray_address_problem(environ.RAY_ADDRESS.get())):
        raise ConfigError(problem)  # before the bases' minutes: Ray joins that address only then
    if not (watch or default_watch()).dashboard and (need := state_api_need(cfg)) and not joins_a_cluster():
        raise ConfigError(f"{need}. --no-dashboard (or {environ.GRPO_SWEEP_DASHBOARD.name}=0) keeps it off: drop it, {STATE_API_FIX}")
    here = local_resources()
    if here is not None:
        check_resources(cfg, here, "the Ray started on this machine would have (Ray's own count)")


def check_resources(cfg: SweepConfig, available: dict[str, float], holder: str = "the Ray cluster has") -> None:
    """A trial that asks for more than the cluster has would wait forever: say so instead (the check ``sweep validate`` runs)."""
    from sweep.spec.resource_checks import resource_problems

    problems = resource_problems(cfg, available, holder=holder)
    if problems:
        raise ConfigError("\n".join(problems))


def check_state_api(cfg: SweepConfig) -> None:
    """Once Ray has started or been joined: multi-worker trials stopped early need its state API (``state_api_need``),
    asked as Ray Train's cleaner asks it, from the head node."""
    from configkit.redact import redact_uri
    from sweep.spec.resource_checks import STATE_API_FIX, joins_a_cluster, state_api_need, state_api_problem_on_head

    if (need := state_api_need(cfg)) and (problem := state_api_problem_on_head()):
        if joins_a_cluster():
            address = environ.RAY_ADDRESS.get()
            cluster = f"at {redact_uri(address)}" if address else "that `ray start` began on this machine"
            where = f"the Ray cluster {cluster}: start its head with Ray's dashboard (ray start --head --include-dashboard=true), "
        else:
            where = "the Ray started here: "
        raise ConfigError(f"{need}. {problem}, on {where}{STATE_API_FIX}")
