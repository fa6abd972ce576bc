from __future__ import annotations

import pytest

from toolenvs.protocol import Done, Malformed, ToolCall, format_call, parse_action, system_prompt, tool_signature


def test_tool_call_round_trip():
    call = ToolCall("book_hotel", {"hotel_id": "H01", "nights": 2})
    assert parse_action(format_call(call)) == call


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<done>", Done()),
        ("all set <done> <tool_call>{}</tool_call>", Done()),
        ('<tool_call>{"name": "list_bookings"}</tool_call>', ToolCall("list_bookings", {})),
        ('<tool_call>{"name": "x", "arguments": {"a": 1}}</tool_call> <done>', ToolCall("x", {"a": 1})),
    ],
)
def test_actions(text, expected):
    assert parse_action(text) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("I will book it.", "no action found"),
        ('<tool_call>{"name": "x"', "missing </tool_call>"),
        ('<tool_call>{"name": x}</tool_call>', "not valid JSON"),
        ('<tool_call>["x"]</tool_call>', '"name"'),
        ('<tool_call>{"name": "x", "arguments": [1]}</tool_call>', '"arguments" must be an object'),
    ],
)
def test_malformed_answers_are_errors_not_crashes(text, error):
    action = parse_action(text)
    assert isinstance(action, Malformed)
    assert error in action.error


def test_system_prompt_names_user_date_and_tools():
    sig = tool_signature("book_hotel", {"properties": {"hotel_id": {}, "check_in": {}, "nights": {}}})
    text = system_prompt([sig], {"CURRENT_DATE": "2026-03-01", "LOGGED_IN_USER": "alice", "LOGGED_IN_NAME": "Alice Martin"})
    assert "book_hotel(hotel_id, check_in, nights)" in text
    assert "Alice Martin (alice)" in text and "2026-03-01" in text
