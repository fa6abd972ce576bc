"""The ``local`` environment backend: our apps (``toolenvs/local``), each a real MCP server on 127.0.0.1.

A trial starts one server process per env_key (``toolenvs.local.launch.EnvServerPool``) and always stops them;
each event loop gets an ``EnvClient`` per server, capped at ``max_concurrent`` requests in flight and
``call_timeout_s`` per tool call. Nothing is shared across a sweep's trials.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from configkit.base import StrictModel
from toolenvs.task import Task

if TYPE_CHECKING:
    from types import ModuleType

    from toolenvs.seam import EpisodeClient


ACTED_ON = ("CURRENT_DATE", "LOGGED_IN_USER")  # the env_variables every local app's state starts from (appkit.base_state)


class LocalBackendConfig(StrictModel):
    """Our local apps (``toolenvs/local``), each served as a real MCP server on 127.0.0.1, one process per env_key."""

    type: Literal["local"] = "local"
    max_concurrent: int = Field(32, ge=1, description="MCP requests in flight per trial and app server at most.")
    call_timeout_s: float = Field(10.0, gt=0, description="Timeout of one tool call, in seconds.")

    PER_TRIAL: ClassVar[tuple[str, ...]] = ("max_concurrent", "call_timeout_s")  # each trial's own client: sweepable
    # keys that lived under env before they moved here, with the values every config saved then carries
    MOVED_FROM_ENV: ClassVar[dict[str, object]] = {"max_concurrent": 32, "call_timeout_s": 10.0}

    def problems(self, tasks: Sequence[Task], most: int = 5) -> list[str]:
        """The local apps run their own env_keys, judged by a verifier spec or sandboxed ``verifier_code``."""
        from toolenvs.local import APPS, get_app
        from toolenvs.local.appkit import is_day

        problems = []
        unknown = sorted({t.env_key for t in tasks if t.env_key not in APPS})
        if unknown:
            problems.append(f"env_key(s) {', '.join(unknown)} are not local apps (known: {', '.join(sorted(APPS))}); "
                            "Fleet's tasks run with env.backend: {type: fleet}")
        hosted = [t.task_key for t in tasks if t.verifier_func is not None and t.env_key in APPS]
        if hosted:
            problems.append(f"{len(hosted)} task(s) have a Fleet verifier_func, which only Fleet runs: {', '.join(hosted[:most])}; "
                            "use env.backend: {type: fleet}")
        for env_key in sorted({t.env_key for t in tasks if t.env_key in APPS}):
            app = get_app(env_key)
            known = app.VERIFIERS
            odd = [f"{t.task_key} ({t.verifier.get('type')!r})" for t in tasks
                   if t.env_key == env_key and t.verifier is not None and t.verifier.get("type") not in known]
            if odd:
                problems.append(f"{len(odd)} {env_key} task(s) name a verifier type the app does not have: {', '.join(odd[:most])}; "
                                f"known: {', '.join(sorted(known))}")
            unread = [f"{t.task_key} ({why})" for t in tasks if t.env_key == env_key and t.verifier is not None
                      and t.verifier.get("type") in known and (why := app.spec_problem(t.verifier))]
            if unread:
                problems.append(f"{len(unread)} {env_key} task(s) have a verifier spec the app cannot judge as meant: {'; '.join(unread[:most])}")
            unseeded = [f"{t.task_key} ({why})" for t in tasks if t.env_key == env_key and (why := _unseeded(app, t))]
            if unseeded:  # every episode of such a task failed in the environment when it opened (HTTP 422)
                problems.append(f"{len(unseeded)} {env_key} task(s) have an initial_state the app cannot start from: {'; '.join(unseeded[:most])}")
        local = [t for t in tasks if t.env_key in APPS and t.verifier_func is None]  # the others are refused above
        lacking = [f"{t.task_key} ({', '.join(k for k in ACTED_ON if k not in t.env_variables)})" for t in local
                   if any(k not in t.env_variables for k in ACTED_ON)]
        if lacking:  # the apps fell back to 'guest' on 2026-01-01, silently
            problems.append(f"{len(lacking)} task(s) lack env_variables the local apps act on ({', '.join(ACTED_ON)}): {', '.join(lacking[:most])}")
        days = [f"{t.task_key} ({t.env_variables['CURRENT_DATE']!r})" for t in local
                if "CURRENT_DATE" in t.env_variables and not is_day(t.env_variables["CURRENT_DATE"])]
        if days:  # the local apps read it as the day the episode runs on: any tool call with a date failed
            problems.append(f"{len(days)} task(s) have an env_variables CURRENT_DATE that is no date YYYY-MM-DD: {', '.join(days[:most])}")
        users = [f"{t.task_key} ({t.env_variables['LOGGED_IN_USER']!r})" for t in local
                 if "LOGGED_IN_USER" in t.env_variables and not (isinstance(t.env_variables["LOGGED_IN_USER"], str) and t.env_variables["LOGGED_IN_USER"].strip())]
        if users:
            problems.append(f"{len(users)} task(s) have an env_variables LOGGED_IN_USER that is no user name (text): {', '.join(users[:most])}")
        return problems

    def sweep_wide(self) -> AbstractContextManager[None]:
        return nullcontext()  # each trial starts its own servers

    def open(self, env_keys: Sequence[str]) -> LocalBackend:
        return LocalBackend(self, env_keys)


class LocalBackend:
    """A pool of app servers for the trial, an ``EnvClient`` per server and event loop."""

    def __init__(self, cfg: LocalBackendConfig, env_keys: Sequence[str]):
        from toolenvs.local.launch import EnvServerPool

        self.cfg = cfg
        self.pool = EnvServerPool(sorted(set(env_keys)))
        self.urls: dict[str, str] = {}

    def __enter__(self) -> LocalBackend:
        self.urls = self.pool.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.stop()

    def clients(self) -> dict[str, EpisodeClient]:
        from toolenvs.client import EnvClient

        return {key: EnvClient(url, self.cfg.max_concurrent, self.cfg.call_timeout_s) for key, url in self.urls.items()}


def _unseeded(app: ModuleType, task: Task) -> str | None:
    """Why the app cannot start an episode from the task's initial_state and env_variables, or None."""
    from toolenvs.local.appkit import SeedError, seeded

    try:
        seeded(app, task.env_variables, task.initial_state)
    except SeedError as exc:
        return str(exc)
    return None
