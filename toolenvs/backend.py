"""Environment backends behind one seam, built from config by one factory.

A backend is what a trial's episodes act in. ``with make_backend(cfg, env_keys, limits) as backend:``
starts what it needs (the ``local`` backend: one MCP server process per env_key) and stops it on leaving;
inside each event loop ``backend.clients()`` gives, per env_key, a client whose ``episode(task)`` opens
an episode with ``tools``, ``call_tool`` and ``score`` (``toolenvs.client.EpisodeSession``'s shape), which is
all the trainer's episode loop knows of an environment.

The config is a discriminated union on ``type``: ``local`` (our MCP apps on 127.0.0.1) today; a hosted
backend is one more member and one more entry in ``BACKENDS``. Leaves out: which tasks a trial runs
(``grpo.data``) and how an episode's turns go (``grpo.episodes``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field

from configkit.base import StrictModel
from toolenvs.task import Task


class LocalBackendConfig(StrictModel):
    """Our local apps (``toolenvs/local``), each served as a real MCP server on 127.0.0.1, one process per env_key."""

    type: Literal["local"] = "local"


BackendConfig = Annotated[LocalBackendConfig, Field(discriminator="type")]


@dataclass(frozen=True)
class ClientLimits:
    """What every backend's client honours: in-flight requests at most, and how long one tool call may take."""

    max_concurrent: int = 32
    call_timeout_s: float = 10.0


class EpisodeClient(Protocol):
    def episode(self, task: Task) -> AbstractAsyncContextManager[Any]:
        """An open episode: ``tools``, ``await call_tool(name, arguments)``, ``await score()``; always closed."""


class EnvBackend(Protocol):
    def __enter__(self) -> EnvBackend: ...

    def __exit__(self, *exc: object) -> None: ...

    def clients(self) -> Mapping[str, EpisodeClient]:
        """A client per env_key, for the running event loop (call it inside the loop that uses them)."""


class LocalBackend:
    """The ``local`` backend: a pool of app servers for the trial, an ``EnvClient`` per server and event loop."""

    def __init__(self, cfg: LocalBackendConfig, env_keys: Sequence[str], limits: ClientLimits):
        from toolenvs.local.launch import EnvServerPool

        self.limits = limits
        self.pool = EnvServerPool(sorted(set(env_keys)))
        self.urls: dict[str, str] = {}

    def __enter__(self) -> LocalBackend:
        self.urls = self.pool.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.stop()

    def clients(self) -> dict[str, EpisodeClient]:
        from toolenvs.client import EnvClient

        return {key: EnvClient(url, self.limits.max_concurrent, self.limits.call_timeout_s) for key, url in self.urls.items()}


BACKENDS: dict[str, Callable[[Any, Sequence[str], ClientLimits], EnvBackend]] = {"local": LocalBackend}


def make_backend(cfg: BackendConfig, env_keys: Sequence[str], limits: ClientLimits | None = None) -> EnvBackend:
    """The backend ``cfg.type`` names, for these env_keys (not started: enter it)."""
    if cfg.type not in BACKENDS:
        raise ValueError(f"unknown environment backend {cfg.type!r} (valid: {', '.join(BACKENDS)})")
    return BACKENDS[cfg.type](cfg, env_keys, limits or ClientLimits())
