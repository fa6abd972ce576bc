"""The end-of-sweep leaderboard: one row per trial, best first, printed as a table and saved as JSON."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sweep.results import trial_history
from sweep.stoppers import VARIANCE, no_signal
from sweep.storage import Storage


@dataclass
class TrialRow:
    trial: str
    config: dict[str, Any]
    first_metric: float | None
    best_metric: float | None
    last_variance_per_prompt: float | None
    steps: int
    status: str  # finished | stopped early (the scheduler) | zero signal | error
    error: str = ""


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def trial_row(result, metric: str, mode: str, total_steps: int, keys: list[str], zero_signal: tuple[float, int] | None = None) -> TrialRow:
    """Summarise one Tune ``Result`` from its history, one row per step (a resumed trial's redone steps count once)."""
    import pandas as pd

    history = trial_history(result.path, result.filesystem) if result.path else []
    frame = pd.DataFrame(history) if history else result.metrics_dataframe
    config = {k: result.config.get(k) for k in keys}
    name = str(result.metrics.get("trial_id") or (Path(result.path).name if result.path else "?"))
    if frame is None or frame.empty or metric not in frame:
        return TrialRow(name, config, None, None, None, 0, "error", str(result.error or "no metrics reported"))
    series = frame[metric]
    steps = int(frame["training_iteration"].max())
    status = "error" if result.error else ("finished" if steps >= total_steps else "stopped early")
    if status == "stopped early" and zero_signal and VARIANCE in frame and no_signal(list(frame[VARIANCE]), *zero_signal):
        status = "zero signal"
    return TrialRow(
        trial=name,
        config=config,
        first_metric=_num(series.iloc[0]),
        best_metric=_num(series.max() if mode == "max" else series.min()),
        last_variance_per_prompt=_num(frame[VARIANCE].iloc[-1]) if VARIANCE in frame else None,
        steps=steps,
        status=status,
        error=str(result.error or ""),
    )


def rank(rows: list[TrialRow], mode: str) -> list[TrialRow]:
    """Best first; trials without a metric last."""
    sign = -1 if mode == "max" else 1
    return sorted(rows, key=lambda r: (r.best_metric is None, sign * (r.best_metric or 0.0), -r.steps))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2e}" if 0 < abs(value) < 1e-2 else f"{value:.3g}"
    return str(value)


def render(rows: list[TrialRow], metric: str, console=None) -> None:
    """A table of the trials, best first; keys shown by their last dotted part."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if not console.is_terminal:
        console = Console(width=160, file=console.file)
    short = metric.split("/")[-1]
    table = Table(title=f"Leaderboard (by best {metric})")
    keys = list(rows[0].config) if rows else []
    headers = ["#", "trial", *[k.split(".")[-1] for k in keys], f"first {short}", f"best {short}", "last variance_per_prompt", "steps", "status"]
    for column in headers:
        table.add_column(column, no_wrap=True)
    for i, r in enumerate(rows, start=1):
        values = [r.config.get(k) for k in keys]
        table.add_row(str(i), r.trial, *map(_fmt, values), _fmt(r.first_metric), _fmt(r.best_metric), _fmt(r.last_variance_per_prompt), str(r.steps), r.status)
    console.print(table)


def save(rows: list[TrialRow], store: Storage, name: str) -> str:
    """Write ``{storage}/{name}/leaderboard.json`` (local or S3); returns where."""
    return store.write_text(json.dumps([asdict(r) for r in rows], indent=2, default=str), name, "leaderboard.json")
