"""The ``report`` subcommand's arguments and its handler (kept here so ``sweep/__main__.py`` stays thin)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from configkit.base import ConfigError
from configkit.outputs import check_output_folder
from sweep.verdict.thresholds import Thresholds, threshold_problems


def add_report_command(commands) -> None:
    """Register ``python -m sweep report SWEEP [--out DIR] [--<threshold> X ...]``."""
    p = commands.add_parser("report", help="write report/index.html, PNG plots and summary.md for a finished sweep")
    p.add_argument("sweep", help="the sweep's directory ({storage}/{name}) or s3://bucket/prefix[?endpoint_override=host:port&scheme=http]")
    p.add_argument("--out", type=Path, help="where to write (default: {sweep}/report, rewritten each time; ./report-{name}-{8 hex digits of its address} for S3)")
    p.add_argument("--force", action="store_true", help="replace a report already in --out (its summary.md and index.html)")
    p.add_argument("--min-complete", type=int, default=None, help="finished Optuna trials needed for importance (default 3)")
    for f in fields(Thresholds):
        p.add_argument(f"--{f.name.replace('_', '-')}", type=float, default=f.default, dest=f"th_{f.name}",
                       help=f"threshold (default {f.default:g}); see sweep/verdict/thresholds.py")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from sweep.report import default_out, make_report
    from sweep.report.render import REPORT_FILES

    thresholds = Thresholds(**{f.name: getattr(args, f"th_{f.name}") for f in fields(Thresholds)})
    problems = threshold_problems(thresholds)
    if args.min_complete is not None and args.min_complete < 1:
        problems.append(f"--min-complete = {args.min_complete}: allowed: a whole number of 1 or more")
    if problems:
        raise ConfigError("\n".join(problems))
    if args.out is not None:
        check_output_folder(args.out, "--out", REPORT_FILES, args.force)  # a folder of the user's: its files are not replaced unasked
    elif default_out(args.sweep).parent.is_dir():  # the sweep's own report folder, rewritten each time: named before the work
        check_output_folder(default_out(args.sweep), "the report folder (--out names another)", REPORT_FILES, force=True)
    try:
        out, markdown = make_report(args.sweep, args.out, thresholds, args.min_complete)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(markdown)
    print(f"\nreport: {out / 'index.html'}")
    return 0
