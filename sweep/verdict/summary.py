"""The two or three sentences that open a sweep's report: which setting won, by how much over the base,
and why the others lost. Pure text from the ranking and the labels."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sweep.verdict.labels import Verdict
from sweep.verdict.score import Score

WHY_THEY_LOST = {
    "too high": "too high (fell below the base or collapsed)",
    "too low": "too low (updates too small to move the policy)",
    "no signal": "without signal (every group's rewards equal)",
    "undecided": "undecided (a change within noise: too few evals to tell)",
    "flat": "flat (moved the policy, not the held-out score)",
    "env-limited": "limited by the environment",
    "no eval": "stopped before a trained eval",
    "error": "failed",
    "learns": "learners behind the winner",
}


def setting(config: Mapping[str, Any]) -> str:
    """``lr=1e-04, kl_coef=0.1, n=8``: the swept keys by their last part."""
    short = {"n_samples_per_prompt": "n"}
    parts = []
    for key, value in config.items():
        name = key.split(".")[-1]
        shown = f"{value:.2g}" if isinstance(value, float) and 0 < abs(value) < 1e-2 else str(value)
        parts.append(f"{short.get(name, name)}={shown}")
    return ", ".join(parts) or "the base config"


def verdict_text(ranked: Sequence[tuple[str, Mapping[str, Any], Score, Verdict]], base: float | None) -> str:
    """``ranked``: (trial id, swept config, score, verdict), best first."""
    if not ranked or ranked[0][2].gain is None:
        return "No trial reached a trained held-out eval, so there is no winner yet."
    name, config, score, top = ranked[0]
    spread = f" (90% interval {score.low:+.3f} to {score.high:+.3f})" if score.low is not None else ""
    start = f" from the base's {base:.3f}" if base is not None else ""
    lead = f"#1 is trial {name} ({setting(config)}): held-out pass@1 {score.gain:+.3f}{start}{spread}; verdict: {top.label}."
    if top.label != "learns":
        learners = [n for n, _, _, v in ranked[1:] if v.label == "learns"]
        if learners:  # #1 by gain, yet its own curves say otherwise (a rise that collapsed by its last eval)
            lead += f" Trials labelled learns rank below it ({', '.join(learners)}): read #1's verdict before taking its setting."
        elif any(s.moved == "rose" for _, _, s, _ in ranked):
            lead += " No trial learns."
        else:
            lead += " No trial rose above the base by more than noise."
    tied = [n for n, _, s, _ in ranked[1:] if s.tied]
    ahead = [(n, s) for n, _, s, _ in ranked[1:] if s.tied and s.gain is not None and s.gain > score.gain]
    of = "of it"
    if ahead:  # sweep.verdict.pick: #1 is the middle of the learners within noise of the best gain
        best_name, best = max(ahead, key=lambda x: x[1].gain)
        lead += (f" It is the middle, by update size, of the learners within noise of the best gain (trial {best_name}, {best.gain:+.3f}): "
                 "the evals cannot tell them apart, and the band's top edge is where a short sweep's lead fades at longer horizons.")
        tied, of = [n for n in tied if n != best_name], f"of trial {best_name}'s gain"
    ties = f" {len(tied)} more within noise {of} ({', '.join(tied)}): confirm with `sweep confirm` before trusting the order." if tied else ""
    losers = Counter(v.label for n, _, s, v in ranked[1:] if not s.tied)
    lost = "; ".join(f"{count} {WHY_THEY_LOST.get(label, label)}" for label, count in losers.most_common())
    return lead + ties + (f" The others: {lost}." if lost else "")


def confirmation_text(confirmation: Mapping[str, Any] | None) -> str:
    """The sentence on a confirm stage (``confirm.json``: the top settings again with fresh seeds), or empty."""
    if not confirmation or not confirmation.get("settings"):
        return ""
    settings = confirmation["settings"]
    seeds, steps = len(confirmation.get("seeds") or []), confirmation.get("steps")
    scored = [s for s in settings if s.get("mean") is not None]
    where = f"{len(settings)} settings again with {seeds} fresh seed{'s' if seeds != 1 else ''} over {steps} steps"
    if not scored:
        return f"Confirm stage ({where}): no confirming trial reached a trained eval."
    first = min(settings, key=lambda s: s["original_rank"])
    best = max(scored, key=lambda s: s["mean"])
    mean = f"{first['mean']:+.3f}" if first.get("mean") is not None else "none"
    if confirmation.get("holds"):
        return f"Confirm stage ({where}): #1 holds, mean gain {mean} over its fresh seeds; the winner is exported to winner/."
    return (f"Confirm stage ({where}): #1 does not hold (mean gain {mean}); {setting(best['setting'])}, #{best['original_rank']} in the "
            f"sweep, did best over fresh seeds (mean {best['mean']:+.3f}) and is the exported winner (winner/).")
