"""One episode on an app server, as the trainer's episode loop sees it: its tools, its calls, its score.

``EpisodeSession`` is what ``toolenvs.client.EnvClient.episode`` yields: the seeded start state, the tools, each
tool call (one POST on stateless protocols, the SDK's ``call_tool`` on stateful ones) with the environment's
failures turned into ``EnvError``, and the score, which reads and frees the episode's state on the server in one
request. Leaves out: opening, retrying and pooling connections (``toolenvs.client``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolenvs import mcpcompat
from toolenvs.errors import EnvError
from toolenvs.faults import describe, is_sdk_cancellation
from toolenvs.outcomes import Failure
from toolenvs.rpc import ToolCaller, failure_kind, result_text
from toolenvs.task import Task
from toolenvs.verify import score_async


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool
    failure: str | None = None  # an error's kind (toolenvs.outcomes.Failure), as the environment named it


@dataclass(frozen=True)
class ServerInfo:
    """What a server says about itself once: the protocol version it speaks and its tools."""

    protocol_version: str
    tools: tuple[ToolSpec, ...]


class ServerState:
    """An episode's state on the server: read, read and freed in one request (``take``), or freed on close."""

    def __init__(self, http: Any, episode_id: str):
        self.http = http
        self.path = f"/episodes/{episode_id}"
        self.final: dict[str, Any] | None = None  # once taken: the server holds nothing for us any more

    async def read(self) -> dict[str, Any]:
        return self.final if self.final is not None else self._state(await self.http.get(self.path))

    async def take(self) -> dict[str, Any]:
        if self.final is None:
            self.final = self._state(await self.http.delete(self.path))  # DELETE answers with what it freed
        return self.final

    async def free_quietly(self) -> None:
        """Free it unless taken; failing here costs nothing (a dead server freed it)."""
        if self.final is not None:
            return
        try:
            await self.http.delete(self.path)
        except Exception:
            pass

    def _state(self, response: Any) -> dict[str, Any]:
        if response.status_code != 200:
            raise EnvError(f"final state of {self.path.removeprefix('/episodes/')}: HTTP {response.status_code}")
        return response.json()


class EpisodeSession:
    """One episode on the server: its seeded start state, its tools, and how its tool calls travel (one POST
    each, or the SDK session ``mcp`` on stateful protocols)."""

    def __init__(
        self,
        client: Any,  # its EnvClient: the request cap (limit), the call timeout and the stats
        mcp: Any,
        state: ServerState,
        episode_id: str,
        task: Task,
        start: dict[str, Any],
        tools: list[ToolSpec],
        caller: ToolCaller | None = None,
    ):
        self._client = client
        self._mcp = mcp
        self._caller = caller  # the one-POST fast path on stateless protocols; None: the SDK's call_tool
        self._state = state
        self._tool_names = {t.name for t in tools}
        self.episode_id = episode_id
        self.task = task
        self.start_state = start
        self.tools = tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call a tool; an unknown tool name is the agent's error, a transport failure is an EnvError."""
        if self._state.final is not None:
            raise RuntimeError(f"episode {self.episode_id} was scored: its state is freed, no more tool calls")
        if name not in self._tool_names:
            return ToolResult(f"error: unknown tool {name}", True, Failure.UNKNOWN_TOOL)
        self._client.stats.tool_calls += 1
        try:
            async with self._client.limit:
                if self._caller is not None:
                    return ToolResult(*result_text(await self._caller.call(name, arguments, self._client.call_timeout_s)))
                text, failed, meta = await mcpcompat.call_tool(self._mcp, name, arguments, self._client.call_timeout_s)
        except asyncio.CancelledError as exc:
            if not is_sdk_cancellation(exc):
                raise  # our own task is being cancelled: let it be
            raise EnvError(f"tool call {name}: the session's connection failed (server gone?)") from exc
        except Exception as exc:  # transport and timeout errors of every shape the SDK raises
            if type(exc).__name__.endswith("Timeout") or (isinstance(exc, mcpcompat.MCPError) and "timed out" in str(exc).lower()):
                # httpx's ReadTimeout, ConnectTimeout, ...; the SDK's own read timeout is an MCPError that says so
                raise EnvError(f"tool call {name} timed out after {self._client.call_timeout_s:g}s ({describe(exc)})") from exc
            raise EnvError(f"tool call {name} failed: {describe(exc)}") from exc
        return ToolResult(text, failed, failure_kind(meta, failed))

    async def final_state(self) -> dict[str, Any]:
        """The episode's state on the server now (after ``score``: the state it scored)."""
        return await self._state.read()

    async def score(self, conversation: Sequence[Mapping[str, Any]] | None = None) -> float:
        """The verifier's reward for the final state, read and freed in one request; VerifierError (an EnvError)
        when untrusted code fails. Ends the episode: later tool calls raise. Our verifiers read the state
        only (``conversation`` is for a hosted judge, ``toolenvs.fleet``)."""
        return await score_async(self.task, self.start_state, await self._state.take())
