"""The verdict bench's truth grid (``python bench/verdict.py truth``): a world's eight learning rates x three RL seeds,
30 steps each with no early stopping, run whole or in parts (``--lrs``/``--grid-seeds``, each part's sweep packed to
``bench/data/verdict_truth_{world}_parts/`` and committed: a grid is hours), read back with the report's own
loader into one data file (every run's evals per task and its curves), and that file's table labelled by this
checkout's verdict rules (``--truth rules``: in-sample, the bench's figures before 2026-11-27). The outcome truth the
bench judges against is made from the same file by ``bench/outcome_truth.py``, which reads nothing of the verdict.
Also the one place a bench runs ``sweep`` (``run_sweep``)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import DATA, commit, file_tag  # noqa: E402
from bench.sweep_archive import is_pack, opened, pack  # noqa: E402
from bench.worlds import WORLDS, World, lr_text, read_json, write_json  # noqa: E402
from sweep.verdict.labels import TrialEvidence, update_scale, verdict  # noqa: E402
from sweep.verdict.score import EvalPoint, score_trials  # noqa: E402

HOTEL_GRID = WORLDS["hotel"].grid_space
CURVES = ("variance_per_prompt", "update_kl", "update_norm", "clip_frac", "kl", "entropy", "tool_error_rate")
HORIZONS = (5, 10, 15, 20, 25, 30)


def run_sweep(args: list[str], env: dict[str, str]) -> None:
    run = subprocess.run([sys.executable, "-m", "sweep", *args], cwd=ROOT, env=env, text=True)
    if run.returncode:
        raise SystemExit(f"sweep {' '.join(args)} failed with {run.returncode}")


def sweep_env() -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled")}


def trainer_section(space: Path) -> dict[str, Any]:
    """A space file's trainer section with its paths resolved against the file (the loader's rule), so a copy of it runs from any folder."""
    from sweep.spec.loader import resolve_paths

    return resolve_paths(yaml.safe_load(space.read_text())["trainer"], space.parent)


def grid_data(world: World) -> dict[str, Any]:
    """The world's truth grid as a space: its committed file (hotel), or the world's trainer over the hotel grid's
    learning rates and seeds, 30 steps, an eval every 5, every run to its end (mix); a finer grid's added learning
    rates (``World.fine``) among them."""
    if world.grid_space is not None:
        grid = yaml.safe_load(world.grid_space.read_text())
    else:
        hotel = yaml.safe_load(HOTEL_GRID.read_text())
        trainer = {**trainer_section(world.trainer_space), "total_steps": HORIZONS[-1]}
        trainer["eval"] = {**trainer.get("eval", {}), "interval": HORIZONS[0]}
        grid = {"name": f"verdict_truth_{world.name}", "trainer": trainer, "space": hotel["space"], "search": hotel["search"],
                "scheduler": {"type": "fifo"}, "resources": {"cpus_per_trial": 1}, "max_concurrent_trials": 2,
                "logging": {"progress": False, "tensorboard": False}, "storage": "sweep_results"}
    if world.added_lrs:  # the same grid's name, so its parts and the frozen grid's are read together
        lrs = grid["space"]["optim.lr"]["grid"]
        grid["space"] = {**grid["space"], "optim.lr": {"grid": sorted({*lrs, *world.added_lrs})}}
    return grid


def grid_file(world: World, folder: Path, grid: dict[str, Any] | None = None) -> Path:
    """The world's grid as a file ``sweep run`` takes: its committed one, or ``grid`` (default: ``grid_data``, e.g. a
    part of it) written into ``folder`` as ``{name}.yaml``, a committed grid's trainer paths resolved for the copy."""
    if grid is None and world.committed_grid:
        return world.grid_space
    grid = grid or grid_data(world)
    if world.grid_space is not None:  # its paths are its folder's
        grid = {**grid, "trainer": trainer_section(world.grid_space)}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{grid['name']}.yaml"
    path.write_text(yaml.safe_dump(grid))
    return path


def held_out_envs(space: Path) -> dict[str, str]:
    """Each held-out task's env, for the grid's space (per-env counts can be judged again from the data file)."""
    from grpo.data import trial_tasks
    from sweep.spec.loader import load_space

    return {t.task_key: t.env_key for t in trial_tasks(load_space(space).trainer)[1]}


def truth_runs(results: Path, total: int) -> dict[str, Any]:
    """Every grid trial's evals and curves, read with the report's own loader (``sweep.report``)."""
    from sweep.report.judge import eval_points, evidence
    from sweep.report.load import load_sweep
    from sweep.report.store import SweepStore

    sweep = load_sweep(SweepStore(str(results)))
    runs, base, unfinished = [], None, []
    for trial in sweep.trials:
        point, evals, _ = eval_points(trial)
        base = base or point
        if not evals or evals[-1].step < total:  # a grid still running (or cut short) is judged on its finished runs only
            unfinished.append(trial.trial_id)
            continue
        ev = evidence(trial, "finished")
        runs.append({"trial": trial.trial_id, "lr": float(trial.config["optim.lr"]), "seed": int(trial.config["seed"]),
                     "evals": [_point(e) for e in evals], **{name: list(getattr(ev, name)) for name in CURVES},
                     "optimizer_steps": ev.optimizer_steps})
    assert base is not None, f"{results}: no base eval"
    return {"base": _point(base), "runs": sorted(runs, key=lambda r: (r["lr"], r["seed"])), "unfinished": sorted(unfinished)}


def _point(e: EvalPoint) -> dict[str, Any]:
    return {"step": e.step, "pass_at_1": e.pass_at_1, "tasks": {k: list(v) for k, v in (e.tasks or {}).items()}}


def _eval(d: dict[str, Any]) -> EvalPoint:
    return EvalPoint(d["step"], d["pass_at_1"], {k: tuple(v) for k, v in d["tasks"].items()} or None)


def judge_runs(base: EvalPoint, runs: list[dict[str, Any]], horizon: int) -> list[tuple[float | None, str]]:
    """The grid's runs judged on their evals and curves up to ``horizon``, as one sweep (the update size that moved
    the score is the grid's own): (gain, label) each."""
    judged = []
    for i, run in enumerate(runs):
        evals = [_eval(e) for e in run["evals"] if e["step"] <= horizon]
        curves = {name: run[name][:horizon] for name in CURVES}
        ev = TrialEvidence(str(run.get("trial", i)), base=base, evals=evals, optimizer_steps=run["optimizer_steps"], **curves)
        judged.append((ev, score_trials(base, {"run": evals}, size=2)["run"]))
    scale = update_scale(judged)
    return [(score.gain, verdict(ev, score, scale=scale).label) for ev, score in judged]


def majority(labels: Counter) -> str:
    """The label more than half the seeds share; ``mixed`` where none does (1 learns, 1 flat, 1 undecided
    is no truth, and picking one of them would make one at random)."""
    label, count = labels.most_common(1)[0]
    return label if 2 * count > sum(labels.values()) else "mixed"


def truth_table(data: dict[str, Any]) -> dict[str, Any]:
    """Per horizon: every setting's gains over seeds, their mean, its majority label; and the top set."""
    base = _eval(data["base"])
    by_lr: dict[float, list[dict[str, Any]]] = defaultdict(list)
    for run in data["runs"]:
        by_lr[run["lr"]].append(run)
    table: dict[str, Any] = {}
    for h in HORIZONS:
        settings = []
        every = [r for _, runs in sorted(by_lr.items()) for r in runs]
        labelled = dict(zip(map(id, every), judge_runs(base, every, h)))
        for lr, runs in sorted(by_lr.items()):
            judged = [labelled[id(r)] for r in runs]
            gains = [g for g, _ in judged if g is not None]
            labels = Counter(label for _, label in judged)
            settings.append({"lr": lr, "gains": gains, "mean": fmean(gains) if gains else None,
                             "se": stdev(gains) / math.sqrt(len(gains)) if len(gains) > 1 else None,
                             "labels": [label for _, label in judged], "label": majority(labels)})
        scored = [s for s in settings if s["mean"] is not None]
        best = max(scored, key=lambda s: s["mean"])
        top = [s["lr"] for s in scored if best["mean"] - s["mean"] <= 2 * math.hypot(best["se"] or 0.0, s["se"] or 0.0)]
        table[str(h)] = {"settings": settings, "top": top, "top_share": len(top) / len(settings)}
    return table


def merged_runs(folders: list[Path], total: int, files: Sequence[Path] = ()) -> dict[str, Any]:
    """The grid's runs from one or more sweeps of it (a run cut short, re-run in a sweep of its own) and from runs
    data files already made (a frozen grid's, its sweeps long gone, under a finer grid's new parts): the same base
    eval in each (same base, split and dice), a setting and seed taken from the first that ran it, files first."""
    parts = [{**read_json(f), "unfinished": []} for f in files] + [truth_runs(folder, total) for folder in folders]
    sources = [*files, *folders]
    bases = {json.dumps(p["base"], sort_keys=True) for p in parts}
    if len(bases) > 1:
        raise SystemExit(f"{', '.join(map(str, sources))}: their base evals differ, so their runs cannot be judged together")
    runs: dict[tuple[float, int], dict[str, Any]] = {}
    for part in parts:
        for run in part["runs"]:
            runs.setdefault((run["lr"], run["seed"]), run)
    done = {(r["lr"], r["seed"]) for r in runs.values()}
    unfinished = sorted({t for p in parts for t in p["unfinished"]} - {r["trial"] for r in runs.values()})
    return {"base": parts[0]["base"], "runs": [runs[k] for k in sorted(done)], "unfinished": unfinished}


def grid_part(grid: dict[str, Any], lrs: list[float] | None, seeds: list[int] | None) -> dict[str, Any]:
    """The grid cut to some of its learning rates and seeds (a part run in one sitting); each must be the grid's own."""
    space = {key: dict(value) for key, value in grid["space"].items()}
    for key, wanted in (("optim.lr", lrs), ("seed", seeds)):
        if wanted is None:
            continue
        values = space[key]["grid"]
        unknown = [v for v in wanted if not any(math.isclose(v, w) for w in values)]
        if unknown:
            raise SystemExit(f"truth grid {grid['name']}: {key} {unknown} is not in its grid {values}")
        space[key]["grid"] = [w for w in values if any(math.isclose(v, w) for v in wanted)]
    return {**grid, "space": space}


def part_name(grid: dict[str, Any]) -> str:
    """A part's file name: its learning rates and seeds, and the commit that ran it."""
    lrs = "-".join(lr_text(lr) for lr in grid["space"]["optim.lr"]["grid"])
    seeds = "".join(str(s) for s in grid["space"]["seed"]["grid"])
    return f"lr{lrs}_s{seeds}_{file_tag()}.tar.gz"


@contextmanager
def truth_folders(grid: dict[str, Any], results: list[Path]) -> Iterator[list[Path]]:
    """``--results`` as sweep folders: a packed part (``.tar.gz``) unpacked, as its grid's sweep folder (the grid's
    name), until leaving."""
    with opened(results) as folders:
        yield [folder / grid["name"] if is_pack(r) else folder for r, folder in zip(results, folders)]


def make_truth(world: World, results: list[Path] | None, keep: Path | None = None, lrs: list[float] | None = None,
               seeds: list[int] | None = None) -> None:
    """Run the world's grid (into ``keep``, or a temporary folder; ``sweep resume`` it there if cut short) unless
    ``results`` holds its runs already, and write the runs with the rules-labelled table (``--truth rules``).
    ``lrs``/``seeds`` run a part of the grid only, packed to ``bench/data/verdict_truth_{world}_parts/`` (a
    grid is hours: it is built over sittings, each part committed); the truth is written once the parts given
    to ``--results`` cover the whole grid."""
    if (lrs or seeds) and results:
        raise SystemExit("truth: --lrs/--grid-seeds run a part of the grid, --results reads runs already made: give one or the other")
    grid = grid_data(world)
    folder = keep or Path(tempfile.mkdtemp(prefix="verdict-truth-"))
    folder.mkdir(parents=True, exist_ok=True)
    if lrs or seeds:
        part = grid_part(grid, lrs, seeds)
        run_sweep(["run", str(grid_file(world, folder, part)), "--storage", str(folder), "--fresh"], sweep_env())
        packed = pack(folder, [part["name"]], DATA / f"verdict_truth_{world.name}_parts" / part_name(part))
        print(f"packed the part's sweep to {packed.relative_to(ROOT)}: commit it; the truth: --results with every part")
        return
    space = grid_file(world, folder)
    if not results:
        run_sweep(["run", str(space), "--storage", str(folder), "--fresh"], sweep_env())
        results = [folder / grid["name"]]
    files = [r for r in results if r.name.endswith((".json", ".json.gz"))]  # runs data files (a frozen grid's)
    with truth_folders(grid, [r for r in results if r not in files]) as folders:
        data = merged_runs(folders, int(grid["trainer"]["total_steps"]), files)
    missing = sorted({(lr, seed) for lr in grid["space"]["optim.lr"]["grid"] for seed in grid["space"]["seed"]["grid"]}
                     - {(r["lr"], r["seed"]) for r in data["runs"]})
    if missing:
        raise SystemExit(f"the truth grid lacks {len(missing)} of its runs (lr, seed): {missing}; run them as parts (--lrs, --grid-seeds)")
    data["sources"] = [str(r) for r in results]  # as given (a pack, not the folder it was unpacked to)
    where = {"space": str(space.relative_to(ROOT))} if world.committed_grid else {"world": world.key, "grid": grid, "task_envs": held_out_envs(space)}
    data = {**where, "made": time.strftime("%Y-%m-%d"), "commit": commit(), **data, "truth": truth_table(data)}
    write_json(world.runs, data)
    for h, row in data["truth"].items():
        print(f"horizon {h}: " + ", ".join(f"{lr_text(s['lr'])} {s['label']} ({s['mean']:+.3f})" for s in row["settings"]) + f"; top {row['top']}")
    print(f"wrote {world.runs}; its outcome truth: python bench/outcome_truth.py {world.cli}")
