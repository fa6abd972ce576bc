"""The shape each of a sweep's JSON records must have to be read back (``leaderboard.json``, ``confirm.json``,
``sweep_config.json``), as a problem in words, or None when it reads. A record overwritten or hand-edited into another
shape was a traceback in whichever reader met it first (``report``, ``confirm``); its readers name the file with this.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from configkit.base import ConfigError

LEADERBOARD = "leaderboard.json"
CONFIRMATION = "confirm.json"


def parsed(text: str, damaged: Callable[[str], str], problem: Callable[[Any], str | None] | None = None) -> Any:
    """A record's data from its text. Empty, not JSON (cut mid-write, overwritten), nested past what Python reads, or of
    another shape than ``problem`` reads: a ConfigError of ``damaged(why)``, never a traceback."""
    if not text.strip():
        raise ConfigError(damaged("empty"))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(damaged(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")) from None
    except RecursionError:
        raise ConfigError(damaged("nested too deep to read")) from None
    except ValueError as exc:  # JSON Python will not read: a whole number of more than 4300 digits
        raise ConfigError(damaged(f"not readable: {exc}")) from None
    if problem is not None and (why := problem(data)):
        raise ConfigError(damaged(why))
    return data


def kind(value: Any) -> str:
    """A JSON value's kind in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {dict: "an object", list: "a list", str: "text", int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def leaderboard_problem(rows: Any) -> str | None:
    """A list of ranked rows, each with its trial id (``trial``), its settings (``config``, an object) and a gain that is
    a number or null."""
    if not isinstance(rows, list):
        return f"{kind(rows)}, not the list of ranked trials"
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            return f"row {i} is {kind(row)}, not a ranked trial"
        if not isinstance(row.get("trial"), str):
            return f"row {i} has no trial id ('trial')"
        if not isinstance(row.get("config"), dict):
            return f"row {i} (trial {row['trial']}): 'config' is {kind(row.get('config'))}, not the trial's settings"
        if row.get("gain") is not None and not _number(row["gain"]):
            return f"row {i} (trial {row['trial']}): 'gain' is {kind(row['gain'])}, not a number"
    return None


def confirmation_problem(data: Any) -> str | None:
    """An object with the confirmed ``settings`` (each its ``setting``, ``original_rank`` and gains) and the fresh ``seeds``."""
    if not isinstance(data, dict):
        return f"{kind(data)}, not a confirmation"
    settings, seeds = data.get("settings"), data.get("seeds", [])
    if not isinstance(settings, list) or not isinstance(seeds, list):
        return "no list of confirmed 'settings' and 'seeds'"
    for i, s in enumerate(settings, start=1):
        if not (isinstance(s, dict) and isinstance(s.get("setting"), dict) and _number(s.get("original_rank"))):
            return f"setting {i} is no confirmed setting (its 'setting' and 'original_rank')"
        gains = s.get("gains", [])
        if not isinstance(gains, list) or not all(g is None or _number(g) for g in [*gains, s.get("mean"), s.get("original_gain")]):
            return f"setting {i}: its gains are not numbers"
    return None


def saved_config_problem(data: Any) -> str | None:
    """The saved sweep config as the report reads it: an object whose sections are objects, its score window a whole number."""
    if not isinstance(data, dict):
        return f"{kind(data)}, not the sweep's config"
    for section in ("trainer", "scheduler", "search", "space", "stopping"):
        if data.get(section) is not None and not isinstance(data[section], dict):
            return f"'{section}' is {kind(data[section])}, not a section"
    evals = (data.get("trainer") or {}).get("eval")
    if evals is not None and not isinstance(evals, dict):
        return f"'trainer.eval' is {kind(evals)}, not a section"
    window = (evals or {}).get("score_window")
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        return f"'trainer.eval.score_window' = {window!r}, not a whole number of 1 or more"
    return None
