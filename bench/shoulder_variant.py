"""The held-with-huge-updates rule as it was (a482e2a's) vs the variant that also asks for a sign of a fall, on packed bench sweeps.

    python bench/shoulder_variant.py --world mix --results bench/data/verdict_sweeps/mix_s[0-9]_10steps_*.tar.gz
    python bench/shoulder_variant.py decide bench/data/shoulder_variant_mix_*.jsonl bench/data/shoulder_variant_hotel_*.jsonl

`too high` for a trial that held had one rule (``sweep.verdict.labels._huge_update``): its updates above 10x those of
every learner of its sweep. The variant keeps that call only where the trial also shows a sign of a fall
(``_blowup``: KL to the reference, entropy, clip fraction or failed tool turns); without one the trial goes on to the
later rules (flat, advising a lower LR, or undecided). Both judge the same packs against the world's frozen outcome
truth, side by side. Tuning seeds only (docs/decisions.md: the variant is chosen or refused on mix and hotel 0-9,
before the mix's judging seeds 30-39 are judged). Per-seed rows of both, then one summary line.

``decide`` applies the test written down before mix tuning seeds 5-9 ran (docs/decisions.md), to one such file per
world, all their seeds together: the variant is taken if it raises agreement with the truth, adds no
wrong-direction verdict or advice in any seed, and leaves #1 in the truth's top set as often; otherwise the rule stays.
It was taken on 2026-12-01 (``bench/data/shoulder_variant_decision_2026-12-01_012742_a778f6f.jsonl``) and is now the
rule (``sweep.verdict.labels._held_too_high``); rows and files still name the old rule ``current`` and the variant
``fall_sign``, so a run at any commit compares the same two rules.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import record  # noqa: E402
from bench.sweep_archive import opened  # noqa: E402
from bench.verdict import _truth, judged_seeds, summarize  # noqa: E402
from bench.worlds import WORLDS  # noqa: E402

SEED_FIGURES = ("agree", "wrong_direction", "advice_wrong_direction", "top1_in_top")  # each seed's, for ``decide``
FIGURES = ("top1_in_truth_top", "wrong_direction", "advice_wrong_direction", "verdict_agreement", "trials_judged", "undecided_share")


@contextlib.contextmanager
def huge_alone_rule() -> Iterator[None]:
    """The verdict rules as they were before 2026-12-01 (``current`` in the rows), for the block's length: a held
    trial with updates far above the learners' is too high with or without a sign of a fall."""
    from sweep.verdict import labels

    rule = labels._held_too_high

    def huge_alone(t, th, scale):
        huge = labels._huge_update(t, th, scale)
        return f"{huge}{labels._blowup(t, th)}" if huge else None

    labels._held_too_high = huge_alone
    try:
        yield
    finally:
        labels._held_too_high = rule


def decide(rows: list[dict]) -> dict:
    """The pre-registered test on per-seed rows of both rules (``rules``: current or fall_sign; a seed is its
    world and searcher seed): agreement pooled over every judged trial, wrong-direction counts seed by seed, #1s."""
    by = {name: {(r["world"], r["seed"]): r for r in rows if r["rules"] == name} for name in ("current", "fall_sign")}
    if set(by["current"]) != set(by["fall_sign"]) or not by["current"]:
        raise SystemExit("decide: the files must hold the same seeds judged by both rules")
    pooled = {name: [a for r in seeds.values() for a in r["agree"]] for name, seeds in by.items()}
    agreement = {name: round(sum(a) / len(a), 4) if a else None for name, a in pooled.items()}
    added = sorted(f"{w} {s}" for (w, s), r in by["fall_sign"].items()
                   if any(r[k] > by["current"][(w, s)][k] for k in ("wrong_direction", "advice_wrong_direction")))
    top1 = {name: sum(r["top1_in_top"] for r in seeds.values()) for name, seeds in by.items()}
    raises = None not in agreement.values() and agreement["fall_sign"] > agreement["current"]
    taken = raises and not added and top1["fall_sign"] >= top1["current"]
    return {"seeds": len(by["current"]), "trials_judged": {n: len(a) for n, a in pooled.items()}, "agreement": agreement,
            "seeds_adding_wrong_direction": added, "top1_in_truth_top": top1, "variant_taken": taken}


def decide_main(files: list[Path]) -> int:
    rows = []
    for f in files:
        if not f.is_file():
            raise SystemExit(f"decide: no file {f}")
        mine = [json.loads(line) for line in f.read_text().splitlines()[:-1]]  # the last line is the summary
        if not mine or any(k not in r for r in mine for k in ("rules", "world", *SEED_FIGURES)):
            raise SystemExit(f"decide: {f} has no per-seed figures ({', '.join(SEED_FIGURES)}): side-by-side files from ba137f6 on")
        rows += mine
    worlds = sorted({r["world"] for r in rows})
    record("shoulder_variant_decision", [], {"worlds": worlds, **decide(rows), "files": ", ".join(map(str, files))})
    return 0


def main() -> int:
    if sys.argv[1:2] == ["decide"]:
        return decide_main([Path(f) for f in sys.argv[2:]])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", choices=sorted(WORLDS), default="mix")
    parser.add_argument("--results", type=Path, nargs="+", required=True, help="packed bench sweeps (tuning seeds)")
    args = parser.parse_args()
    world = WORLDS[args.world]
    truth = _truth(world)
    rows, figures = [], {}
    with opened(args.results) as folders:
        for name, rules in (("current", huge_alone_rule()), ("fall_sign", contextlib.nullcontext())):
            with rules, contextlib.redirect_stdout(io.StringIO()):
                per_seed, steps = judged_seeds(world, args.results, folders, truth)
            summary = summarize(world, per_seed, steps, truth, folders)
            figures[name] = {k: summary[k] for k in FIGURES}
            rows += [{"rules": name, "world": world.key, "seed": r["seed"], "verdicts": r["verdicts"], **{k: r[k] for k in SEED_FIGURES}}
                     for r in per_seed]
            print(name, figures[name])
    labels = {n: [v[1] for r in rows if r["rules"] == n for v in r["verdicts"]] for n in figures}  # the same trials, in order
    moved = sum(a != b for a, b in zip(labels["current"], labels["fall_sign"]))
    record(f"shoulder_variant_{world.key}", rows, {"world": world.key, "seeds": sorted({r["seed"] for r in rows}), **figures,
                                                   "trials_moved": moved, "results": ", ".join(map(str, args.results))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
