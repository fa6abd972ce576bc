"""The one door for configs: a space file (or a trainer YAML, or a saved sweep), plus command-line overrides,
parsed and checked once.

Every command goes through here: ``run``, ``validate``, ``train`` and ``forecast`` read a file with
``load_space`` / ``load_trainer``; ``resume`` reads the sweep's saved ``sweep_config.json`` with
``load_saved``; the benches call the same functions. Each returns typed, validated configs: a
``SweepConfig`` whose ``trainer`` is a ``TrainerConfig``, parsed here once; nothing downstream re-parses
it (each trial parses its own config once: the base plus its sampled overrides).

What loading does, in order: read the YAML; make the trainer's relative paths relative to the file (a
trial runs in its own directory); apply the overrides (``--set key=value``; a trainer key may drop its
``trainer.`` prefix, a sweep key is written as it is in the file, e.g. ``search.num_samples``); parse
the distributions' shorthand; validate the shape, section by section, so one bad section does not hide
the others' problems; run the meaning checks (``sweep.spec.checks``). Every problem is reported at once, each
naming the file, the key, the value and what is allowed, before anything starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from configkit.base import (
    ConfigError,
    UnreadableYaml,
    apply_overrides,
    describe_errors,
    get_dotted,
    parse_yaml,
    read_yaml,
    validate,
)
from configkit.redact import HIDDEN, looks_secret, mentions_secret, shown_repr, shown_value
from configkit.suggest import did_you_mean
from grpo.config import TrainerConfig
from sweep.spec.checks import meaning_problems, trainer_problems
from sweep.spec.config import SCHEDULERS, SweepConfig
from sweep.spec.distributions import DISTRIBUTIONS, distribution_dict

TRAINER_PATHS = (  # resolved against the file that names them
    ("env", "tasks_path"), ("eval", "tasks_path"), ("model", "cache_dir"), ("data", "curriculum", "prior_path"),
)
SPACE_MARKERS = ("space", "search")  # a file with either is a space file; else a trainer YAML


def parse_sets(items: Sequence[str]) -> dict[str, Any]:
    """``["optim.lr=3e-4", "search.num_samples=2"]`` as ``{key: value}``, each value read as YAML."""
    overrides: dict[str, Any] = {}
    written: dict[str, str] = {}  # each key's value as typed, for a message
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {key + '=' + _typed(key, value) if sep else _typed('', item)!r}: write it as dotted.key=value")
        key = key.strip()
        if key in written:  # not the later one silently kept
            raise ConfigError(f"--set {key} is given twice ({_typed(key, written[key])}, then {_typed(key, value)}): give it once")
        written[key] = value
        if _names_secret(key, value):  # YAML's own message would quote the text
            try:
                overrides[key] = parse_yaml(value, f"--set {key}", under=key)  # its own problems hide a secret's value
            except UnreadableYaml:
                raise ConfigError(f"--set {key}={HIDDEN}: not valid YAML (its text is not shown: it names a secret)") from None
        else:
            overrides[key] = parse_yaml(value, f"--set {key + '=' + _typed(key, value)!r}", under=key)
    return overrides


def _names_secret(key: str, text: str) -> bool:
    """A --set whose key, or a key in whose value, names a secret (``api_key=...``, ``aws_access={key: ...}``)."""
    return looks_secret(key) or mentions_secret(text, under=key)


def _typed(key: str, text: str) -> str:
    """A --set value as typed, as a message may show it (a secret's text hidden, a URI's secrets too, 300 characters)."""
    return HIDDEN if _names_secret(key, text) else shown_value("", text)


def describe_sets(sets: Mapping[str, Any]) -> str:
    return ", ".join(f"--set {key}={shown_value(key, value)}" for key, value in sets.items())  # a secret typed there is not repeated


def _set_once(trainer_level: dict[str, Any], key: str, value: Any) -> None:
    """A trainer key set by ``--set KEY`` and ``--set trainer.KEY`` both: refused, not the later one silently kept."""
    if key in trainer_level:
        raise ConfigError(f"--set {key} and --set trainer.{key} set the same trainer key ({shown_repr(key, trainer_level[key])}, "
                          f"{shown_repr(key, value)}): give it once")
    trainer_level[key] = value


def split_sets(sets: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(sweep-level, trainer-level) overrides; a key belonging to neither is a ConfigError listing both kinds."""
    sweep_level: dict[str, Any] = {}
    trainer_level: dict[str, Any] = {}
    for key, value in sets.items():
        head = key.split(".", 1)[0]
        if head == "trainer" and "." in key:
            _set_once(trainer_level, key.split(".", 1)[1], value)
        elif head in SweepConfig.model_fields and head != "trainer":
            sweep_level[key] = value
        elif head in TrainerConfig.model_fields:
            _set_once(trainer_level, key, value)
        elif head == "trainer":
            raise ConfigError(f"--set {key}: give one trainer key at a time, as --set trainer.KEY=VALUE (or KEY=VALUE)")
        else:
            raise ConfigError(
                f"--set {key}: unknown key '{head}' ({did_you_mean(head, [*TrainerConfig.model_fields, *SweepConfig.model_fields])}"
                f"trainer keys: {', '.join(TrainerConfig.model_fields)}; "
                f"sweep keys: {', '.join(k for k in SweepConfig.model_fields if k != 'trainer')})"
            )
    return sweep_level, trainer_level


def resolve_paths(trainer: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """The trainer's relative paths made absolute against ``base_dir`` (the file's folder, or the working
    directory for paths given on the command line)."""

    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, str) and not Path(value).expanduser().is_absolute():
            return str((base_dir / value).resolve())
        return value

    def resolved(block: Any, keys: tuple[str, ...]) -> Any:
        if not isinstance(block, dict) or keys[0] not in block:
            return block
        return {**block, keys[0]: resolve(block[keys[0]]) if len(keys) == 1 else resolved(block[keys[0]], keys[1:])}

    for keys in TRAINER_PATHS:
        trainer = resolved(trainer, keys)
    return dict(trainer)


def _trainer_sets(trainer_level: dict[str, Any]) -> dict[str, Any]:
    """Command-line paths are relative to the working directory."""
    resolved = resolve_paths(apply_overrides({}, trainer_level), Path.cwd())
    flat = dict(trainer_level)
    for keys in TRAINER_PATHS:
        if ".".join(keys) in flat:
            flat[".".join(keys)] = get_dotted(resolved, keys)
    return flat


def with_sets(data: dict[str, Any], sets: Mapping[str, Any], source: str, pin_swept: bool) -> tuple[dict[str, Any], list[str]]:
    """The file's data with the overrides applied, and the problems they make.

    ``pin_swept``: a trainer override of a swept key sets the base value (``train``, ``forecast``); for a
    sweep it is a problem, since the space would overrule it.
    """
    sweep_level, trainer_level = split_sets(sets)
    problems = []
    swept = {key.split(".", 1)[1]: sweep_level.pop(key) for key in list(sweep_level) if key.startswith("space.")}
    if swept:  # a swept key is one key with dots in it (space.optim.lr), not a path of sections
        if not isinstance(data.get("space", {}), dict):
            problems.append(f"{source}: --set space.{next(iter(swept))}: the file's key 'space' is not a section to set it in")
        else:
            unknown = [key for key, value in swept.items() if value is None and key not in (data.get("space") or {})]
            for key in unknown:
                problems.append(f"{source}: --set space.{key}=null: the space does not sweep {key!r} (it sweeps: "
                                f"{', '.join(data.get('space') or {}) or 'nothing'}); nothing to unsweep")
            merged = {**(data.get("space") or {}), **swept}
            data["space"] = {key: value for key, value in merged.items() if not (key in swept and value is None)}  # null: unswept
    space = data.get("space") if isinstance(data.get("space"), dict) else {}
    for key in trainer_level:
        if key in space and not pin_swept:
            problems.append(f"{source}: --set {key}: the space sweeps this key (space.{key}); remove it from the space to pin it "
                            f"(--set space.{key}=null), or drop the --set")
    data = apply_overrides(data, sweep_level)
    if "trainer" not in data or isinstance(data["trainer"], dict):
        data["trainer"] = apply_overrides(data.get("trainer") or {}, _trainer_sets(trainer_level))
        if not pin_swept and data["trainer"].get("output_dir") is not None:
            problems.append(f"{source}: key 'trainer.output_dir' = {data['trainer']['output_dir']!r}: each trial of a sweep writes its evals and "
                            "trajectories to {storage}/{name}/trajectories/{trial}, where the report reads them; one folder for every trial "
                            "would mix them. Remove it (it is for `sweep train`)")
    # else a section of the wrong type: left as written, for the schema to name (never replaced by defaults)
    return data, problems


def _parse_distributions(data: dict[str, Any], source: str, problems: list[str]) -> None:
    """Turn the YAML shorthand into tagged dicts in place; a malformed entry is a problem and is dropped."""
    blocks = [("space", data.get("space"))]
    if isinstance(data.get("scheduler"), dict):
        blocks.append(("scheduler.mutations", data["scheduler"].get("mutations")))
    for where, block in blocks:
        if not isinstance(block, dict):
            continue
        for key, raw in list(block.items()):
            try:
                block[key] = distribution_dict(raw)
            except ValueError as exc:
                problems.append(f"{source}: key '{where}.{key}' = {shown_repr(key, raw)}: {exc}")
                del block[key]


def _name_distribution_errors(message: str) -> str:
    """Pydantic names union members in its locations (``space.x.loguniform``); keep only the user's key."""
    for name in (*DISTRIBUTIONS, "fixed", *SCHEDULERS):
        message = message.replace(f".{name}'", "'").replace(f".{name}.", ".")
    return message


def _validate_shape(data: dict[str, Any], source: str, problems: list[str]) -> tuple[SweepConfig | None, set[str]]:
    """Validate the structure; a section with errors is reported, then dropped, so later checks still run.

    Returns the config (None if even that failed) and the top-level sections that were dropped (their
    defaults are not what the user wrote, so checks about them are skipped). A valid file is parsed once.
    """
    dropped: set[str] = set()
    for _ in range(len(SweepConfig.model_fields) + 1):
        try:
            return SweepConfig.model_validate(data), dropped
        except ValidationError as exc:
            problems.extend(_name_distribution_errors(describe_errors(exc, SweepConfig, source)).splitlines())
            for err in exc.errors():
                loc = err["loc"]
                if not loc:
                    return None, dropped
                if loc[0] == "space" and len(loc) > 1 and isinstance(data.get("space"), dict):
                    data["space"].pop(loc[1], None)
                else:
                    data.pop(loc[0], None)
                    dropped.add(str(loc[0]))
    return None, dropped


def parse_sweep(data: dict[str, Any], source: str, cluster: dict[str, float] | None = None, problems: list[str] | None = None) -> SweepConfig:
    """Parse and check a space's data; every problem (with ``problems`` found before) in one ConfigError."""
    problems = list(problems or [])
    _parse_distributions(data, source, problems)
    cfg, dropped = _validate_shape(data, source, problems)
    if cfg is not None:
        problems.extend(meaning_problems(cfg, source, dropped, cluster))
    if problems:
        lines = list(dict.fromkeys(problems))  # the same problem found twice is reported once
        head = f"{source}: {len(lines)} problems\n" if len(lines) > 1 else ""
        raise ConfigError(head + "\n".join(lines))
    assert cfg is not None
    return cfg


def load_space(path: str | Path, sets: Mapping[str, Any] | None = None, cluster: dict[str, float] | None = None,
               pin_swept: bool = False) -> SweepConfig:
    """A space file, with overrides, parsed and checked.

    ``cluster``: the resources trials can get (``{"CPU": 8, "GPU": 1}``), checked when given (``sweep
    validate`` passes a running cluster's; ``sweep run`` checks the Ray it starts). ``pin_swept``: the space's base
    read for one trial (``with_sets``), its scheduler left out.
    """
    path = Path(path)
    data = read_yaml(path)
    source = f"{path} ({describe_sets(sets)})" if sets else str(path)
    if isinstance(data.get("trainer"), dict):
        data["trainer"] = resolve_paths(data["trainer"], path.parent)
    if pin_swept:  # one trial (train, forecast): no scheduler runs, so a shortened run is not held to its periods
        data["scheduler"] = {"type": "fifo"}
    data, problems = with_sets(data, sets or {}, source, pin_swept)
    return parse_sweep(data, source, cluster, problems)


def is_space_file(data: dict[str, Any]) -> bool:
    return any(key in data for key in SPACE_MARKERS)


def load_trainer(path: str | Path, sets: Mapping[str, Any] | None = None) -> tuple[TrainerConfig, SweepConfig | None]:
    """A trainer config from a trainer YAML, or from a space file's base (the space's checks run too), with
    trainer overrides (which may pin a swept key); and the space, or None for a trainer YAML.

    A trainer YAML's relative paths stay relative to the working directory, as ``sweep train`` always read them.
    """
    path = Path(path)
    data = read_yaml(path)
    sweep_level, trainer_level = split_sets(sets or {})
    if sweep_level:
        raise ConfigError(f"{describe_sets(sweep_level)}: a sweep key; one trial takes trainer keys only ({', '.join(TrainerConfig.model_fields)})")
    if is_space_file(data):
        cfg = load_space(path, {f"trainer.{key}": value for key, value in trainer_level.items()}, pin_swept=True)
        return cfg.trainer, cfg
    source = f"{path} ({describe_sets(sets)})" if sets else str(path)
    cfg = validate(TrainerConfig, apply_overrides(data, _trainer_sets(trainer_level)), source)
    problems = trainer_problems(cfg, source)
    if problems:
        raise ConfigError("\n".join(problems))
    return cfg, None
