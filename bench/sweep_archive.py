"""A finished sweep kept small enough to commit, and judged again from it: what the report reads, no weights.

``pack(root, members, dest)`` writes a gzipped tar of the files under ``root/member`` that a sweep's report and
leaderboard read back (``sweep.report.load``: Tune's ``result.json`` and ``params.json``, ``error.txt``, the
trials' attempt records, ``leaderboard.json``, ``sweep_config.json``, each trial's ``aggregated_results.jsonl``,
with its per-task eval counts, and ``trainer_config.json``), leaving out checkpoints (``checkpoint_*``,
``global_step_*``: weights), the eval dumps (``global_step_*/{env}.jsonl``: every episode's text, already
counted per task in the eval lines), the report's pages and plots, TensorBoard and W&B files. ``unpack(tarball,
into)`` extracts one; ``opened(sources)`` gives packs and folders alike as folders, a pack's removed on leaving. The verdict bench packs each searcher seed's sweep, so
rules can be tuned on seeds 0-9 and judged on seeds 10-19 again without running a sweep (``bench/verdict.py
judge --results bench/data/verdict_sweeps/*.tar.gz``).
"""

from __future__ import annotations

import gzip
import io
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

KEPT_SUFFIXES = (".json", ".jsonl", ".yaml", ".txt")
LEFT_OUT_PREFIXES = ("checkpoint_", "global_step_", "events.out.tfevents")
LEFT_OUT_PARTS = ("report", "wandb", "tensorboard", "__pycache__")


def kept(relative: Path) -> bool:
    """Whether a file (its path relative to the packed root) is one the report reads back."""
    if relative.suffix not in KEPT_SUFFIXES:
        return False
    return not any(part.startswith(LEFT_OUT_PREFIXES) or part in LEFT_OUT_PARTS for part in relative.parts)


def pack(root: Path, members: list[str], dest: Path) -> Path:
    """Pack the kept files under each ``root/member`` (a file or a folder) into ``dest`` (``.tar.gz``), in a fixed
    order with no times or owners, so the same sweep packs to the same bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for member in members:
        path = root / member
        if not path.exists():
            raise FileNotFoundError(f"{path}: nothing to pack")
        candidates = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        files += [p for p in candidates if kept(p.relative_to(root))]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(set(files)):
            info = tarfile.TarInfo(str(path.relative_to(root)))
            data = path.read_bytes()
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    dest.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return dest


def is_pack(path: Path) -> bool:
    return path.name.endswith(".tar.gz")


def unpack(tarball: Path, into: Path) -> Path:
    """Extract a packed sweep (plain files only) into ``into`` and return it."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, mode="r:gz") as tar:
        tar.extractall(into, filter="data")
    return into


@contextmanager
def opened(sources: list[Path]) -> Iterator[list[Path]]:
    """Each source as a folder: a pack (``.tar.gz``) unpacked into a temporary folder that is removed on leaving,
    a folder as it is."""
    with ExitStack() as stack:
        yield [unpack(s, Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"{s.name.split('.')[0]}-")))) if is_pack(s) else s
               for s in sources]
