"""Which raised things are the environment's failure, in whatever shape the MCP SDK raises them.

A dead server surfaces as a ``CancelledError`` from the SDK's task group (a BaseException), as
``ExceptionGroup[ConnectError]`` on leaving a session, as an ``MCPError`` on a timeout; a tool that reports an
error is no failure at all (a result with ``is_error``). These predicates tell them apart for the client
(``toolenvs.client``) and the session (``toolenvs.session``), and say which are worth retrying.
"""

from __future__ import annotations

import asyncio

from toolenvs import mcpcompat
from toolenvs.errors import EnvError
from toolenvs.rpc import RpcError


def is_sdk_cancellation(exc: BaseException) -> bool:
    """A CancelledError the SDK's anyio task group raised into our task because its connection failed.

    anyio marks its cancellations with this message and tells them apart the same way
    (``anyio._backends._asyncio.is_anyio_cancellation``); a cancellation of our own task has no such message.
    """
    while isinstance(exc, asyncio.CancelledError):
        if exc.args and isinstance(exc.args[0], str) and exc.args[0].startswith("Cancelled via cancel scope "):
            return True
        exc = exc.__context__  # type: ignore[assignment]
    return False


def first_env_error(exc: BaseException) -> EnvError | None:
    """The first EnvError inside a group (keeps a VerifierError's outcome when the SDK wrapped it)."""
    if isinstance(exc, EnvError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = first_env_error(inner)
            if found is not None:
                return found
    return None


def is_env_failure(exc: BaseException) -> bool:
    """Transport errors, timeouts and protocol errors, alone or grouped (as the SDK's task groups raise them)."""
    import anyio

    http = mcpcompat.http
    if isinstance(exc, BaseExceptionGroup):
        return all(is_env_failure(e) or isinstance(e, asyncio.CancelledError) for e in exc.exceptions)
    # a stream the SDK closed under a call that timed out (stateful protocols) is the connection's failure too
    closed = (anyio.BrokenResourceError, anyio.ClosedResourceError)
    return isinstance(exc, (EnvError, RpcError, http.TransportError, http.HTTPStatusError, mcpcompat.MCPError, OSError, TimeoutError, *closed))


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: anything but an HTTP 4xx other than 429 (a wrong URL or a rejected seed stays wrong)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(is_transient(e) for e in exc.exceptions)
    if isinstance(exc, mcpcompat.http.HTTPStatusError):
        status = exc.response.status_code
        return status >= 500 or status == 429
    return True


def describe(exc: BaseException) -> str:
    """The innermost messages of an exception (group), one line; an HTTP error status with the server's reason."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    if isinstance(exc, mcpcompat.http.HTTPStatusError):
        response, reason = exc.response, _reason(exc.response)
        return f"HTTP {response.status_code} {response.reason_phrase} from {exc.request.method} {exc.request.url}" + (f": {reason}" if reason else "")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


REASON_CHARS = 500  # of a server's error body, in one line


def _reason(response) -> str:
    """What the server said of an error status: its JSON ``error`` (or ``detail``, ``message``), else its text; '' when
    the body was not read (a stream) or says nothing."""
    try:
        text = response.text
    except Exception:  # a streamed body not read: the status alone
        return ""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        said = next((body[k] for k in ("error", "detail", "message") if isinstance(body.get(k), str) and body[k].strip()), None)
        text = said if said is not None else text
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."
