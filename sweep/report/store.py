"""Read a finished sweep's files from a local directory or an S3 URI, through one pyarrow filesystem.

``s3://bucket/prefix?endpoint_override=host:port&scheme=http`` reaches S3-compatible servers; credentials
come from the usual AWS environment variables. Read-only: the report is written locally.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pyarrow import fs as pafs

from sweep.store.uris import bare_uri


class SweepStore:
    """The files under one sweep's directory (``{storage}/{name}``), addressed by relative paths."""

    def __init__(self, uri: str):
        self.uri = uri
        location = uri if "://" in uri else str(Path(uri).expanduser().resolve())
        self.fs, self.root = pafs.FileSystem.from_uri(location)
        self.root = self.root.rstrip("/")
        if self.fs.get_file_info(self.root).type != pafs.FileType.Directory:
            raise FileNotFoundError(f"{uri}: no sweep directory there (expected {{storage}}/{{name}} with one folder per trial)")

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def name(self) -> str:
        return self.root.rsplit("/", 1)[-1]

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def shown(self, rel: str) -> str:
        """``rel`` as the user named the sweep (its URI without the query: no endpoint settings in messages)."""
        return f"{bare_uri(self.uri)}/{rel}"

    def exists(self, rel: str) -> bool:
        return self.fs.get_file_info(self.path(rel)).type != pafs.FileType.NotFound

    def read_text(self, rel: str) -> str | None:
        """The file's text, or None when it is not there."""
        if self.fs.get_file_info(self.path(rel)).type != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(self.path(rel)) as f:
            return f.read().decode("utf-8", errors="replace")

    def subdirs(self, rel: str = "") -> list[str]:
        """Names of the folders directly under ``rel`` (sorted)."""
        return sorted(i.base_name for i in self._listing(rel) if i.type == pafs.FileType.Directory)

    def files(self, rel: str = "") -> list[str]:
        """Names of the files directly under ``rel`` (sorted)."""
        return sorted(i.base_name for i in self._listing(rel) if i.type == pafs.FileType.File)

    def _listing(self, rel: str) -> list[pafs.FileInfo]:
        return self.fs.get_file_info(pafs.FileSelector(self.path(rel), allow_not_found=True))

    def local_copy(self, rel: str, dest: Path) -> Path | None:
        """Copy one file to a local path (SQLite needs a real file); None when it is not there."""
        if self.fs.get_file_info(self.path(rel)).type != pafs.FileType.File:
            return None
        dest.parent.mkdir(parents=True, exist_ok=True)
        with self.fs.open_input_stream(self.path(rel)) as src, open(dest, "wb") as out:
            shutil.copyfileobj(src, out)
        return dest
