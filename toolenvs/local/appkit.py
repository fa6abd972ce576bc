"""What every local app shares: the error the agent sees, argument parsing, in-process calls and replay,
and the declarative ``changes`` verifier that compares an episode's final state with its start.

An app's state is a JSON-able dict: ``user`` and ``today`` from the task's ``env_variables``, a
``counters`` dict for new ids, and named collections ``{id: record}``. Records are never deleted (a
status field changes instead), so a verifier can say exactly which records were created or updated and
require that nothing else changed. The hotel app keeps its own state shape and verifiers (its task set,
tools and results are frozen: the shipped base policies were built on them) and uses the rest of the kit.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterable
from datetime import date
from typing import Any, NamedTuple

from toolenvs.outcomes import Failure

State = dict[str, Any]
USERS = {"alice": "Alice Martin", "bob": "Bob Chen", "carol": "Carol Diaz", "dan": "Dan Okafor", "erin": "Erin Novak"}


class AppError(Exception):
    """A tool error the agent is shown; its ``kind`` (``toolenvs.outcomes.Failure``) travels with it to the
    trajectory, so the report counts failures by kind rather than by their words."""

    kind = Failure.INVALID_ARGUMENT


class InvalidArgument(AppError):
    """An argument's value is refused (a bad date, an empty title, a number out of range)."""


class NotFound(AppError):
    kind = Failure.NOT_FOUND


class PermissionDenied(AppError):
    kind = Failure.PERMISSION_DENIED


class Conflict(AppError):
    """The record's state does not allow it (already closed, sold out, past)."""

    kind = Failure.CONFLICT


class UnknownTool(AppError):
    kind = Failure.UNKNOWN_TOOL


def base_state(env_variables: dict[str, str]) -> State:
    """The fields every app's state starts with."""
    return {
        "user": env_variables.get("LOGGED_IN_USER", "guest"),
        "today": env_variables.get("CURRENT_DATE", "2026-01-01"),
        "counters": {},
    }


class SeedError(ValueError):
    """A task's ``initial_state`` (with its ``env_variables``) the app cannot start an episode's state from."""


def seeded(app: Any, env_variables: dict[str, Any], seed: dict[str, Any] | None) -> State:
    """The app's (an app module's) state for one episode from a task's seed; ``SeedError`` naming the first thing
    that did not fit (a record without its key field, a number where records were expected)."""
    try:
        return app.initial_state(env_variables, seed or {})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SeedError(f"{type(exc).__name__}: {exc}") from None


def keyed(records: Iterable[dict[str, Any]], key: str, defaults: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Seed records as a collection ``{str(record[key]): record}``, missing fields from ``defaults``."""
    return {str(r[key]): {**(defaults or {}), **copy.deepcopy(r)} for r in records}


def new_id(state: State, collection: str) -> int:
    """The next integer id of a collection: one past the largest seeded id (ids stay small numbers)."""
    counters = state["counters"]
    if collection not in counters:
        counters[collection] = max((int(k) for k in state[collection] if str(k).isdigit()), default=0) + 1
    value = counters[collection]
    counters[collection] = value + 1
    return value


def parse_date(value: Any, field: str) -> date:
    """An ISO date string; anything else (a number too) is the error the agent sees."""
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"invalid {field} {value!r}: use YYYY-MM-DD") from None


def future_date(state: State, value: Any, field: str) -> str:
    """An ISO date that is today or later, else the error the agent sees."""
    day = parse_date(value, field)
    if day < date.fromisoformat(state["today"]):
        raise InvalidArgument(f"{field} {day.isoformat()} is in the past")
    return day.isoformat()


def parse_time(value: Any, field: str) -> str:
    """``HH:MM`` on a 24-hour clock."""
    text = str(value)
    parts = text.split(":")
    if len(parts) != 2 or not all(p.isdigit() and len(p) == 2 for p in parts) or int(parts[0]) > 23 or int(parts[1]) > 59:
        raise InvalidArgument(f"invalid {field} {value!r}: use HH:MM")
    return text


def require_user(value: Any) -> str:
    """A known user name, else a not-found error listing none of them (the agent must look them up)."""
    if str(value) not in USERS:
        raise NotFound(f"user {value} not found")
    return str(value)


def in_range(value: Any, field: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{field} must be a whole number") from None
    if not low <= number <= high:
        raise InvalidArgument(f"{field} must be {low} to {high}")
    return number


def get(state: State, collection: str, record_id: Any, noun: str) -> dict[str, Any]:
    """A record by id, else ``<noun> <id> not found``."""
    record = state[collection].get(str(record_id))
    if record is None:
        raise NotFound(f"{noun} {record_id} not found")
    return record


def call(tools: dict[str, Callable[..., Any]], state: State, name: str, arguments: dict[str, Any]) -> Any:
    """Run a tool in-process (reference replay and tests); raises AppError like the server would."""
    if name not in tools:
        raise UnknownTool(f"unknown tool {name}")
    try:
        return tools[name](state, **arguments)
    except TypeError as exc:
        raise InvalidArgument(f"bad arguments for {name}: {exc}") from None


def replay(initial_state: Callable[..., State], tools: dict[str, Callable[..., Any]], env_variables: dict[str, str],
           seed: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> tuple[State, State, list[Any]]:
    """Run calls in-process from a fresh state; returns (start, final, results) with errors as strings."""
    state = initial_state(env_variables, seed)
    start = copy.deepcopy(state)
    results: list[Any] = []
    for name, arguments in calls:
        try:
            results.append(call(tools, state, name, arguments))
        except AppError as exc:
            results.append(f"error: {exc}")
    return start, state, results


# --- the declarative verifier ----------------------------------------------------------------------


def _same(actual: Any, expected: Any) -> bool:
    """Equality that forgives what a person would: case and spacing of text, order of lists."""
    if isinstance(expected, str) and isinstance(actual, str):
        return " ".join(actual.split()).lower() == " ".join(expected.split()).lower()
    if isinstance(expected, list) and isinstance(actual, list):
        return sorted(map(str, actual)) == sorted(map(str, expected))
    return actual == expected


def matches(record: dict[str, Any], fields: dict[str, Any]) -> bool:
    return all(k in record and _same(record[k], v) for k, v in fields.items())


def _created_match(new: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> bool:
    """Each wanted field set matches a distinct new record, and there are no other new records."""
    if len(new) != len(wanted):
        return False
    free = list(new)
    for fields in wanted:
        hit = next((r for r in free if matches(r, fields)), None)
        if hit is None:
            return False
        free.remove(hit)
    return True


def _strip(record: dict[str, Any], ignored: frozenset[str] | set[str]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ignored}


def verify_changes(final: State, start: State, spec: dict[str, Any], collections: Iterable[str], ignored: frozenset[str] = frozenset()) -> float:
    """1.0 iff the episode made exactly the changes ``spec`` names and nothing else.

    ``spec["created"]``: ``{collection: [fields, ...]}``, one new record per entry, matching those fields.
    ``spec["updated"]``: ``{collection: {id: fields}}``, existing records whose final values match
    (their other fields unchanged). Every other existing record must equal its start (``ignored`` fields aside, e.g. a message's read
    flag), and no record may disappear.
    """
    created, updated = spec.get("created", {}), spec.get("updated", {})
    for name in collections:
        before, after = start[name], final.get(name, {})
        if any(rid not in after for rid in before):
            return 0.0
        new = [r for rid, r in after.items() if rid not in before]
        if not _created_match(new, created.get(name, [])):
            return 0.0
        wanted = updated.get(name, {})
        if any(str(rid) not in before for rid in wanted):
            return 0.0
        for rid, record in before.items():
            fields = wanted.get(rid, {})
            if not matches(after[rid], fields) or _strip(after[rid], ignored | set(fields)) != _strip(record, ignored | set(fields)):
                return 0.0
    return 1.0


def verify(env_key: str, verifiers: dict[str, Callable[..., float]], final: State, start: State, spec: dict[str, Any]) -> float:
    """Run the verifier named by ``spec['type']``; an unknown type lists the known ones."""
    kind = spec.get("type")
    if kind not in verifiers:
        raise ValueError(f"unknown {env_key} verifier {kind!r} (known: {', '.join(sorted(verifiers))})")
    return verifiers[kind](final, start, spec)


# --- what a verifier spec must hold, checked before anything runs ---------------------------------------


class SpecField(NamedTuple):
    """One field an app's own verifier reads from its spec: what it must be, in words, and the test of a value."""

    what: str
    ok: Callable[[Any], bool]


def is_day(value: Any) -> bool:
    """An ISO date, YYYY-MM-DD (a task's CURRENT_DATE, a date field of a verifier spec)."""
    try:  # the pattern too: Python reads '2026-W05-1' (a week date) as well, and the verifiers compare the text
        return isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) is not None and date.fromisoformat(value) is not None
    except ValueError:
        return False


TEXT = SpecField("text", lambda v: isinstance(v, str) and v.strip() != "")
DAY = SpecField("a date, YYYY-MM-DD", is_day)
COUNT = SpecField("a whole number, 1 or more", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
CHANGES_KEYS = ("created", "updated")


def spec_problem(collections: tuple[str, ...], fields: dict[str, dict[str, SpecField]], spec: dict[str, Any]) -> str | None:
    """Why a verifier spec of a known type cannot be judged as its author meant, or None: a field its verifier reads
    missing or of the wrong kind (it failed mid-episode with a KeyError, or never matched: ``"nights": "5"``), a key
    it never reads (a misspelling the verifier ignores), a ``changes`` entry naming a collection the app lacks (ignored:
    the task passed with no change made)."""
    kind = spec.get("type")
    if kind == "changes" and collections:
        return _changes_problem(collections, spec)
    wanted = fields.get(kind)
    if wanted is None:
        return None
    needs = ", ".join(f"{key}: {field.what}" for key, field in wanted.items())
    missing = [key for key in wanted if key not in spec]
    if missing:
        return f"lacks {', '.join(repr(k) for k in missing)} (a {kind!r} verifier reads {needs})"
    odd = [f"{key!r} = {spec[key]!r} (must be {field.what})" for key, field in wanted.items() if not field.ok(spec[key])]
    if odd:
        return "; ".join(odd)
    unknown = sorted(set(spec) - set(wanted) - {"type"})
    if unknown:
        return f"key(s) {', '.join(repr(k) for k in unknown)} that a {kind!r} verifier does not read (it reads {needs})"
    return None


def _changes_problem(collections: tuple[str, ...], spec: dict[str, Any]) -> str | None:
    known = ", ".join(collections)
    unknown = sorted(set(spec) - set(CHANGES_KEYS) - {"type"})
    if unknown:
        return f"key(s) {', '.join(repr(k) for k in unknown)} that a 'changes' verifier does not read (it reads created, updated)"
    for key, entry in (("created", lambda v: isinstance(v, list) and all(isinstance(f, dict) for f in v)),
                       ("updated", lambda v: isinstance(v, dict) and all(isinstance(f, dict) for f in v.values()))):
        value = spec.get(key, {})
        if not isinstance(value, dict):
            return f"{key!r} = {value!r} (must map a collection to its records' fields; collections: {known})"
        stray = sorted(set(value) - set(collections))
        if stray:
            return f"{key!r} names collection(s) {', '.join(repr(c) for c in stray)} the app does not have (collections: {known})"
        shape = "a list of field sets" if key == "created" else "a map from a record id to its fields"
        bad = [c for c, v in value.items() if not entry(v)]
        if bad:
            return f"{key!r}[{bad[0]!r}] = {value[bad[0]]!r} (must be {shape})"
    return None


class AppInterface(NamedTuple):
    """What an app module exports beside its tools (``toolenvs.local`` contract): the verifiers by type, and
    in-process ``call``, ``verify`` and ``replay`` bound to the app's own tools and state, and ``spec_problem``:
    why a task's verifier spec cannot be judged (``spec_problem`` above), or None."""

    VERIFIERS: dict[str, Callable[..., float]]
    call: Callable[[State, str, dict[str, Any]], Any]
    verify: Callable[[State, State, dict[str, Any]], float]
    replay: Callable[[dict[str, str], dict[str, Any], list[tuple[str, dict[str, Any]]]], tuple[State, State, list[Any]]]
    spec_problem: Callable[[dict[str, Any]], str | None]


def app_interface(env_key: str, tools: dict[str, Callable[..., Any]], initial_state: Callable[..., State], collections: Iterable[str],
                  ignored: frozenset[str] = frozenset(), verifiers: dict[str, Callable[..., float]] | None = None,
                  fields: dict[str, dict[str, SpecField]] | None = None) -> AppInterface:
    """The declarative ``changes`` verifier over ``collections`` (none without collections), the app's own
    ``verifiers`` by type (``fields``: what each reads from its spec), and the in-process entry points of one app."""
    collections = tuple(collections)
    changes = {"changes": functools.partial(verify_changes, collections=collections, ignored=ignored)} if collections else {}
    verifiers = {**changes, **(verifiers or {})}
    return AppInterface(
        verifiers,
        functools.partial(call, tools),
        functools.partial(verify, env_key, verifiers),
        functools.partial(replay, initial_state, tools),
        functools.partial(spec_problem, collections, fields or {}),
    )
