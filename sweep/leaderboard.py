"""The end-of-sweep leaderboard: every trial judged (``sweep.report.judge``: the same ranking as ``sweep
report``), printed as a table with the verdict's sentences, and saved as ``leaderboard.json``.

A trial's fate (finished, stopped early by the scheduler, zero signal, error) comes from Tune's results,
which alone know a trial errored; everything else is read back from storage, as the report reads it,
including how many times the trial restarted after its process died (``sweep.trials.attempts``).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass
from typing import Any

from configkit.base import ConfigError
from grpo.metrics import shown_values
from sweep.store.results import trial_history, trial_id_of
from sweep.store.storage import Storage
from sweep.trials import attempts
from sweep.trials.stoppers import VARIANCE, fate
from sweep.watch.text import fmt


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
    restarts: int = 0  # times the trial started again after its process died


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def trial_row(result, metric: str, mode: str, total_steps: int, keys: list[str], zero_signal: tuple[float, int] | None = None) -> TrialRow:
    """A trial's fate from one Tune ``Result`` and its history, one row per step (a restarted trial's redone
    steps count once, and the steps it has not redone yet not at all)."""
    import pandas as pd

    tried = attempts.read(result.filesystem, result.path) if result.path else []
    history = attempts.current_rows(trial_history(result.path, result.filesystem), tried) if result.path else []
    frame = pd.DataFrame(history) if history else result.metrics_dataframe
    config = {k: result.config.get(k) for k in keys}
    name = str(result.metrics.get("trial_id") or (trial_id_of(result.path) if result.path else "?"))
    if frame is None or frame.empty or metric not in frame:
        return TrialRow(name, config, None, None, None, 0, "error", str(result.error or "no metrics reported"), attempts.restarts(tried))
    values = shown_values(frame.to_dict("records"), metric)
    steps = int(frame["training_iteration"].max())
    status = fate(steps, total_steps, list(frame[VARIANCE]) if VARIANCE in frame else [], zero_signal, bool(result.error))
    return TrialRow(
        trial=name,
        config=config,
        first_metric=values[0] if values else None,  # eval/score's placeholders before a trained eval are no values
        best_metric=(max if mode == "max" else min)(values, default=None),
        last_variance_per_prompt=_num(frame[VARIANCE].iloc[-1]) if VARIANCE in frame else None,
        steps=steps,
        status=status,
        error=str(result.error or ""),
        restarts=attempts.restarts(tried),
    )


def judged_rows(fates: list[TrialRow], store: Storage, name: str) -> list[dict[str, Any]]:
    """Every trial with its verdict, best first: the fates from Tune, the judgement from storage."""
    from sweep.report.judge import judge, row
    from sweep.report.load import load_sweep
    from sweep.report.store import SweepStore
    from sweep.resume import experiment_uri

    by_id = {r.trial: r for r in fates}
    try:
        sweep = load_sweep(SweepStore(experiment_uri(store.uri, name)))
    except FileNotFoundError:  # no trial wrote a result: nothing to judge, only their fates to say
        return [asdict(r) for r in fates]
    except ConfigError as exc:  # a damaged record: the sweep's end still says every trial's fate, and why no verdict
        print(f"leaderboard: the trials' results could not be judged ({exc}); it holds their fates alone", file=sys.stderr, flush=True)
        return [asdict(r) for r in fates]
    judged = judge(sweep, {r.trial: r.status for r in fates})
    rows = [{**row(j, by_id[j.trial_id].config if j.trial_id in by_id else {}), **_fate(by_id.get(j.trial_id))} for j in judged]
    missing = [asdict(r) for r in fates if r.trial not in {j.trial_id for j in judged}]  # no folder in storage: errored early
    return rows + missing


def _fate(fate: TrialRow | None) -> dict[str, Any]:
    if fate is None:
        return {}
    data = asdict(fate)
    return {key: data[key] for key in ("first_metric", "best_metric", "last_variance_per_prompt", "steps", "status", "error", "restarts")}


def _gain(row: dict[str, Any]) -> str:
    if row.get("gain") is None:
        return "-"
    spread = f" [{row['low']:+.3f}, {row['high']:+.3f}]" if row.get("low") is not None else ""
    return f"{row['gain']:+.3f}{spread}" + (" tie" if row.get("tied") else "")


def render(rows: list[dict[str, Any]], console=None) -> None:
    """A table of the trials, best first, then the verdict in words."""
    from rich.console import Console
    from rich.table import Table

    from sweep.verdict.labels import Verdict
    from sweep.verdict.score import Score
    from sweep.verdict.summary import verdict_text

    console = console or Console()
    if not console.is_terminal:
        console = Console(width=170, file=console.file)
    table = Table(title="Leaderboard (by held-out gain over the shared base: base → last, the mean of the last evals; 90% bootstrap interval over tasks)")
    keys = list(rows[0]["config"]) if rows else []
    for column in ["#", "trial", *[k.split(".")[-1] for k in keys], "base → last", "gain [90%]", "verdict", "steps", "restarts", "status"]:
        table.add_column(column, no_wrap=True)
    for i, r in enumerate(rows, start=1):
        course = f"{fmt(r.get('base'), '.3g')} → {fmt(r.get('last'), '.3g')}"
        table.add_row(str(i), r["trial"], *[fmt(r["config"].get(k), '.3g') for k in keys], course, _gain(r), r.get("verdict", "-"),
                      str(r.get("steps", "-")), str(r.get("restarts", "-")), r.get("status", "-"))
    console.print(table)
    ranked = [(r["trial"], r["config"], Score(r.get("gain"), r.get("low"), r.get("high"), tied=bool(r.get("tied"))),
               Verdict(r.get("verdict", "error"), r.get("why", ""), r.get("lr_advice", ""))) for r in rows]
    console.print(verdict_text(ranked, rows[0].get("base") if rows else None))


def save(rows: list[dict[str, Any]], store: Storage, name: str) -> str:
    """Write ``{storage}/{name}/leaderboard.json`` (local or S3); returns where."""
    return store.write_text(json.dumps(rows, indent=2, default=str), name, "leaderboard.json")
