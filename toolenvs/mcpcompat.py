"""The two generations of the ``mcp`` SDK behind one set of names: 2.x (what a plain install gets) and 1.x
(>= 1.24: what OpenEnv's Fleet code imports, so the ``fleet`` extra installs it).

Our servers and our client use only what is here, so they run on either. The differences that matter,
each read in the SDKs' own code: the server class (``MCPServer`` / ``FastMCP``), where the JSON-response
setting goes and how a tool reads its request's headers; the client's session and transport (2.x
``Client`` over ``httpx2``, 1.x ``ClientSession`` over ``httpx``, whose ``streamable_http_client`` yields a
third value); field names (``input_schema`` / ``inputSchema``, ``is_error`` / ``isError``); timeouts (a float
in 2.x, a ``timedelta`` in 1.x, which fails only after the request went out when given a float); the error
class (``MCPError`` / ``McpError``); and the stateless protocol (2026-07-28+), which only 2.x speaks: a 1.x
server answers a bare ``tools/call`` POST with 400, so our one-POST call path is 2.x only. Both generations
give the same tool input schemas and the same argument-error texts, and ``_meta`` on a tool's error result
crosses intact in every direction (1.x client to 2.x server and back). Leaves out: anything the project
does not call.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

V2 = importlib.util.find_spec("mcp.server.mcpserver") is not None

if V2:
    import httpx2 as http
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp_types import CallToolResult, TextContent
else:  # mcp 1.x
    import httpx as http
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as MCPServer
    from mcp.server.fastmcp.exceptions import ToolError
    from mcp.shared.exceptions import McpError as MCPError
    from mcp.types import CallToolResult, TextContent

__all__ = ["V2", "Context", "MCPError", "ToolError", "http"]


# --- server ------------------------------------------------------------------------------------------


def make_server(name: str, version: str, log_level: str = "WARNING", tracing: bool = False, check: Any = None) -> Any:
    """A server answering in plain JSON (not SSE); without ``tracing``, no OpenTelemetry span per call (2.x).
    ``check(tool, arguments)``: run on a call's raw arguments before the SDK validates (and coerces) them;
    a result it returns is the call's answer. Both SDKs route every call through ``call_tool``."""
    server_class = _checked(check) if check is not None else MCPServer
    if V2:
        server = server_class(name, version=version, log_level=log_level)
        if not tracing:  # a span per call costs CPU; local servers export none
            server.middleware[:] = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
        return server
    server = server_class(name, log_level=log_level, json_response=True, stateless_http=False)
    server._mcp_server.version = version  # 1.x takes no version argument; the initialize answer reads it here
    logging.getLogger("mcp.server.streamable_http").addFilter(_ClosedStandaloneStream())
    return server


def _checked(check: Any) -> type:
    class CheckedServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any, **kwargs: Any) -> Any:
            refused = check(name, arguments or {})
            if refused is not None:
                return refused
            return await super().call_tool(name, arguments, *rest, **kwargs)

    return CheckedServer


class _ClosedStandaloneStream(logging.Filter):
    """1.x logs an ERROR with a traceback whenever a client closes the session's standalone SSE stream (every
    episode, on 1.x): drop that one message, keep the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Error in standalone SSE")


def http_app(server: Any) -> Any:
    """The Starlette app serving ``/mcp`` and the server's custom routes."""
    return server.streamable_http_app(json_response=True) if V2 else server.streamable_http_app()


def request_headers(ctx: Any) -> Mapping[str, str]:
    """The HTTP headers of the call a tool is running for."""
    if V2:
        return ctx.headers or {}
    request = ctx.request_context.request
    return request.headers if request is not None else {}


def error_result(text: str, meta: dict[str, Any]) -> Any:
    """A tool's error as a result: the agent reads ``text``; ``meta`` reaches the client as ``_meta``."""
    content = [TextContent(type="text", text=text)]
    return CallToolResult(content=content, is_error=True, _meta=meta) if V2 else CallToolResult(content=content, isError=True, _meta=meta)


# --- client ------------------------------------------------------------------------------------------


@asynccontextmanager
async def session(url: str, http_client: Any, timeout_s: float) -> AsyncIterator[tuple[Any, str]]:
    """An initialized MCP session over ``http_client`` and the protocol version it negotiated."""
    from mcp.client.streamable_http import streamable_http_client

    if V2:
        from mcp import Client

        async with Client(streamable_http_client(url, http_client=http_client), read_timeout_seconds=timeout_s) as client:
            yield client, client.protocol_version
        return
    from mcp import ClientSession

    async with streamable_http_client(url, http_client=http_client) as (read, write, _), \
            ClientSession(read, write, read_timeout_seconds=timedelta(seconds=timeout_s)) as client:
        initialized = await client.initialize()
        yield client, initialized.protocolVersion


def input_schema(tool: Any) -> dict[str, Any]:
    return tool.input_schema if V2 else tool.inputSchema


async def call_tool(client: Any, name: str, arguments: dict[str, Any], timeout_s: float) -> tuple[str, bool, Any]:
    """(text, is_error, _meta) of one tool call through the SDK."""
    timeout = timeout_s if V2 else timedelta(seconds=timeout_s)
    result = await client.call_tool(name, arguments, read_timeout_seconds=timeout)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return text, bool(result.is_error if V2 else result.isError), result.meta


def is_stateless(protocol_version: str) -> bool:
    """A protocol on which each request stands alone (no session id), so a tool call is one POST (2.x only)."""
    if not V2:
        return False
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return protocol_version in MODERN_PROTOCOL_VERSIONS


def ssl_context() -> Any:
    """The HTTP library's default TLS context."""
    if V2:
        return http.create_ssl_context()
    import ssl

    import certifi

    return ssl.create_default_context(cafile=certifi.where())
