"""Write a space file with the launcher's filters applied (``env.env_keys``, ``env.max_tasks``), then validate it.

``python sky/space_overrides.py SPACE [--env-keys a,b] [--max-tasks N]`` prints the path of the file it
wrote: ``SPACE`` itself when there is nothing to override, else ``<space>.launch.yaml`` beside it (so the
space's relative paths still resolve). Used by ``sky/sweep.yaml`` and the GitHub workflow, whose inputs
are strings ("" means unset). Validation is ``sweep validate``'s (resources are checked by ``sweep run``
against the cluster it runs on).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml


def apply(space: dict, env_keys: str, max_tasks: str) -> dict:
    """The space with ``trainer.env.env_keys`` / ``trainer.env.max_tasks`` set from the launcher's strings."""
    trainer = dict(space.get("trainer") or {})
    env = dict(trainer.get("env") or {})
    keys = [k.strip() for k in env_keys.split(",") if k.strip()]
    if keys:
        env["env_keys"] = keys
    if max_tasks.strip():
        env["max_tasks"] = int(max_tasks)
    if env:
        trainer["env"] = env
    return {**space, "trainer": trainer}


def write(path: Path, env_keys: str = "", max_tasks: str = "") -> Path:
    if not env_keys.strip() and not max_tasks.strip():
        return path
    space = yaml.safe_load(path.read_text()) or {}
    target = path.with_name(f"{path.stem}.launch.yaml")
    target.write_text(yaml.safe_dump(apply(space, env_keys, max_tasks), sort_keys=False))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("space", type=Path)
    parser.add_argument("--env-keys", default="", help="comma-separated env_keys to keep ('' keeps all)")
    parser.add_argument("--max-tasks", default="", help="cap on tasks ('' for none)")
    args = parser.parse_args(argv)
    target = write(args.space, args.env_keys, args.max_tasks)
    from sweep.spec.loader import load_space

    try:
        load_space(target)
    except ValueError as exc:  # ConfigError, or a task filter that leaves nothing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
