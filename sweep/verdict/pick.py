"""The sweep's #1: among the learners within noise of the best gain, the middle one by update size.

Ranked by gain alone, #1 is sometimes the top edge of the band of learners: the largest update that has not
fallen yet at the sweep's horizon, whose lead fades or turns by the users' longer one (on the hotel, LR 1.7e-4
learns at 10 steps and is mixed at 30, while 3e-5 and 1e-4 go on rising: ``bench/verdict.py``'s outcome truths;
3 of 20 judging sweeps' #1s, hotel seeds 20-29 and mix 10-19). When the evals cannot tell the band's members apart
(each within noise of the best), the sweep names the middle of the band by update size: as far as it can see from
both edges, the early riser's above and the slow learner's below. The band's members rose beyond noise by their own
evals (the caller says which: ``sweep.report.judge``); one labelled learns by its neighbours' updates is not #1 on
their evidence. The update sizes are compared over the first steps every member ran (a decaying LR schedule makes
late steps small); an even count takes the gentler of the two middle ones. Without a measured (finite) update for
every member, or when the best is not a learner, the best gain stays #1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import median

from sweep.verdict.labels import overflowed


def middle_learner(best: str, tied: Sequence[str], learners: set[str], update_kl: Mapping[str, Sequence[float]]) -> str:
    """``best``: the trial with the best gain; ``tied``: those within noise of it; ``learners``: the band's
    possible members (labelled learns, rose beyond noise); ``update_kl``: each trial's per-step update KL, oldest first."""
    band = [name for name in (best, *tied) if name in learners]
    if best not in learners or len(band) < 2 or not all(update_kl.get(name) and not overflowed(update_kl[name]) for name in band):
        return best
    steps = min(len(update_kl[name]) for name in band)
    by_size = sorted(band, key=lambda name: (median(update_kl[name][:steps]), name))
    return by_size[(len(by_size) - 1) // 2]
