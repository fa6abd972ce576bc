"""The report's PNG plots, drawn with matplotlib's Agg backend (no display needed).

Each function takes plain series or summaries and a path, writes one PNG and returns its path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

Series = list[tuple[int, float]]
STYLES = ("-", "--", ":", "-.")
POINTS = ("o", "s", "^", "D", "v", "x")
MARKERS = {"finished": "o", "ASHA": "v", "zero signal": "x", "error": "s"}


def learning_curves(panels: dict[str, dict[str, Series]], path: Path) -> Path:
    """One panel per metric (title → trial → series), one line per trial, the step axis shared."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    trials = sorted({t for per_trial in panels.values() for t in per_trial})
    for ax, (title, per_trial) in zip(axes.flat, panels.items()):
        for i, trial in enumerate(trials):
            points = per_trial.get(trial, [])
            if points:
                style = dict(color=colors[i % len(colors)], linestyle=STYLES[i % len(STYLES)], marker=POINTS[i % len(POINTS)], alpha=0.85)
                ax.plot([p[0] for p in points], [p[1] for p in points], label=trial, **style)  # styles tell equal curves apart
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("GRPO step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if not handles:
        handles, labels = next((a.get_legend_handles_labels() for a in axes.flat if a.get_legend_handles_labels()[0]), ([], []))
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8, title="trial")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return _save(fig, path)


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def metric_vs_params(points: list[tuple[dict[str, Any], float, str]], keys: list[str], metric: str, path: Path) -> Path:
    """The best metric of each trial against each swept key; the marker says why the trial stopped."""
    fig, axes = plt.subplots(1, max(1, len(keys)), figsize=(4.2 * max(1, len(keys)), 3.6), squeeze=False)
    for ax, key in zip(axes[0], keys):
        values = [cfg.get(key) for cfg, _, _ in points]
        ticks = sorted({str(v) for v in values}) if not _numeric(values) else None
        for (_, best, stop), value in zip(points, values):
            x = ticks.index(str(value)) if ticks else value
            ax.scatter([x], [best], marker=MARKERS.get(stop, "o"), color="C0")
        if ticks:
            ax.set_xticks(range(len(ticks)), ticks)
        elif values and min(values) > 0 and max(values) / min(values) > 20:
            ax.set_xscale("log")
        ax.set_xlabel(key)
        ax.set_ylabel(f"best {metric}", fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("markers: o finished, v ASHA, x zero signal, s error", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


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
