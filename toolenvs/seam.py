"""What the trainer's episode loop knows of an environment, and what an environment backend's config owns.

A backend is what a trial's episodes act in. ``with backend_config.open(env_keys) as backend:`` starts what
it needs (the ``local`` backend: one MCP server process per env_key) and stops it on leaving; inside each event
loop ``backend.clients()`` gives, per env_key, a client whose ``episode(task)`` opens an episode with ``tools``,
``call_tool`` and ``score`` (``toolenvs.session.EpisodeSession``'s shape).

A backend's config (``BackendSettings``) owns its parts: which tasks and settings it can run (``problems``),
what it starts once per sweep and tears down after (``sweep_wide``: Fleet's instance slots), and how it opens
environments (``open``); the sweep and the trainer call those and never ask which backend it is. The configs
themselves are in ``toolenvs.backend``. Leaves out: which tasks a trial runs (``grpo.data``) and how an
episode's turns go (``grpo.episodes``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, ClassVar, Protocol

from toolenvs.task import Task

Queued = Callable[[], AbstractAsyncContextManager[None]]


class EpisodeClient(Protocol):
    def episode(self, task: Task, queued: Queued | None = None) -> AbstractAsyncContextManager[Any]:
        """An open episode: ``tools``, ``await call_tool(name, arguments)``, ``await score()``; always closed.
        A client that makes an episode wait for capacity (Fleet's instance cap) waits inside ``queued()``, so
        the caller knows this episode will not ask for a turn meanwhile (``grpo.episodes.GenerationBatcher``)."""


class EnvBackend(Protocol):
    def __enter__(self) -> EnvBackend: ...

    def __exit__(self, *exc: object) -> None: ...

    def clients(self) -> Mapping[str, EpisodeClient]:
        """A client per env_key, for the running event loop (call it inside the loop that uses them)."""


class BackendSettings(Protocol):
    """What every backend's config provides (a member of ``toolenvs.backend.BackendConfig``)."""

    type: str
    PER_TRIAL: ClassVar[tuple[str, ...]]  # its keys a sweep may vary between trials (the rest hold across the sweep)
    MOVED_FROM_ENV: ClassVar[dict[str, object]]  # keys that lived under ``env`` before, with the value old configs saved

    def problems(self, tasks: Sequence[Task]) -> list[str]:
        """Why this backend cannot run some of ``tasks``, or lacks what it needs here (a key, an SDK): one line each."""

    def sweep_wide(self) -> AbstractContextManager[None]:
        """What a sweep starts once, on its running Ray, before its trials, and tears down after them."""

    def open(self, env_keys: Sequence[str]) -> EnvBackend:
        """The backend for these env_keys (not started: enter it)."""
