"""How a value reads where people see it: the live table and lines, the leaderboard, a notification."""

from __future__ import annotations

from typing import Any


def fmt(value: Any, digits: str = ".3f") -> str:
    """``-`` for none, a float below 0.01 in scientific notation, another with ``digits``, anything else as it prints."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2e}" if 0 < abs(value) < 1e-2 else f"{value:{digits}}"
    return str(value)
