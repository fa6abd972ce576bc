"""``python -m sweep``: run, resume, confirm, validate, report, train, forecast, data split, envs check.

    python -m sweep run sweep/search_spaces/demo_cpu.yaml     # a Ray Tune sweep, then a leaderboard
    python -m sweep resume sweep_results/demo_cpu             # continue a sweep whose driver died (or s3://...)
    python -m sweep confirm sweep_results/demo_cpu --top 3    # the top settings again with fresh seeds; export the winner
    python -m sweep validate space.yaml                       # check a space file, start nothing
    python -m sweep report sweep_results/demo_cpu             # what won and why: report/index.html, plots, summary.md
    python -m sweep train space_or_trainer.yaml --set optim.lr=3e-3   # one trial, no Tune (--workers 2: FSDP2 ranks)
    python -m sweep data split toolenvs/data/*.jsonl --eval-ratio 0.2 --out split # train/eval task files
    python -m sweep envs check [tasks.jsonl ...] [--write kept.jsonl] # replay reference solutions live
    python -m sweep forecast space.yaml --k 8                          # zero-variance share per n, before a sweep
    python -m sweep forecast space.yaml --save-probe probe.json        # ... and keep the probe as the curriculum's prior

Imports nothing heavy until a command needs it, so ``--help`` and ``validate`` are instant.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from configkit import environ
from configkit.base import ConfigError
from configkit.outputs import check_output_file

if TYPE_CHECKING:
    from sweep.store.storage import Storage


def at_least_one(text: str) -> int:
    """An argparse type: a whole number of 1 or more (a count of workers or samples)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1; give 1 or more")
    return value


def port(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port: {text!r}; give a whole number from 0 (any free port) to 65535") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port; give a whole number from 0 (any free port) to 65535")
    return value


def _cmd_validate(args: argparse.Namespace) -> int:
    from sweep.spec.loader import load_space, parse_sets
    from sweep.spec.resource_checks import cluster_resources
    from sweep.spec.space import sampled_trial_count

    available, where = cluster_resources()
    try:
        cfg = load_space(args.space, parse_sets(args.set), cluster=available)
    except ConfigError as exc:
        raise ConfigError(f"{exc}\n(resources checked against {where})" if "_per_trial'" in str(exc) else str(exc)) from None
    searcher = cfg.search.searcher + (f" ({cfg.search.sampler})" if cfg.search.searcher == "optuna" else "")
    trials = sampled_trial_count(cfg)
    print(f"{args.space}: ok — {trials} trial{'' if trials == 1 else 's'}, searcher {searcher}, scheduler {cfg.scheduler.type}, "
          f"metric {cfg.search.metric} ({cfg.search.mode}), {cfg.trainer.total_steps} steps each; resources checked against {where}")
    for key, dist in cfg.space.items():
        print(f"  {key}: {dist.model_dump(exclude_none=True)}")
    for key, dist in getattr(cfg.scheduler, "mutations", {}).items():
        print(f"  pbt mutates {key}: {dist.model_dump(exclude_none=True)}")
    from sweep.spec.bases import base_notes

    for note in base_notes(cfg):
        print(f"  {note}")
    rule = cfg.stopping.zero_signal
    if rule.enabled:
        print(f"  stop on zero signal: variance_per_prompt < {rule.threshold:g} for {rule.patience} steps")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from sweep.run import run_sweep
    from sweep.spec.loader import load_space, parse_sets

    watch = _watch(args)
    sets = parse_sets(args.set)
    # where the storage was given, for a refusal to name: the flag, a --set, or the space file
    where = "--storage" if args.storage is not None else "--set storage" if "storage" in sets else f"{args.space}: key 'storage'"
    for flag, key, value in (("--storage", "storage", args.storage), ("--num-samples", "search.num_samples", args.num_samples)):
        if value is None:  # --storage "" is refused by name, not ignored
            continue
        if key in sets:
            raise ConfigError(f"{flag} and --set {key} both given: give one")
        sets[key] = value
    cfg = load_space(args.space, sets)
    store = _reachable(cfg.storage, where)
    from sweep.confirm import confirm_stage
    from sweep.resume import experiment_uri

    status = run_sweep(cfg, fresh=args.fresh, space=str(args.space), watch=watch)
    return confirm_stage(experiment_uri(store.uri, cfg.name), status, watch, cfg=cfg)


def _reachable(uri: str, what: str = "key 'storage'") -> Storage:
    """The storage, opened, once it answers (S3: a few seconds at most): refused by name before anything starts."""
    from sweep.store.storage import open_storage, reachability_problem

    store = open_storage(uri, what)
    problem = reachability_problem(store, what)
    if problem:
        raise ConfigError(problem)
    return store


def _cmd_confirm(args: argparse.Namespace) -> int:
    from sweep.confirm import run_confirm

    return run_confirm(args.path, top=args.top, seeds=args.seeds, steps=args.steps, fresh=args.fresh, watch=_watch(args))


def _cmd_resume(args: argparse.Namespace) -> int:
    from sweep.run import resume_sweep
    from sweep.store.storage import split_experiment

    watch = _watch(args)
    _reachable(split_experiment(args.path)[0], "the sweep's path")
    from sweep.confirm import confirm_stage

    return confirm_stage(args.path, resume_sweep(args.path, watch=watch), watch, again=False)


def _add_watch_flags(parser: argparse.ArgumentParser) -> None:
    """Ray's dashboard and the live page (``sweep.watch.live_page``), both on 127.0.0.1 unless told otherwise."""
    from sweep.watch.live_server import DASHBOARD_PORT, LIVE_PORT

    parser.add_argument("--no-dashboard", action="store_true", help="do not start Ray's dashboard (GRPO_SWEEP_DASHBOARD=0 does the same)")
    parser.add_argument("--dashboard-port", type=port, default=DASHBOARD_PORT, help=f"Ray's dashboard port on 127.0.0.1 (default {DASHBOARD_PORT}; "
                        "a taken port, e.g. by a Ray left running, falls back to a free one)")
    parser.add_argument("--no-live", action="store_true", help="do not serve the live sweep page")
    parser.add_argument("--live-port", type=port, default=LIVE_PORT, help=f"the live page's port (default {LIVE_PORT}; 0: any free port; "
                        "a taken port falls back to a free one)")
    parser.add_argument("--live-host", default="127.0.0.1", help="the live page's address (default 127.0.0.1; any other needs "
                        "GRPO_SWEEP_LIVE_TOKEN, which clients from elsewhere must present)")


def _watch(args: argparse.Namespace):
    """The watch flags as ``sweep.watch.live_server.Watch``, refused before anything starts when the address needs a token."""
    from configkit import environ
    from sweep.watch.live_server import Watch, bind_problem, default_watch

    if not args.no_live and (problem := bind_problem(args.live_host, environ.GRPO_SWEEP_LIVE_TOKEN.get())):
        raise ConfigError(problem)
    return Watch(dashboard=default_watch().dashboard and not args.no_dashboard, dashboard_port=args.dashboard_port,
                 live=not args.no_live, live_host=args.live_host, live_port=args.live_port)


def _show_base_policy_build() -> None:
    """A first run builds the tiny base policy (minutes): its progress lines go to the terminal."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("grpo.warmstart")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)


def _cmd_train(args: argparse.Namespace) -> int:
    from sweep.spec.loader import load_trainer, parse_sets

    if args.metrics_jsonl:  # appended to: it may exist, but must be a file that can be written
        check_output_file(args.metrics_jsonl, "--metrics-jsonl", appends=True)
    cfg, _ = load_trainer(args.config, parse_sets(args.set))
    if args.metrics_jsonl:  # made only once the config is accepted
        args.metrics_jsonl.parent.mkdir(parents=True, exist_ok=True)
    if args.workers > 1:
        from grpo.combinations import worker_clashes

        clashes = worker_clashes(cfg, args.workers)  # here, once, not by every rank after torchrun started them
        if clashes:
            raise ConfigError("\n".join(f"{args.config} (--workers {args.workers}): key {c.key.removeprefix('trainer.')!r} {c.text}"
                                         for c in clashes))
    if cfg.checkpoint.interval and not cfg.checkpoint.dir and not cfg.output_dir:  # one folder, made here, for every rank
        from grpo.trainer import temporary_checkpoints

        folder = str(temporary_checkpoints())
        print(f"checkpoints go to {folder} (a temporary folder: set output_dir or checkpoint.dir to choose one)", flush=True)
        cfg = cfg.model_copy(update={"checkpoint": cfg.checkpoint.model_copy(update={"dir": folder})})
        args.set = [*args.set, f"checkpoint.dir={folder}"]
    _show_base_policy_build()
    if args.workers > 1:  # one process per rank through torchrun; each rank runs this command again
        from grpo.distributed import torchrun

        argv = ["train", str(args.config), *(f"--set={item}" for item in args.set)]
        return torchrun(args.workers, ["-m", "sweep", *argv, *(["--metrics-jsonl", str(args.metrics_jsonl)] if args.metrics_jsonl else [])])
    from grpo.reporting import ConsoleReporter
    from grpo.trainer import train

    with open(args.metrics_jsonl, "a") if args.metrics_jsonl else nullcontext() as jsonl:
        reporter = ConsoleReporter(jsonl=jsonl)
        train(cfg, reporter)
    if environ.RANK.get("0") == "0":  # torchrun's other ranks report nothing
        print(reporter.closing_line(cfg.total_steps, cfg.resume_from), flush=True)
    return 0


def _cmd_forecast(args: argparse.Namespace) -> int:
    from sweep.forecast import candidate_sizes, probe, render
    from sweep.spec.loader import load_trainer, parse_sets

    if args.save_probe:  # checked before the probe's minutes, not after
        check_output_file(args.save_probe, "--save-probe", args.force)
    # the probe reads no prior, and may be what makes the file a space's data.curriculum.prior_path names
    cfg, sweep_cfg = load_trainer(args.config, {**parse_sets(args.set), "data.curriculum.prior_path": None})
    _show_base_policy_build()
    print(f"probing the base policy: {args.k} samples of each training task...", flush=True)
    results = probe(cfg, args.k, say=lambda line: print(line, flush=True))
    render(results, candidate_sizes(cfg, sweep_cfg), args.k)
    if args.save_probe:
        from grpo.curriculum import write_probe

        print(f"probe saved to {write_probe(args.save_probe, results, args.k)} (data.curriculum.prior_path reads it)")
    return 0


def _cmd_envs_check(args: argparse.Namespace) -> int:
    from toolenvs.check import main as check_main

    if args.write:  # checked before the replay, not after
        check_output_file(args.write, "--write", args.force)
    return check_main(args.tasks, args.write)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep", description="Hyperparameter sweeps of GRPO tool-use agents on Ray Tune.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a sweep and print the leaderboard")
    run.add_argument("space", type=Path)
    run.add_argument("--storage", help="results directory (overrides the file's storage)")
    run.add_argument("--num-samples", type=int, help="trials to run (overrides search.num_samples)")
    run.add_argument("--fresh", action="store_true", help="delete an existing sweep of the same name and start over")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="dotted override, repeatable: a trainer key (optim.lr=3e-4) sets the base, a sweep key (search.seed=1) the sweep")
    _add_watch_flags(run)
    run.set_defaults(func=_cmd_run)
    resume = commands.add_parser("resume", help="continue a sweep whose driver died (its directory or s3:// URI)")
    resume.add_argument("path", help="the sweep's directory, {storage}/{name}, local or s3://bucket/prefix/name")
    _add_watch_flags(resume)
    resume.set_defaults(func=_cmd_resume)
    confirm = commands.add_parser("confirm", help="re-run a finished sweep's top settings with fresh seeds and more steps; export the winner")
    confirm.add_argument("path", help="the sweep's directory, {storage}/{name}, local or s3://bucket/prefix/name")
    confirm.add_argument("--top", type=at_least_one, default=3, help="settings to confirm, best first (default 3)")
    confirm.add_argument("--seeds", type=at_least_one, default=2, help="fresh RL seeds per setting (default 2)")
    confirm.add_argument("--steps", type=at_least_one, help="GRPO steps per trial (default: twice the sweep's)")
    confirm.add_argument("--fresh", action="store_true", help="delete an earlier confirmation of this sweep and start over")
    _add_watch_flags(confirm)
    confirm.set_defaults(func=_cmd_confirm)
    check = commands.add_parser("validate", help="check a space file without running it")
    check.add_argument("space", type=Path)
    check.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override, repeatable (as sweep run)")
    check.set_defaults(func=_cmd_validate)
    train = commands.add_parser("train", help="run one trial without Tune (a trainer YAML, or a space file's base)")
    train.add_argument("config", type=Path)
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override, repeatable")
    train.add_argument("--workers", type=at_least_one, default=1, help="FSDP2 ranks (processes started through torchrun)")
    train.add_argument("--metrics-jsonl", type=Path, help="append every step's full metrics as JSON lines")
    train.set_defaults(func=_cmd_train)
    forecast = commands.add_parser("forecast", help="probe the base policy and predict zero-variance groups per n")
    forecast.add_argument("config", type=Path, help="a space file or a trainer YAML")
    forecast.add_argument("--k", type=at_least_one, default=8, help="samples per task in the probe")
    forecast.add_argument("--save-probe", type=Path, metavar="PATH",
                          help="write the probe's per-task success counts as JSON, the curriculum's prior (data.curriculum.prior_path)")
    forecast.add_argument("--force", action="store_true", help="replace the --save-probe file if it exists (refused without it)")
    forecast.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override, repeatable")
    forecast.set_defaults(func=_cmd_forecast)
    from sweep.report.cli import add_report_command  # the report's flags live beside it

    add_report_command(commands)
    from toolenvs.split import add_data_command  # python -m sweep data split

    add_data_command(commands)
    envs = commands.add_parser("envs", help="local environments: check task sets against them")
    envs_commands = envs.add_subparsers(dest="envs_command", required=True)
    check_cmd = envs_commands.add_parser("check", help="replay every reference solution against the live server")
    check_cmd.add_argument("tasks", type=Path, nargs="*", help="JSONL task files (default: every shipped file in toolenvs/data)")
    check_cmd.add_argument("--write", type=Path, help="write the tasks whose solution passes to this file")
    check_cmd.add_argument("--force", action="store_true", help="replace the --write file if it exists (refused without it)")
    check_cmd.set_defaults(func=_cmd_envs_check)
    args = parser.parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return status
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `sweep validate ... | head`: the reader has what it wanted; no traceback, and none at exit
        if not _stdout_closed():  # another pipe or socket: a failure to show
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell counts a process SIGPIPE ended
    except KeyboardInterrupt as stopped:  # Ctrl-C, or SIGTERM/SIGHUP to a driver (sweep.store.signals)
        import signal

        signum = getattr(stopped, "signum", signal.SIGINT)  # a driver's stop carries its signal (sweep.store.driver.driving)
        said = f"interrupted ({signal.Signals(signum).name})"
        if getattr(stopped, "uri", None):  # sweep.run.Interrupted names a sweep to continue
            said += (f": the sweep stopped where its last snapshot and checkpoints left it; continue it with "
                     f"`python -m sweep resume {stopped.uri}`")
        try:
            print(said, file=sys.stderr)
        except OSError:  # SIGHUP: the terminal is gone
            pass
        return 128 + signum


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader is gone (poll says POLLERR), not whatever else broke a pipe."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no file behind stdout
        return False


if __name__ == "__main__":
    from grpo.process import exit_rank_process, launched_rank, watch_rank_crashes

    rank = launched_rank()  # one of torchrun's ranks (sweep train --workers N)
    if rank:  # a native abort prints its Python stacks
        watch_rank_crashes()
    status = main()
    if rank:  # past gloo's exit race
        exit_rank_process(status)
    sys.exit(status)
