"""Which checkpoint a restarted trial continues from: its newest complete one in storage.

Tune restores a trial from the checkpoint its last experiment snapshot recorded; a snapshot can be a second
(or, at Tune's defaults, ten) older than the trial's newest checkpoint, and a driver killed in between would
cost the trial the steps since. So each trial names its checkpoint directories by GRPO step
(``checkpoint_000004``: a redone step overwrites its own, never another's) and, once Tune has persisted one,
the driver writes a small marker into it (``MarkPersisted``); a restarted trial takes the newest marked
checkpoint, or Tune's if newer. The driver marks it, not the trial: ``tune.report`` persists the checkpoint,
then blocks until Tune asks for the next step, which it never does after the last (it stops the trial), so a
trial's own marker after the report would never mark its final checkpoint.
Reports carry ``training_iteration = step``, so Tune's clock (ASHA rungs, the step limit) stays the step,
and each report is also written by the trial itself to ``{trial}/steps/`` (``record_step``).

Uses Tune's ``get_storage()`` (a DeveloperAPI) for the trial's storage directory; without it (another
Ray) trials fall back to Tune's own restore.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs
from ray.tune import Callback

from sweep.store.results import STEPS_DIR, recorded_steps
from sweep.store.storage import write_whole

log = logging.getLogger(__name__)

MARKER = "grpo_complete.json"
STATE_FILE = "trainer_state.json"


@dataclass(frozen=True)
class Saved:
    """A checkpoint in storage and the GRPO step it holds."""

    step: int
    path: str
    fs: pafs.FileSystem


def _storage():
    from ray import tune

    try:
        return tune.get_context().get_storage()
    except (AttributeError, RuntimeError):
        return None


def dir_name(step: int) -> str:
    return f"checkpoint_{step:06d}"


def _read_json(fs: pafs.FileSystem, path: str) -> dict[str, Any] | None:
    try:
        with fs.open_input_stream(path) as f:
            return json.loads(f.read().decode())
    except (FileNotFoundError, OSError, ValueError):
        return None


def name_next(step: int) -> None:
    """Make Tune persist the coming checkpoint as ``checkpoint_{step}``; drop an old marker there first
    (a step redone after a restart overwrites its directory, which is incomplete until marked again)."""
    storage = _storage()
    if storage is None:
        return
    storage.current_checkpoint_index = step - 1  # Tune adds one before it persists
    marker = f"{storage.trial_fs_path}/{dir_name(step)}/{MARKER}"
    if storage.storage_filesystem.get_file_info(marker).type != pafs.FileType.NotFound:
        storage.storage_filesystem.delete_file(marker)


def record_step(step: int, row: dict[str, Any]) -> None:
    """Write the step's report to ``{trial}/steps/step_{N}.json`` before Tune hears of it.

    Tune's ``result.json`` lives with the driver and reaches storage a moment later; a driver killed in
    that moment would lose rows the checkpoint already covers (steps not redone). A redone step
    overwrites its own file, whole (a reader never finds it part-written).
    """
    storage = _storage()
    if storage is None:
        return
    fs, folder = storage.storage_filesystem, f"{storage.trial_fs_path}/{STEPS_DIR}"
    fs.create_dir(folder, recursive=True)
    write_whole(fs, f"{folder}/step_{step:06d}.json", json.dumps(row, default=float).encode())


def recorded(step: int) -> dict[str, Any] | None:
    """The trial's own record of ``step`` (``record_step``), None where it has none or no storage."""
    storage = _storage()
    if storage is None:
        return None
    return recorded_steps(storage.trial_fs_path, storage.storage_filesystem).get(step)


class MarkPersisted(Callback):
    """A Tune callback (driver side): marks each reported checkpoint whole as its result arrives.

    A result that names a checkpoint (``checkpoint_dir_name``) is sent only after the trial's report persisted
    it, so it is whole; the marker reaches storage before the result's row does (the driver's rows are synced
    with its experiment snapshots). Listed first among the callbacks, ahead of Tune's result logger.
    """

    def on_trial_result(self, iteration, trials, trial, result, **info):
        name, step = result.get("checkpoint_dir_name"), result.get("step")
        if not name or step is None:
            return
        fs, folder = trial.storage.storage_filesystem, f"{trial.storage.trial_fs_path}/{name}"
        try:
            if fs.get_file_info(folder).type == pafs.FileType.Directory:  # (another trainable's checkpoint may live elsewhere)
                write_whole(fs, f"{folder}/{MARKER}", json.dumps({"step": int(step)}).encode())
        except OSError as exc:  # unmarked, the checkpoint is still Tune's to restore from; the sweep goes on
            log.warning("could not mark %s complete: %s", folder, exc)


def saved_in_storage() -> list[Saved]:
    """The trial's marked checkpoints in storage, whose marker and trainer state agree on the step."""
    storage = _storage()
    if storage is None:
        return []
    fs = storage.storage_filesystem
    found = []
    for info in fs.get_file_info(pafs.FileSelector(storage.trial_fs_path, allow_not_found=True)):
        if info.type != pafs.FileType.Directory or not info.base_name.startswith("checkpoint_"):
            continue
        marker, state = _read_json(fs, f"{info.path}/{MARKER}"), _read_json(fs, f"{info.path}/{STATE_FILE}")
        if marker and state and marker.get("step") == state.get("step"):
            found.append(Saved(int(state["step"]), info.path, fs))
    return found


def newest(restored) -> Saved | None:
    """The newest of Tune's restored checkpoint (trusted) and the trial's own marked ones in storage.

    A restored checkpoint from another trial's directory (PBT's exploit of a donor) is taken as it is.
    """
    own = saved_in_storage()
    if restored is None:
        return max(own, key=lambda s: s.step, default=None)
    fs = restored.filesystem or pafs.LocalFileSystem()
    state = _read_json(fs, f"{restored.path}/{STATE_FILE}")
    tune_saved = Saved(int(state["step"]) if state else 0, restored.path, fs)
    mine = [s for s in own if s.path.rsplit("/", 1)[0] == restored.path.rstrip("/").rsplit("/", 1)[0]]
    return max([tune_saved, *mine], key=lambda s: s.step)


def download(saved: Saved, local: str) -> str:
    from ray import tune

    return tune.Checkpoint(saved.path, filesystem=saved.fs).to_directory(local)
