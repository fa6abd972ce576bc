"""MCP streamable-HTTP client for environments: one session per episode, a per-trial concurrency cap.

``async with EnvClient(url).episode(task) as session``: seeds the episode's state on the server, opens an
MCP session carrying the episode id, lists the tools; ``session.call_tool`` returns the result text the
agent sees; ``session.score()`` reads the final state and runs the task's verifier.
Failures of the environment itself (unreachable, timeout) raise ``EnvError``; a tool that reports an
error is a normal result with ``is_error=True``. Leaves out: retries with backoff (issue 5).
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from envs.local.server import EPISODE_HEADER
from envs.task import Task
from envs.verify import score


class EnvError(Exception):
    """The environment failed (not the agent): the episode is left out of its group's advantage."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool


class EpisodeSession:
    """One episode's open MCP session and its seeded start state."""

    def __init__(self, client: EnvClient, mcp: Any, admin: Any, episode_id: str, task: Task, start: dict[str, Any], tools: list[ToolSpec]):
        self._client = client
        self._mcp = mcp
        self._admin = admin
        self.episode_id = episode_id
        self.task = task
        self.start_state = start
        self.tools = tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call a tool; an unknown tool name is the agent's error, a transport failure is an EnvError."""
        if name not in {t.name for t in self.tools}:
            return ToolResult(f"error: unknown tool {name}", True)
        try:
            async with self._client.limit:
                result = await self._mcp.call_tool(name, arguments, read_timeout_seconds=self._client.call_timeout_s)
        except Exception as exc:  # transport and timeout errors of every shape the SDK raises
            raise EnvError(f"tool call {name} failed: {type(exc).__name__}: {exc}") from exc
        text = "".join(getattr(block, "text", "") for block in result.content)
        return ToolResult(text, bool(result.is_error))

    async def final_state(self) -> dict[str, Any]:
        response = await self._admin.get(f"/episodes/{self.episode_id}")
        if response.status_code != 200:
            raise EnvError(f"final state of episode {self.episode_id}: HTTP {response.status_code}")
        return response.json()

    async def score(self) -> float:
        """The verifier's reward for the final state."""
        return score(self.task, self.start_state, await self.final_state())


class EnvClient:
    """Client for one environment server; ``max_concurrent`` caps in-flight requests of this client."""

    def __init__(self, base_url: str, max_concurrent: int = 32, call_timeout_s: float = 10.0):
        self.base_url = base_url.rstrip("/")
        self.call_timeout_s = call_timeout_s
        self.limit = asyncio.Semaphore(max_concurrent)

    @asynccontextmanager
    async def episode(self, task: Task) -> AsyncIterator[EpisodeSession]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        episode_id = uuid.uuid4().hex
        timeout = httpx2.Timeout(self.call_timeout_s)
        in_body = False
        try:
            async with httpx2.AsyncClient(base_url=self.base_url, timeout=timeout) as admin:
                async with self.limit:
                    seeded = await admin.post(
                        "/episodes",
                        json={"episode_id": episode_id, "env_variables": task.env_variables, "initial_state": task.initial_state},
                    )
                seeded.raise_for_status()
                start = copy.deepcopy(seeded.json()["state"])
                async with httpx2.AsyncClient(headers={EPISODE_HEADER: episode_id}, timeout=timeout) as http:
                    transport = streamable_http_client(f"{self.base_url}/mcp", http_client=http)
                    async with Client(transport, read_timeout_seconds=self.call_timeout_s) as mcp:
                        async with self.limit:
                            listed = await mcp.list_tools()
                        tools = [ToolSpec(t.name, t.description or "", t.input_schema) for t in listed.tools]
                        in_body = True
                        yield EpisodeSession(self, mcp, admin, episode_id, task, start, tools)
                        in_body = False
                await admin.delete(f"/episodes/{episode_id}")
        except EnvError:
            raise
        except Exception as exc:
            if in_body:  # the caller's own error, not the environment's
                raise
            raise EnvError(f"episode {episode_id} on {self.base_url}: {type(exc).__name__}: {exc}") from exc
