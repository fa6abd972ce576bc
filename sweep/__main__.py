"""``python -m sweep``: run, validate, train, forecast, envs check.

    python -m sweep run sweep/search_spaces/demo_cpu.yaml     # a Ray Tune sweep, then a leaderboard
    python -m sweep validate space.yaml                       # check a space file, start nothing
    python -m sweep train space_or_trainer.yaml --set optim.lr=3e-3   # one trial, no Tune
    python -m sweep envs check [tasks.jsonl] [--write kept.jsonl]     # replay reference solutions live
    python -m sweep forecast space.yaml --k 8                          # zero-variance share per n, before a sweep

Imports nothing heavy until a command needs it, so ``--help`` and ``validate`` are instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from grpo.configbase import ConfigError


def _cmd_validate(args: argparse.Namespace) -> int:
    from sweep.config import load_sweep_config, sampled_trial_count

    cfg = load_sweep_config(args.space)
    print(f"{args.space}: ok — {sampled_trial_count(cfg)} trials, searcher {cfg.search.searcher}, scheduler {cfg.scheduler.type}, "
          f"metric {cfg.search.metric} ({cfg.search.mode}), {cfg.base_trainer().total_steps} steps each")
    for key, dist in cfg.space.items():
        print(f"  {key}: {dist.model_dump()}")
    rule = cfg.stopping.zero_signal
    if rule.enabled:
        print(f"  stop on zero signal: variance_per_prompt < {rule.threshold:g} for {rule.patience} steps")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from grpo.configbase import validate
    from sweep.config import SweepConfig, load_sweep_config

    cfg = load_sweep_config(args.space)
    data = cfg.model_dump()
    if args.storage:
        data["storage"] = args.storage
    if args.num_samples is not None:
        data["search"]["num_samples"] = args.num_samples
    return run_sweep(validate(SweepConfig, data, f"{args.space} (with command-line overrides)"))


def run_sweep(cfg) -> int:
    """Run a validated sweep on a local Ray, print and save the leaderboard; 1 if every trial failed."""
    import ray

    from sweep import leaderboard
    from sweep.tuner import build_tuner, storage_path

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if os.environ.get("GRPO_SWEEP_CACHE"):  # trials run in their own directories
        os.environ["GRPO_SWEEP_CACHE"] = str(Path(os.environ["GRPO_SWEEP_CACHE"]).expanduser().resolve())
    prepare_base_policy(cfg)
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        check_resources(cfg, ray.cluster_resources())
        results = build_tuner(cfg).fit()
    finally:
        ray.shutdown()
    total = cfg.base_trainer().total_steps
    rule = cfg.stopping.zero_signal
    zero = (rule.threshold, rule.patience) if rule.enabled else None
    rows = [leaderboard.trial_row(r, cfg.search.metric, cfg.search.mode, total, list(cfg.space), zero) for r in results]
    rows = leaderboard.rank(rows, cfg.search.mode)
    leaderboard.render(rows, cfg.search.metric)
    saved = leaderboard.save(rows, storage_path(cfg) / cfg.name / "leaderboard.json")
    print(f"results: {saved.parent}")
    return 1 if rows and all(r.status == "error" for r in rows) else 0


def check_resources(cfg, available: dict[str, float]) -> None:
    """A trial that asks for more than the cluster has would wait forever: say so instead."""
    wanted = {"CPU": cfg.resources.cpus_per_trial, "GPU": cfg.resources.gpus_per_trial}
    for kind, amount in wanted.items():
        if amount > available.get(kind, 0.0):
            raise ConfigError(
                f"resources: each trial asks for {amount:g} {kind}, the Ray cluster has {available.get(kind, 0.0):g}; "
                f"lower resources.{kind.lower()}s_per_trial"
            )


def prepare_base_policy(cfg) -> None:
    """Build the base trainer's policy once with every core before trials start (they find it cached).

    A separate process, so the driver itself never imports torch.
    """
    import json
    import subprocess

    print("preparing the base policy (built once, then cached)...", flush=True)
    subprocess.run([sys.executable, "-m", "grpo.warmstart", json.dumps(cfg.trainer)], check=True)


def _parse_set(items: list[str]) -> dict[str, object]:
    overrides: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: write it as dotted.key=value")
        overrides[key] = yaml.safe_load(value)
    return overrides


def _cmd_train(args: argparse.Namespace) -> int:
    cfg, _ = _load_trainer(args.config, args.set)
    from grpo.reporting import ConsoleReporter
    from grpo.trainer import train

    train(cfg, ConsoleReporter())
    return 0


def _load_trainer(path: Path, overrides: list[str]):
    """A TrainerConfig from a trainer YAML or a space file's base, with --set overrides; and the space (or None)."""
    from grpo.config import TrainerConfig
    from grpo.configbase import apply_overrides, read_yaml, validate
    from sweep.config import load_sweep_config

    data = read_yaml(path)
    sweep_cfg = load_sweep_config(path) if "space" in data or "search" in data else None
    base = sweep_cfg.trainer if sweep_cfg else data
    return validate(TrainerConfig, apply_overrides(base, _parse_set(overrides)), str(path)), sweep_cfg


def _cmd_forecast(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from sweep.config import Choice, Fixed
    from sweep.forecast import forecast_table, probe, tasks_without_signal

    cfg, sweep_cfg = _load_trainer(args.config, args.set)
    dist = sweep_cfg.space.get("rollout.n_samples_per_prompt") if sweep_cfg else None
    candidates = sorted(set(dist.values)) if isinstance(dist, Choice) else [dist.value] if isinstance(dist, Fixed) else []
    candidates = candidates or sorted({2, 4, 8, 16, cfg.rollout.n_samples_per_prompt})
    print(f"probing the base policy: {args.k} samples of each training task...", flush=True)
    results = probe(cfg, args.k)
    rows = forecast_table(results, candidates)
    table = Table(title=f"Expected share of zero-variance groups (base policy, {args.k} samples per task)")
    for column in ["env_key", "tasks", "mean success", "status", *[f"n={n}" for n in candidates]]:
        table.add_column(column)
    for row in rows:
        table.add_row(row["env_key"], str(row["tasks"]), f"{row['mean_success']:.3f}", row["status"], *[f"{row[f'zero_var@{n}']:.3f}" for n in candidates])
    Console(width=160).print(table)
    best = min(candidates, key=lambda n: rows[-1][f"zero_var@{n}"])
    dead = tasks_without_signal(results)
    print(f"least zero-variance: n={best} ({rows[-1][f'zero_var@{best}']:.3f}); "
          f"{len(dead)} of {len(results)} tasks were never or always solved in the probe (candidates to drop)")
    return 0


def _cmd_envs_check(args: argparse.Namespace) -> int:
    from envs.check import check_tasks, render, write_kept
    from envs.task import load_tasks

    report = check_tasks(load_tasks(args.tasks))
    render(report)
    if args.write:
        write_kept(report, args.write)
        print(f"wrote {len(report.kept())} passing tasks to {args.write}")
    return 1 if any(report.failed.values()) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep", description="Hyperparameter sweeps of GRPO tool-use agents on Ray Tune.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a sweep and print the leaderboard")
    run.add_argument("space", type=Path)
    run.add_argument("--storage", help="results directory (overrides the file's storage)")
    run.add_argument("--num-samples", type=int, help="trials to run (overrides search.num_samples)")
    run.set_defaults(func=_cmd_run)
    check = commands.add_parser("validate", help="check a space file without running it")
    check.add_argument("space", type=Path)
    check.set_defaults(func=_cmd_validate)
    train = commands.add_parser("train", help="run one trial without Tune (a trainer YAML, or a space file's base)")
    train.add_argument("config", type=Path)
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override, repeatable")
    train.set_defaults(func=_cmd_train)
    forecast = commands.add_parser("forecast", help="probe the base policy and predict zero-variance groups per n")
    forecast.add_argument("config", type=Path, help="a space file or a trainer YAML")
    forecast.add_argument("--k", type=int, default=8, help="samples per task in the probe")
    forecast.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="dotted override, repeatable")
    forecast.set_defaults(func=_cmd_forecast)
    envs = commands.add_parser("envs", help="local environments: check task sets against them")
    envs_commands = envs.add_subparsers(dest="envs_command", required=True)
    check_cmd = envs_commands.add_parser("check", help="replay every reference solution against the live server")
    check_cmd.add_argument("tasks", type=Path, nargs="?", default=None, help="a JSONL task file (default: the shipped hotel tasks)")
    check_cmd.add_argument("--write", type=Path, help="write the tasks whose solution passes to this file")
    check_cmd.set_defaults(func=_cmd_envs_check)
    args = parser.parse_args(argv)
    if getattr(args, "envs_command", None) == "check" and args.tasks is None:
        from grpo.config import DEFAULT_TASKS

        args.tasks = Path(DEFAULT_TASKS)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
