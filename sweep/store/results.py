"""A trial's results read back, one row per GRPO step: what the leaderboard and reports read.

Tune appends a row to ``result.json`` at every report. A trial resumed after its driver died continues from
its last checkpoint and redoes the steps after it; and Tune's restore starts each trial's ``result.json``
afresh, so before a restore ``keep_before_resume`` copies every trial's rows to
``result.before-resume-{k}.jsonl``. ``trial_history`` reads those copies, oldest first, then
``result.json``, and keys rows by ``training_iteration`` (the trials report it as the step): the last
written row of a step wins, as it is the history the checkpointed policy actually has. Each trial also
writes its own record of every step to ``steps/`` before Tune hears of it; those fill any row Tune's
files lost when the driver died, and win over them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

RESULT_FILE = "result.json"
KEPT = re.compile(r"^result\.before-resume-(\d+)\.jsonl$")  # not *.json: Tune's restore copies those down
STEP_KEY = "training_iteration"
STEPS_DIR = "steps"  # sweep.trials.checkpoints.record_step writes there, one file per step


def _open(trial_dir: str | Path, filesystem: pafs.FileSystem | None) -> tuple[pafs.FileSystem, str]:
    if filesystem is not None:
        return filesystem, str(trial_dir).rstrip("/")
    if "://" in str(trial_dir):
        return pafs.FileSystem.from_uri(str(trial_dir).rstrip("/"))
    return pafs.LocalFileSystem(), str(Path(trial_dir).resolve())


def _result_files(fs: pafs.FileSystem, trial_dir: str) -> list[str]:
    """The kept copies in the order they were made, then ``result.json``."""
    infos = fs.get_file_info(pafs.FileSelector(trial_dir, allow_not_found=True))
    kept = sorted((int(m.group(1)), i.path) for i in infos if (m := KEPT.match(i.base_name)))
    current = [i.path for i in infos if i.base_name == RESULT_FILE]
    return [path for _, path in kept] + current


def _rows(fs: pafs.FileSystem, path: str) -> list[dict[str, Any]]:
    with fs.open_input_stream(path) as f:
        text = f.read().decode()
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # blank, or the last line cut short when the driver was killed mid-write
            continue
        if isinstance(row, dict):  # a line that is JSON but no row (a number, a list) is damage, read as unreadable
            rows.append(row)
    return rows


def step_of(row: dict[str, Any]) -> int | None:
    """A row's step (``training_iteration``, else ``step``): a whole number, or None for a row that names none (or names
    it as something else: a damaged row)."""
    step = row.get(STEP_KEY, row.get("step"))
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step) or step != int(step):
        return None
    return int(step)


def raw_history(trial_dir: str | Path, filesystem: pafs.FileSystem | None = None) -> list[dict[str, Any]]:
    """Every report the trial made, in the order written, across restores (steps may repeat)."""
    fs, path = _open(trial_dir, filesystem)
    return [row for file in _result_files(fs, path) for row in _rows(fs, file)]


def dedupe_by_step(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per step (``training_iteration``, else ``step``), the last written wins, in step order."""
    by_step: dict[int, dict[str, Any]] = {}
    for row in rows:
        step = step_of(row)
        if step is not None:
            by_step[step] = row
    return [by_step[s] for s in sorted(by_step)]


def recorded_steps(trial_dir: str | Path, filesystem: pafs.FileSystem | None = None) -> dict[int, dict[str, Any]]:
    """The reports the trial itself wrote to ``steps/step_{N}.json`` (a redone step overwrote its own), by step."""
    fs, path = _open(trial_dir, filesystem)
    infos = fs.get_file_info(pafs.FileSelector(f"{path}/{STEPS_DIR}", allow_not_found=True))
    found = {}
    for info in infos:
        if info.base_name.startswith("step_") and info.base_name.endswith(".json"):
            with fs.open_input_stream(info.path) as f:
                text = f.read().decode()
            try:
                row = json.loads(text)
            except json.JSONDecodeError:  # cut by a stop mid-write before records were written whole: Tune's row stands
                continue
            if isinstance(row, dict) and (step := step_of(row)) is not None:
                found[step] = row
    return found


def trial_history(trial_dir: str | Path, filesystem: pafs.FileSystem | None = None) -> list[dict[str, Any]]:
    """The trial's reports, one per step in step order (a local dir, an ``s3://`` URI, or a path on ``filesystem``).

    Tune's rows (with its own fields: time_total_s, trial_id, ...) overlaid with the trial's own step
    records, which hold every step even when the driver died before Tune's rows reached storage.
    """
    rows = {step_of(r): r for r in dedupe_by_step(raw_history(trial_dir, filesystem))}
    for step, row in recorded_steps(trial_dir, filesystem).items():
        rows[step] = {**rows.get(step, {}), **row}
    return [rows[s] for s in sorted(rows)]


def keep_before_resume(fs: pafs.FileSystem, experiment_dir: str) -> int:
    """Copy each trial's ``result.json`` to its next ``result.before-resume-{k}.jsonl``; returns how many."""
    kept = 0
    for info in fs.get_file_info(pafs.FileSelector(experiment_dir, allow_not_found=True)):
        current = f"{info.path}/{RESULT_FILE}"
        if info.type != pafs.FileType.Directory or fs.get_file_info(current).type != pafs.FileType.File:
            continue
        k = len(_result_files(fs, info.path))  # the copies so far, plus result.json itself
        fs.copy_file(current, f"{info.path}/result.before-resume-{k}.jsonl")
        kept += 1
    return kept


TRIAL_FOLDER = re.compile(r"^[A-Za-z_]+?_([0-9a-f]{5,}(?:_\d{5})?)_\d+_")  # Tune's {trainable}_{trial id}_{n}_{params}: ids are 8 hex (searchers) or 5 hex _ 5 digits


def trial_id_of(folder: str, rows: list[dict[str, Any]] | None = None) -> str:
    """A trial's id: from its reports, else from its folder's name (a trial that failed before its first
    report has only that), so the leaderboard and the report name every trial alike."""
    if rows and rows[-1].get("trial_id"):
        return str(rows[-1]["trial_id"])
    match = TRIAL_FOLDER.match(Path(folder).name)
    return match.group(1) if match else Path(folder).name
