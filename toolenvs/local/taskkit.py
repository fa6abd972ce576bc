"""What every task generator shares: who and when a task runs, assembling records, and the replay check.

A generator module defines ``FAMILIES`` (name -> function of ``(rng, env_variables)`` returning a
prompt, a seed state, a reference solution and a verifier spec) and ``PER_FAMILY``; ``generate``
here turns them into task records, replaying every reference solution in-process and refusing any
that does not pass its own verifier. Output is deterministic for a seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from toolenvs.local.appkit import USERS

DATA = Path(__file__).resolve().parents[1] / "data"
Family = Callable[[random.Random, dict[str, str]], dict[str, Any]]


def env_variables(rng: random.Random, users: list[str] | None = None) -> dict[str, str]:
    """A logged-in user and a current date in the first half of 2026."""
    user = rng.choice(users or sorted(USERS))
    today = date(2026, 1, 5) + timedelta(days=rng.randrange(0, 150))
    return {"CURRENT_DATE": today.isoformat(), "LOGGED_IN_USER": user, "LOGGED_IN_NAME": USERS[user]}


def days_after(env_variables: dict[str, str], days: int) -> str:
    return (date.fromisoformat(env_variables["CURRENT_DATE"]) + timedelta(days=days)).isoformat()


def others(env_variables: dict[str, str], pool: list[str] | None = None) -> list[str]:
    """Users other than the logged-in one, in a fixed order."""
    return [u for u in (pool or sorted(USERS)) if u != env_variables["LOGGED_IN_USER"]]


def step(name: str, **arguments: Any) -> dict[str, Any]:
    """One reference tool call."""
    return {"name": name, "arguments": arguments}


def generate(app: ModuleType, families: dict[str, Family], per_family: int, seed: int = 0, users: list[str] | None = None,
             rng_seed: Any = None) -> list[dict[str, Any]]:
    """All task records of an app, each checked by replaying its solution against its verifier.

    ``users``: who may be logged in (default every known user); ``rng_seed``: the generator's own seed
    (default ``"{env_key}-{seed}"``; the hotel set, older than this kit, seeds with ``seed`` itself).
    """
    rng = random.Random(f"{app.ENV_KEY}-{seed}" if rng_seed is None else rng_seed)
    records = []
    for family, build in families.items():
        for i in range(per_family):
            ev = env_variables(rng, users)
            body = build(rng, ev)
            record = {
                "task_key": f"{app.ENV_KEY}-{family}-{i:02d}",
                "prompt": body["prompt"],
                "env_key": app.ENV_KEY,
                "env_version": app.ENV_VERSION,
                "env_variables": ev,
                "initial_state": body.get("initial_state", {}),
                "verifier": body["verifier"],
                "solution": body["solution"],
                "difficulty": len(body["solution"]),
            }
            check(app, record)
            records.append(record)
    return records


def check(app: ModuleType, record: dict[str, Any]) -> None:
    """Raise unless the reference solution runs without tool errors and passes the verifier."""
    calls = [(c["name"], c["arguments"]) for c in record["solution"]]
    start, final, results = app.replay(record["env_variables"], record["initial_state"], calls)
    errors = [r for r in results if isinstance(r, str) and r.startswith("error:")]
    if errors or app.verify(final, start, record["verifier"]) != 1.0:
        raise AssertionError(f"reference solution of {record['task_key']} fails: {errors or 'verifier gave 0'}")


def write(app: ModuleType, records: list[dict[str, Any]], path: Path | None = None) -> Path:
    path = path or DATA / f"{app.ENV_KEY}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    return path
