"""``tools/call`` as one plain JSON-RPC POST, for servers that negotiated a stateless MCP protocol (2026-07-28+).

Why: the SDK's client spends ~2× the CPU of a plain HTTP round trip per call (anyio streams, a request
dispatcher, per-message validation), and on a 2-core trial the client shares the cores with the server
and the model. On the stateless protocol a tool call is self-contained (no session id), so after the SDK
has opened the session (``server/discover``, ``tools/list``) the call itself can be one POST with the
same headers and ``_meta`` the SDK sends, on the same HTTP client (or a shared one, with the episode's own
headers added per request). JSON and SSE responses are both read;
a server request inside the stream (sampling, elicitation) is not supported here and is an error.
Leaves out: older, stateful protocol versions (the SDK's own ``call_tool`` serves those).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from toolenvs.outcomes import FAILURE_META, Failure

PROTOCOL_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO = {"name": "grpo-sweep", "version": "1"}


class RpcError(Exception):
    """The server answered the call with a JSON-RPC error or an unreadable body."""


class ToolCaller:
    """Calls tools on ``url`` through ``http`` (an ``AsyncClient`` of ``mcpcompat.http``), adding ``headers`` to each request."""

    def __init__(self, http: Any, url: str, protocol_version: str, headers: dict[str, str] | None = None):
        self.http = http
        self.url = url
        self.protocol_version = protocol_version
        self.headers = headers or {}
        self._ids = itertools.count(1_000_000)  # apart from the SDK's ids on the same connection

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The ``result`` object of ``tools/call``: ``{"content": [...], "isError": bool, ...}``."""
        request_id = next(self._ids)
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": arguments,
                "_meta": {
                    PROTOCOL_META: self.protocol_version,
                    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": self.protocol_version,
            "mcp-method": "tools/call",
            "mcp-name": name,
            **self.headers,
        }
        response = await self.http.post(self.url, content=json.dumps(body), headers=headers, timeout=timeout_s)
        response.raise_for_status()
        kind = response.headers.get("content-type", "")
        message = _from_sse(response.text, request_id) if kind.startswith("text/event-stream") else response.json()
        if "error" in message:
            raise RpcError(f"tools/call {name}: {message['error'].get('message', message['error'])}")
        if message.get("id") != request_id or not isinstance(message.get("result"), dict):
            raise RpcError(f"tools/call {name}: unexpected reply {str(message)[:200]}")
        return message["result"]


def _from_sse(text: str, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response with our id among an SSE stream's ``data:`` events."""
    for event in text.split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
        if not data:
            continue
        message = json.loads(data)
        if "method" in message and "id" in message:
            raise RpcError(f"server sent a request ({message['method']}) this client does not answer")
        if message.get("id") == request_id:
            return message
    raise RpcError("the event stream ended without a response")


def result_text(result: dict[str, Any]) -> tuple[str, bool, str | None]:
    """The text blocks of a ``CallToolResult`` joined, its ``isError`` flag and, for an error, its failure kind."""
    text = "".join(block.get("text", "") for block in result.get("content", []) if isinstance(block, dict))
    failed = bool(result.get("isError", False))
    return text, failed, failure_kind(result.get("_meta"), failed)


def failure_kind(meta: Any, failed: bool) -> str | None:
    """A tool error's kind as the server wrote it in ``_meta``; ``tool_error`` when it wrote none."""
    if not failed:
        return None
    kind = meta.get(FAILURE_META) if isinstance(meta, dict) else None
    return kind if kind in Failure.ALL else Failure.TOOL_ERROR
