"""Load a sweep's records into plain data: each trial's reported steps, eval points, config and fate.

Sources, all optional except the trial folders: Tune's ``result.json`` (one JSON line per step),
``params.json`` and ``error.txt`` per trial folder; ``leaderboard.json``; ``sweep_config.json``; ``confirm.json``; ``trajectories/{trial}/``
(``aggregated_results.jsonl``, ``trainer_config.json``). Leaves the eval dumps to ``trajectories.py`` and
the Optuna study to ``importance.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from configkit.base import ConfigError
from sweep.report.store import SweepStore
from sweep.store.records import (
    CONFIRMATION,
    LEADERBOARD,
    confirmation_problem,
    kind,
    leaderboard_problem,
    parsed,
    saved_config_problem,
)
from sweep.store.results import step_of, trial_id_of
from sweep.trials import attempts
from toolenvs.outcomes import passed

EVAL_METRIC = "eval/avg_pass_at_1"
TRAIN_METRIC = "reward/avg_pass_at_1"


@dataclass
class TrialData:
    trial_id: str
    folder: str
    config: dict[str, Any]
    rows: list[dict[str, Any]]  # result.json, one per reported step
    evals: list[dict[str, Any]] = field(default_factory=list)  # aggregated_results.jsonl, step 0 included
    trainer_config: dict[str, Any] | None = None
    error: str = ""
    restarts: int = 0  # times the trial started again after its process died (sweep.trials.attempts)
    mended: str = ""  # what was read from elsewhere because a record was lost or cut (``_with_row_evals``)

    @property
    def steps(self) -> int:
        return max((step_of(r) or 0 for r in self.rows), default=0)

    @property
    def wall_s(self) -> float | None:
        """Tune's ``time_total_s`` at the trial's last step (0 before any); None when that step's row lacks it: its
        ``result.json`` lost, cut or not synced yet, the step known from the trial's own record (``sweep.store.results``) alone."""
        if not self.rows:
            return 0.0
        value = self.rows[-1].get("time_total_s")
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    def episodes_by_step(self) -> dict[int, float]:
        """The rollout episodes the trial had spent by the end of each step (0 at step 0): where the verdict cuts a
        trial's evals at the sweep's common budget (``sweep.verdict.score.common_budget``)."""
        spent, total = {0: 0.0}, 0.0
        for r in sorted(self.rows, key=lambda r: step_of(r) or 0):
            total += float(r.get("rollout/episodes", 0.0))
            spent[step_of(r) or 0] = total
        return spent


@dataclass
class SweepData:
    uri: str
    name: str
    trials: list[TrialData]
    leaderboard: list[dict[str, Any]] | None
    swept_keys: list[str]
    scheduler: str | None = None  # scheduler.type from sweep_config.json, when the sweep saved it
    saved: dict[str, Any] = field(default_factory=dict)  # sweep_config.json, when the sweep saved it
    confirmation: dict[str, Any] | None = None  # confirm.json, once a confirm stage (or `sweep confirm`) ran
    absent: list[str] = field(default_factory=list)  # trials the leaderboard ranks whose folders are not here (deleted, moved)
    zero_signal: tuple[float, int] | None = None  # the zero-signal rule from sweep_config.json, when on


def _json_lines(text: str | None) -> list[dict[str, Any]]:
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash mid-write
            if isinstance(record, dict):  # JSON but no record (a number, a list): damage, as a cut line
                out.append(record)
    return out


def _json_file(store: SweepStore, name: str, missing: Any, problem: Callable[[Any], str | None] | None = None) -> Any:
    """One of the sweep's JSON records (``missing`` when it is absent or empty); a damaged one (not JSON, or of another
    shape than ``problem`` reads: ``sweep.store.records``) is a ConfigError naming it."""
    text = store.read_text(name)
    return parsed(text, lambda why: _damaged(store, name, why), problem) if text else missing


def _damaged(store: SweepStore, name: str, why: str) -> str:
    return f"{store.shown(name)}: {why}: the sweep's record is damaged; restore it (or move it away to report without it)"


def _object(data: Any) -> str | None:
    return None if isinstance(data, dict) else f"{kind(data)}, not an object"


def _dump_results(store: SweepStore, traj: str, step: int) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Per task ``[passes, valid episodes]`` and its env, from one eval's dumps (``global_step_N/{env_key}.jsonl``)."""
    tasks: dict[str, list[int]] = {}
    envs: dict[str, str] = {}
    folder = f"{traj}/global_step_{step}"
    for name in store.files(folder):
        for record in _json_lines(store.read_text(f"{folder}/{name}")):
            extras = record.get("env_extras") or {}
            key = str(extras.get("task_key", "?"))
            counts = tasks.setdefault(key, [0, 0])
            envs[key] = str(extras.get("env_key") or name.removesuffix(".jsonl"))
            if not extras.get("env_error"):
                counts[0] += passed(float(record.get("score") or 0.0))
                counts[1] += 1
    return tasks, envs


def _with_task_results(store: SweepStore, traj: str, evals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each eval line with its per-task results and their envs; lines written before they were recorded get
    them from the eval's dumps, when those are there (a line's own results win)."""
    out = []
    for line in evals:
        if "global_step" in line and "task_envs" not in line:
            tasks, envs = _dump_results(store, traj, int(line["global_step"]))
            line = {"tasks": tasks, **line, "task_envs": envs} if tasks else line
        out.append(line)
    return out


def _history(store: SweepStore, folder: str, tried: list[attempts.Attempt]) -> list[dict[str, Any]]:
    """One row per step, a resumed trial's redone steps once (``sweep.store.results``) and the steps a restart
    started before not at all (``sweep.trials.attempts``); Tune's ``result.json`` as it is where that cannot be read."""
    from sweep.store.results import trial_history

    try:
        rows = attempts.current_rows(trial_history(store.path(folder), store.fs), tried)
    except (OSError, ValueError):
        rows = _json_lines(store.read_text(f"{folder}/result.json"))
    return [_measured(r) for r in rows if step_of(r) is not None]


def _measured(row: dict[str, Any]) -> dict[str, Any]:
    """A step row whose metrics (``group/name`` keys) are numbers: one that is not (text, a list, null in a damaged or
    hand-edited file) is left out, as a metric not reported, rather than failing every reader of the row."""
    return {k: v for k, v in row.items() if "/" not in k or (isinstance(v, (int, float)) and not isinstance(v, bool))}


def _attempts(store: SweepStore, folder: str) -> list[attempts.Attempt]:
    try:
        return attempts.read(store.fs, store.path(folder))
    except (OSError, ValueError, TypeError):  # unreadable records: the history as it was written
        return []


def _unreadable(store: SweepStore, folder: str, rows: list[dict[str, Any]]) -> str:
    """The trial's fate when its ``result.json`` has lines but none of them is JSON and no step came from elsewhere
    (else ""), so a damaged record shows as an error in the report, not as a trial that never reported a step. Rows
    dropped for another reason (a restart's redone steps) are not damage."""
    if rows:  # the usual case: no second read of the file
        return ""
    text = store.read_text(f"{folder}/result.json") or ""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or _json_lines(text):
        return ""
    return (f"{store.shown(folder + '/result.json')}: none of its {len(lines)} lines is readable JSON (damaged): the trial's steps are not in this report; "
            "restore it from a copy (result.before-resume-*.jsonl beside it, when the sweep was resumed)")


def load_trial(store: SweepStore, folder: str) -> TrialData:
    tried = _attempts(store, folder)
    rows = _history(store, folder, tried)
    error = (store.read_text(f"{folder}/error.txt") or "").strip() or _unreadable(store, folder, rows)
    return trial_from_rows(store, trial_id_of(folder, rows), folder, _settings(store, folder, rows), rows, error, attempts.restarts(tried))


def _settings(store: SweepStore, folder: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The trial's settings: Tune's ``params.json``, else (lost, emptied, cut, not an object) the ``config`` Tune wrote into
    each of its ``result.json`` rows; {} when neither is there (the report then shows '-')."""
    config = next((r["config"] for r in reversed(rows) if isinstance(r.get("config"), dict) and r["config"]), None)
    try:
        params = _json_file(store, f"{folder}/params.json", None)
    except ConfigError:  # not JSON (cut mid-write): the rows' copy, when they hold one
        if config is None:
            raise
        return config
    if isinstance(params, dict) and params:
        return params
    if config is not None:
        return config
    if params is None or params == {}:
        return {}
    raise ConfigError(_damaged(store, f"{folder}/params.json", f"{kind(params)}, not the trial's settings, and its result.json holds none"))


def trial_from_rows(store: SweepStore, trial_id: str, folder: str, config: dict[str, Any], rows: list[dict[str, Any]],
                    error: str = "", restarts: int = 0) -> TrialData:
    """A trial from its step rows (read back from storage, or as Tune handed them to the driver, for the live
    page) and what the trial itself wrote to storage: its eval points and trainer config."""
    traj = f"trajectories/{trial_id}"
    trainer_config = _json_file(store, f"{traj}/trainer_config.json", None, _object)
    lines = [_measured(line) for line in _json_lines(store.read_text(f"{traj}/aggregated_results.jsonl"))
             if step_of({"step": line.get("global_step")}) is not None]  # a line with no step is no eval
    evals, mended = _with_row_evals(store, traj, lines, rows, trainer_config)
    return TrialData(
        trial_id=trial_id,
        folder=folder,
        config=config,
        rows=rows,
        evals=[_readable_tasks(line) for line in _with_task_results(store, traj, evals)],
        trainer_config=trainer_config,
        error=error,
        restarts=restarts,
        mended=mended,
    )


def _readable_tasks(line: dict[str, Any]) -> dict[str, Any]:
    """An eval line whose per-task results (``tasks``: ``{task: [passes, episodes]}``, ``task_envs``: ``{task: env}``) read
    as such, or without them (a damaged line's point stands, without an interval)."""
    tasks, envs = line.get("tasks"), line.get("task_envs")
    whole = isinstance(tasks, dict) and all(isinstance(v, list) and len(v) == 2 and all(isinstance(n, int) and not isinstance(n, bool) for n in v)
                                             for v in tasks.values())
    if "tasks" in line and not whole or "task_envs" in line and not isinstance(envs, dict):
        return {k: v for k, v in line.items() if k not in ("tasks", "task_envs")}
    return line


def _with_row_evals(store: SweepStore, traj: str, lines: list[dict[str, Any]], rows: list[dict[str, Any]],
                    trainer_config: Any) -> tuple[list[dict[str, Any]], str]:
    """The trial's eval lines, with those its ``aggregated_results.jsonl`` lacks (lost, emptied, its last line cut) read from
    its step rows, which carry each eval's metrics (``eval/global_step`` names the eval): per-task results come from the
    eval's dumps (``_with_task_results``), and step 0 from the sweep's shared base eval when the trial's config names it.
    Else a lost record changed the verdict silently (#1 fell to ``no eval``). Returns the lines and what was read so."""
    have = {step_of({"step": line.get("global_step")}) for line in lines}
    found: dict[int, dict[str, Any]] = {}
    for row in rows:
        step = step_of({"step": row.get("eval/global_step")})
        if step is not None and EVAL_METRIC in row and step not in have:
            found.setdefault(step, {**{k: v for k, v in row.items() if k.startswith("eval/")}, "global_step": step})
    if not found:
        return lines, ""
    if 0 not in have and (base := _shared_base_line(store, trainer_config)) is not None:
        found[0] = base  # no row carries step 0's eval when the trial evaluates every step (the step-1 eval came first)
    where = store.shown(f"{traj}/aggregated_results.jsonl")
    steps = ", ".join(str(s) for s in sorted(found))
    return (sorted([*lines, *found.values()], key=lambda line: int(line["global_step"])),
            f"the evals at step(s) {steps} are not in {where} (lost, cut, or not uploaded yet): read from the trial's step rows")


def _shared_base_line(store: SweepStore, trainer_config: Any) -> dict[str, Any] | None:
    """The sweep's shared base eval the trial's curve started from (``sweep.trials.base_evals``), named by its trainer config."""
    from grpo.config import TrainerConfig
    from sweep.spec.bases import eval_key
    from sweep.store.storage import BASE_EVALS_DIR
    from sweep.trials.base_evals import BASE_EVAL_FILE, base_eval_record

    if not isinstance(trainer_config, dict):
        return None
    try:
        key = eval_key(TrainerConfig.model_validate(trainer_config))
    except ValueError:  # a config this version cannot read: the trial's own step-0 metrics
        return None
    line = base_eval_record(store.read_text(f"{BASE_EVALS_DIR}/{key}/{BASE_EVAL_FILE}"))
    return {**line, "global_step": 0, "shared": True, "base_eval": key} if line is not None else None


def load_sweep(store: SweepStore) -> SweepData:
    """Every trial folder (one holding Tune's result.json or params.json: a lost result.json leaves the trial's own step
    records), the leaderboard if written, the swept keys."""
    folders = [d for d in store.subdirs() if d != "trajectories" and (store.exists(f"{d}/result.json") or store.exists(f"{d}/params.json"))]
    if not folders:
        raise FileNotFoundError(f"{store.uri}: no trial folders with result.json: is this a sweep's {{storage}}/{{name}} directory?")
    trials = [load_trial(store, d) for d in folders]
    refuse_shared_ids(store, trials)
    board = _json_file(store, LEADERBOARD, None, leaderboard_problem)
    keys = list(board[0]["config"]) if board else sorted({k for t in trials for k in t.config})
    sweep = sweep_of(store, trials, board, keys)
    here = {t.trial_id for t in trials}
    sweep.absent = [row["trial"] for row in board or [] if row["trial"] not in here]
    return sweep


def refuse_shared_ids(store: SweepStore, trials: list[TrialData]) -> None:
    """Two trial folders whose records name one trial (a ``result.json`` copied over another's): the report would show one
    trial's settings beside the other's results, and one of them not at all."""
    seen: dict[str, str] = {}
    for t in trials:
        if t.trial_id in seen:
            raise ConfigError(f"{store.shown(seen[t.trial_id])} and {store.shown(t.folder)} both hold the records of trial {t.trial_id} "
                              "(a result.json copied from one trial's folder to another's?): restore the copied file, or move one folder away")
        seen[t.trial_id] = t.folder


def sweep_of(store: SweepStore, trials: list[TrialData], board: list[dict[str, Any]] | None, keys: list[str]) -> SweepData:
    """The sweep from its trials and (when there is one) its leaderboard: each trial's ``status`` there is its fate."""
    saved = _json_file(store, "sweep_config.json", {}, saved_config_problem)
    zero_signal = _zero_signal_rule(store, saved)
    confirmation = _json_file(store, CONFIRMATION, None, confirmation_problem)
    return SweepData(store.uri, store.name, trials, board, keys, (saved.get("scheduler") or {}).get("type"), saved, confirmation,
                     zero_signal=zero_signal)


def _zero_signal_rule(store: SweepStore, saved: dict[str, Any]) -> tuple[float, int] | None:
    """``(threshold, patience)`` of the saved config's zero-signal rule, which the report applies to trials that ended
    early; None when it is off or the config predates it. A rule of another shape names the file."""
    from pydantic import ValidationError

    from sweep.spec.config import ZeroSignalConfig

    try:
        return ZeroSignalConfig.model_validate((saved.get("stopping") or {}).get("zero_signal") or {}).rule()
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(["stopping.zero_signal", *(str(p) for p in first["loc"])])
        raise ConfigError(_damaged(store, "sweep_config.json", f"'{key}' = {first.get('input')!r}: {first['msg']}")) from None


def uses_eval(sweep: SweepData) -> bool:
    """True when any trial reported held-out eval metrics."""
    return any(t.evals or any(EVAL_METRIC in r for r in t.rows) for t in sweep.trials)
