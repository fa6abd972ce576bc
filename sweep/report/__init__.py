"""``python -m sweep report``: what won, why, what each environment is doing, from a finished sweep.

``store`` reads the sweep (local or S3), ``load`` parses its records, ``summary`` makes the leaderboard and
the per-env table, ``rules`` diagnoses, ``importance`` reads the Optuna study, ``coverage`` says where the sweep looked, ``trajectories`` groups
the eval dumps' failures, ``plots`` draws, ``build`` assembles and ``render`` writes Markdown and HTML.
The live page (``sweep.watch.live_page``) is the same assembly and rendering of a running sweep's results so far.
Leaves out writing the report back to S3.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from sweep.store.uris import bare_uri
from sweep.verdict.thresholds import Thresholds


def default_out(uri: str) -> Path:
    """``{sweep}/report`` for a local sweep; for one on S3 (the report is written locally), ``./report-{name}-{8 hex
    digits of its address}``: sweeps of one name in two buckets or prefixes, reported from one folder, keep apart."""
    if "://" in uri and not uri.startswith("file://"):
        address = bare_uri(uri)
        return Path.cwd() / f"report-{address.rsplit('/', 1)[-1]}-{zlib.crc32(address.encode()):08x}"
    return Path(uri.removeprefix("file://")).expanduser().resolve() / "report"


def make_report(uri: str, out: Path | None = None, thresholds: Thresholds | None = None, min_complete: int | None = None) -> tuple[Path, str]:
    """Build and write the report; returns its directory and the Markdown summary."""
    out = out or default_out(uri)
    _, _, markdown = build_and_write(uri, out, thresholds, min_complete)
    return out, markdown


def build_and_write(uri: str, out: Path, thresholds: Thresholds | None = None, min_complete: int | None = None) -> tuple[Any, Path, str]:
    """The report built and written to ``out``: (the report, its index.html, the Markdown summary)."""
    from sweep.report.build import build_report
    from sweep.report.importance import MIN_COMPLETE
    from sweep.report.render import write_report

    rep = build_report(uri, out, thresholds, min_complete or MIN_COMPLETE)
    _, page, markdown = write_report(rep, out)
    return rep, page, markdown
