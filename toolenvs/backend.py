"""Environment backends behind one seam, built from config by one factory.

A backend is what a trial's episodes act in. ``with make_backend(cfg, env_keys, limits) as backend:``
starts what it needs (the ``local`` backend: one MCP server process per env_key) and stops it on leaving;
inside each event loop ``backend.clients()`` gives, per env_key, a client whose ``episode(task)`` opens
an episode with ``tools``, ``call_tool`` and ``score`` (``toolenvs.client.EpisodeSession``'s shape), which is
all the trainer's episode loop knows of an environment.

The config is a discriminated union on ``type``: ``local`` (our MCP apps on 127.0.0.1) or ``fleet``
(Fleet's hosted environments through OpenEnv, ``toolenvs.fleet``); a backend is one more member and one
more entry in ``BACKENDS``. Leaves out: which tasks a trial runs
(``grpo.data``) and how an episode's turns go (``grpo.episodes``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field

from configkit import environ
from configkit.base import StrictModel
from toolenvs.task import Task


class LocalBackendConfig(StrictModel):
    """Our local apps (``toolenvs/local``), each served as a real MCP server on 127.0.0.1, one process per env_key."""

    type: Literal["local"] = "local"


class FleetBackendConfig(StrictModel):
    """Fleet's hosted environments through OpenEnv's ``FleetTaskEnv`` (``toolenvs.fleet``): each episode
    provisions an instance of the task's env; ``FLEET_API_KEY`` from the environment only."""

    type: Literal["fleet"] = "fleet"
    max_instances: int = Field(2, ge=1, description="Fleet instances open at once across the whole sweep (Fleet's quotas are per API key; the seeds' fix for MCP connection timeouts was 2, SkyRL's Tinker entry point uses 8).")
    ttl_s: int = Field(600, ge=60, description="An instance's time to live, in seconds (SkyRL passes 600); also when a slot a killed trial held is freed.")
    reset_timeout_s: float = Field(10.0, gt=0, description="FleetTaskEnv's reset request timeout.")
    request_timeout_s: float = Field(60.0, gt=0, description="FleetTaskEnv's request timeout. A verification that fails costs about 21 s more (OpenEnv retries it 3 times: 3, 6, 12 s).")
    max_steps: int = Field(50, ge=1, description="Tool calls FleetTaskEnv allows an episode (rollout.max_turns ends it sooner).")
    partial_reward: bool = Field(False, description="Fleet's partial reward (from the verifier's accumulators) instead of 0 or 1.")
    openenv_path: str | None = Field(None, description="OpenEnv's src folder (holding envs/fleet_env); default OPENENV_PATH, else an installed OpenEnv.")


BackendConfig = Annotated[LocalBackendConfig | FleetBackendConfig, Field(discriminator="type")]


@dataclass(frozen=True)
class ClientLimits:
    """What every backend's client honours: in-flight requests at most, and how long one tool call may take."""

    max_concurrent: int = 32
    call_timeout_s: float = 10.0


class EpisodeClient(Protocol):
    def episode(self, task: Task, queued: Queued | None = None) -> AbstractAsyncContextManager[Any]:
        """An open episode: ``tools``, ``await call_tool(name, arguments)``, ``await score()``; always closed.
        A client that makes an episode wait for capacity (Fleet's instance cap) waits inside ``queued()``, so
        the caller knows this episode will not ask for a turn meanwhile (``grpo.episodes.GenerationBatcher``)."""


Queued = Callable[[], AbstractAsyncContextManager[None]]


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


class FleetBackend:
    """The ``fleet`` backend: nothing to start; per event loop one ``FleetClient`` serving every env_key,
    its instances capped by the sweep's slots (``toolenvs.fleet_slots``), or this process's outside a sweep."""

    def __init__(self, cfg: FleetBackendConfig, env_keys: Sequence[str], limits: ClientLimits):
        self.cfg = cfg
        self.env_keys = sorted(set(env_keys))
        self._env_class: Any = None
        self._slots: Any = None

    def __enter__(self) -> FleetBackend:
        from toolenvs.fleet import InstanceSlots, load_fleet_task_env
        from toolenvs.fleet_slots import sweep_slots

        if not environ.FLEET_API_KEY.is_set():
            raise ValueError(f"the fleet backend needs {environ.FLEET_API_KEY.name} in the environment")
        self._env_class = load_fleet_task_env(self.cfg.openenv_path)
        self._slots = sweep_slots() or InstanceSlots(self.cfg.max_instances)  # a sweep's trials share its cap
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def clients(self) -> dict[str, EpisodeClient]:
        from toolenvs.fleet import FleetClient

        c, env_class = self.cfg, self._env_class

        def make(task_config: dict[str, Any]) -> Any:  # the key goes from the environment to Fleet, nowhere else
            return env_class(task_config, api_key=environ.FLEET_API_KEY.get(), ttl_seconds=c.ttl_s, max_steps=c.max_steps,
                             request_timeout_s=c.request_timeout_s, reset_timeout_s=c.reset_timeout_s, partial_reward=c.partial_reward)

        client = FleetClient(make, self._slots)
        return {key: client for key in self.env_keys}


BACKENDS: dict[str, Callable[[Any, Sequence[str], ClientLimits], EnvBackend]] = {"local": LocalBackend, "fleet": FleetBackend}


def task_problems(cfg: BackendConfig, tasks: Sequence[Task], most: int = 5) -> list[str]:
    """Why the backend cannot run some of ``tasks`` (each named), checked when a config loads: the local
    apps run their own env_keys with a spec or sandboxed ``verify(final_state)``; Fleet runs ``verifier_func``."""
    if cfg.type == "fleet":
        wrong = [t.task_key for t in tasks if t.verifier_func is None]
        why = ("have no verifier_func, which is all Fleet runs ('verifier' and 'verifier_code' are judged by our local apps): "
               "use Fleet's export of the tasks, or env.backend: local")
        return [f"{len(wrong)} task(s) {why}: {', '.join(wrong[:most])}"] if wrong else []
    from toolenvs.local import APPS

    problems = []
    unknown = sorted({t.env_key for t in tasks if t.env_key not in APPS})
    if unknown:
        problems.append(f"env_key(s) {', '.join(unknown)} are not local apps (known: {', '.join(sorted(APPS))}); "
                        "Fleet's tasks run with env.backend: {type: fleet}")
    hosted = [t.task_key for t in tasks if t.verifier_func is not None and t.env_key in APPS]
    if hosted:
        problems.append(f"{len(hosted)} task(s) have a Fleet verifier_func, which only Fleet runs: {', '.join(hosted[:most])}; "
                        "use env.backend: {type: fleet}")
    return problems


def make_backend(cfg: BackendConfig, env_keys: Sequence[str], limits: ClientLimits | None = None) -> EnvBackend:
    """The backend ``cfg.type`` names, for these env_keys (not started: enter it)."""
    if cfg.type not in BACKENDS:
        raise ValueError(f"unknown environment backend {cfg.type!r} (valid: {', '.join(BACKENDS)})")
    return BACKENDS[cfg.type](cfg, env_keys, limits or ClientLimits())
