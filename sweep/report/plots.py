"""The report's PNG plots, drawn with matplotlib's Agg backend (no display needed).

Each function takes plain series or summaries and a path, writes one PNG and returns its path. They draw one
at a time in a process: pyplot and its mathtext parser are not thread-safe, and the live page
(``sweep.watch.live_page``) draws from its server's thread while the driver draws the final report (two at once
failed the report with a mathtext ParseException on a tick label).
"""

from __future__ import annotations

import functools
import math
import threading
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

Series = list[tuple[int, float]]
STYLES = ("-", "--", ":", "-.")
POINTS = ("o", "s", "^", "D", "v", "x")


_DRAWING = threading.Lock()


def _one_at_a_time(draw):
    @functools.wraps(draw)
    def drawn(*args: Any, **kwargs: Any) -> Path:
        with _DRAWING:
            return draw(*args, **kwargs)

    return drawn


VERDICT_COLORS = {  # one colour per verdict label (sweep.verdict.labels), the same on every plot
    "learns": "#2a9d4b", "too low": "#3b6fd4", "too high": "#d43b3b", "no signal": "#8c8c8c",
    "undecided": "#17a2b8", "flat": "#e09b1a", "env-limited": "#8e44ad", "no eval": "#333333", "error": "#000000",
}


@_one_at_a_time
def learning_curves(panels: dict[str, dict[str, Series]], path: Path, labels: dict[str, str] | None = None,
                    base: float | None = None, log_panels: tuple[str, ...] = ()) -> Path:
    """One panel per metric (title → trial → series), one line per trial in its verdict's colour (``labels``:
    trial → label), the step axis shared; the first panel marks the shared base; ``log_panels`` are drawn on
    a symmetric log scale (a KL of 1,000 at one step must not flatten every other curve)."""
    rows = max(2, math.ceil(len(panels) / 2))
    fig, axes = plt.subplots(rows, 2, figsize=(11, 3.5 * rows), sharex=True, squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = labels or {}
    trials = sorted({t for per_trial in panels.values() for t in per_trial})
    for panel, (ax, (title, per_trial)) in enumerate(zip(axes.flat, panels.items())):
        for i, trial in enumerate(trials):
            points = per_trial.get(trial, [])
            if points:
                color = VERDICT_COLORS.get(labels.get(trial, ""), colors[i % len(colors)])
                style = dict(color=color, linestyle=STYLES[i % len(STYLES)], marker=POINTS[i % len(POINTS)], alpha=0.85)
                name = f"{trial} ({labels[trial]})" if trial in labels else trial
                ax.plot([p[0] for p in points], [p[1] for p in points], label=name, **style)  # styles tell equal curves apart
        if panel == 0 and base is not None:
            ax.axhline(base, color="black", linewidth=1, linestyle="--", label=f"shared base {base:.3f}")
        if title in log_panels:
            ax.set_yscale("symlog", linthresh=1e-5)
        ax.set_title(title + (" (log)" if title in log_panels else ""), fontsize=10)
        ax.grid(alpha=0.3)
    for column in axes.T:  # the lowest drawn panel of each column carries the step axis
        ax = [a for a in column if a.get_visible()][-1]
        ax.set_xlabel("GRPO step")
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, names = axes.flat[0].get_legend_handles_labels()
    if not handles:
        handles, names = next((a.get_legend_handles_labels() for a in axes.flat if a.get_legend_handles_labels()[0]), ([], []))
    if handles:
        fig.legend(handles, names, loc="lower center", ncol=min(4, len(names)), fontsize=8, title="trial (verdict)")
    fig.tight_layout(rect=(0, 0.24 / rows, 1, 1))
    return _save(fig, path)


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


@_one_at_a_time
def score_vs_params(points: list[tuple[dict[str, Any], float, float | None, float | None, str]], keys: list[str], path: Path) -> Path:
    """Each trial's held-out gain over the base (with its interval) against each swept key, in its verdict's colour."""
    fig, axes = plt.subplots(1, max(1, len(keys)), figsize=(4.2 * max(1, len(keys)), 3.6), squeeze=False)
    for ax, key in zip(axes[0], keys):
        values = [cfg.get(key) for cfg, *_ in points]
        ticks = sorted({str(v) for v in values}) if not _numeric(values) else None
        for (_, gain, low, high, label), value in zip(points, values):
            x = ticks.index(str(value)) if ticks else value
            color = VERDICT_COLORS.get(label, "C0")
            if low is not None and high is not None:
                ax.errorbar([x], [gain], yerr=[[gain - low], [high - gain]], fmt="o", color=color, capsize=3)
            else:
                ax.scatter([x], [gain], color=color)
        if ticks:
            ax.set_xticks(range(len(ticks)), ticks)
        elif values and min(values) > 0 and max(values) / min(values) > 20:
            ax.set_xscale("log")
        ax.axhline(0.0, color="black", linewidth=1, linestyle="--")
        ax.set_xlabel(key)
        ax.set_ylabel("held-out gain over the base", fontsize=8)
        ax.grid(alpha=0.3)
    shown = sorted({label for *_, label in points})
    fig.suptitle("colour: " + ", ".join(f"{label}" for label in shown) + "  (bars: 90% interval over tasks)", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


@_one_at_a_time
def importance_bars(importances: dict[str, float], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 0.5 + 0.5 * len(importances)))
    names = list(importances)[::-1]
    ax.barh(names, [importances[n] for n in names], color="C2")
    ax.set_xlabel("importance (PED-ANOVA, normalised)")
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
