"""Split task sets into train and eval files: ``python -m sweep data split``, deterministic by seed.

    python -m sweep data split toolenvs/data/*.jsonl --eval-ratio 0.2 --eval-cap-per-env 20 \\
        --held-out-env zillow --seed 0 --out data/split

Order of operations: keep the ``--env-key`` envs (all when none given), sample ``--max-tasks`` of them by
seed, hold out every task of each ``--held-out-env`` (eval only, never trained on: does the policy carry
over to an unseen app?), then per remaining env put ``round(n * eval_ratio)`` tasks, at most
``eval_cap_per_env``, into eval. The eval cap applies to held-out envs too; tasks above it are dropped.
Each env is shuffled by its own seeded RNG, so adding an env does not reshuffle the others.
Leaves out: the trainer's own in-run split (``grpo.data.held_out_split``), which this does not replace.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from configkit.base import ConfigError
from configkit.outputs import check_output_folder
from toolenvs.task import Task, load_task_files


@dataclass(frozen=True)
class SplitSpec:
    eval_ratio: float = 0.2
    eval_cap_per_env: int | None = None
    held_out_envs: tuple[str, ...] = ()
    env_keys: tuple[str, ...] = ()
    max_tasks: int | None = None
    seed: int = 0


@dataclass
class Split:
    train: list[Task] = field(default_factory=list)
    eval: list[Task] = field(default_factory=list)
    dropped: list[Task] = field(default_factory=list)


def check_spec(spec: SplitSpec, present: set[str]) -> None:
    """Bad values raise ConfigError naming the option and what is allowed."""
    if not 0.0 <= spec.eval_ratio < 1.0:
        raise ConfigError(f"--eval-ratio = {spec.eval_ratio}: must be in [0, 1)")
    for option, value in (("--eval-cap-per-env", spec.eval_cap_per_env), ("--max-tasks", spec.max_tasks)):
        if value is not None and value < 1:
            raise ConfigError(f"{option} = {value}: must be at least 1")
    for option, keys in (("--env-key", spec.env_keys), ("--held-out-env", spec.held_out_envs)):
        unknown = sorted(set(keys) - present)
        if unknown:
            raise ConfigError(f"{option} {', '.join(unknown)}: no such env_key in the tasks (present: {', '.join(sorted(present))})")
    if spec.env_keys and set(spec.held_out_envs) - set(spec.env_keys):
        raise ConfigError("--held-out-env must also be among --env-key when --env-key is given")


def split_tasks(tasks: list[Task], spec: SplitSpec) -> Split:
    """Train, eval and dropped tasks, each in the input order; the same inputs and seed give the same split."""
    check_spec(spec, {t.env_key for t in tasks})
    kept = [t for t in tasks if not spec.env_keys or t.env_key in spec.env_keys]
    if spec.max_tasks is not None and len(kept) > spec.max_tasks:
        pool = sorted(kept, key=lambda t: t.task_key)
        chosen = {t.task_key for t in random.Random(f"{spec.seed}:max_tasks").sample(pool, spec.max_tasks)}
        kept = [t for t in kept if t.task_key in chosen]
    destination: dict[str, str] = {}
    for env_key in sorted({t.env_key for t in kept}):
        env_tasks = sorted((t for t in kept if t.env_key == env_key), key=lambda t: t.task_key)  # file order does not matter
        order = random.Random(f"{spec.seed}:{env_key}").sample(env_tasks, len(env_tasks))
        held_out = env_key in spec.held_out_envs
        n_eval = len(order) if held_out else round(len(order) * spec.eval_ratio)
        cap = spec.eval_cap_per_env if spec.eval_cap_per_env is not None else len(order)
        for i, task in enumerate(order):
            destination[task.task_key] = "eval" if i < min(n_eval, cap) else "dropped" if held_out else "train"
    split = Split()
    for task in kept:
        getattr(split, destination[task.task_key]).append(task)
    if not split.train:
        raise ConfigError("no training tasks left: lower --eval-ratio, hold out fewer envs or widen --env-key")
    return split


SPLIT_FILES = ("train.jsonl", "eval.jsonl")


def write_split(split: Split, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = out / SPLIT_FILES[0], out / SPLIT_FILES[1]
    for path, tasks in zip(paths, (split.train, split.eval)):
        path.write_text("".join(json.dumps(t.model_dump(exclude_none=True), sort_keys=True) + "\n" for t in tasks))
    return paths


def table_rows(split: Split, held_out: tuple[str, ...]) -> list[tuple[str, int, int, int, str]]:
    """(env_key, train, eval, dropped, note) per env, then a total row."""
    counts = {name: Counter(t.env_key for t in getattr(split, name)) for name in ("train", "eval", "dropped")}
    envs = sorted(set().union(*counts.values()))
    rows = [(e, counts["train"][e], counts["eval"][e], counts["dropped"][e], "held out" if e in held_out else "") for e in envs]
    rows.append(("total", len(split.train), len(split.eval), len(split.dropped), ""))
    return rows


def render(split: Split, spec: SplitSpec, method: str = "seeded") -> None:
    from rich.console import Console
    from rich.table import Table

    how = "Fleet's rules" if method == "fleet" else f"seed {spec.seed}, eval cap per env {spec.eval_cap_per_env}"
    table = Table(title=f"train/eval split ({how}, eval_ratio {spec.eval_ratio:g})")
    for column in ("env_key", "train", "eval", "dropped", ""):
        table.add_column(column)
    for env_key, train, eval_, dropped, note in table_rows(split, spec.held_out_envs):
        table.add_row(env_key, str(train), str(eval_), str(dropped), note)
    Console().print(table)


ONLY_FOR = {"seeded": ("max_env_ratio", "max_eval_prompts"), "fleet": ("eval_cap_per_env", "seed")}  # options the other method ignores


def check_method_options(args: argparse.Namespace) -> None:
    """An option given to the method that does not read it is an error, not silently ignored; the fleet
    method's own bounds."""
    for option in ONLY_FOR[args.method]:
        if getattr(args, option) is not None:
            other = "fleet" if args.method == "seeded" else "seeded"
            raise ConfigError(f"--{option.replace('_', '-')} applies to --method {other} only")
    if args.max_env_ratio is not None and not 0.0 < args.max_env_ratio <= 1.0:
        raise ConfigError(f"--max-env-ratio = {args.max_env_ratio}: must be in (0, 1] (the largest share of the training tasks one env may keep)")
    if args.max_eval_prompts is not None and args.max_eval_prompts < 1:
        raise ConfigError(f"--max-eval-prompts = {args.max_eval_prompts}: must be at least 1")


def run_split(args: argparse.Namespace) -> int:
    check_method_options(args)
    check_output_folder(args.out, "--out", SPLIT_FILES, args.force)  # before the split: nothing there is replaced unasked
    tasks = load_task_files(args.tasks)
    seed = 0 if args.seed is None else args.seed
    if args.method == "fleet":
        from toolenvs.fleet_split import MAX_ENV_TRAIN_RATIO, MAX_EVAL_PROMPTS, fleet_split

        spec = SplitSpec(args.eval_ratio, None, tuple(args.held_out_env), tuple(args.env_key), args.max_tasks, seed)
        check_spec(spec, {t.env_key for t in tasks})
        done = fleet_split(tasks, args.eval_ratio, MAX_ENV_TRAIN_RATIO if args.max_env_ratio is None else args.max_env_ratio,
                           MAX_EVAL_PROMPTS if args.max_eval_prompts is None else args.max_eval_prompts, tuple(args.env_key),
                           args.max_tasks, tuple(args.held_out_env))
        split = Split(done.train, done.eval, done.dropped)
        if not split.train:
            raise ConfigError("no training tasks left by Fleet's rules: lower --eval-ratio, hold out fewer envs, widen --env-key "
                              "or raise --max-env-ratio; nothing was written")
    else:
        spec = SplitSpec(args.eval_ratio, args.eval_cap_per_env, tuple(args.held_out_env), tuple(args.env_key), args.max_tasks, seed)
        split = split_tasks(tasks, spec)
    render(split, spec, args.method)
    train_path, eval_path = write_split(split, args.out)
    print(f"wrote {len(split.train)} tasks to {train_path} and {len(split.eval)} to {eval_path}")
    return 0


def stats_rows(tasks: list[Task]) -> list[tuple[str, str, int]]:
    """(env_key, modality, tasks), sorted, then a total row."""
    counts = Counter((t.env_key, t.modality) for t in tasks)
    return [(env, modality, n) for (env, modality), n in sorted(counts.items())] + [("total", "", len(tasks))]


def run_stats(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    tasks = load_task_files(args.tasks)
    table = Table(title="tasks per env and modality")
    for column in ("env_key", "modality", "tasks"):
        table.add_column(column)
    for env, modality, n in stats_rows(tasks):
        table.add_row(env, modality, str(n))
    Console(width=150).print(table)
    return 0


def add_data_command(commands) -> None:
    """Register ``python -m sweep data split TASKS... --out DIR [options]`` and ``python -m sweep data stats TASKS...``."""
    data = commands.add_parser("data", help="task sets: split into train and eval files, count them")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    p = data_commands.add_parser("split", help="split task files (JSON lines, or Fleet's JSON export) into train.jsonl and eval.jsonl")
    p.add_argument("tasks", type=Path, nargs="+", help="task files")
    p.add_argument("--out", type=Path, required=True, help="directory for train.jsonl and eval.jsonl")
    p.add_argument("--force", action="store_true", help="replace train.jsonl and eval.jsonl already in --out (refused without it)")
    p.add_argument("--method", choices=["seeded", "fleet"], default="seeded",
                   help="seeded: per env by seed (default); fleet: Fleet's own rules, as SkyRL's prepare_dataset.py makes them")
    p.add_argument("--eval-ratio", type=float, default=0.2, help="share of each env's tasks held out for eval (default 0.2)")
    p.add_argument("--eval-cap-per-env", type=int, default=None, help="seeded: at most this many eval tasks per env")
    p.add_argument("--held-out-env", action="append", default=[], metavar="KEY", help="env whose tasks are all eval (repeatable)")
    p.add_argument("--env-key", action="append", default=[], metavar="KEY", help="keep only these envs (repeatable)")
    p.add_argument("--max-tasks", type=int, default=None, help="at most this many tasks (seeded: sampled by seed; fleet: the first)")
    p.add_argument("--max-env-ratio", type=float, default=None, help="fleet: no env above this share of the training tasks (default 0.2)")
    p.add_argument("--max-eval-prompts", type=int, default=None, help="fleet: eval tasks in all at most (default 60)")
    p.add_argument("--seed", type=int, default=None, help="seeded: the split's seed (default 0)")
    p.set_defaults(func=run_split)
    stats = data_commands.add_parser("stats", help="tasks per env and modality of task files (JSON lines, or Fleet's JSON export)")
    stats.add_argument("tasks", type=Path, nargs="+", help="task files")
    stats.set_defaults(func=run_stats)
