"""A sweep's JSON records read back: every way a file can be damaged is a ConfigError naming why, never a traceback."""

from __future__ import annotations

import pytest

from configkit.base import ConfigError
from sweep.store.records import leaderboard_problem, parsed


@pytest.mark.parametrize(("text", "why"), [
    ("", "empty"),
    (" \n", "empty"),
    ('[{"trial": "a", ', "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 17"),
    ("[" * 100_000 + "]" * 100_000, "nested too deep to read"),
    ("1" * 5000, "not readable: Exceeds the limit (4300 digits) for integer string conversion"),
    ("{}", "an object, not the list of ranked trials"),
])
def test_a_damaged_record_says_why(text, why):
    with pytest.raises(ConfigError) as err:
        parsed(text, lambda reason: f"board.json: {reason}", leaderboard_problem)
    assert str(err.value).startswith(f"board.json: {why}"), str(err.value)


def test_a_whole_record_reads():
    rows = [{"trial": "a", "config": {"optim.lr": 0.001}, "gain": 0.1}]
    assert parsed('[{"trial": "a", "config": {"optim.lr": 0.001}, "gain": 0.1}]', str, leaderboard_problem) == rows
