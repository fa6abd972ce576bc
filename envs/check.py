"""Replay every task's reference solution against its live environment and keep the tasks it solves.

``python -m sweep envs check [TASKS.jsonl]``: starts each env's server, replays all solutions
concurrently through the real MCP client, runs each task's verifier on the final state and prints a
per-env table of passed/failed/env errors. With ``--write OUT`` it writes only the passing tasks.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from envs.client import EnvClient, EnvError
from envs.local.launch import LocalEnvServer
from envs.task import Task


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
    return task, None if reward >= 0.5 else f"verifier gave {reward}"


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


def render(report: CheckReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Reference solutions replayed against the live environments")
    for column in ("env_key", "tasks", "passed", "failed"):
        table.add_column(column)
    for env_key in sorted(set(report.passed) | set(report.failed)):
        passed, failed = len(report.passed[env_key]), len(report.failed[env_key])
        table.add_row(env_key, str(passed + failed), str(passed), str(failed))
    console = Console()
    console.print(table)
    for env_key, problems in sorted(report.failed.items()):
        for task, why in problems[:10]:
            console.print(f"  {env_key} {task.task_key}: {why}")


def write_kept(report: CheckReport, path: Path) -> None:
    path.write_text("".join(json.dumps(t.model_dump(), sort_keys=True) + "\n" for t in report.kept()))
