"""Shared machinery for typed YAML configs: strict base model, loading, dotted keys, errors for people.

Imports no torch: the sweep driver validates configs with this module alone.
Leaves out: the config schemas themselves (``grpo.config``, ``sweep.config``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError


class StrictModel(BaseModel):
    """Base of every config: unknown keys are errors, defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class ConfigError(ValueError):
    """A config problem, phrased for the person who wrote the file."""


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file or a non-mapping top level is a ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
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


def model_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class that owns the last key of ``loc``, or None if the path leaves the models."""
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if current is None or not isinstance(part, str) or part not in current.model_fields:
            return None
        inner = _unwrap(current.model_fields[part].annotation)
        current = inner[0] if inner else None
    return current


def allowed_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The keys allowed beside the last key of ``loc``."""
    owner = model_at(model, loc)
    return sorted(owner.model_fields) if owner else []


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


def describe_errors(exc: ValidationError, model: type[BaseModel], source: str, prefix: str = "") -> str:
    """One line per error: ``source: key 'a.b' = value: what is wrong (allowed: ...)``."""
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = prefix + ".".join(str(p) for p in loc)
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(allowed_keys(model, loc))
            lines.append(f"{source}: unknown key '{key}' (allowed here: {allowed})")
        elif err["type"] == "missing":
            lines.append(f"{source}: key '{key}' is required")
        else:
            lines.append(f"{source}: key '{key}' = {value!r}: {err['msg']}")
    return "\n".join(lines)


def validate(model: type[BaseModel], data: dict[str, Any], source: str, prefix: str = "") -> Any:
    """``model.model_validate(data)`` with errors that name the source, the dotted key and the value."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, model, source, prefix)) from None


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
