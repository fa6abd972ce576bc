"""Where a command will write what it makes, checked before the work starts: a probe or a check that took minutes
must not end in a traceback because its output path names a folder, and a file already there is not replaced
unless the user says so (``--force``).

Leaves out: S3 outputs (the report's ``--out`` is local; a sweep's own storage is ``sweep.store.uris``').
"""

from __future__ import annotations

import os
from pathlib import Path

from configkit.base import ConfigError


def _nearest_folder(path: Path) -> Path:
    """The nearest folder above ``path`` that exists (where its missing parents would be made)."""
    existing = path.absolute().parent
    while not existing.exists():
        existing = existing.parent
    return existing


def _placement_problem(path: Path, flag: str) -> str | None:
    """Why nothing can be made at ``path``: a file on the way, or a folder that cannot be written."""
    above = _nearest_folder(path)
    if not above.is_dir():
        return f"{flag} {path}: {above} is a file, so {path} cannot be made; name a path under a folder"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"{flag} {path}: {above} is not writable by this user; name a path you can write to"
    return None


def check_output_file(path: Path, flag: str, force: bool = False, appends: bool = False) -> None:
    """A file the command will write at ``path`` (``flag`` names the option): refused when it is a folder, cannot be
    made, or exists and would be replaced (``appends``: the command adds to it, so it may exist; ``force``: the user
    asked to replace it)."""
    if path.is_dir():
        raise ConfigError(f"{flag} {path}: a directory; name a file to write")
    if path.exists() and not (force or appends):
        raise ConfigError(f"{flag} {path}: the file exists and would be replaced; name another file, or add --force to replace it")
    problem = _placement_problem(path, flag)
    if problem:
        raise ConfigError(problem)


def check_output_folder(path: Path, flag: str, files: tuple[str, ...] = (), force: bool = False) -> None:
    """A folder the command will write ``files`` into: refused when it is a file, cannot be made, or holds one of
    ``files`` already (unless ``force``)."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {path}: a file, not a directory; name a directory to write into")
    present = [name for name in files if (path / name).exists()]
    if present and not force:
        raise ConfigError(f"{flag} {path}: {', '.join(present)} already there and would be replaced; name another directory, or add --force to replace them")
    if not path.exists():
        problem = _placement_problem(path, flag)
        if problem:
            raise ConfigError(problem)
    elif not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: not writable by this user; name a directory you can write to")
