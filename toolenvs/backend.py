"""The environment backends a trainer config can choose, as one discriminated union on ``type``.

``local`` (our MCP apps on 127.0.0.1, ``toolenvs.local.backend``) or ``fleet`` (Fleet's hosted environments
through OpenEnv, ``toolenvs.fleet_backend``). Each member owns its parts (``toolenvs.seam.BackendSettings``):
its checks, what it starts once per sweep, and how it opens environments; ``cfg.open(env_keys)`` is the factory.
A third backend is one module with its config and one more member here.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from toolenvs.fleet_backend import FleetBackendConfig
from toolenvs.local.backend import LocalBackendConfig

BackendConfig = Annotated[LocalBackendConfig | FleetBackendConfig, Field(discriminator="type")]

__all__ = ["BackendConfig", "FleetBackendConfig", "LocalBackendConfig"]
