"""The Optuna study's SQLite file, kept beside the sweep's results.

SQLite cannot live on S3, so with S3 the study is kept in a local directory named after the experiment (the same
on every machine, since Tune pickles the searcher with its path) and copied up whenever Tune snapshots the
searcher (``push_study``); ``sweep resume`` copies it down first (``pull_study``).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sweep.store.storage import Storage


def optuna_db_path(store: Storage, name: str) -> Path:
    """The study's SQLite file: in the experiment directory when local; else a local copy named after the
    experiment, the same path on every machine (Tune pickles the searcher, and with it this path)."""
    if store.is_local:
        return Path(store.path(name, "optuna.db"))
    key = hashlib.sha1(store.path(name).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "grpo-sweep-optuna" / key / "optuna.db"


_PUSHED: dict[Path, tuple[int, int]] = {}  # the study file's (size, mtime) when last copied up


def push_study(store: Storage, name: str) -> None:
    """Copy the local study up to ``{name}/optuna.db`` when it changed (S3 only; a local study already lives there)."""
    local = optuna_db_path(store, name)
    if store.is_local or not local.is_file():
        return
    stamp = (local.stat().st_size, local.stat().st_mtime_ns)
    if _PUSHED.get(local) != stamp:
        store.upload(local, name, "optuna.db")
        _PUSHED[local] = stamp


def pull_study(store: Storage, name: str) -> Path:
    """Before resuming on any machine: the study's local copy from storage (S3 only); returns its path."""
    local = optuna_db_path(store, name)
    local.parent.mkdir(parents=True, exist_ok=True)
    if not store.is_local:
        local.unlink(missing_ok=True)
        store.download(local, name, "optuna.db")
    return local


@contextmanager
def studies_open_at(path: Path) -> Iterator[None]:
    """While a saved sweep is restored: every Optuna SQLite storage unpickled opens ``path``, this sweep's study.

    Tune pickles the searcher with its study's storage, whose URL is the SQLite file where the sweep first ran;
    optuna connects to it as it unpickles (creating tables there), so a sweep moved or copied elsewhere would
    open a file that is gone, or another sweep's. Only for the restore: the patch is undone on leaving.
    """
    from optuna.storages import RDBStorage

    original = RDBStorage.__setstate__

    def setstate(storage: RDBStorage, state: dict) -> None:
        original(storage, {**state, "url": f"sqlite:///{path}"})

    RDBStorage.__setstate__ = setstate  # type: ignore[method-assign]
    try:
        yield
    finally:
        RDBStorage.__setstate__ = original  # type: ignore[method-assign]
