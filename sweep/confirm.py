"""``python -m sweep confirm SWEEP``: does the winner stay the winner with fresh seeds and more steps?

A sweep ranks each setting by one trial: one RL seed, a short horizon. ``confirm`` re-runs its top
``--top`` settings, each with ``--seeds`` fresh RL seeds (same base, same held-out tasks), for ``--steps``
steps (default: twice the sweep's), as a sweep of its own (``{name}_confirm`` beside it, no early
stopping, the original's base eval reused), judges it with the same verdict, and says per setting the
gain of every seed and their mean over the seeds every setting reached a trained eval on (a setting is never
judged on fewer seeds than another: ``compared_seeds``), and whether the original #1 is still the best. The confirmed winner is
exported to ``{sweep}/winner/``: ``trainer.yaml`` (a runnable trainer config: ``sweep train`` it) and
the newest checkpoint of its best seed; the sweep's report is written again with the confirmation. With
``confirm.top`` set in the space file, ``sweep run`` (and ``resume``) end with this stage themselves (``confirm_stage``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from statistics import fmean
from typing import Any

import yaml

from configkit.base import ConfigError, apply_overrides, get_dotted
from sweep.spec.config import SweepConfig
from sweep.store.records import CONFIRMATION, LEADERBOARD
from sweep.store.storage import Storage, open_storage

CONFIRM_SEED_BASE = 1000  # fresh RL seeds: apart from the seeds a sweep draws (0, 1, 2, ...)
WINNER_DIR = "winner"


@dataclass(frozen=True)
class SettingResult:
    setting: dict[str, Any]
    original_rank: int
    original_gain: float | None
    gains: list[float | None]  # per fresh seed
    verdicts: list[str]
    compared: tuple[int, ...] | None = None  # the fresh seeds (positions) the mean is over (``compared_seeds``); None: all

    @property
    def mean(self) -> float | None:
        at = range(len(self.gains)) if self.compared is None else self.compared
        known = [self.gains[i] for i in at if self.gains[i] is not None]
        return fmean(known) if known else None


def compared_seeds(results: list[SettingResult]) -> tuple[int, ...]:
    """The fresh seeds (positions) on which every setting with any gain has one: the settings' means are taken over
    these alone, so a seed one setting lost (its trial failed or stopped before a trained eval) does not leave it
    judged on its others while the rest are judged on all (a setting with no gain at all is out of the comparison)."""
    scored = [r for r in results if any(g is not None for g in r.gains)]
    if not scored:
        return ()
    return tuple(i for i in range(len(scored[0].gains)) if all(r.gains[i] is not None for r in scored))


def top_settings(rows: list[dict[str, Any]], top: int) -> list[tuple[int, dict[str, Any], float | None]]:
    """(rank, swept config, gain) of the best ``top`` distinct settings with a trained eval, best first."""
    found: list[tuple[int, dict[str, Any], float | None]] = []
    for rank, row in enumerate(rows, start=1):
        setting = {k: v for k, v in row.get("config", {}).items() if k != "seed"}
        if row.get("gain") is None or any(setting == s for _, s, _ in found):
            continue
        found.append((rank, setting, row["gain"]))
        if len(found) == top:
            break
    return found


def confirm_config(cfg: SweepConfig, settings: list[dict[str, Any]], seeds: list[int], steps: int, source: str) -> SweepConfig:
    """The confirming sweep: every setting with every fresh seed, as listed points, no early stopping."""
    from sweep.spec.loader import parse_sweep

    data = cfg.model_dump(mode="json")
    space = dict(data["space"])
    space["seed"] = {"type": "choice", "values": seeds}
    points = [{**_active(cfg, setting), "seed": seed} for setting in settings for seed in seeds]
    data.update(
        name=f"{cfg.name}_confirm",
        space=space,
        search={**data["search"], "searcher": "random", "num_samples": len(points), "points_to_evaluate": points,
                "sampler": "tpe", "constant_liar": True, "n_startup_trials": 2},
        scheduler={"type": "fifo"},
        stopping={"zero_signal": {"enabled": False}},
        confirm={"top": 0},  # the confirming sweep confirms nothing itself
    )
    data["trainer"]["total_steps"] = steps
    return parse_sweep(data, source)


def _active(cfg: SweepConfig, setting: dict[str, Any]) -> dict[str, Any]:
    """A setting's keys that its trial sampled (a conditional key whose condition failed is left out)."""
    return {k: v for k, v in setting.items() if k in cfg.space and cfg.space[k].active(setting)}


def summarize(original: list[tuple[int, dict[str, Any], float | None]], rows: list[dict[str, Any]], seeds: list[int]) -> list[SettingResult]:
    by_setting: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        config = dict(row.get("config", {}))
        seed = config.pop("seed", None)
        by_setting[json.dumps(config, sort_keys=True)][seed] = row
    results = []
    for rank, setting, gain in original:
        runs = by_setting.get(json.dumps({k: v for k, v in setting.items()}, sort_keys=True), {})
        results.append(SettingResult(setting, rank, gain, [runs.get(s, {}).get("gain") for s in seeds], [runs.get(s, {}).get("verdict", "-") for s in seeds]))
    compared = compared_seeds(results)
    return [SettingResult(**{**r.__dict__, "compared": compared}) for r in results]


def holds(results: list[SettingResult]) -> bool:
    """The original #1 still has the best mean gain over the fresh seeds."""
    scored = [r for r in results if r.mean is not None]
    return bool(scored) and max(scored, key=lambda r: r.mean).original_rank == min(r.original_rank for r in results)


def machine_paths_note(trainer: dict[str, Any]) -> str:
    """A comment line naming the exported trainer's paths (absolute, as the sweep resolved them: this machine's)
    and how to give them elsewhere; empty when it names none."""
    from sweep.spec.loader import TRAINER_PATHS

    keys = [".".join(path) for path in TRAINER_PATHS if get_dotted(trainer, path) is not None]
    if not keys:
        return ""
    return (f"# Its paths ({', '.join(keys)}) are the sweep machine's; elsewhere, edit them here or give them as "
            f"--set {keys[0]}=PATH (relative to the working directory).\n")


def export_winner(store: Storage, name: str, cfg: SweepConfig, rows: list[dict[str, Any]], winner: SettingResult) -> str:
    """``{sweep}/winner/trainer.yaml`` (the confirming sweep ``cfg``'s base trainer with the winning setting and its
    best seed) and the newest checkpoint of that seed's trial, in place of an earlier export; returns where."""
    from sweep.report.store import SweepStore
    from sweep.resume import experiment_uri

    best = max((r for r in rows if {k: v for k, v in r["config"].items() if k != "seed"} == winner.setting and r.get("gain") is not None),
               key=lambda r: r["gain"])
    trainer = cfg.trainer.model_dump(mode="json", exclude_none=True)
    trainer = apply_overrides(trainer, {**_active(cfg, winner.setting), "seed": best["config"]["seed"]})
    for key in ("output_dir", "resume_from"):
        trainer.pop(key, None)
    trainer.get("checkpoint", {}).pop("dir", None)
    confirm = SweepStore(experiment_uri(store.uri, cfg.name))
    folder = next((d for d in confirm.subdirs() if best["trial"] in d), None)
    checkpoints = sorted(d for d in (confirm.subdirs(folder) if folder else []) if d.startswith("checkpoint_"))
    kept = ("# Its trial's newest checkpoint is in checkpoint/ beside this file (resume_from: that directory continues it).\n" if checkpoints
            else "# Its trial kept no checkpoint (checkpoint.interval 0, or it failed before its first): train it from the start.\n")
    header = (f"# The confirmed winner of sweep {name}: {json.dumps(winner.setting)}, seed {best['config']['seed']}; mean held-out gain "
              f"{winner.mean:+.3f} over {_seeds(winner)}. Run it: python -m sweep train THIS_FILE\n{kept}{machine_paths_note(trainer)}")
    store.delete_dir(name, WINNER_DIR)  # an earlier export's (another trial's checkpoint files) never mixes with this one
    if checkpoints:
        store.copy((cfg.name, folder, checkpoints[-1]), (name, WINNER_DIR, "checkpoint"))
    # last: a copy cut short leaves no trainer.yaml saying its checkpoint is whole beside it
    store.write_text(header + yaml.safe_dump(trainer, sort_keys=False), name, WINNER_DIR, "trainer.yaml")
    return store.display(name, WINNER_DIR)


def _seeds(result: SettingResult) -> str:
    n = len(result.gains) if result.compared is None else len(result.compared)
    return f"{n} fresh seed{'s' if n != 1 else ''}"


def render(results: list[SettingResult], seeds: list[int], held: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from sweep.verdict.summary import setting

    table = Table(title=f"Confirmation: the top settings with fresh seeds {seeds}")
    for column in ("sweep rank", "setting", "sweep gain", *[f"seed {s}" for s in seeds], "mean", "verdicts"):
        table.add_column(column)
    for r in results:
        gains = [f"{g:+.3f}" if g is not None else "-" for g in r.gains]
        table.add_row(str(r.original_rank), setting(r.setting), f"{r.original_gain:+.3f}" if r.original_gain is not None else "-",
                      *gains, f"{r.mean:+.3f}" if r.mean is not None else "-", ", ".join(r.verdicts))
    Console(width=170).print(table)
    if results and results[0].compared is not None and len(results[0].compared) < len(seeds):
        print(f"Means over {_seeds(results[0])} of {len(seeds)}: the seeds every setting reached a trained eval on.")
    print("The ranking holds: the sweep's #1 has the best mean gain over fresh seeds." if held else
          "The ranking does not hold: another setting did better over fresh seeds than the sweep's #1.")


def run_confirm(uri: str, top: int = 3, seeds: int = 2, steps: int | None = None, fresh: bool = False, watch=None,
                cut_short: bool = False) -> int:
    """``cut_short``: continue the confirming sweep a driver left unfinished (``sweep resume``: its state there, no
    ``confirm.json``), when it confirms the same settings over the same seeds and steps; else start it (over, ``fresh``)."""
    from sweep.resume import STATE_FILE, experiment_uri, json_record, load_config
    from sweep.run import resume_sweep, run_sweep, write_report
    from sweep.store.driver import driving
    from sweep.store.records import leaderboard_problem
    from sweep.store.storage import split_experiment

    storage_uri, name = split_experiment(uri)
    store = open_storage(storage_uri)
    cfg = load_config(store, name, "confirm")
    # held while its confirming sweep runs (a `resume` of the sweep waits for it), and refused while a driver runs the
    # sweep (a resume retrying errored trials is about to rank it anew)
    with driving(store, name, "sweep confirm"):
        if not store.exists(name, LEADERBOARD):
            raise ConfigError(f"{store.display(name)}: no {LEADERBOARD} (the sweep has not finished): run or resume it first")
        rows = json_record(store, name, LEADERBOARD, lambda why: (
            f"{store.display(name, LEADERBOARD)}: the sweep's ranking is damaged ({why}); `python -m sweep resume "
            f"{experiment_uri(store.uri, name)}` ranks the finished sweep again and writes it anew"), leaderboard_problem)
        original = top_settings(rows, top)
        if not original:
            raise ConfigError(f"{store.display(name)}: no trial reached a trained held-out eval, so there is nothing to confirm")
        fresh_seeds = [CONFIRM_SEED_BASE + i for i in range(seeds)]
        confirm = confirm_config(cfg, [s for _, s, _ in original], fresh_seeds, steps or 2 * cfg.trainer.total_steps, f"{store.display(name)}/{cfg.name}_confirm")
        if cut_short and store.exists(confirm.name, STATE_FILE) and _same_confirmation(load_config(store, confirm.name), confirm):
            print(f"confirm stage: continuing {store.display(confirm.name)}, which its driver left unfinished", flush=True)
            status = resume_sweep(experiment_uri(store.uri, confirm.name), watch=watch)
        else:
            status = run_sweep(confirm, fresh=fresh, base_evals_from=name, watch=watch, start_over=f"python -m sweep confirm {uri} --fresh")
        confirmed = json.loads(store.read_text(confirm.name, LEADERBOARD))
        results = summarize(original, confirmed, fresh_seeds)
        held = holds(results)
        render(results, fresh_seeds, held)
        winner = max((r for r in results if r.mean is not None), key=lambda r: r.mean, default=None)
        summary = {"holds": held, "seeds": fresh_seeds, "steps": confirm.trainer.total_steps,
                   "settings": [{**r.__dict__, "mean": r.mean} for r in results]}
        store.write_text(json.dumps(summary, indent=2), name, CONFIRMATION)
        if winner is not None:
            print(f"winner: {export_winner(store, name, confirm, confirmed, winner)}")
        else:  # an earlier confirmation's winner is not this one's
            store.delete_dir(name, WINNER_DIR)
        write_report(store, name)  # the sweep's report, now with the confirmation (`sweep confirm` alone left it stale)
        return status


def confirmation_is_current(store: Storage, name: str, top: int) -> bool:
    """Whether the sweep's ``confirm.json`` confirmed the top settings its leaderboard ranks now (a resume that retried
    errored trials may rank others first, and a confirmation of the old ones would stand in the report)."""
    try:
        confirmed = json.loads(store.read_text(name, CONFIRMATION))
        rows = json.loads(store.read_text(name, LEADERBOARD))
        return [s["setting"] for s in confirmed["settings"]] == [s for _, s, _ in top_settings(rows, top)]
    except (OSError, ValueError, KeyError, TypeError):  # unreadable or damaged: confirmed again
        return False


def _same_confirmation(saved: SweepConfig, confirm: SweepConfig) -> bool:
    """Whether a confirming sweep already in storage runs what ``confirm`` would: the same settings and seeds (the
    listed points) over the same steps. A sweep resumed after retrying its errored trials may rank others first."""
    return (saved.search.points_to_evaluate == confirm.search.points_to_evaluate
            and saved.trainer.total_steps == confirm.trainer.total_steps)


def confirm_stage(uri: str, status: int, watch=None, again: bool = True, cfg: SweepConfig | None = None) -> int:
    """After ``sweep run`` (or ``resume``) of the sweep at ``uri``, with its ``confirm.top`` set and the sweep run:
    its top settings again with fresh seeds (``run_confirm``, as ``sweep confirm`` runs them), the winner exported,
    and the sweep's report written again with the confirmation. ``cfg``: the sweep's config when the caller holds
    it (``run``); else its saved config is read, and parsed only when it asks for the stage. ``again`` False: not
    when a confirmation is already there (a resumed sweep that had confirmed), and a confirming sweep cut short (its
    driver died) is continued, not started over. The sweep's own results stand whatever happens here."""
    if status != 0 or (cfg is not None and cfg.confirm.top == 0):
        return status
    from sweep.resume import load_config
    from sweep.store.storage import split_experiment

    storage_uri, name = split_experiment(uri)
    store = open_storage(storage_uri)
    if cfg is None:
        saved = json.loads(store.read_text(name, "sweep_config.json")) if store.exists(name, "sweep_config.json") else {}
        if not (saved.get("confirm") or {}).get("top"):
            return status
        cfg = load_config(store, name)
    if cfg.confirm.top == 0:
        return status
    if not again and store.exists(name, CONFIRMATION):
        if confirmation_is_current(store, name, cfg.confirm.top):
            return status
        print(f"confirm stage: {store.display(name, 'confirm.json')} confirmed other settings than the sweep's top "
              f"{cfg.confirm.top} now (the resumed trials moved the ranking): confirming again", flush=True)
    print(f"confirm stage: the top {cfg.confirm.top} settings with {cfg.confirm.seeds} fresh seed(s) each "
          f"over {cfg.confirm.steps or 2 * cfg.trainer.total_steps} steps", flush=True)
    from sweep.run import Interrupted
    from sweep.store.driver import TakenOver

    try:
        confirmed = run_confirm(uri, cfg.confirm.top, cfg.confirm.seeds, cfg.confirm.steps, fresh=True, watch=watch, cut_short=not again)
    except Interrupted as stopped:  # the stage's own sweep stopped: resuming the sweep continues it and then confirms
        raise Interrupted(uri, stopped.signum) from None
    except TakenOver:  # another driver has the sweep now: this one stops, said as such
        raise
    except ConfigError as exc:  # nothing to confirm (no trial reached a trained eval): said, not raised
        print(f"confirm stage skipped: {exc}", flush=True)
        return status
    return confirmed
