"""MCP streamable-HTTP client for environments: one session per episode, a per-trial concurrency cap.

``async with EnvClient(url).episode(task) as session``: seeds the episode's state on the server, opens an
MCP session carrying the episode id, lists the tools; ``session.call_tool`` returns the result text the
agent sees; ``session.score()`` reads the final state and runs the task's verifier.
Failures of the environment itself (unreachable, timeout) raise ``EnvError``; a tool that reports an
error is a normal result with ``is_error=True``. Opening an episode is retried with exponential backoff
and jitter, and so is an empty tool list; tool calls are not (they are not idempotent).
"""

from __future__ import annotations

import asyncio
import copy
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from envs.errors import EnvError, VerifierError
from envs.local.server import EPISODE_HEADER
from envs.task import Task
from envs.verify import score_async

__all__ = ["EnvClient", "EnvError", "EpisodeSession", "ToolResult", "ToolSpec", "VerifierError", "is_env_failure"]


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
        """The verifier's reward for the final state; VerifierError (an EnvError) when untrusted code fails."""
        return await score_async(self.task, self.start_state, await self.final_state())


class EnvClient:
    """Client for one environment server; ``max_concurrent`` caps in-flight requests of this client."""

    def __init__(self, base_url: str, max_concurrent: int = 32, call_timeout_s: float = 10.0, open_attempts: int = 3, backoff_s: float = 0.2):
        self.base_url = base_url.rstrip("/")
        self.call_timeout_s = call_timeout_s
        self.open_attempts = open_attempts
        self.backoff_s = backoff_s
        self.limit = asyncio.Semaphore(max_concurrent)

    @asynccontextmanager
    async def episode(self, task: Task) -> AsyncIterator[EpisodeSession]:
        """Open an episode (retrying connection failures with backoff), yield it, always close and free it."""
        episode_id = uuid.uuid4().hex
        async with AsyncExitStack() as stack:
            session = await self._open_with_retries(stack, task, episode_id)
            try:
                yield session
            except Exception as exc:
                if isinstance(exc, EnvError) or not is_env_failure(exc):
                    raise  # already says what failed, or the caller's own error, not the environment's
                raise EnvError(f"episode {episode_id}: {describe(exc)}") from exc
            finally:
                await _close_quietly(stack, session)

    async def _open_with_retries(self, stack: AsyncExitStack, task: Task, episode_id: str) -> EpisodeSession:
        for attempt in range(self.open_attempts):
            attempt_stack = AsyncExitStack()
            try:
                session = await self._open(attempt_stack, task, episode_id)
                stack.push_async_exit(attempt_stack)
                return session
            except Exception as exc:
                await _aclose_ignoring(attempt_stack)
                if not is_env_failure(exc):
                    raise  # a bug, not the environment: never disguised as an env_error
                if attempt + 1 == self.open_attempts:
                    raise EnvError(f"opening episode {episode_id} on {self.base_url} failed after {attempt + 1} tries: {describe(exc)}") from exc
                await asyncio.sleep(self.backoff_s * 2**attempt * (1 + random.random()))
        raise AssertionError("unreachable")

    async def _open(self, stack: AsyncExitStack, task: Task, episode_id: str) -> EpisodeSession:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(self.call_timeout_s)
        admin = await stack.enter_async_context(httpx2.AsyncClient(base_url=self.base_url, timeout=timeout))
        body = {"episode_id": episode_id, "env_variables": task.env_variables, "initial_state": task.initial_state}
        async with self.limit:
            seeded = await admin.post("/episodes", json=body)
        seeded.raise_for_status()
        start = copy.deepcopy(seeded.json()["state"])
        http = await stack.enter_async_context(httpx2.AsyncClient(headers={EPISODE_HEADER: episode_id}, timeout=timeout))
        transport = streamable_http_client(f"{self.base_url}/mcp", http_client=http)
        mcp = await stack.enter_async_context(Client(transport, read_timeout_seconds=self.call_timeout_s))
        async with self.limit:
            listed = await mcp.list_tools()
        tools = [ToolSpec(t.name, t.description or "", t.input_schema) for t in listed.tools]
        if not tools:  # seen in production under load ("no tools found"): retried like a connection error
            raise EnvError(f"{self.base_url} listed no tools")
        return EpisodeSession(self, mcp, admin, episode_id, task, start, tools)


def is_env_failure(exc: BaseException) -> bool:
    """Transport errors, timeouts and protocol errors, alone or grouped (as the SDK's task groups raise them)."""
    import httpx2
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, BaseExceptionGroup):
        return all(is_env_failure(e) or isinstance(e, asyncio.CancelledError) for e in exc.exceptions)
    return isinstance(exc, (EnvError, httpx2.TransportError, httpx2.HTTPStatusError, MCPError, OSError, TimeoutError))


def describe(exc: BaseException) -> str:
    """The innermost messages of an exception (group), one line."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _aclose_ignoring(stack: AsyncExitStack) -> None:
    try:
        await stack.aclose()
    except BaseException as exc:  # closing a half-open connection may raise anything the transport raises
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise


async def _close_quietly(stack: AsyncExitStack, session: EpisodeSession) -> None:
    """Free the episode's state on the server, then close the MCP session; failures here cost nothing."""
    try:
        await session._admin.delete(f"/episodes/{session.episode_id}")
    except Exception:
        pass
    await _aclose_ignoring(stack)
