"""A trial's attempts: every start of ``run_trial`` for one trial, recorded in the trial's folder in storage.

Tune starts a trial again after its process died (out of memory, a killed worker, a lost node: up to
``failures.max_trial_restarts`` times), after PBT paused it or gave it another trial's checkpoint, and on
``sweep resume``. Each start writes ``{trial}/attempts/attempt_{k}.json`` (the driver's run, the pid, the
step it resumed from) and marks it ended when it leaves by its own hand: finished, stopped or paused by
Tune, or raised. Hence:

- a restart is an attempt whose predecessor never ended, because its process died (``restarts``);
- a trial whose steps ran in another process that died (``ProcessLost``: a pack host) is recorded as died;
- an attempt whose predecessor raised in the same driver run refuses to train (``check_not_raised``):
  Tune retries any failure and cannot tell an exception from a lost process, and a bug or a config error
  raises again; ``sweep resume`` (another run) does retry it, from its checkpoint;
- each report carries its attempt (``ATTEMPT``): a row an earlier attempt wrote for a step after a later
  attempt's start is history that start replaced (``current_rows``), even before the restart reaches it.

Not here: multi-worker trials' worker failures, which Ray Train retries inside the trial (``sweep.trials.multiworker``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow.fs as pafs

from sweep.store.storage import write_whole

ATTEMPTS_DIR = "attempts"
ATTEMPT = "trial/attempt"  # the key each report carries


class RaisedBefore(RuntimeError):
    """The trial's previous attempt raised in this run: it is not started again."""


class ProcessLost(RuntimeError):
    """The process that ran the trial's steps died (a pack host, ``sweep.trials.packing``): the attempt is recorded
    as one whose process died, not as one that raised, so Tune's retry is a restart from the checkpoint."""


@dataclass
class Attempt:
    number: int
    run: str  # the driver's run (``sweep.tuner.build_trainable``): a retry within it, or ``sweep resume``
    pid: int
    started: float
    resumed_from: int | None = None  # the step of the checkpoint it continued from (0: from step 1); None: unknown
    ended: float | None = None  # None: its process died
    raised: str | None = None


def read(fs: pafs.FileSystem, trial_path: str) -> list[Attempt]:
    """The trial's attempts, oldest first (none for trials run before attempts were recorded). A record
    cut short (older versions wrote in place, and a stop could land mid-write) is skipped, not fatal."""
    found = []
    for info in fs.get_file_info(pafs.FileSelector(f"{trial_path}/{ATTEMPTS_DIR}", allow_not_found=True)):
        if info.base_name.startswith("attempt_") and info.base_name.endswith(".json"):
            with fs.open_input_stream(info.path) as f:
                text = f.read().decode()
            try:
                found.append(Attempt(**json.loads(text)))
            except (ValueError, TypeError):
                continue
    return sorted(found, key=lambda a: a.number)


def restarts(attempts: list[Attempt]) -> int:
    """How many times the trial started again after its process died."""
    return sum(1 for before in attempts[:-1] if before.ended is None)


def current_rows(rows: list[dict[str, Any]], attempts: list[Attempt]) -> list[dict[str, Any]]:
    """The rows still the trial's history: not those of a step a later attempt started before (it redid or
    will redo it). Rows without an attempt (older sweeps, multi-worker trials) are all kept."""
    starts = {a.number: a.resumed_from for a in attempts if a.resumed_from is not None}

    def current(row: dict[str, Any]) -> bool:
        attempt, step = row.get(ATTEMPT), row.get("training_iteration", row.get("step"))
        return attempt is None or step is None or all(step <= start for later, start in starts.items() if later > attempt)

    return [row for row in rows if current(row)]


def check_not_raised(attempts: list[Attempt], run: str) -> None:
    previous = attempts[-1] if attempts else None
    if previous is not None and previous.raised and previous.run == run:
        raise RaisedBefore(
            f"not restarted: attempt {previous.number} of this trial raised {previous.raised}. An exception (a bug, a config "
            "error) would raise again, so only a trial whose process died is restarted; `sweep resume` retries it from its checkpoint"
        )


class Recorder:
    """This attempt's record in the trial's folder; without Tune's storage context (another Ray) it records nothing."""

    def __init__(self, fs: pafs.FileSystem | None, trial_path: str, attempt: Attempt):
        self.fs, self.trial_path, self.attempt = fs, trial_path, attempt

    @classmethod
    def start(cls, run: str) -> Recorder:
        """Begin this trial's next attempt; raises ``RaisedBefore`` where the last one raised in this run."""
        fs, path = _trial_folder()
        attempts = read(fs, path) if fs is not None else []
        check_not_raised(attempts, run)
        recorder = cls(fs, path, Attempt(len(attempts), run, os.getpid(), time.time()))
        recorder._write()
        return recorder

    def resumes_from(self, step: int) -> None:
        self.attempt.resumed_from = step
        self._write()

    @contextmanager
    def running(self) -> Iterator[None]:
        """Marks the attempt ended however it leaves, and what it raised; a killed process marks nothing."""
        try:
            yield
        except ProcessLost:  # as if this process had died: nothing more is written
            raise
        except Exception as exc:
            self.end(raised=f"{type(exc).__name__}: {exc}"[:2000])
            raise
        except BaseException:  # Tune stopping or pausing the trial (SystemExit in its thread)
            self.end()
            raise
        self.end()

    def end(self, raised: str | None = None) -> None:
        """Mark the attempt ended (again: the latest end, and what it raised, if anything, is the one kept)."""
        self.attempt.ended, self.attempt.raised = time.time(), raised
        self._write()

    def _write(self) -> None:
        if self.fs is None:
            return
        folder = f"{self.trial_path}/{ATTEMPTS_DIR}"
        self.fs.create_dir(folder, recursive=True)
        # whole: a stop that landed mid-write once left an empty record that failed the sweep's leaderboard
        write_whole(self.fs, f"{folder}/attempt_{self.attempt.number:03d}.json", json.dumps(asdict(self.attempt)).encode())


def _trial_folder() -> tuple[pafs.FileSystem | None, str]:
    from ray import tune

    try:
        storage = tune.get_context().get_storage()
    except (AttributeError, RuntimeError):
        storage = None
    return (storage.storage_filesystem, storage.trial_fs_path) if storage is not None else (None, "")
