"""MCP streamable-HTTP client for environments: one session per episode, per-trial concurrency caps.

``async with EnvClient(url).episode(task) as session``: seeds the episode's state on the server, opens an
MCP session carrying the episode id, lists the tools; ``session.call_tool`` returns the result text the
agent sees; ``session.score()`` reads the final state and runs the task's verifier. Scoring ends the episode:
one request reads the final state and frees it on the server (no tool calls after it).

Failures of the environment itself raise ``EnvError`` (``VerifierError`` for untrusted verifier code),
whatever shape the SDK gives them (``toolenvs.faults`` tells them apart). The episode's own side, its calls and
its score, is ``toolenvs.session.EpisodeSession``. Opening an episode is retried with
exponential backoff and full jitter on connection errors, 5xx/429 and an empty tool list (seen in
production under load); a 4xx is not retried, and neither are tool calls (they are not idempotent, and
a dead server took the episode's state with it).

Opening is cheap on stateless protocol versions (2026-07-28+): a client asks the server for its protocol
version and tools once (an app's tools do not change while it runs), then opens each episode with the seed
POST alone and calls tools as one plain POST each (``toolenvs.rpc``: half the client CPU of the SDK's call
path), on HTTP clients each shared by up to ``EPISODES_PER_POOL`` open episodes. On older, stateful
protocols (or with ``fast_calls=False``) each episode is its own SDK session, listing the tools itself.
``max_concurrent`` caps in-flight requests;
``max_sessions`` caps open episodes; an episode waits for one inside the caller's ``queued()`` (the generation
batcher then does not wait for it: the episodes holding sessions must be able to finish and free them).
"""

from __future__ import annotations

import asyncio
import functools
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from toolenvs import mcpcompat
from toolenvs.errors import EnvError, VerifierError
from toolenvs.faults import describe, first_env_error, is_env_failure, is_sdk_cancellation, is_transient
from toolenvs.local.server import EPISODE_HEADER
from toolenvs.rpc import ToolCaller
from toolenvs.session import EpisodeSession, ServerInfo, ServerState, ToolResult, ToolSpec
from toolenvs.task import Task

# Episodes sharing one HTTP client. Sharing saves a client and a connection per episode, but httpcore scans
# every connection of a pool whenever a request starts or ends (polling each idle socket): with 64 episodes on
# one pool a call cost 50% more client CPU than on a client of its own.
EPISODES_PER_POOL = 8

__all__ = [
    "ClientStats",
    "EnvClient",
    "EnvError",
    "EpisodeSession",
    "ServerInfo",
    "ToolResult",
    "ToolSpec",
    "VerifierError",
    "is_env_failure",
]


@dataclass
class ClientStats:
    """What a client went through (for metrics and tests)."""

    discovered: int = 0  # times it asked the server for its protocol version and tools
    opened: int = 0
    open_retries: int = 0
    env_errors: int = 0
    tool_calls: int = 0


class EnvClient:
    """Client for one environment server, shared by a trial's concurrent episodes (one event loop)."""

    def __init__(
        self,
        base_url: str,
        max_concurrent: int = 32,
        call_timeout_s: float = 10.0,
        open_attempts: int = 3,
        backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        max_sessions: int | None = None,
        fast_calls: bool = True,
        open_timeout_s: float = 30.0,
    ):
        self.base_url = base_url.rstrip("/")
        self.call_timeout_s = call_timeout_s
        self.open_timeout_s = open_timeout_s  # each request while opening (seed, discover, list tools)
        self.open_attempts = open_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.limit = asyncio.Semaphore(max_concurrent)
        self.sessions = asyncio.Semaphore(max_sessions) if max_sessions else None
        self.fast_calls = fast_calls  # tool calls as one plain POST where the protocol is stateless (toolenvs.rpc)
        self.waiting = 0  # episodes queued for a session slot
        self.stats = ClientStats()
        self.server: ServerInfo | None = None  # learned on the first open (fast_calls only), kept for the client's life
        self._discovery: tuple[Any, asyncio.Lock] | None = None  # (event loop, lock): one discovery at a time
        self._pools: list[_Pool] = []  # HTTP clients of the open episodes, EPISODES_PER_POOL each at most

    def backoff(self, attempt: int) -> float:
        """Seconds before retry ``attempt + 1``: base·2^attempt, times a jitter factor in [1, 2), capped."""
        return min(self.max_backoff_s, self.backoff_s * 2**attempt * (1 + random.random()))

    @asynccontextmanager
    async def episode(self, task: Task, queued: Any = None) -> AsyncIterator[EpisodeSession]:
        """Open an episode (retrying with backoff), yield it, always close and free it (``queued``: a context the
        wait for a session under ``max_sessions`` runs in; no other capacity of a local server is waited for).

        Every environment failure, during the episode or while closing it, leaves as ``EnvError``.
        """
        episode_id = uuid.uuid4().hex
        finished, body_error = False, None
        async with self._session_slot(queued):
            try:
                async with AsyncExitStack() as stack:  # closes the MCP session, then frees the state on the server
                    session = await self._open_with_retries(stack, task, episode_id)
                    try:
                        yield session
                    except BaseException as exc:
                        body_error = exc
                        raise
                    finished = True
            except BaseException as exc:
                error = self._outcome(body_error or exc, exc, episode_id)
                if finished and isinstance(error, EnvError):
                    return  # the episode is done; only closing a dead connection failed
                if isinstance(error, EnvError):
                    self.stats.env_errors += 1
                if error is exc or error is body_error:
                    raise error  # noqa: B904 -- as the caller or the environment raised it, its own cause kept
                raise error from exc

    def _outcome(self, cause: BaseException, raised: BaseException, episode_id: str) -> BaseException:
        """What leaves ``episode``: an EnvError for environment failures; the caller's own exception (a bug, a
        real cancellation) as the caller raised it, not wrapped in the SDK's ExceptionGroup."""
        if isinstance(cause, EnvError):
            return cause
        if isinstance(raised, BaseExceptionGroup):  # the SDK's task group wraps what the episode raised
            inner = first_env_error(raised)
            if inner is not None and is_env_failure(raised):
                return inner
        for candidate in (cause, raised):
            if isinstance(candidate, asyncio.CancelledError) and is_sdk_cancellation(candidate):
                return EnvError(f"episode {episode_id} on {self.base_url}: the connection failed ({describe(raised)})")
            if isinstance(candidate, Exception) and is_env_failure(candidate):
                return EnvError(f"episode {episode_id} on {self.base_url}: {describe(candidate)}")
        return cause

    @asynccontextmanager
    async def _session_slot(self, queued: Any = None) -> AsyncIterator[None]:
        if self.sessions is None:
            yield
            return
        self.waiting += 1
        try:
            async with queued() if queued is not None else nullcontext():
                await self.sessions.acquire()
        finally:
            self.waiting -= 1
        try:
            yield
        finally:
            self.sessions.release()

    async def _open_with_retries(self, stack: AsyncExitStack, task: Task, episode_id: str) -> EpisodeSession:
        for attempt in range(self.open_attempts):
            attempt_stack = AsyncExitStack()
            try:
                session = await self._open(attempt_stack, task, episode_id)
                stack.push_async_exit(attempt_stack)
                self.stats.opened += 1
                return session
            except Exception as exc:
                await _aclose_ignoring(attempt_stack)
                if not is_env_failure(exc):
                    raise  # a bug, not the environment: never disguised as an env_error
                if not is_transient(exc) or attempt + 1 == self.open_attempts:
                    tries = f"after {attempt + 1} tries" if attempt else "(not retried)" if not is_transient(exc) else ""
                    raise EnvError(f"opening episode {episode_id} on {self.base_url} failed {tries}: {describe(exc)}") from exc
            self.stats.open_retries += 1
            await asyncio.sleep(self.backoff(attempt))
        raise AssertionError("unreachable")

    async def _open(self, stack: AsyncExitStack, task: Task, episode_id: str) -> EpisodeSession:
        http = await stack.enter_async_context(self._pooled_http())
        body = {"episode_id": episode_id, "env_variables": task.env_variables, "initial_state": task.initial_state}
        async with self.limit:
            seeded = await http.post("/episodes", json=body)
        seeded.raise_for_status()
        start = seeded.json()["state"]  # freshly parsed: no one else holds it
        state = ServerState(http, episode_id)
        stack.push_async_callback(state.free_quietly)  # from here on the server holds state for us
        if self.fast_calls:
            server = await self._server_info(http)
            if is_stateless(server.protocol_version):  # nothing more to open: each tool call is one POST
                caller = ToolCaller(http, f"{self.base_url}/mcp", server.protocol_version, {EPISODE_HEADER: episode_id})
                return EpisodeSession(self, None, state, episode_id, task, start, list(server.tools), caller)
        own = await stack.enter_async_context(_http_client(self.open_timeout_s, headers={EPISODE_HEADER: episode_id}))
        mcp, tools, _ = await self._sdk_session(stack, own)
        return EpisodeSession(self, mcp, state, episode_id, task, start, list(tools))

    async def _server_info(self, http: Any) -> ServerInfo:
        """The server's protocol version and tools, asked once per client (the first opener asks, the others wait)."""
        loop = asyncio.get_running_loop()
        if self._discovery is None or self._discovery[0] is not loop:
            self._discovery = (loop, asyncio.Lock())
        async with self._discovery[1]:
            if self.server is None:
                async with AsyncExitStack() as stack:
                    _, tools, version = await self._sdk_session(stack, http)
                    self.server = ServerInfo(version, tuple(tools))
                self.stats.discovered += 1
        return self.server

    async def _sdk_session(self, stack: AsyncExitStack, http: Any) -> tuple[Any, list[ToolSpec], str]:
        """An MCP SDK session over ``http``, the tools it lists and the protocol version it negotiated; EnvError
        on an empty list."""
        mcp, version = await stack.enter_async_context(mcpcompat.session(f"{self.base_url}/mcp", http, self.open_timeout_s))
        async with self.limit:
            listed = await mcp.list_tools()
        tools = [ToolSpec(t.name, t.description or "", mcpcompat.input_schema(t)) for t in listed.tools]
        if not tools:  # seen in production under load ("no tools found"): retried like a connection error
            raise EnvError(f"{self.base_url} listed no tools")
        return mcp, tools, version

    @asynccontextmanager
    async def _pooled_http(self) -> AsyncIterator[Any]:
        """An HTTP client (connection pool) shared with at most EPISODES_PER_POOL - 1 other open episodes; made
        when all are full, closed by its last user (so none outlives the event loop that made it)."""
        pool = next((p for p in self._pools if p.users < EPISODES_PER_POOL), None)
        if pool is None:
            pool = _Pool(_http_client(self.open_timeout_s, base_url=self.base_url))
            self._pools.append(pool)
        pool.users += 1
        try:
            yield pool.http
        finally:
            pool.users -= 1
            if pool.users == 0:
                self._pools.remove(pool)
                await pool.http.aclose()


@dataclass
class _Pool:
    http: Any
    users: int = 0


@functools.cache
def _ssl_context() -> Any:
    """The default TLS context, built once: building it reads the CA bundle (~30 ms, per client otherwise)."""
    return mcpcompat.ssl_context()


def _http_client(timeout_s: float, **kwargs: Any) -> Any:
    http = mcpcompat.http
    return http.AsyncClient(timeout=http.Timeout(timeout_s), verify=_ssl_context(), **kwargs)


def is_stateless(protocol_version: str) -> bool:
    """A protocol version on which each request stands alone (no session id), so a tool call is one POST."""
    return mcpcompat.is_stateless(protocol_version)


async def _aclose_ignoring(stack: AsyncExitStack) -> None:
    try:
        await stack.aclose()
    except BaseException as exc:  # closing a half-open connection may raise anything the transport raises
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
