"""The environment backends a trainer config can choose, as one discriminated union on ``type``.

``local`` (our MCP apps on 127.0.0.1, ``toolenvs.local.backend``) or ``fleet`` (Fleet's hosted environments
through OpenEnv, ``toolenvs.fleet_backend``). Each member owns its parts (``toolenvs.seam.BackendSettings``):
its checks, what it starts once per sweep, and how it opens environments; ``cfg.open(env_keys)`` is the factory.
A third backend is one module with its config and one more member here.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import Field

from toolenvs.fleet_backend import FleetBackendConfig
from toolenvs.local.backend import LocalBackendConfig

MEMBERS = (LocalBackendConfig, FleetBackendConfig)
BackendConfig = Annotated[LocalBackendConfig | FleetBackendConfig, Field(discriminator="type")]

__all__ = ["BackendConfig", "FleetBackendConfig", "LocalBackendConfig", "absorb_moved_keys"]


def _member(tag: Any) -> Any:
    """The member a backend section's ``type`` tag names (None: no member, for the union's own error to name)."""
    return next((m for m in MEMBERS if tag in get_args(m.model_fields["type"].annotation)), None)


def absorb_moved_keys(env: dict[str, Any]) -> dict[str, Any]:
    """An ``env`` section written before keys moved under its backend (``MOVED_FROM_ENV``): each such key moves into
    a backend that has it, and is refused where the backend sets it to another value; one the chosen backend lacks
    is dropped when it holds the value every old config saved (it was ignored there), else refused by name."""
    old = {key: env[key] for m in MEMBERS for key in m.MOVED_FROM_ENV if key in env}
    backend = env.get("backend", {"type": "local"})
    if not old or not isinstance(backend, dict) or (member := _member(backend.get("type", "local"))) is None:
        return env
    rest = {key: value for key, value in env.items() if key not in old}
    moved = dict(backend)
    for key, value in old.items():
        if key in member.model_fields:
            if key in backend and backend[key] != value:
                raise ValueError(f"env.{key} = {value!r} and env.backend.{key} = {backend[key]!r}: it moved under the backend; keep env.backend.{key} only")
            moved[key] = value
        elif value != next(m.MOVED_FROM_ENV[key] for m in MEMBERS if key in m.MOVED_FROM_ENV):
            raise ValueError(f"env.{key} = {value!r}: the {member.model_fields['type'].default} backend has no such limit "
                             f"(its keys: {', '.join(k for k in member.model_fields if k != 'type')})")
    return {**rest, "backend": moved}
