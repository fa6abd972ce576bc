"""The task record users know (``task_key``, ``prompt``, ``env_key``, ...) and a loader that says what is wrong.

One schema for local and hosted tasks. A task is judged by exactly one of: ``verifier`` (a declarative
spec the local app's own verifier reads: ``{"type": ..., ...}``), ``verifier_code`` (untrusted Python
defining ``verify(final_state: dict) -> float``, run sandboxed by ``toolenvs.sandbox``), or ``verifier_func``
(a Fleet verifier: Python whose first top-level function takes the live environment, run by Fleet).

Files load as JSON lines, or as a JSON array (or ``{"tasks": [...]}``) as Fleet exports them. Fleet's own
field names are read as they are: ``key`` is ``task_key``, ``env_id`` is ``env_key``, ``version`` is
``env_version``, ``data_id`` is ``data_key``, ``task_modality`` is ``modality``; ``data_key``,
``data_version``, ``env_version`` and JSON-valued ``env_variables`` are kept verbatim. Computer-use tasks
are refused by name (this trainer acts through tool calls). The loader names every bad record with its
file, line or index, task and key (``read_tasks`` also returns the good ones, for a caller that goes on).
Leaves out: running verifiers (``toolenvs.verify``; Fleet runs its own) and checking that an ``env_key`` is
served anywhere.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from configkit.base import FILE_NAME_WORDS, ConfigError, StrictModel, is_file_name, read_text, validate

VERIFIER_FUNCTION = "verify"


class SolutionCall(StrictModel):
    """One tool call of a reference solution."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Task(StrictModel):
    """One task: what the agent is asked, where it acts, and how its final state is judged."""

    task_key: str = Field(min_length=1, description="Unique within a task set.")
    prompt: str = Field(min_length=1, description="What the agent is asked to do.")
    env_key: str = Field(min_length=1, description="Which environment serves the task (a local app or a Fleet env).")
    env_version: str | None = Field(None, description="The environment's version the task was written for (None: Fleet's newest).")
    data_key: str | None = Field(None, description="Fleet: the data set the instance is seeded with (Fleet export: data_id).")
    data_version: str | None = Field(None, description="Fleet: the data set's version (read with data_key).")
    env_variables: dict[str, Any] = Field(default_factory=dict, description="E.g. CURRENT_DATE, LOGGED_IN_USER; seed the state (Fleet takes any JSON value).")
    initial_state: dict[str, Any] = Field(default_factory=dict, description="App state seeded before the episode.")
    verifier: dict[str, Any] | None = Field(None, description="Declarative check of the final state: {'type': ..., ...}.")
    verifier_code: str | None = Field(
        None, min_length=1, description="Untrusted Python defining verify(final_state: dict) -> float; run sandboxed."
    )
    verifier_func: str | None = Field(
        None, min_length=1, description="Fleet's verifier: Python whose first top-level function takes the live environment; Fleet runs it."
    )
    solution: list[SolutionCall] = Field(default_factory=list, description="A reference sequence of tool calls.")
    modality: Literal["tool_use"] = Field("tool_use", description="Only tool use is trained here.")
    difficulty: int = Field(1, ge=1, description="Tool calls the reference solution needs.")

    @field_validator("env_key")
    @classmethod
    def _env_key_names_a_file(cls, value: str) -> str:
        """An env key names the eval's trajectory file (``{env_key}.jsonl``) and a part of its metrics' names
        (``reward/{env_key}/pass_at_1``): a '/' or '..' in it wrote outside the trial's folder and split the name."""
        if not is_file_name(value):
            version = " (a version goes in env_version: the env key is the name before the ':')" if ":" in value else ""
            raise ValueError(f"an env key is {FILE_NAME_WORDS}: it names the eval's trajectory file and its metrics{version}")
        return value

    @model_validator(mode="after")
    def _one_verifier(self) -> Task:
        problem = verifier_problem(self.verifier, self.verifier_code, self.verifier_func)
        if problem:
            raise ValueError(problem)
        return self


VERIFIERS = "'verifier' (a spec dict), 'verifier_code' (Python defining verify(final_state)) or 'verifier_func' (a Fleet verifier)"


def verifier_problem(verifier: Any, verifier_code: Any, verifier_func: Any = None) -> str | None:
    """Why a record's verifier fields are unusable, or None. Parses code without running it."""
    given = [name for name, value in (("verifier", verifier), ("verifier_code", verifier_code), ("verifier_func", verifier_func)) if value is not None]
    if len(given) != 1:
        without = " (a Fleet task without one is scored 0.0 by Fleet, silently)" if not given else f" (got {', '.join(given)})"
        return f"give exactly one of {VERIFIERS}{without}"
    if given == ["verifier"]:
        return None
    key = given[0]
    code = verifier_code if key == "verifier_code" else verifier_func
    if not isinstance(code, str):
        return f"key '{key}' must be a string of Python source, got {type(code).__name__}"
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"key '{key}' is not valid Python: {f'line {exc.lineno}: ' if exc.lineno else ''}{exc.msg}"
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    if key == "verifier_code" and not any(node.name == VERIFIER_FUNCTION for node in functions):
        return f"key 'verifier_code' must define a top-level function {VERIFIER_FUNCTION}(final_state: dict) -> float"
    if key == "verifier_func" and not any(node.args.args or node.args.vararg for node in functions):
        return "key 'verifier_func' must define a top-level function taking the environment (Fleet runs the first one defined)"
    return None


FLEET_NAMES = {"key": "task_key", "env_id": "env_key", "version": "env_version", "data_id": "data_key", "task_modality": "modality"}


def from_fleet_names(record: dict[str, Any]) -> dict[str, Any]:
    """A record with Fleet's export names read as ours (a name given both ways, with the same value, read once:
    with two values ``fleet_name_clashes`` names it)."""
    out = dict(record)
    for theirs, ours in FLEET_NAMES.items():
        if theirs in out:
            value = out.pop(theirs)
            out.setdefault(ours, value)
    return out


def fleet_name_clashes(record: dict[str, Any]) -> list[str]:
    """A field given under both names (Fleet's and ours) with two different values: which one is meant is
    not for the loader to guess."""
    return [f"keys '{theirs}' ({record[theirs]!r}) and '{ours}' ({record[ours]!r}) are one field (Fleet's name and ours) "
            "with two values: keep one" for theirs, ours in FLEET_NAMES.items()
            if theirs in record and ours in record and record[theirs] != record[ours]]


class _JsonObject(dict):
    """A JSON object as read, with the keys given twice in it or in the objects inside it (dotted): JSON
    keeps the last of them silently, as PyYAML would (the YAML configs refuse it too)."""

    repeated: tuple[str, ...] = ()


def _json_object(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj, repeated = _JsonObject(), []
    for key, value in pairs:
        if key in obj:
            repeated.append(key)
        obj[key] = value
        inner = [(key, value)] if isinstance(value, dict) else [(f"{key}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, list) else []
        repeated += [f"{where}.{name}" for where, item in inner for name in getattr(item, "repeated", ())]
    obj.repeated = tuple(dict.fromkeys(repeated))
    return obj


def _json(text: str) -> Any:
    """``json.loads`` whose objects remember their repeated keys (``_JsonObject``), for ``parse_task`` to name."""
    return json.loads(text, object_pairs_hook=_json_object)


def parse_task(record: Any, source: str) -> Task:
    """One record to a Task; ConfigError names ``source`` (file:line), the task and the key."""
    if not isinstance(record, dict):
        raise ConfigError(f"{source}: a task record must be a JSON object, got {type(record).__name__}")
    named = record.get("task_key", record.get("key"))
    if isinstance(named, str):
        source = f"{source} (task {named!r})"
    repeated = getattr(record, "repeated", ())
    if repeated:
        keys = ", ".join(f"'{key}'" for key in repeated)
        raise ConfigError(f"{source}: key {keys} appears twice in the record; JSON would keep the second silently: keep one")
    clashes = fleet_name_clashes(record)
    if clashes:
        raise ConfigError("\n".join(f"{source}: {clash}" for clash in clashes))
    record = from_fleet_names(record)
    if record.get("modality") == "computer_use":
        raise ConfigError(f"{source}: key 'modality' = 'computer_use': this trainer acts through tool calls only (allowed: tool_use); "
                          "filter computer-use tasks out of the file")
    problem = verifier_problem(record.get("verifier"), record.get("verifier_code"), record.get("verifier_func"))
    if problem:
        raise ConfigError(f"{source}: {problem}")
    return validate(Task, record, source)


def _records(path: Path) -> tuple[list[tuple[str, Any]], list[str]]:
    """(where, record) of each task in a file: JSON lines, or one JSON array or ``{"tasks": [...]}`` (Fleet's export);
    and a problem for each line that is not JSON. A file that cannot be read as any of these is a ConfigError."""
    text = read_text(path, "task file (JSON lines or a JSON array)")
    try:
        document = _one_document(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read as JSON; a task file is JSON lines, a JSON array of tasks or {{\"tasks\": [...]}}") from None
    shape = 'a task file is JSON lines, a JSON array of tasks or {"tasks": [...]}'
    if isinstance(document, list):
        records = [(f"{path}[{i}]", item) for i, item in enumerate(document)]
    elif isinstance(document, dict) and "tasks" in document and "prompt" not in document:
        if not isinstance(document["tasks"], list):
            raise ConfigError(f"{path}: key 'tasks' must be an array of tasks, got {type(document['tasks']).__name__}")
        records = [(f"{path}[{i}]", item) for i, item in enumerate(document["tasks"])]
    elif isinstance(document, dict) and not TASK_KEYS & set(document):  # {"items": [...]}: no task, and no task list either
        raise ConfigError(f"{path}: one JSON object with none of a task's keys (it has {', '.join(repr(k) for k in list(document)[:8])}); {shape}")
    else:
        records, problems = [], []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append((f"{path}:{lineno}", _json(line)))
                except (json.JSONDecodeError, RecursionError) as exc:
                    problems.append(f"{path}:{lineno}: not valid JSON: {exc}")
        if records or problems:
            return records, problems
    if not records:  # an empty file, array or list: every later message ("no training tasks left") would guess why
        raise ConfigError(f"{path}: no tasks in it; {shape}")
    return records, []


def _one_document(text: str) -> Any:
    """The file as one JSON value when it is one (an array, an object), else None (JSON lines, or broken)."""
    if not text.lstrip().startswith(("[", "{")):
        return None
    try:
        return _json(text)
    except json.JSONDecodeError:
        if text.lstrip().startswith("["):  # an array that does not parse: its own error, not line by line
            raise
        return None


TASK_KEYS = {"task_key", "key", "prompt", "env_key", "env_id"}  # a record that has none of these is no task (either name read)
MOST_PROBLEMS = 20  # bad records named in one error; the rest are counted


def read_tasks(path: str | Path) -> tuple[list[tuple[str, Task]], list[str]]:
    """Every good task of a file with where it is (``file:line``), and one problem per bad record, naming the
    file, the line (or index), the task and the key; a file that cannot be read as tasks is one problem."""
    path = Path(path)
    try:
        records, problems = _records(path)
    except ConfigError as exc:
        return [], [str(exc)]
    parsed: list[tuple[str, Task]] = []
    for source, record in records:
        try:
            parsed.append((source, parse_task(record, source)))
        except ConfigError as exc:
            problems.append(str(exc))
    found, repeated = _first_of_each_key(parsed, "appears twice (first at {first})")
    return found, problems + repeated


def read_task_files(paths: list[str | Path]) -> tuple[list[tuple[str, Task]], list[str]]:
    """``read_tasks`` of several files; a task_key in two files is a problem naming both."""
    found: list[tuple[str, Task]] = []
    problems: list[str] = []
    for path in paths:
        tasks, bad = read_tasks(path)
        found += tasks
        problems += bad
    found, repeated = _first_of_each_key(found, "is also in {first}")
    return found, problems + repeated


def _first_of_each_key(tasks: list[tuple[str, Task]], again: str) -> tuple[list[tuple[str, Task]], list[str]]:
    """The first task of each task_key; each later one is a problem (``again`` says where the first is)."""
    first: dict[str, str] = {}
    kept: list[tuple[str, Task]] = []
    problems: list[str] = []
    for source, task in tasks:
        if task.task_key in first:
            problems.append(f"{source}: key 'task_key' = {task.task_key!r} " + again.format(first=first[task.task_key]))
            continue
        first[task.task_key] = source
        kept.append((source, task))
    return kept, problems


def refuse(problems: list[str]) -> None:
    """Raise one ConfigError naming every problem (the first ``MOST_PROBLEMS``, then how many more)."""
    if problems:
        more = f"\n... and {len(problems) - MOST_PROBLEMS} more bad task record(s)" if len(problems) > MOST_PROBLEMS else ""
        raise ConfigError("\n".join(problems[:MOST_PROBLEMS]) + more)


def load_tasks(path: str | Path) -> list[Task]:
    """Read a task file; bad records raise one ConfigError naming each: the file, the line (or index) and the key."""
    found, problems = read_tasks(path)
    refuse(problems)
    return [task for _, task in found]


def load_task_files(paths: list[str | Path]) -> list[Task]:
    """Tasks of several files; a task_key in two files is an error naming both."""
    found, problems = read_task_files(paths)
    refuse(problems)
    return [task for _, task in found]
