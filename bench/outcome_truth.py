"""A ground truth made from outcomes only: what each learning rate of the truth grid did, over its seeds.

    python bench/outcome_truth.py                # bench/data/verdict_truth.json's runs -> bench/data/verdict_truth_outcomes.json
    python bench/outcome_truth.py --world mix    # the mix's grid (bench/worlds.py) -> bench/data/verdict_truth_mix_outcomes.json
    python bench/outcome_truth.py --world mix --fine   # its finer grid (bench/worlds.py, refined_lrs) -> ..._mix_fine_outcomes.json

A truth already written is frozen: run again, the script checks that the runs still give it and leaves it as it is
(never re-dated), or refuses and names what would move.

The verdict bench (``bench/verdict.py``) judges the sweep's labels against this. It reads nothing of
``sweep/verdict/``: no label, rule or threshold of the code it judges, so changing those cannot move it (a test
holds that). Its rules, written before the judging seeds (10-19) ran and frozen with its labels in the data file:

- A run's **gain** at horizon h is the mean pass@1 over the held-out tasks of its last two evals up to h, minus the
  base's (an episode lost to an environment error is no outcome: a task's rate counts its scored episodes, and a
  task with none in the window, or in the base, is left out; first met in the mix's collapsed runs, before any of
  its judging seeds ran); its **noise** is the half-width of a 90% task-bootstrap interval of that gain (tasks resampled with
  their base and trial counts paired, 2,000 draws, a fixed seed). A run is **up** when its interval is above 0 and
  its gain at least the world's floor, **down** when its interval is below 0 and its gain at most minus the floor, else
  **level**. The floor is about a tenth of the best settings' 30-step gains (a policy an LR barely moves has a paired
  interval so narrow that a tiny gain would otherwise count as learning): hotel 0.03 (9 of the 288 held-out episodes
  of two evals); mix 0.005 (8 of its 1,600; its best runs gain +0.04 to +0.05; set with 11 of its 24 grid runs in,
  before any of its judging seeds ran). A run has **fallen** at h when it is down, or when its gain is below its
  own best earlier window's gain by more than its noise.
- A setting **learns** at h when every seed is up and none has fallen; is **too high** when most seeds have fallen;
  is **level** when every seed is level and none has fallen. The **learning band** is the LRs that learn at 30
  steps. A level setting below the band is **too low**; a level setting inside or above it is **flat**. Anything
  else is **mixed** (no trial is judged against it).
- The **top set** at h: the settings whose mean gain over seeds is within noise of the best's (the difference is
  at most the root sum of squares of the two means' noises, each the seeds' noises combined over the seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.worlds import WORLDS, lr_text, read_json, world_of, write_json  # noqa: E402

RUNS = WORLDS["hotel"].runs
HORIZONS = (5, 10, 15, 20, 25, 30)
WINDOW = 2  # evals averaged into a gain (the sweep's default window, a fact of the data: not read from the code)
DRAWS = 2000
LEVEL = 0.90  # the bootstrap interval
MIN_GAIN = WORLDS["hotel"].min_gain  # a gain smaller than this is level, however narrow its interval (each world's: bench/worlds.py)
RULES = __doc__.split("before the judging seeds (10-19) ran and frozen with its labels in the data file:", 1)[1].strip()


def task_gains(base: dict[str, Sequence[int]], evals: Sequence[dict[str, Sequence[int]]]) -> list[float]:
    """Per held-out task (sorted by key): the evals' mean pass rate minus the base's; counts are [passes, samples],
    the samples being the scored episodes. A task is left out when the base or every eval of the window scored none
    of its episodes (each lost to an environment error: no outcome of the policy)."""
    gains = []
    for t in sorted(base):
        scored = [e[t][0] / e[t][1] for e in evals if e.get(t) and e[t][1]]
        if scored and base[t][1]:
            gains.append(fmean(scored) - base[t][0] / base[t][1])
    return gains


def gain_and_noise(base: dict[str, Sequence[int]], evals: Sequence[dict[str, Sequence[int]]], seed: int = 0) -> tuple[float, float, float, float]:
    """(gain, noise, low, high): the mean of the task gains, and its task-bootstrap interval's half-width and ends."""
    import numpy as np

    per_task = np.array(task_gains(base, evals))
    draws = np.sort(per_task[np.random.default_rng(seed).integers(0, len(per_task), size=(DRAWS, len(per_task)))].mean(axis=1))
    low, high = float(draws[int((1 - LEVEL) / 2 * DRAWS)]), float(draws[int((1 + LEVEL) / 2 * DRAWS) - 1])
    return float(per_task.mean()), (high - low) / 2, low, high


def run_outcomes(base: dict[str, Sequence[int]], run: dict[str, Any], min_gain: float) -> dict[int, dict[str, Any]]:
    """A run at each horizon: gain, noise, interval, and whether it is up, down or level (``min_gain``: the floor), and has fallen."""
    out: dict[int, dict[str, Any]] = {}
    best_earlier: float | None = None
    evals = sorted(run["evals"], key=lambda e: e["step"])
    for h in HORIZONS:
        seen = [e["tasks"] for e in evals if e["step"] <= h]
        if not seen:
            continue
        gain, noise, low, high = gain_and_noise(base, seen[-WINDOW:])
        state = "up" if low > 0 and gain >= min_gain else "down" if high < 0 and gain <= -min_gain else "level"
        fallen = state == "down" or (best_earlier is not None and best_earlier - gain > noise)
        out[h] = {"gain": gain, "noise": noise, "low": low, "high": high, "state": state, "fallen": fallen}
        best_earlier = gain if best_earlier is None else max(best_earlier, gain)
    return out


def setting_label(seeds: Sequence[dict[str, Any]]) -> str:
    """learns, too high, level or mixed, from the seeds' outcomes at one horizon (``level`` is split by the band)."""
    fallen = sum(s["fallen"] for s in seeds)
    if all(s["state"] == "up" for s in seeds) and not fallen:
        return "learns"
    if 2 * fallen > len(seeds):
        return "too high"
    if all(s["state"] == "level" for s in seeds) and not fallen:
        return "level"
    return "mixed"


def outcome_truth(data: dict[str, Any], min_gain: float) -> dict[str, Any]:
    """Per horizon: every setting's seeds' gains and noises, its label, and the top set (``bench/truth_grid.truth_table``'s shape);
    ``min_gain``: the world's floor."""
    base = data["base"]["tasks"]
    by_lr: dict[float, list[dict[int, dict[str, Any]]]] = defaultdict(list)
    for run in data["runs"]:
        by_lr[run["lr"]].append(run_outcomes(base, run, min_gain))
    labels = {h: {lr: setting_label([r[h] for r in runs]) for lr, runs in by_lr.items()} for h in HORIZONS}
    band = sorted(lr for lr, label in labels[HORIZONS[-1]].items() if label == "learns")
    table: dict[str, Any] = {}
    for h in HORIZONS:
        settings = []
        for lr, runs in sorted(by_lr.items()):
            label = labels[h][lr]
            if label == "level":
                label = "too low" if band and lr < band[0] else "flat"
            gains, noises = [r[h]["gain"] for r in runs], [r[h]["noise"] for r in runs]
            settings.append({"lr": lr, "gains": gains, "noises": noises, "mean": fmean(gains),
                             "se": math.sqrt(sum(n * n for n in noises)) / len(noises), "states": [r[h]["state"] for r in runs],
                             "fallen": [r[h]["fallen"] for r in runs], "label": label})
        best = max(settings, key=lambda s: s["mean"])
        top = [s["lr"] for s in settings if best["mean"] - s["mean"] <= math.hypot(best["se"], s["se"])]
        table[str(h)] = {"settings": settings, "top": top, "top_share": len(top) / len(settings), "band": band}
    return table


def same_truth(frozen: dict[str, Any], min_gain: float, truth: dict[str, Any]) -> bool:
    """Whether a frozen outcomes file says what these runs give at this floor: every gain, noise, label and top set
    (its date, commit and rules text aside: the text has grown clauses since the hotel's was frozen, none moving it)."""
    return frozen.get("min_gain", min_gain) == min_gain and frozen.get("truth") == json.loads(json.dumps(truth))


def truth_changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Where two truths' labels and top sets differ, in words (empty when only numbers differ)."""
    out = []
    for h, row in new.items():
        was = old.get(h, {})
        before = {lr_text(s["lr"]): s["label"] for s in was.get("settings", [])}
        now = {lr_text(s["lr"]): s["label"] for s in row["settings"]}
        out += [f"{lr} at {h} steps {before.get(lr, 'absent')} -> {label}" for lr, label in now.items() if before.get(lr) != label]
        if was.get("top") != row["top"]:
            out.append(f"the top set at {h} steps {was.get('top')} -> {row['top']}")
    return "; ".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", choices=sorted(WORLDS), default="hotel", help="whose truth grid to read (bench/worlds.py)")
    parser.add_argument("--fine", action="store_true", help="the world's finer grid (bench/worlds.py, refined_lrs): its runs -> its own outcome truth")
    args = parser.parse_args()
    world = world_of(args.world, args.fine)
    if not world.runs.is_file():
        raise SystemExit(f"no truth grid runs at {world.runs}: make them with `python bench/verdict.py truth {world.cli}`")
    data = read_json(world.runs)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    truth = outcome_truth(data, world.min_gain)
    shown = world.outcomes.relative_to(ROOT) if world.outcomes.is_relative_to(ROOT) else world.outcomes
    if world.outcomes.is_file():  # frozen before its judging seeds ran: never moved, never re-dated
        frozen = read_json(world.outcomes)
        if not same_truth(frozen, world.min_gain, truth):
            raise SystemExit(f"{shown} is a frozen truth (made {frozen.get('made')} at {frozen.get('commit')}) and "
                             f"these runs and rules give another: {truth_changes(frozen.get('truth', {}), truth) or 'its floor or its numbers differ'}. "
                             "A frozen truth is not rewritten: move it aside to make a new one, and say so where its figures are reported.")
        print(f"{shown}: the frozen truth (made {frozen.get('made')} at {frozen.get('commit')}) is what these runs "
              "give; left as it is")
        commit = frozen.get("commit", commit)
    else:
        write_json(world.outcomes, {"rules": RULES, "world": world.key, "min_gain": world.min_gain, "runs": str(world.runs.relative_to(ROOT)),
                                    "made": time.strftime("%Y-%m-%d"), "commit": commit, "truth": truth})
    for h, row in truth.items():
        print(f"horizon {h}: " + ", ".join(f"{lr_text(s['lr'])} {s['label']} ({s['mean']:+.3f})" for s in row["settings"]) + f"; top {row['top']}")
    print(json.dumps({"bench": "outcome_truth", "world": world.key, "data": str(shown), "commit": commit,
                      "labels_30": {lr_text(s["lr"]): s["label"] for s in truth["30"]["settings"]},
                      "top_30": truth["30"]["top"], "top_share_30": round(truth["30"]["top_share"], 3), "band": truth["30"]["band"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
