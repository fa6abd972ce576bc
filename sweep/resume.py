"""Surviving a dead driver: what a sweep leaves in storage so ``sweep resume`` can continue it anywhere.

At start a sweep writes ``sweep_config.json`` (the validated SweepConfig) beside Tune's experiment; resume
rebuilds the trainable from it and hands it to ``Tuner.restore``. Tune snapshots its experiment state
(trial statuses, searcher) every ``TUNE_GLOBAL_CHECKPOINT_S`` seconds; we set 1 s (Tune's default is at
least 10 s); the Optuna searcher copies its study to storage each time Tune saves it with a snapshot
(``sweep.tuner.HonestOptunaSearch.save``), so the stored study is never older than the stored snapshot.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from configkit import environ
from configkit.base import ConfigError
from sweep.spec.config import SweepConfig
from sweep.spec.loader import parse_sweep
from sweep.store.driver import DRIVER_FILE
from sweep.store.records import LEADERBOARD
from sweep.store.storage import BASE_EVALS_DIR, PARTIAL, Storage
from sweep.store.study import optuna_db_path

CONFIG_FILE = "sweep_config.json"
STATE_FILE = "tuner.pkl"
SNAPSHOT_PERIOD_S = "1"


def experiment_uri(storage: str, name: str) -> str:
    """The sweep's own URI, what ``sweep resume`` takes: ``dir/name`` or ``s3://bucket/prefix/name?query``."""
    base, sep, query = storage.partition("?")
    return f"{base.rstrip('/')}/{name}" + (f"?{query}" if sep else "")


def sweep_exists(store: Storage, name: str) -> bool:
    return store.exists(name, STATE_FILE) or store.exists(name, CONFIG_FILE)


OWN_BEFORE_CONFIG = (BASE_EVALS_DIR, DRIVER_FILE)  # what a start writes in the sweep's folder before its config (sweep.run.run_sweep)


def foreign_entries(store: Storage, name: str) -> list[str]:
    """What is in the folder ``{storage}/{name}`` that no sweep wrote there, when it is not a sweep's folder:
    the user's own files, which neither ``run`` nor ``--fresh`` may delete."""
    if sweep_exists(store, name):
        return []
    own = (CONFIG_FILE, *OWN_BEFORE_CONFIG)
    return [entry for entry in store.entries(name) if entry not in own and not any(entry.startswith(o + PARTIAL) for o in own)]


def start_fresh(store: Storage, name: str, fresh: bool, space: str, start_over: str | None = None) -> None:
    """``refuse_overwrite``, then ``clear``."""
    refuse_overwrite(store, name, fresh, space, start_over)
    clear(store, name)


def refuse_overwrite(store: Storage, name: str, fresh: bool, space: str, start_over: str | None = None) -> None:
    """Refuse to overwrite an existing sweep unless asked (``--fresh``: delete it and its study), and a folder of
    the sweep's name that holds anything else always (``refuse_foreign``). ``start_over``: the command that
    starts this sweep over, for the refusal (default: ``sweep run`` of ``space`` with ``--fresh``)."""
    refuse_foreign(store, name)
    if sweep_exists(store, name) and not fresh:
        again = f"`{start_over or f'python -m sweep run {space} --fresh'}` (deletes it)"
        if not store.exists(name, STATE_FILE):  # its trials without Tune's state: there is nothing resume can continue
            raise ConfigError(f"{_stateless(store, name, len(trial_folders(store, name)))}; or start over with {again}")
        raise ConfigError(
            f"a sweep named {name!r} already exists at {store.display(name)}. Continue it with "
            f"`python -m sweep resume {experiment_uri(store.uri, name)}`, or start over with {again}"
        )


def trial_folders(store: Storage, name: str) -> list[str]:
    """The folders in the sweep's folder that hold a trial's records (Tune's ``params.json`` or ``result.json``)."""
    if not store.is_dir(name):
        return []
    return [e for e in store.entries(name) if store.exists(name, e, "result.json") or store.exists(name, e, "params.json")]


def _stateless(store: Storage, name: str, trials: int) -> str:
    """What a sweep folder with ``trials`` trial folders but no Tune state (``tuner.pkl`` lost) is, and what can be done with it."""
    return (f"{store.display(name)} holds a sweep's {trials} trial folder(s) but not Tune's state ({STATE_FILE}, lost or "
            f"removed), so it cannot be continued: put the file back from a copy to resume it; `python -m sweep report "
            f"{experiment_uri(store.uri, name)}` reads it as it is")


def refuse_foreign(store: Storage, name: str) -> None:
    """Refuse a folder of the sweep's name that holds what no sweep wrote: it is not ours to delete, or to write in."""
    foreign = foreign_entries(store, name)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ConfigError(
            f"{store.display(name)} exists and is not a sweep's folder (it holds {shown}); a sweep named {name!r} would "
            "replace it. Give the sweep another name (key 'name') or storage (--storage), or move that folder away"
        )


def clear(store: Storage, name: str, keep: tuple[str, ...] = ()) -> None:
    """Delete the sweep's folder but ``keep`` (the new driver's marker), and a local study left from an earlier run
    of this name."""
    if keep:
        for entry in store.entries(name):
            if entry not in keep:
                store.delete_dir(name, entry) if store.is_dir(name, entry) else store.delete(name, entry)
    else:
        store.delete_dir(name)
    optuna_db_path(store, name).unlink(missing_ok=True)


def failed_start(store: Storage, name: str) -> bool:
    """A sweep folder with its config but no tuner state is a start refused or killed before Tune began (no
    trial ran): ``resume`` has nothing to continue there, so ``run`` starts over in it, and says so."""
    if store.exists(name, CONFIG_FILE) and not store.exists(name, STATE_FILE) and not trial_folders(store, name):
        print(f"{store.display(name)}: a start that failed before its first trial (a {CONFIG_FILE}, no {STATE_FILE}); starting over there", flush=True)
        return True
    return False


def forget_failed_start(store: Storage, name: str) -> None:
    """A start refused or crashed before Tune saved its state leaves no folder (it would block the next
    ``run`` and give ``resume`` nothing); once Tune has saved state, the folder stays for ``resume``."""
    try:
        if store.exists(name) and not store.exists(name, STATE_FILE) and not trial_folders(store, name):
            store.delete_dir(name)
    except OSError as exc:  # the first error is the one to show; say what is left
        print(f"{store.display(name)} could not be removed ({exc}); `python -m sweep run ...` starts over there", file=sys.stderr)


SNAPSHOT_PREFIX = "experiment_state-"  # Tune's snapshot of the sweep: experiment_state-{time}.json


def check_snapshot(store: Storage, name: str) -> None:
    """Before a resume: Tune's newest snapshot of the sweep is there and reads as JSON. Tune, finding none or a damaged
    one, logs it and starts the whole sweep over in the same folder (its old trials beside the new, one study for
    both); refused here instead, saying what is there."""
    where = store.display(name)
    snapshots = sorted(e for e in store.entries(name) if e.startswith(SNAPSHOT_PREFIX) and e.endswith(".json"))
    if not snapshots and (trials := trial_folders(store, name)):  # lost or removed: --fresh would delete the trials
        raise ConfigError(f"{where}: Tune's snapshot of this sweep (an {SNAPSHOT_PREFIX}*.json) is missing beside its "
                          f"{len(trials)} trial folder(s) (lost, or its driver died before Tune wrote one), so it "
                          f"cannot be continued: put the file back from a copy to resume it; `python -m sweep report "
                          f"{experiment_uri(store.uri, name)}` reads it as it is, and `python -m sweep run SPACE --fresh` starts "
                          "over (deleting them)")
    if not snapshots:
        raise ConfigError(f"{where}: Tune saved no snapshot of this sweep (no {SNAPSHOT_PREFIX}*.json): its driver stopped before "
                          "the first trial began, so there is nothing to continue; start it over with `python -m sweep run SPACE --fresh`")
    before = f" ({snapshots[-2]})" if len(snapshots) > 1 else " (there is none: start over with `python -m sweep run SPACE --fresh`)"
    json_record(store, name, snapshots[-1], lambda why: (
        f"{where}/{snapshots[-1]}: Tune's newest snapshot of the sweep is damaged ({why}), and Tune would start the sweep over "
        f"beside its trials; move that file away to resume from the one before it{before}"))


def json_record(store: Storage, name: str, file: str, damaged: Callable[[str], str], problem: Callable[[Any], str | None] | None = None) -> Any:
    """The sweep's JSON record ``file``; unreadable storage or a damaged file (not JSON, or of another shape than
    ``problem`` reads: ``sweep.store.records``; ``damaged`` of why: the message) is a ConfigError, never a traceback."""
    from sweep.store.records import parsed

    try:
        text = store.read_text(name, file)
    except OSError as exc:  # the storage, not the file: the sweep is kept
        raise ConfigError(f"{store.display(name)}/{file}: could not be read ({exc.strerror or type(exc).__name__}); check access to "
                          "the storage and try again") from None
    except UnicodeDecodeError:
        raise ConfigError(damaged("not text")) from None
    return parsed(text, damaged, problem)


def save_config(store: Storage, cfg: SweepConfig) -> None:
    store.write_text(cfg.model_dump_json(indent=2), cfg.name, CONFIG_FILE)


def load_config(store: Storage, name: str, to: str = "resume") -> SweepConfig:
    """The sweep's saved config, pointed at where it is now (it may have moved, or be read on another machine);
    ``to``: what the command wants of it, for the message when there is no sweep there."""
    where = store.display(name)
    if not store.exists(name, STATE_FILE):
        if trials := trial_folders(store, name):
            raise ConfigError(_stateless(store, name, len(trials)))
        raise ConfigError(f"{where}: no sweep to {to} here (no {STATE_FILE}); start one with `python -m sweep run SPACE`")
    if not store.exists(name, CONFIG_FILE):
        if any(store.exists(name, ours) for ours in (BASE_EVALS_DIR, LEADERBOARD, "trajectories")):  # our sweep, its config lost
            raise ConfigError(f"{where}: its {CONFIG_FILE} (the sweep's saved config) is lost, so it cannot be continued or confirmed: "
                              f"put the file back from a copy; `python -m sweep report {experiment_uri(store.uri, name)}` reads it as it is")
        raise ConfigError(f"{where}: no {CONFIG_FILE} (the sweep was started by another tool); restore it with ray.tune.Tuner.restore")
    data = json_record(store, name, CONFIG_FILE, lambda why: _damaged(where, f"unreadable ({why})"))
    if not isinstance(data, dict):
        raise ConfigError(_damaged(where, f"not a JSON object ({type(data).__name__})"))
    # every check a new sweep passes, on what was saved: a sweep whose config no longer passes is not resumed
    return parse_sweep({**data, "storage": store.uri, "name": name}, f"{where}/{CONFIG_FILE}")


def _damaged(where: str, why: str) -> str:
    return (f"{where}/{CONFIG_FILE}: {why}: the sweep's saved config is damaged; start the sweep again "
            "(`python -m sweep run SPACE --fresh`), or put back the file from a copy")


def snapshot_often() -> None:
    """Tune's experiment snapshots every second (unless the user chose a period): a trial restored after the
    driver died resumes from the checkpoint the last snapshot recorded, so a stale snapshot costs steps."""
    environ.TUNE_GLOBAL_CHECKPOINT_S.set_default(SNAPSHOT_PERIOD_S)
