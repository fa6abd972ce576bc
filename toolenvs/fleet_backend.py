"""The ``fleet`` environment backend: Fleet's hosted environments through OpenEnv's ``FleetTaskEnv``.

Nothing starts per trial: each episode provisions an instance of its task's env (``toolenvs.fleet``). What a
sweep starts once is the cap on instances open at once across all its trials (``toolenvs.fleet_slots``: a Ray
actor in the driver's namespace, ended after the trials); outside a sweep (``sweep train``) the cap is this
process's. ``FLEET_API_KEY`` comes from the environment only and goes to ``FleetTaskEnv`` and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from configkit import environ
from configkit.base import StrictModel
from toolenvs.task import Task

if TYPE_CHECKING:
    from toolenvs.seam import EpisodeClient


class FleetBackendConfig(StrictModel):
    """Fleet's hosted environments through OpenEnv's ``FleetTaskEnv`` (``toolenvs.fleet``): each episode
    provisions an instance of the task's env; ``FLEET_API_KEY`` from the environment only."""

    type: Literal["fleet"] = "fleet"
    max_instances: int = Field(2, ge=1, description="Fleet instances open at once across the whole sweep (Fleet's quotas are per API key; the seeds' fix for MCP connection timeouts was 2, SkyRL's Tinker entry point uses 8).")
    ttl_s: int = Field(600, ge=60, description="An instance's time to live, in seconds (SkyRL passes 600); also when a slot a killed trial held is freed.")
    reset_timeout_s: float = Field(10.0, gt=0, description="FleetTaskEnv's reset request timeout.")
    request_timeout_s: float = Field(60.0, gt=0, description="FleetTaskEnv's request timeout (each tool call's). A verification that fails costs about 21 s more (OpenEnv retries it 3 times: 3, 6, 12 s).")
    max_steps: int = Field(50, ge=1, description="Tool calls FleetTaskEnv allows an episode (rollout.max_turns ends it sooner).")
    partial_reward: bool = Field(False, description="Fleet's partial reward (from the verifier's accumulators) instead of 0 or 1.")
    openenv_path: str | None = Field(None, description="OpenEnv's src folder (holding envs/fleet_env); default OPENENV_PATH, else an installed OpenEnv.")

    PER_TRIAL: ClassVar[tuple[str, ...]] = ()  # the instance cap and its slots hold across the sweep: nothing is a trial's own
    MOVED_FROM_ENV: ClassVar[dict[str, object]] = {}

    def problems(self, tasks: Sequence[Task], most: int = 5) -> list[str]:
        """Fleet runs a task's ``verifier_func`` only; and it needs the key, the SDK, mcp 1.x and OpenEnv here."""
        from toolenvs.fleet import fleet_problems

        problems = []
        wrong = [t.task_key for t in tasks if t.verifier_func is None]
        if wrong:
            problems.append(f"{len(wrong)} task(s) have no verifier_func, which is all Fleet runs ('verifier' and 'verifier_code' are "
                            f"judged by our local apps): use Fleet's export of the tasks, or env.backend: local: {', '.join(wrong[:most])}")
        return problems + fleet_problems(self.openenv_path)

    @contextmanager
    def sweep_wide(self) -> Iterator[None]:
        """The actor capping the sweep's open instances, on the running Ray, for as long as the trials run."""
        import ray

        from toolenvs.fleet_slots import start

        slots = start(self.max_instances, self.ttl_s)
        try:
            yield
        finally:
            ray.kill(slots)

    def open(self, env_keys: Sequence[str]) -> FleetBackend:
        return FleetBackend(self, env_keys)


class FleetBackend:
    """Per event loop one ``FleetClient`` serving every env_key, its instances capped by the sweep's slots
    (``toolenvs.fleet_slots``), or this process's outside a sweep."""

    def __init__(self, cfg: FleetBackendConfig, env_keys: Sequence[str]):
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
