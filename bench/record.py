"""Where a bench's figures go: its per-run data to ``bench/data/``, its one summary line to stdout.

``record(name, runs, summary)`` writes ``bench/data/{name}_{date}_{commit}.jsonl`` (``-dirty`` after the commit when
the checkout had uncommitted changes): one line per run (a round, a
concurrency level, a phase, a seed, a replayed turn) as the bench measured it, then the summary line, which names
the file and the commit and is printed last, as produced by the bench's code. README names each figure's file;
a figure is recomputable from what is committed there.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"


def commit() -> str:
    """The checkout's commit, with ``+`` when it has uncommitted changes (then the figures are not reproducible from it)."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def file_tag() -> str:
    """The commit as it goes into a data file's name (``-dirty`` for uncommitted changes)."""
    return commit().replace("+", "-dirty")


def record(name: str, runs: list[dict[str, Any]], summary: dict[str, Any], folder: Path = DATA) -> Path:
    """Write the runs and the summary (with its file, date and commit) and print the summary line; returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC)
    at = commit()
    path = folder / f"{name}_{stamp:%Y-%m-%d_%H%M%S}_{file_tag()}.jsonl"
    summary = {"bench": name, **summary, "data": str(path.relative_to(folder.parent.parent)) if path.is_relative_to(folder.parent.parent) else str(path),
               "date": f"{stamp:%Y-%m-%dT%H:%MZ}", "commit": at, "runs": len(runs)}
    path.write_text("".join(json.dumps({"run": i, **run}) + "\n" for i, run in enumerate(runs)) + json.dumps(summary) + "\n")
    print(json.dumps(summary))
    return path
