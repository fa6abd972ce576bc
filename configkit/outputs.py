"""Where a command will write what it makes, checked before the work starts: a probe or a check that took minutes
must not end in a traceback because its output path names a folder, and a file already there is not replaced
unless the user says so (``--force``).

Leaves out: S3 outputs (the report's ``--out`` is local; a sweep's own storage is ``sweep.store.uris``').
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from configkit.base import ConfigError


def placement_problem(path: Path) -> str | None:
    """Why ``path`` (a folder or file, with any missing parents) cannot be made: the nearest existing one of it and
    its parents is a file, or a folder this user cannot write; None when it can. Also the storage check's
    (``sweep.store.uris.storage_problems``)."""
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a directory" if existing == path.absolute() else f"{existing} is a file, so {path} cannot be made"
    return writable_problem(existing)


def writable_problem(folder: Path) -> str | None:
    """Why this user cannot make entries in the existing ``folder``, or None. ``os.access`` answers from the
    permission bits, which root passes everywhere (``/proc``, a filesystem that refuses new entries), so a folder
    made and removed at once gives the answer the work would get."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable by this user"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".grpo-sweep-probe-", dir=folder))
    except OSError as exc:
        return f"{folder} is not writable by this user ({exc.strerror or exc})"
    return None


def _placement_problem(path: Path, flag: str) -> str | None:
    """``placement_problem`` of a new output beside its parents, as ``flag``'s problem."""
    problem = placement_problem(path.absolute().parent)
    return f"{flag} {path}: {problem}; name a path you can write to" if problem else None


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
    elif problem := writable_problem(path):
        raise ConfigError(f"{flag} {path}: {problem}; name a directory you can write to")
