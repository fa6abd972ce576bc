"""Shared machinery for typed YAML configs: strict base model, loading, dotted keys, errors for people.

Imports no torch: the sweep driver validates configs with this module alone.
Leaves out: the config schemas themselves (``grpo.config``, ``sweep.spec.config``).
"""

from __future__ import annotations

import copy
import datetime
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from configkit.redact import as_written, redact_text, shown_key, shown_repr, shown_value
from configkit.suggest import did_you_mean


class StrictModel(BaseModel):
    """Base of every config: unknown keys are errors, defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True, strict=True, allow_inf_nan=False)


class ConfigError(ValueError):
    """A config problem, phrased for the person who wrote the file."""


class UnreadableYaml(ConfigError):
    """Text that is not YAML at all: PyYAML's own message, which may quote the text around the fault."""


FILE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
FILE_NAME_WORDS = "letters, digits, '.', '_' and '-', not '.' or '..'"


def is_file_name(value: str) -> bool:
    """A name that is one file or folder name on every system, never a path: a sweep's folder, an env's eval dump."""
    return FILE_NAME.fullmatch(value) is not None and value not in (".", "..")


def read_text(path: str | Path, what: str = "file") -> str:
    """A text file's contents; a missing, unreadable, binary or non-UTF-8 file is a ConfigError naming it."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: a directory, not a {what}")
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{path}: UTF-16 text (it starts with a byte-order mark); save the {what} as UTF-8")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise ConfigError(f"{path}: a binary file (NUL byte at {nul}), not a {what}: is it the file you meant?")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {raw[exc.start]:#04x} at {exc.start}); save the {what} as UTF-8") from None


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading ``1e-3`` as the number it is (YAML 1.1 wants a dot: ``1.0e-3``; YAML
    1.2 and every user's eye read both as floats), so ``lr: {grid: [1e-3, 1e-2]}`` sweeps numbers, not strings."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


AMBIGUOUS_NUMBER = "tag:grpo-sweep,2026:ambiguous-number"
AMBIGUOUS_PATTERN = re.compile(r"^[-+]?(?:0[0-7_]+|[1-9][0-9_]*(?::[0-5]?[0-9])+|[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*)$")  # PyYAML's octal, base 60
for _first in "-+0123456789":  # ahead of YAML 1.1's int resolver, which would read these silently
    _Loader.yaml_implicit_resolvers.setdefault(_first, []).insert(0, (AMBIGUOUS_NUMBER, AMBIGUOUS_PATTERN))
AMBIGUOUS_HINT = "a number YAML 1.1 reads otherwise than it looks (a leading zero: octal; a colon: base 60): quote it if it is text"


def ambiguous_number(value: str) -> str:
    """Why ``010`` (YAML 1.1: octal 8; YAML 1.2 and most eyes: 10) or ``1:30`` (YAML 1.1: base 60, 90) is refused,
    naming both readings: a seed or a step count would change silently. (``09`` and ``09:30`` are text to YAML 1.1
    as they look; a number field refuses text by name.)"""
    if ":" in value:
        parts = value.lstrip("+-").replace("_", "").split(":")
        read = sum(float(p) * 60 ** (len(parts) - 1 - i) for i, p in enumerate(parts)) * (-1 if value.startswith("-") else 1)
        return f"YAML 1.1 reads it in base 60 ({read:g}): quote it if it is text, or write the number you mean"
    sign, digits = value[:1] if value[0] in "+-" else "", value.lstrip("+-").replace("_", "")
    return (f"a leading zero, which YAML 1.1 reads as octal ({int(sign + digits, 8)}): write {sign}{digits.lstrip('0') or '0'} for "
            "the number, or quote it if it is text")


def _refuse_ambiguous(loader: _Loader, node: yaml.ScalarNode) -> Any:
    """Where ``_problems`` does not look (under a complex key, ``? [1]: ...``): refused at its line, the value unshown
    (no key says whether it is a secret's)."""
    raise yaml.constructor.ConstructorError(None, None, f"{AMBIGUOUS_HINT}, or write the number plainly", node.start_mark)


_Loader.add_constructor(AMBIGUOUS_NUMBER, _refuse_ambiguous)


def parse_yaml(text: str, source: str, under: str = "") -> Any:
    """``yaml.safe_load`` that names ``source`` in its errors and refuses a key given twice in one mapping
    (PyYAML keeps the last one, silently) and a number YAML 1.1 reads otherwise than it looks (``010``, ``1:30``):
    ConfigError naming each dotted key and line (a secret's value not shown; ``under``: the dotted key the whole
    document is the value of, a ``--set``'s: placed in that value, as typed, without "line 1"). Text that is no YAML
    at all: UnreadableYaml."""
    try:
        loader = _Loader(text)  # refuses control characters already
        loader.name = f"the value of {under}" if under else source  # YAML's own messages say where: in "space.yaml", line 3, column 5
        try:
            node = loader.get_single_node()
            problems = [f"{source}: {problem}" for problem in _problems(node, under, bool(under) and "\n" not in text)]
            if problems:
                raise ConfigError("\n".join(problems))
            return loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        for mark in (getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)):
            if mark is not None:
                mark.buffer = None  # YAML would quote the file's line, cut anywhere (a secret's key cut off): place only
        raise UnreadableYaml(f"{source}: not valid YAML: {redact_text(str(exc))}") from None
    except RecursionError:
        raise UnreadableYaml(f"{source}: nested too deeply to read as YAML") from None


MERGE_TAG = "tag:yaml.org,2002:merge"


def _key_path(path: str, key: str) -> str:
    """The dotted key of ``key`` in the mapping at ``path`` (the top level's: ``key``)."""
    return f"{path}.{key}" if path else str(key)


def _nodes(node: yaml.Node | None, path: str = "", seen: set[int] | None = None) -> Iterator[tuple[str, yaml.Node]]:
    """(dotted key, node) for ``node`` and every value under it; an alias's node once, where its anchor is."""
    seen = set() if seen is None else seen
    if node is None or id(node) in seen:
        return
    seen.add(id(node))
    yield path, node
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _nodes(item, f"{path}[{i}]", seen)
    elif isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == MERGE_TAG:  # <<: {...} merges its keys here
                yield from _nodes(value_node, path, seen)
            elif isinstance(key_node, yaml.ScalarNode):
                yield from _nodes(value_node, _key_path(path, key_node.value), seen)


def _where(marks: list[yaml.Mark], under: str, one_line: bool, in_secret: bool) -> str:
    """`` (line 3, columns 5 and 11)``: where in the text, by line (none in a --set's one-line value: `` (columns 2
    and 9 of the value)``), by column where marks share a line, unless inside a secret's value (they would measure it)."""
    if len({m.line for m in marks}) > 1:
        place = "lines " + " and ".join(str(m.line + 1) for m in marks)
    else:
        columns = "columns " + " and ".join(str(m.column + 1) for m in marks) if len(marks) > 1 and not in_secret else ""
        place = ", ".join(p for p in ("" if one_line else f"line {marks[0].line + 1}", columns) if p)
    return f" ({place}{' of the value' if under else ''})" if place else ""


def _ambiguous(path: str, node: yaml.ScalarNode) -> tuple[Any, str]:
    """An ambiguous number's text as shown under ``path`` (a secret's hidden), and why it is refused."""
    shown = shown_value(path, node.value)
    return shown, AMBIGUOUS_HINT if shown != node.value else ambiguous_number(node.value)  # a secret's: no reading shown


def _problems(root: yaml.Node | None, under: str = "", one_line: bool = False) -> Iterator[str]:
    """Each key given twice in one mapping, and each number YAML 1.1 reads otherwise than it looks, each with where
    (``one_line``: a --set's value typed on one line, where a line number says nothing)."""
    for path, node in _nodes(root, under):
        if isinstance(node, yaml.ScalarNode) and node.tag == AMBIGUOUS_NUMBER:
            shown, why = _ambiguous(path, node)
            where = _where([node.start_mark], under, one_line, False)
            yield f"{f'key {shown_key(path)!r} = {shown}{where}' if path else node.value}: {why}"  # no path: a document that is one number
        if not isinstance(node, yaml.MappingNode):
            continue
        marks: dict[tuple[str, str], yaml.Mark] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
                continue
            if key_node.tag == AMBIGUOUS_NUMBER:  # a key's text is its mapping's value's: a secret's hidden
                shown, why = _ambiguous(path, key_node)
                yield f"key {shown} under '{shown_key(path) or '(top level)'}'{_where([key_node.start_mark], under, one_line, False)}: {why}"
            first, second = marks.setdefault((key_node.tag, key_node.value), key_node.start_mark), key_node.start_mark
            if first is not second:
                key = _key_path(path, key_node.value)
                where = _where([first, second], under, one_line, shown_key(key) != key)
                yield f"key '{shown_key(key)}' appears twice{where}; the second would silently win: keep one"


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing, binary or non-UTF-8 file, a key given twice or a non-mapping top
    level is a ConfigError naming the file."""
    path = Path(path)
    data = parse_yaml(read_text(path, "YAML file"), str(path))
    if data is None:  # not taken as "every default": an empty file is more likely the wrong file, or one cut short
        raise ConfigError(f"{path}: empty (no keys, or only comments); write its keys, or name the file you meant")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(data).__name__}")
    return data


def _unwrap(annotation: Any) -> list[type[BaseModel]]:
    """The BaseModel classes inside an annotation (Optional, unions, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        found.extend(_unwrap(arg))
    return found


def _tagged(members: list[type[BaseModel]], tag: Any) -> type[BaseModel] | None:
    """The member of a union tagged on ``type`` whose tag is ``tag`` (None: ``tag`` is no member's)."""
    for member in members:
        field = member.model_fields.get("type")
        if field is not None and isinstance(tag, str) and tag in get_args(field.annotation):
            return member
    return None


def user_loc(model: type[BaseModel], loc: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], type[BaseModel] | None]:
    """``loc`` as the file's author wrote it, and the model that owns its last key (None if the path leaves the
    models). Pydantic puts a tagged union's member in its locations (``env.backend.local.call_timeout_s``); the
    file has no such key, so it is dropped (``env.backend.call_timeout_s``) and that member owns what follows."""
    clean: list[str | int] = []
    owner: type[BaseModel] | None = model
    members: list[type[BaseModel]] = []  # the union the previous key holds, if it holds one
    element = False  # the previous key holds a mapping or list of models: this part is a key or an index in it
    for i, part in enumerate(loc):
        if element:  # the element's model (or union) owns what follows
            element = False
            clean.append(part)
            continue
        chosen = _tagged(members, part)
        members = []
        if chosen is not None and i < len(loc) - 1:
            owner = chosen
            continue
        clean.append(part)
        if i == len(loc) - 1:
            break
        field = owner.model_fields.get(part) if owner is not None and isinstance(part, str) else None
        inner = _unwrap(field.annotation) if field is not None else []
        members, owner = (inner, inner[0]) if len(inner) > 1 else ([], inner[0] if inner else None)
        element = field is not None and bool(inner) and _holds_elements(field.annotation)
    return tuple(clean), owner


def _holds_elements(annotation: Any) -> bool:
    """Whether an annotation (through Optional, unions, Annotated) is a mapping or a list: a location goes on with
    a key or an index before the element's own keys."""
    if get_origin(annotation) in (dict, list):
        return True
    return any(_holds_elements(arg) for arg in get_args(annotation) if arg is not type(None))


def dotted_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf key of a config model as a dotted path (``optim.lr``, ...)."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        inner = _unwrap(field.annotation)
        if inner and get_origin(field.annotation) not in (dict, list):
            keys.extend(dotted_keys(inner[0], f"{prefix}{name}."))
        else:
            keys.append(f"{prefix}{name}")
    return keys


TEXT_ERRORS = ("string_type", "literal_error", "enum")  # where text was wanted: a true/false there may be YAML's reading
BOOL_WORDS = "YAML reads an unquoted yes, no, on or off as true/false: quote the word ('off') if you meant the text"


def describe_errors(exc: ValidationError, model: type[BaseModel], source: str, prefix: str = "") -> str:
    """One line per error: ``source: key 'a.b' = value: what is wrong (allowed: ...)``."""
    lines, errors = [], exc.errors()
    written = {repr(e["input"]): str(as_written(e["input"])) for e in errors  # a date key's own error holds the date
               if _names_a_key(e) and isinstance(e.get("input"), datetime.date)}
    for err in errors:
        loc, owner = user_loc(model, tuple(err["loc"]))
        key = prefix + _dotted(loc, written)
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            allowed = sorted(field.alias or name for name, field in owner.model_fields.items()) if owner else []
            lines.append(f"{source}: unknown key '{key}' ({did_you_mean(str(loc[-1]), allowed)}allowed here: {', '.join(allowed)})")
        elif _names_a_key(err):  # a key YAML read as a number, true/false or a date
            where = prefix + _dotted(_key_section(loc), written)
            lines.append(f"{source}: key {shown_repr('', value)} under '{where or '(top level)'}' is {_yaml_type(value)}, not a name"
                         f"{_quote_hint(value, 'string_type')}")
        elif err["type"] == "missing":
            lines.append(f"{source}: key '{key}' is required")
        elif err["type"] == "union_tag_invalid":  # a section's kind (type: ...) that is none of its kinds
            ctx = err.get("ctx") or {}
            field, allowed = str(ctx.get("discriminator", "type")).strip("'"), str(ctx.get("expected_tags", "")).replace("'", "")
            lines.append(f"{source}: key '{key}.{field}' = {ctx.get('tag')!r}: allowed: {allowed}")
        else:
            hint = _quote_hint(value, err["type"])
            said = _type_words(err["type"], value) or err["msg"].removeprefix("Value error, ")  # a validator's own words
            lines.append(f"{source}: key '{key}' = {shown_repr(key, value)}: {said}{hint}")
    return "\n".join(lines)


def _names_a_key(err: Any) -> bool:
    """An error about a key itself (one YAML read as a number, true/false or a date), not about its value."""
    return err["type"] == "invalid_key" or tuple(err["loc"])[-1:] == ("[key]",)


def _dotted(loc: tuple[str | int, ...], written: dict[str, str]) -> str:
    """A location as a dotted key, a date key as written (``2026-01-05``): pydantic names it by its repr
    (``datetime.date(2026, 1, 5)``), which ``written`` maps back from the key's own error."""
    return ".".join(written.get(p, str(p)) if isinstance(p, str) else str(p) for p in loc)


def _key_section(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """The section a key that is no name sits in: pydantic ends a model's location with the key (as an int) and
    a mapping field's with the key, then ``[key]``."""
    return loc[:-2] if loc[-1:] == ("[key]",) else loc[:-1]


def _quote_hint(value: Any, kind: str) -> str:
    """How YAML 1.1 read ``value`` unquoted where text was wanted, and the quotes that keep the text: a yes/no/on/off
    word wherever text was wanted (a choice of words too), a number or date only where any text would do (quoted,
    ``searcher: '3'`` would still be refused)."""
    if isinstance(value, bool) and kind in TEXT_ERRORS:
        return f"; {BOOL_WORDS}"
    return f"; {YAML_READINGS}" if kind == "string_type" and type(value) in YAML_READS_AS else ""


def _yaml_type(value: Any) -> str:
    """What a value is, in YAML's words (``true`` is a boolean there, not a number)."""
    kinds = {bool: "true/false", int: "a whole number", float: "a number with a decimal point", str: "text", list: "a list",
             dict: "a mapping", type(None): "empty (null)", datetime.date: "a date", datetime.datetime: "a date and time"}
    return next((word for kind, word in kinds.items() if type(value) is kind), type(value).__name__)


YAML_READS_AS = (int, float, datetime.date, datetime.datetime)  # what plain text can become (true/false: BOOL_WORDS)
YAML_READINGS = "quote it to keep the text as written (unquoted, YAML reads 1.10 as the number 1.1 and 2026-01-05 as a date)"
NUMBER_ERRORS = ("float_type", "multiple_of")  # a number's own errors: a NaN there is named as one


def _type_words(kind: str, value: Any) -> str | None:
    """A strict type error in the words of the file's author: what was written and what is allowed (configs are
    strict: no ``true`` for a number, no ``4.0`` for a whole number, no number for ``true/false``; no ``.nan`` or
    ``.inf``, which would fail a bound with a misleading message, or pass where there is none)."""
    if isinstance(value, float) and not math.isfinite(value):
        if kind in ("int_type", "int_from_float"):
            return "must be a whole number, not .nan or .inf"
        if kind == "finite_number" or kind in NUMBER_ERRORS or kind.startswith(("greater_than", "less_than")):
            return "must be a finite number, not .nan or .inf; write a number"
    if kind in ("model_type", "dict_type"):
        return f"must be a mapping of keys (a section), not {_yaml_type(value)}"
    if kind == "int_type" and isinstance(value, float) and value.is_integer():
        return f"must be a whole number: write {int(value)}, without the decimal point"
    if kind in ("int_type", "int_from_float"):
        return f"must be a whole number, not {_yaml_type(value)}"
    if kind == "float_type":
        return f"must be a number, not {_yaml_type(value)}" + (" (write it without quotes)" if _plain_number(value) else "")
    if kind == "bool_type":
        return f"must be true or false, not {_yaml_type(value)}"
    if kind == "string_type":
        return f"must be text, not {_yaml_type(value)}"
    if kind == "list_type":
        return f"must be a list, not {_yaml_type(value)}"
    return None


def _plain_number(value: Any) -> bool:
    """Whether text, written without quotes, would be read as a number (``'0.1'``, ``'1e-3'``; not ``'abc'`` nor ``'010'``)."""
    if not isinstance(value, str):
        return False
    loader = _Loader("")
    try:
        return loader.resolve(yaml.ScalarNode, value, (True, False)) in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    finally:
        loader.dispose()


def validate(model: type[BaseModel], data: dict[str, Any], source: str, prefix: str = "") -> Any:
    """``model.model_validate(data)`` with errors that name the source, the dotted key and the value."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, model, source, prefix)) from None


def get_dotted(data: Any, key: str | Sequence[str]) -> Any:
    """The value at ``a.b.c`` (or the parts ``("a", "b", "c")``) in nested mappings; None where a part is absent or
    its parent is not a mapping."""
    for part in key.split(".") if isinstance(key, str) else key:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def set_dotted(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``data`` with ``a.b.c`` set to ``value`` (intermediate mappings created)."""
    result = copy.deepcopy(data)
    node = result
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value
    return result


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Apply several dotted overrides in key order."""
    for key in sorted(overrides):
        data = set_dotted(data, key, overrides[key])
    return data
