"""Replay every task's reference solution against its live environment and keep the tasks it solves.

``python -m sweep envs check [TASKS.jsonl ...]`` (default: every shipped file in ``toolenvs/data``): starts
each env's server, replays all solutions concurrently through the real MCP client, runs each task's
verifier on the final state and prints a per-env table of passed/failed tasks and the tasks per
difficulty (reference tool calls). With ``--write OUT`` it writes only the passing tasks. A bad record, a bad file
or a task of an env that is not a local app is named and skipped; the rest are checked all the same (exit 2).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from toolenvs.client import EnvClient, EnvError
from toolenvs.local import APPS
from toolenvs.local.launch import LocalEnvServer
from toolenvs.outcomes import passed
from toolenvs.task import Task, read_task_files

DATA = Path(__file__).resolve().parent / "data"


def shipped_task_files() -> list[Path]:
    """Every task file that ships with the package, one per local app."""
    return sorted(DATA.glob("*.jsonl"))


@dataclass
class CheckReport:
    passed: dict[str, list[Task]] = field(default_factory=lambda: defaultdict(list))
    failed: dict[str, list[tuple[Task, str]]] = field(default_factory=lambda: defaultdict(list))

    def kept(self) -> list[Task]:
        return [t for tasks in self.passed.values() for t in tasks]


async def _replay(client: EnvClient, task: Task) -> tuple[Task, str | None]:
    """None when the reference solution passes; otherwise why it does not."""
    try:
        async with client.episode(task) as session:
            for call in task.solution:
                result = await session.call_tool(call.name, call.arguments)
                if result.is_error:
                    return task, f"{call.name} failed: {result.text}"
            reward = await session.score()
    except EnvError as exc:
        return task, f"env error: {exc}"
    return task, None if passed(reward) else f"verifier gave {reward}"


def check_tasks(tasks: list[Task], max_concurrent: int = 16) -> CheckReport:
    report = CheckReport()
    for env_key in sorted({t.env_key for t in tasks}):
        env_tasks = [t for t in tasks if t.env_key == env_key]
        with LocalEnvServer(env_key) as server:
            client = EnvClient(server.base_url, max_concurrent=max_concurrent)

            async def run(client: EnvClient = client, env_tasks: list[Task] = env_tasks):
                return await asyncio.gather(*[_replay(client, t) for t in env_tasks])

            for task, problem in asyncio.run(run()):
                if problem is None:
                    report.passed[env_key].append(task)
                else:
                    report.failed[env_key].append((task, problem))
    return report


def _by_difficulty(tasks: list[Task]) -> str:
    counts = Counter(t.difficulty for t in tasks)
    return " ".join(f"{d}:{counts[d]}" for d in sorted(counts))


def render(report: CheckReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Reference solutions replayed against the live environments")
    for column in ("env_key", "tasks", "passed", "failed", "pass %", "tasks by difficulty (calls:tasks)"):
        table.add_column(column)
    envs = sorted(set(report.passed) | set(report.failed))
    for env_key in envs:
        passed, failed = report.passed[env_key], [t for t, _ in report.failed[env_key]]
        table.add_row(env_key, str(len(passed) + len(failed)), str(len(passed)), str(len(failed)),
                      f"{100 * len(passed) / max(1, len(passed) + len(failed)):.1f}", _by_difficulty(passed + failed))
    if len(envs) > 1:
        everything = report.kept() + [t for problems in report.failed.values() for t, _ in problems]
        failed_total = len(everything) - len(report.kept())
        table.add_row("all", str(len(everything)), str(len(report.kept())), str(failed_total),
                      f"{100 * len(report.kept()) / max(1, len(everything)):.1f}", _by_difficulty(everything))
    console = Console()
    console.print(table)
    for env_key, problems in sorted(report.failed.items()):
        for task, why in problems[:10]:
            console.print(f"  {env_key} {task.task_key}: {why}")


def write_kept(report: CheckReport, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(t.model_dump(), sort_keys=True) + "\n" for t in report.kept()))


def checkable_tasks(paths: list[Path]) -> tuple[list[Task], list[str]]:
    """The tasks that can be replayed here, and why each other one cannot: a bad record or file (named by
    ``toolenvs.task``), an env_key that is not a local app (a Fleet task is checked by Fleet), or a task its app cannot
    judge (the local backend's own ``problems``: a Fleet verifier_func, a verifier type the app lacks)."""
    from toolenvs.local.backend import LocalBackendConfig

    found, problems = read_task_files(paths)
    tasks = []
    for source, task in found:
        unrunnable = LocalBackendConfig().problems([task]) if task.env_key in APPS else []  # a Fleet verifier, an unknown verifier type
        if unrunnable:
            problems.append(f"{source} (task {task.task_key!r}): {'; '.join(unrunnable)}")
        elif task.env_key in APPS:
            tasks.append(task)
        else:
            problems.append(f"{source} (task {task.task_key!r}): key 'env_key' = {task.env_key!r} is not a local app (known: {', '.join(sorted(APPS))}); "
                            "envs check replays local apps only")
    return tasks, problems


def main(paths: list[Path] | None = None, write: Path | None = None) -> int:
    """The ``sweep envs check`` command: 0 when every reference solution passes, 1 when some fail, 2 when
    some tasks could not be checked (each named; the others are checked all the same)."""
    tasks, problems = checkable_tasks(paths or shipped_task_files())
    report = check_tasks(tasks)
    if tasks:
        render(report)
    if write:
        write_kept(report, write)
        print(f"wrote {len(report.kept())} passing tasks to {write}")
    for problem in problems:
        print(f"not checked: {problem}", file=sys.stderr)
    if problems:
        print(f"{len(problems)} task record(s) or file(s) not checked (above); {len(tasks)} task(s) checked", file=sys.stderr)
        return 2
    return 1 if any(report.failed.values()) else 0
