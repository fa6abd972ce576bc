"""The held-with-huge-updates rule as it is vs a variant that also asks for a sign of a fall, on packed bench sweeps.

    python bench/shoulder_variant.py --world mix --results bench/data/verdict_sweeps/mix_s[0-9]_10steps_*.tar.gz

`too high` for a trial that held has one rule (``sweep.verdict.labels._huge_update``): its updates above 10x those of
every learner of its sweep. The variant keeps that call only where the trial also shows a sign of a fall
(``_blowup``: KL to the reference, entropy, clip fraction or failed tool turns); without one the trial goes on to the
later rules (flat, advising a lower LR, or undecided). Both judge the same packs against the world's frozen outcome
truth, side by side. Tuning seeds only (docs/decisions.md: the variant is chosen or refused on mix and hotel 0-9,
before the mix's judging seeds 30-39 are judged). Per-seed rows of both, then one summary line.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import record  # noqa: E402
from bench.sweep_archive import opened  # noqa: E402
from bench.verdict import _truth, judged_seeds, summarize  # noqa: E402
from bench.worlds import WORLDS  # noqa: E402

FIGURES = ("top1_in_truth_top", "wrong_direction", "advice_wrong_direction", "verdict_agreement", "trials_judged", "undecided_share")


@contextlib.contextmanager
def fall_sign_variant() -> Iterator[None]:
    """The verdict rules with the variant in place of the held-with-huge-updates rule, for the block's length."""
    from sweep.verdict import labels

    plain = labels._huge_update

    def with_a_sign(t, th, scale):
        huge = plain(t, th, scale)
        return huge if huge and labels._blowup(t, th or labels.Thresholds()) else None

    labels._huge_update = with_a_sign
    try:
        yield
    finally:
        labels._huge_update = plain


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", choices=sorted(WORLDS), default="mix")
    parser.add_argument("--results", type=Path, nargs="+", required=True, help="packed bench sweeps (tuning seeds)")
    args = parser.parse_args()
    world = WORLDS[args.world]
    truth = _truth(world)
    rows, figures = [], {}
    with opened(args.results) as folders:
        for name, rules in (("current", contextlib.nullcontext()), ("fall_sign", fall_sign_variant())):
            with rules, contextlib.redirect_stdout(io.StringIO()):
                per_seed, steps = judged_seeds(world, args.results, folders, truth)
            summary = summarize(world, per_seed, steps, truth, folders)
            figures[name] = {k: summary[k] for k in FIGURES}
            rows += [{"rules": name, "seed": r["seed"], "verdicts": r["verdicts"]} for r in per_seed]
            print(name, figures[name])
    labels = {n: [v[1] for r in rows if r["rules"] == n for v in r["verdicts"]] for n in figures}  # the same trials, in order
    moved = sum(a != b for a, b in zip(labels["current"], labels["fall_sign"]))
    record(f"shoulder_variant_{world.key}", rows, {"world": world.key, "seeds": sorted({r["seed"] for r in rows}), **figures,
                                                   "trials_moved": moved, "results": ", ".join(map(str, args.results))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
