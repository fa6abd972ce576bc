"""The agent's answer protocol: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` or ``<done>``.

Parsing never raises: a malformed answer becomes ``Malformed(error)``, whose error text is shown to the
agent as the tool result. Also renders the system prompt that teaches the protocol.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
DONE = "<done>"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Done:
    pass


@dataclass(frozen=True)
class Malformed:
    error: str


Action = ToolCall | Done | Malformed

FORMAT_HINT = f'answer with {TOOL_CALL_OPEN}{{"name": ..., "arguments": {{...}}}}{TOOL_CALL_CLOSE} or {DONE}'


def parse_action(text: str) -> Action:
    """The first action in a model turn: a tool call, done, or what is wrong with it."""
    call_at = text.find(TOOL_CALL_OPEN)
    done_at = text.find(DONE)
    if call_at < 0 and done_at < 0:
        return Malformed(f"error: no action found; {FORMAT_HINT}")
    if call_at < 0 or 0 <= done_at < call_at:
        return Done()
    body_start = call_at + len(TOOL_CALL_OPEN)
    body_end = text.find(TOOL_CALL_CLOSE, body_start)
    if body_end < 0:
        return Malformed(f"error: missing {TOOL_CALL_CLOSE}")
    try:
        payload = json.loads(text[body_start:body_end])
    except json.JSONDecodeError:
        return Malformed("error: tool call is not valid JSON")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return Malformed('error: tool call needs a "name" string')
    arguments = payload.get("arguments", {})
    if not isinstance(arguments, dict):
        return Malformed('error: "arguments" must be an object')
    return ToolCall(payload["name"], arguments)


def format_call(call: ToolCall) -> str:
    """The canonical text of a tool call, as reference solutions are written."""
    return f"{TOOL_CALL_OPEN}{json.dumps({'name': call.name, 'arguments': call.arguments})}{TOOL_CALL_CLOSE}"


def format_result(payload: Any) -> str:
    """A tool's structured result as one compact line of JSON (strings pass through)."""
    return payload if isinstance(payload, str) else json.dumps(payload, separators=(", ", ": "))


def tool_signature(name: str, input_schema: dict[str, Any]) -> str:
    """``book_hotel(hotel_id, check_in, nights)`` from a tool's JSON schema."""
    return f"{name}({', '.join(input_schema.get('properties', {}))})"


def system_prompt(tool_signatures: list[str], env_variables: dict[str, str]) -> str:
    """The system message: who and when the agent is, its tools, and how to answer."""
    who = env_variables.get("LOGGED_IN_NAME", "a user")
    user = env_variables.get("LOGGED_IN_USER", "")
    today = env_variables.get("CURRENT_DATE", "")
    return (
        f"You act for {who} ({user}). Today is {today}.\n"
        f"Tools: {' '.join(tool_signatures)}\n"
        f"Each turn {FORMAT_HINT}."
    )
