"""A tiny app for fault tests, served by the real server (``LocalEnvServer("tests.toolenvs.fault_app")``)."""

from __future__ import annotations

import asyncio
from typing import Any

ENV_KEY = "faulty"
ENV_VERSION = "1"


class AppError(Exception):
    """A tool error the agent is shown."""


def initial_state(env_variables: dict[str, str], seed: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"calls": 0}


def echo(state: dict[str, Any], text: str) -> dict[str, Any]:
    """Return the text."""
    state["calls"] += 1
    return {"text": text}


async def slow(state: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Answer after ``seconds`` (other episodes are served meanwhile)."""
    await asyncio.sleep(seconds)
    state["calls"] += 1
    return {"slept": seconds}


TOOLS = {"echo": echo, "slow": slow}
PARAMETERS = {"text": "Text to echo back.", "seconds": "How long to sleep before answering."}


def verify(final: dict[str, Any], start: dict[str, Any], spec: dict[str, Any]) -> float:
    return float(final["calls"] >= spec.get("calls", 1))
