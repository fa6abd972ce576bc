"""Does the sweep name the right winner, and does each trial get the right verdict? Checked against a ground truth.

    python bench/verdict.py truth [--results DIR]   # the ground-truth grid (bench/verdict_truth.yaml, ~2.5 h on 2 cores) -> bench/data/verdict_truth.json
    python bench/verdict.py [--seeds 0 1 ... 9]     # the sweep once per searcher seed, judged against the truth
    python bench/verdict.py judge --results DIR ...  # sweeps the bench ran before (its --keep folders, or the packed
                                                     # sweeps in bench/data/verdict_sweeps/), judged again together
    python bench/verdict.py ... --world mix          # the same in the mix's world (bench/worlds.py; default: hotel)
    python bench/verdict.py --seeds 20 --no-judge    # run and pack only (judging seeds, before their rules are frozen)
    python bench/verdict.py truth --world mix --lrs 1e-6 3e-3 --grid-seeds 0   # a part of the grid, packed to bench/data/verdict_truth_mix_parts/
    python bench/verdict.py truth --world mix --results bench/data/verdict_truth_mix_parts/*.tar.gz   # the truth, once the parts cover the grid

The truth's runs: the learning space's recipe, base and held-out split; eight learning rates from too low to
too high, each with three RL seeds for 30 steps, no early stopping (``bench/verdict_truth.yaml``; their evals,
per task, in ``bench/data/verdict_truth.json``). Their labels and top set per horizon come from outcomes only
(``bench/outcome_truth.py``: gains over the base with task-bootstrap noise, the LR order; no verdict code),
frozen in ``bench/data/verdict_truth_outcomes.json``. ``--truth rules`` instead labels the runs with this
checkout's verdict (the bench's figures before 2026-11-27: in-sample, the rules judging themselves). Rules and
settings may be tuned on searcher seeds 0-9 only; the bench's default seeds are 10-19, kept for judging.

The sweep: the demo's space (``sweep/search_spaces/demo_cpu.yaml``) with KL and n held at the truth's
(0.1 and 8), so a trial's setting is its learning rate: each trial is matched to the truth setting
nearest its LR (log scale) at the trial's own horizon. Printed, then one JSON line:
``top1_in_truth_top`` (share of searcher seeds whose #1 is in the 30-step truth's top set, whatever the sweep's
horizon: what the users' long runs would crown; target >= 0.9), ``wrong_direction`` (trials called "too low" at an LR
above the truth's learning band, or "too high" below it; target 0),
``advice_wrong_direction`` (the same for the way each trial's advice moves the LR, ``lr_advice``: "raise" above the
band or "lower" below it, whatever the label: a ``flat`` trial's advice has a way too),
``advice_direction_agreement`` (over the ``trials_truth_off_lr``, those whose setting's truth at their horizon is "too
low" or "too high": the share whose advice raises, or lowers, the LR as the truth says),
``top1_learns`` (share of seeds whose #1 the sweep itself labels "learns": held-out pass@1 above the base
outside noise),
``collapsed_above_learner`` (pairs, over all seeds, of a trial whose truth is "too high" ranked above one
whose truth is "learns"; target 0), ``verdict_agreement`` (share of trials with a clear truth whose verdict
is their setting's truth label, an ``undecided`` verdict counted as a miss; target >= 0.9),
``verdict_agreement_decided`` (the same over trials not judged ``undecided``), ``undecided_share`` (over every
trial; target <= 10%), ``undecided_share_clear`` (over the trials with a clear truth: an ``undecided`` where the
truth is itself mixed is no miss), ``trials_truth_unclear``, and ``top1_in_truth_top`` and ``verdict_agreement`` again with each trial judged by either grid
setting around its LR (``_bracketed``: the grid is a factor ~3 apart, and between a learner and a flat
setting the truth is unknown). Each seed's sweep is also packed to
``bench/data/verdict_sweeps/{world}_s{seed}_{commit}.tar.gz`` (``bench/sweep_archive.py``: what the report reads,
no weights or dumps; tens of KB), so ``judge`` can judge it again by later rules without running it. Not a CI
test.

Worlds (``--world``, ``bench/worlds.py``): ``hotel`` as above; ``mix``, the five apps of
``sweep/search_spaces/fleet_mix_cpu.yaml`` from its shipped base, where some envs are saturated or failing from step
0. Its truth grid is made from that space's trainer (the hotel grid's eight learning rates and three RL seeds, 30
steps, evals every 5; the grid is kept in the data file, gzipped, with each held-out task's env), and its bench
sweeps are the demo's search over that trainer. Same rules, same judging.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import DATA, file_tag, record  # noqa: E402
from bench.sweep_archive import opened, pack  # noqa: E402
from bench.truth_grid import HORIZONS, make_truth, run_sweep, sweep_env, trainer_section, truth_table  # noqa: E402
from bench.worlds import WORLDS, World, read_json, world_of  # noqa: E402

DEMO = ROOT / "sweep" / "search_spaces" / "demo_cpu.yaml"
SWEEPS = DATA / "verdict_sweeps"  # each bench seed's sweep, packed (bench/sweep_archive.py): judged again without running it
UNCLEAR = ("mixed", "undecided")  # truth labels no trial can be judged against
WAY = {"too low": "raise", "too high": "lower"}  # the way to move the LR where a label (or the truth) says it is off


# --- the sweep against it ---------------------------------------------------------------------------


def nearest(lr: float, settings: list[dict[str, Any]]) -> dict[str, Any]:
    return min(settings, key=lambda s: abs(math.log(lr) - math.log(s["lr"])))


def horizon_of(steps: int) -> str:
    return str(max([h for h in HORIZONS if h <= max(steps, HORIZONS[0])]))


def bench_space(world: World, folder: Path, steps: int, eval_interval: int | None = None, grace_period: int | None = None,
                eval_samples: int | None = None) -> Path:
    """The demo's search and scheduler over the world's trainer (hotel: the demo itself, on the hotel tasks), evals
    as often as the demo's."""
    data = yaml.safe_load(DEMO.read_text())
    if world.trainer_space == DEMO:
        data["trainer"]["env"] = {"tasks_path": str(ROOT / "toolenvs" / "data" / "hotel.jsonl")}
    else:
        trainer = trainer_section(world.trainer_space)
        trainer["eval"] = {**trainer.get("eval", {}), "interval": data["trainer"]["eval"]["interval"]}
        data["trainer"] = trainer
    data["name"] = world.bench_name
    data["trainer"]["total_steps"] = steps
    if eval_interval:
        data["trainer"]["eval"]["interval"] = eval_interval
    if eval_samples:  # samples per held-out task (the mix's 100 tasks x 8 make a seed's evals most of its cost)
        data["trainer"]["eval"]["n_samples"] = eval_samples
    if grace_period:  # ASHA's first rung
        data["scheduler"]["grace_period"] = grace_period
    data["space"] = {"optim.lr": data["space"]["optim.lr"]}  # KL 0.1 and n 8 as the truth's
    data["logging"] = {"progress": False, "tensorboard": False}
    path = folder / "verdict_bench.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def bracket(lr: float, settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The truth settings either side of ``lr`` on the grid (one at either end): the truth says nothing between them."""
    ordered = sorted(settings, key=lambda s: s["lr"])
    below = [s for s in ordered if s["lr"] <= lr]
    above = [s for s in ordered if s["lr"] >= lr]
    return [x for x in (below[-1] if below else None, above[0] if above else None) if x is not None]


def _away_from(band: list[float], lr: float, way: str | None) -> bool:
    """Whether moving ``lr`` this ``way`` ("raise" or "lower") leads away from the learning ``band``."""
    return bool(band) and ((way == "raise" and lr > max(band)) or (way == "lower" and lr < min(band)))


def judge_seed(rows: list[dict[str, Any]], truth: dict[str, Any]) -> dict[str, Any]:
    """One sweep against the truth, twice: each trial as its nearest grid setting (strict), and as either
    grid setting around its LR (bracketed: a trial at 1.9e-4 between a learner at 1e-4 and a flat 3e-4
    agrees with either label, since the grid cannot say which holds there)."""
    judged = [r for r in rows if r.get("gain") is not None]
    lrs = [float(r["config"]["optim.lr"]) for r in judged]
    settings = [truth[horizon_of(int(r.get("steps", 0)))]["settings"] for r in judged]
    matched = [(r, nearest(lr, s)) for r, lr, s in zip(judged, lrs, settings)]
    around = [bracket(lr, s) for lr, s in zip(lrs, settings)]
    top = truth[str(HORIZONS[-1])]["top"]  # the ranking's #1 against what holds at the users' horizon, not the sweep's
    band = truth[str(HORIZONS[-1])].get("band") or [s["lr"] for s in truth[str(HORIZONS[-1])]["settings"] if s["label"] == "learns"]
    wrong = [(lr, r["verdict"]) for r, lr in zip(judged, lrs) if _away_from(band, lr, WAY.get(r["verdict"]))]
    advice_wrong = [(lr, r.get("lr_advice")) for r, lr in zip(judged, lrs) if _away_from(band, lr, r.get("lr_advice"))]
    first = matched[0][1]["lr"] if matched else None
    collapsed = sum(1 for i, (_, a) in enumerate(matched) for _, b in matched[i + 1:] if a["label"] == "too high" and b["label"] == "learns")
    clear = [(r, s, b) for (r, s), b in zip(matched, around) if s["label"] not in UNCLEAR]  # a truth to judge against
    agree = [r["verdict"] == s["label"] for r, s, _ in clear]
    agree_decided = [r["verdict"] == s["label"] for r, s, _ in clear if r["verdict"] != "undecided"]
    agree_bracketed = [any(r["verdict"] == x["label"] for x in b) for r, _, b in clear]
    advice_agree = [r.get("lr_advice") == WAY[s["label"]] for r, s, _ in clear if s["label"] in WAY]
    return {"top1_trial_lr": lrs[0] if lrs else None, "top1_lr": first, "top1_in_top": first in top, "top1_verdict": matched[0][0]["verdict"] if matched else None,
            "top1_in_top_bracketed": bool(around) and any(s["lr"] in top for s in around[0]),
            "collapsed_above_learner": collapsed, "wrong_direction": len(wrong), "advice_wrong_direction": len(advice_wrong), "agree": agree,
            "advice_agree": advice_agree, "agree_bracketed": agree_bracketed, "agree_decided": agree_decided,
            "undecided": sum(r["verdict"] == "undecided" for r, _ in matched), "truth_unclear": len(matched) - len(clear),
            "undecided_clear": sum(r["verdict"] == "undecided" for r, _, _ in clear),
            "verdicts": [(r["config"]["optim.lr"], r["verdict"], s["label"]) for r, s in matched]}


def run_bench(world: World, seeds: list[int], steps: int, keep: Path | None, eval_interval: int | None = None, grace_period: int | None = None,
              truth_kind: str = "outcome", eval_samples: int | None = None, judge: bool = True) -> None:
    """Each seed's sweep run, packed and (``judge``) judged against the truth; with ``judge=False`` (``--no-judge``)
    nothing is judged or written of a judgement: seeds kept for judging run under rules not yet frozen, and
    ``judge`` reads their packs once those rules are."""
    truth = _truth(world, truth_kind) if judge else None
    folder = keep or Path(tempfile.mkdtemp(prefix="verdict-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    space = bench_space(world, folder, steps, eval_interval, grace_period, eval_samples)
    per_seed = []
    for seed in seeds:
        started = time.perf_counter()
        run_sweep(["run", str(space), "--storage", str(folder / f"s{seed}"), "--set", f"search.seed={seed}", "--fresh"], sweep_env())
        rows = json.loads((folder / f"s{seed}" / world.bench_name / "leaderboard.json").read_text())
        packed = pack(folder, ["verdict_bench.yaml", f"s{seed}/{world.bench_name}"], SWEEPS / f"{world.name}_s{seed}_{steps}steps_{file_tag()}.tar.gz")
        result = {"seed": seed, "minutes": round((time.perf_counter() - started) / 60, 1), "sweep": str(packed.relative_to(ROOT)),
                  **(judge_seed(rows, truth) if truth is not None else {"trials": len(rows)})}
        per_seed.append(result)
        print(json.dumps(result))
    if truth is None:
        record(bench_record(world, "unjudged"), per_seed, {"world": world.key, "seeds": seeds, "steps": steps, "results": str(folder)})
        return
    summary = summarize(world, per_seed, steps, truth, [folder], truth_kind)
    record(bench_record(world, truth_kind), per_seed, {k: v for k, v in summary.items() if k != "bench"})


def rejudged(board: Path) -> list[dict[str, Any]]:
    """A kept sweep's leaderboard judged again by this checkout's rules (``sweep.leaderboard.judged_rows``,
    as the sweep's end does), each trial's fate (status, steps) as the sweep saved it."""
    from dataclasses import fields

    from sweep.leaderboard import TrialRow, judged_rows
    from sweep.store.storage import open_storage

    names = [f.name for f in fields(TrialRow)]
    fates = [TrialRow(**{k: r[k] for k in names if k in r}) for r in json.loads(board.read_text())]
    return judged_rows(fates, open_storage(str(board.parent.parent)), board.parent.name)


def bench_record(world: World, truth_kind: str) -> str:
    """The bench's data file name: the hotel's as before worlds, the others' with the world's name."""
    return f"verdict_bench_{truth_kind}" if world.key == "hotel" else f"verdict_bench_{world.key}_{truth_kind}"


def judge_kept(world: World, sources: list[Path], truth_kind: str = "outcome") -> None:
    """The bench's sweeps already run (``--keep`` folders, e.g. seeds run in two sittings, or the packed sweeps
    each seed leaves in ``bench/data/verdict_sweeps/``), judged again together by this checkout's verdict rules."""
    truth = _truth(world, truth_kind)
    with opened(sources) as folders:
        per_seed, steps = judged_seeds(world, sources, folders, truth)
        summary = {**summarize(world, per_seed, steps, truth, folders, truth_kind), "results": ", ".join(map(str, sources))}
    record(bench_record(world, truth_kind), per_seed, {k: v for k, v in summary.items() if k != "bench"})


def judged_seeds(world: World, sources: list[Path], folders: list[Path], truth: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Each searcher seed's sweep under ``folders`` (``sources``' folders, for the messages) judged against
    ``truth``, in seed order within a source; and the most steps a trial ran."""
    per_seed, steps, seen = [], 0, {}
    for source, folder in zip(sources, folders):
        for board in sorted(folder.glob(f"s*/{world.bench_name}/leaderboard.json"), key=lambda p: int(p.parts[-3][1:])):
            seed = int(board.parts[-3][1:])
            if seed in seen:  # two runs of one seed (packs from two commits, say) would count it twice
                raise SystemExit(f"searcher seed {seed} is in both {seen[seed]} and {source}: judge one sweep per seed")
            seen[seed] = source
            rows = rejudged(board)
            steps = max([steps, *(int(r.get("steps", 0)) for r in rows)])
            result = {"seed": seed, **judge_seed(rows, truth)}
            per_seed.append(result)
            print(json.dumps(result))
    if not per_seed:
        raise SystemExit(f"no bench sweeps (s<seed>/{world.bench_name}/leaderboard.json) under {', '.join(map(str, sources))}")
    return per_seed, steps


def _truth(world: World, kind: str = "outcome") -> dict[str, Any]:
    """The truth the bench judges against. ``outcome`` (default): what the grid's runs did, by rules that read
    nothing of the verdict, frozen in ``bench/data/verdict_truth_outcomes.json`` (``bench/outcome_truth.py``).
    ``rules``: the grid's runs labelled by this checkout's own verdict rules (in-sample: how a 10-step run agrees
    with 30-step runs under the same rules, not whether the rules are right; the bench's figures before 2026-11-27)."""
    if not world.runs.is_file():
        raise SystemExit(f"no ground truth at {world.runs}: make it with `python bench/verdict.py truth {world.cli}`")
    if kind == "rules":
        return truth_table(read_json(world.runs))
    if not world.outcomes.is_file():
        raise SystemExit(f"no outcome truth at {world.outcomes}: make it with `python bench/outcome_truth.py {world.cli}`")
    return read_json(world.outcomes)["truth"]


def summarize(world: World, per_seed: list[dict[str, Any]], steps: int, truth: dict[str, Any], folders: list[Path],
              truth_kind: str = "outcome") -> dict[str, Any]:
    agree = [a for r in per_seed for a in r["agree"]]
    bracketed = [a for r in per_seed for a in r["agree_bracketed"]]
    advice = [a for r in per_seed for a in r.get("advice_agree", [])]
    decided = [a for r in per_seed for a in r["agree_decided"]]
    judged = sum(len(r["verdicts"]) for r in per_seed)
    spaces = [yaml.safe_load(p.read_text()) for f in folders if (p := f / "verdict_bench.yaml").is_file()]
    intervals = sorted({d["trainer"]["eval"]["interval"] for d in spaces})
    samples = sorted({d["trainer"]["eval"].get("n_samples") for d in spaces} - {None})
    graces = sorted({d["scheduler"]["grace_period"] for d in spaces})
    return {"bench": "verdict", "world": world.key, "truth": truth_kind, "seeds": [r["seed"] for r in per_seed], "steps": steps, "eval_interval": intervals, "eval_samples": samples,
            "grace_period": graces,
            "top1_in_truth_top": round(sum(r["top1_in_top"] for r in per_seed) / len(per_seed), 3),
            "top1_learns": round(sum(r["top1_verdict"] == "learns" for r in per_seed) / len(per_seed), 3),
            "collapsed_above_learner": sum(r["collapsed_above_learner"] for r in per_seed),
            "wrong_direction": sum(r.get("wrong_direction", 0) for r in per_seed),
            "advice_wrong_direction": sum(r.get("advice_wrong_direction", 0) for r in per_seed),
            "advice_direction_agreement": round(sum(advice) / len(advice), 3) if advice else None, "trials_truth_off_lr": len(advice),
            "verdict_agreement": round(sum(agree) / len(agree), 3) if agree else None, "trials_judged": len(agree),
            "verdict_agreement_decided": round(sum(decided) / len(decided), 3) if decided else None,
            "undecided_share": round(sum(r["undecided"] for r in per_seed) / judged, 3) if judged else None,
            "undecided_share_clear": round(sum(r["undecided_clear"] for r in per_seed) / len(agree), 3) if agree else None,
            "trials_truth_unclear": sum(r["truth_unclear"] for r in per_seed),
            "top1_in_truth_top_bracketed": round(sum(r["top1_in_top_bracketed"] for r in per_seed) / len(per_seed), 3),
            "verdict_agreement_bracketed": round(sum(bracketed) / len(bracketed), 3) if bracketed else None,
            "truth_top_share": {h: t["top_share"] for h, t in truth.items()}, "results": ", ".join(map(str, folders))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", choices=["bench", "truth", "judge"], default="bench")
    parser.add_argument("--world", choices=sorted(WORLDS), default="hotel", help="hotel (the demo's world) or mix (five apps; bench/worlds.py)")
    parser.add_argument("--results", type=Path, nargs="+",
                        help="truth: existing runs of the world's grid ({storage}/verdict_truth, or verdict_truth_mix, packed parts *.tar.gz, or a runs data file "
                             "bench/data/verdict_truth*.json[.gz], e.g. the frozen grid's under a finer grid's parts) to read; later ones fill runs "
                             "the first lacks (data files before sweeps); judge: --keep folders of earlier bench runs, or their packed sweeps (bench/data/verdict_sweeps/*.tar.gz), judged together")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10, 20)),
                        help="searcher seeds, one sweep each (default 10-19, kept for judging: rules may be tuned on 0-9 only)")
    parser.add_argument("--steps", type=int, default=10, help="GRPO steps per trial of the bench's sweeps")
    parser.add_argument("--keep", type=Path, help="keep the bench's sweeps (with truth: the grid's runs) here")
    parser.add_argument("--lrs", type=float, nargs="+", help="truth: run only these of the grid's learning rates (a part, packed to bench/data/verdict_truth_{world}_parts/)")
    parser.add_argument("--grid-seeds", type=int, nargs="+", help="truth: run only these of the grid's seeds (a part)")
    parser.add_argument("--fine", action="store_true",
                        help="the world's finer truth grid (bench/worlds.py, refined_lrs): its parts, its truth, judged against it")
    parser.add_argument("--eval-interval", type=int, help="held-out eval every this many steps (default: the demo's)")
    parser.add_argument("--eval-samples", type=int, help="samples per held-out task in the bench's sweeps (default: the world's trainer's)")
    parser.add_argument("--grace-period", type=int, help="ASHA's first rung, in steps (default: the demo's)")
    parser.add_argument("--truth", choices=["outcome", "rules"],
                        help="judge against the outcome truth (default) or the grid labelled by this checkout's verdict rules (in-sample)")
    parser.add_argument("--no-judge", action="store_true",
                        help="bench: run and pack each seed's sweep, judge nothing (judging seeds run before the rules that will judge them are frozen)")
    args = parser.parse_args()
    if args.no_judge and args.mode != "bench":
        parser.error(f"--no-judge is for the bench's runs, not {args.mode!r}: it runs and packs sweeps without judging them")
    if args.no_judge and args.truth:
        parser.error(f"--no-judge judges nothing, so --truth {args.truth} has nothing to do: give one or the other")
    args.truth = args.truth or "outcome"
    world = world_of(args.world, args.fine)
    if args.mode == "truth":
        make_truth(world, args.results, args.keep, args.lrs, args.grid_seeds)
    elif args.mode == "judge":
        judge_kept(world, args.results or [], args.truth)
    else:
        run_bench(world, args.seeds, args.steps, args.keep, args.eval_interval, args.grace_period, args.truth, args.eval_samples, not args.no_judge)
    return 0


if __name__ == "__main__":
    sys.exit(main())
