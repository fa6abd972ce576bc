"""The ``report`` subcommand's arguments and its handler (kept here so ``sweep/__main__.py`` stays thin)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from sweep.verdict.thresholds import Thresholds


def add_report_command(commands) -> None:
    """Register ``python -m sweep report SWEEP [--out DIR] [--<threshold> X ...]``."""
    p = commands.add_parser("report", help="write report/index.html, PNG plots and summary.md for a finished sweep")
    p.add_argument("sweep", help="the sweep's directory ({storage}/{name}) or s3://bucket/prefix[?endpoint_override=host:port&scheme=http]")
    p.add_argument("--out", type=Path, help="where to write (default: {sweep}/report; ./report-{name} for S3)")
    p.add_argument("--min-complete", type=int, default=None, help="finished Optuna trials needed for importance (default 3)")
    for f in fields(Thresholds):
        p.add_argument(f"--{f.name.replace('_', '-')}", type=float, default=f.default, dest=f"th_{f.name}",
                       help=f"threshold (default {f.default:g}); see sweep/verdict/thresholds.py")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from sweep.report import make_report

    thresholds = Thresholds(**{f.name: getattr(args, f"th_{f.name}") for f in fields(Thresholds)})
    try:
        out, markdown = make_report(args.sweep, args.out, thresholds, args.min_complete)
    except FileNotFoundError as exc:
        print(f"error: {exc}")
        return 2
    print(markdown)
    print(f"\nreport: {out / 'index.html'}")
    return 0
