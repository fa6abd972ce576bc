"""Where a sweep's results live, opened: one URI (``sweep.store.uris`` checks its shape), one pyarrow filesystem.

Under ``{storage}/{name}/``: Tune's experiment (trial results, checkpoints), ``trajectories/{trial}/``,
``leaderboard.json``, ``sweep_config.json`` (what ``sweep resume`` rebuilds the sweep from) and ``optuna.db``
(``sweep.store.study``). ``run`` and ``resume`` ask an S3 bucket to answer within seconds before anything starts
(``reachability_problem``; ``validate`` stays offline). A ``DirMirror`` keeps a local folder's new files uploaded
(a trial's eval trajectories, with S3).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from configkit import environ
from configkit.base import ConfigError
from sweep.store.uris import s3_options, uri_problem, uri_query

# pyarrow's default gives up on a request that stalls 3 s, which a busy S3-compatible server can exceed
S3_REQUEST_TIMEOUT_S = 60.0


S3_CONNECT_TIMEOUT_S = 10.0


BASE_EVALS_DIR = "base_evals"  # in a sweep's folder: the base policy's evals, made once per sweep (sweep.trials.base_evals)
PARTIAL = ".partial-"  # what marks write_whole's temporary: {path}.partial-{pid}-{thread}


def write_whole(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Write ``path`` so that a reader finds the old file or the new one whole, never a part of it.

    A temporary beside it (``{path}.partial-{pid}-{thread}``: readers that list a folder by name skip it),
    then moved over it. A reader that opened a file still being written read it empty (the trial restart
    test's step records, CI 2026-11-29), and a process stopped mid-write left a cut record for good.
    """
    partial = f"{path}{PARTIAL}{os.getpid()}-{threading.get_ident()}"
    with fs.open_output_stream(partial) as f:
        f.write(data)
    fs.move(partial, path)


@dataclass(frozen=True)
class Storage:
    """An opened storage URI: ``root`` is its path on ``fs`` (``/abs/dir`` or ``bucket/prefix``)."""

    uri: str
    fs: pafs.FileSystem
    root: str

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        """A path on ``fs`` under the root."""
        return "/".join([self.root.rstrip("/"), *(p.strip("/") for p in parts if p)])

    def display(self, *parts: str) -> str:
        """Where a thing is, for people: ``s3://bucket/prefix/...`` (no query) or a local path."""
        return self.path(*parts) if self.is_local else "s3://" + self.path(*parts)

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def read_text(self, *parts: str) -> str:
        with self.fs.open_input_stream(self.path(*parts)) as f:
            return f.read().decode()

    def write_text(self, text: str, *parts: str) -> str:
        target = self.path(*parts)
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        write_whole(self.fs, target, text.encode())
        return target

    def upload(self, local: str | Path, *parts: str) -> None:
        """Copy a local file (or directory, recursively) to ``parts`` under the root."""
        pafs.copy_files(str(local), self.path(*parts), source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs)

    def copy(self, source: tuple[str, ...], target: tuple[str, ...]) -> None:
        """Copy a file or directory within this storage (a directory's files at its top level too: pyarrow makes the
        folders it copies into only below the target)."""
        self.fs.create_dir(self.path(*target) if self.is_dir(*source) else self.path(*target).rsplit("/", 1)[0], recursive=True)
        pafs.copy_files(self.path(*source), self.path(*target), source_filesystem=self.fs, destination_filesystem=self.fs)

    def download(self, local: str | Path, *parts: str) -> bool:
        """Copy ``parts`` (a file or directory) to a local path; False when it is not there."""
        if not self.exists(*parts):
            return False
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(self.path(*parts), str(local), source_filesystem=self.fs, destination_filesystem=pafs.LocalFileSystem())
        return True

    def entries(self, *parts: str) -> list[str]:
        """The names directly in the folder ``parts`` (none when it is not there)."""
        if not self.exists(*parts):
            return []
        return sorted(info.base_name for info in self.fs.get_file_info(pafs.FileSelector(self.path(*parts), recursive=False)))

    def delete_dir(self, *parts: str) -> None:
        if self.exists(*parts):
            self.fs.delete_dir(self.path(*parts))

    def is_dir(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type == pafs.FileType.Directory

    def delete(self, *parts: str) -> None:
        """Delete a file (nothing when it is not there)."""
        if self.exists(*parts):
            self.fs.delete_file(self.path(*parts))


def open_storage(uri: str, what: str = "key 'storage'") -> Storage:
    """A local directory (made absolute) or an S3 URI; anything else is a ConfigError naming ``what``."""
    problem = uri_problem(uri, what)
    if problem:
        raise ConfigError(problem)
    if "://" not in uri:
        local = Path(uri).expanduser().resolve()
        return Storage(str(local), pafs.LocalFileSystem(), str(local))
    parts = urlsplit(uri)
    fs = pafs.S3FileSystem(request_timeout=S3_REQUEST_TIMEOUT_S, connect_timeout=S3_CONNECT_TIMEOUT_S, **s3_options(uri_query(uri)))
    return Storage(uri, fs, (parts.netloc + parts.path).rstrip("/"))


PROBE_CONNECT_TIMEOUT_S = 3.0


PROBE_REQUEST_TIMEOUT_S = 5.0


def reachability_problem(store: Storage, what: str = "key 'storage'") -> str | None:
    """For S3: whether the bucket answers within a few seconds (one try, no retries), or why not; None when
    it does, or for a local directory. ``sweep run`` and ``resume`` ask before anything starts; ``validate``
    does not (it stays offline)."""
    if store.is_local:
        return None
    options = s3_options(uri_query(store.uri))
    where = f"{what} = {store.uri!r}"
    endpoint = options.get("endpoint_override", "AWS's endpoint for the region")
    bucket = store.root.split("/", 1)[0]
    try:
        probe = pafs.S3FileSystem(connect_timeout=PROBE_CONNECT_TIMEOUT_S, request_timeout=PROBE_REQUEST_TIMEOUT_S,
                                  retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1), **options)
        found = probe.get_file_info(bucket).type
    except (OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"{where}: the bucket {bucket!r} could not be reached at {endpoint} ({reason}); check the endpoint "
                f"({environ.AWS_ENDPOINT_URL.name} or ?endpoint_override=), the network and the credentials in the environment")
    if found == pafs.FileType.NotFound:
        return f"{where}: there is no bucket {bucket!r} at {endpoint}; create it, or name one that exists"
    return None


def split_experiment(uri: str) -> tuple[str, str]:
    """``s3://b/p/name?q`` -> (``s3://b/p?q``, ``name``); ``dir/name`` -> (``dir``, ``name``)."""
    problem = uri_problem(uri, "the sweep's path")
    if problem:
        raise ConfigError(problem)
    if "://" not in uri:
        path = Path(uri).expanduser().resolve()
        return str(path.parent), path.name
    parts = urlsplit(uri)
    parent, _, name = parts.path.rstrip("/").rpartition("/")
    if not name:
        raise ConfigError(f"{uri!r}: name the sweep's directory, s3://bucket/prefix/NAME")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{parent}{query}", name


class DirMirror:
    """Mirrors a local directory to a storage path: each ``push`` uploads files new or changed since the last.

    Trials write eval trajectories to a local directory (the trainer knows only paths); with S3 storage the
    reporter pushes before each report, so whatever a step wrote is in the bucket before Tune sees the step.
    """

    def __init__(self, local: str | Path, store: Storage, *parts: str):
        self.local, self.store, self.parts = Path(local), store, parts
        self._seen: dict[Path, tuple[int, int]] = {}

    def pull(self) -> None:
        """Start from what storage already holds (a resumed trial appends to its earlier files)."""
        self.store.download(self.local, *self.parts)
        self._seen = self._snapshot()

    def push(self) -> None:
        now = self._snapshot()
        for path, stamp in now.items():
            if self._seen.get(path) != stamp:
                self.store.upload(path, *self.parts, path.relative_to(self.local).as_posix())
        self._seen = now

    def _snapshot(self) -> dict[Path, tuple[int, int]]:
        if not self.local.is_dir():
            return {}
        return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in self.local.rglob("*") if p.is_file()}
