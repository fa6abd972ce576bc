"""The reporter seam: the trainer reports once per step and never knows who listens (Tune, a console, a test)."""

from __future__ import annotations

import json
import sys
from typing import Protocol, TextIO


class Reporter(Protocol):
    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        """Called exactly once per step; ``checkpoint`` is the directory saved at this step, if any.

        With several ranks only rank 0 reports (its metrics cover every rank's episodes), unless the
        reporter has ``all_ranks = True`` (Ray Train workers, which must all report each step).
        """


class ConsoleReporter:
    """One line per step with the headline metrics; the full metrics as JSON lines to ``jsonl`` if given."""

    HEADLINE = ("reward/avg_pass_at_1", "reward/variance_per_prompt", "eval/avg_pass_at_1", "policy/clip_frac", "policy/kl", "timing/step_s")

    def __init__(self, stream: TextIO = sys.stdout, jsonl: TextIO | None = None):
        self.stream = stream
        self.jsonl = jsonl

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        parts = [f"{k if k.startswith('eval/') else k.split('/')[-1]}={metrics[k]:.4g}" for k in self.HEADLINE if k in metrics]
        saved = f" (checkpoint {checkpoint})" if checkpoint else ""
        print(f"step {step}: " + " ".join(parts) + saved, file=self.stream, flush=True)
        if self.jsonl is not None:
            self.jsonl.write(json.dumps({"step": step, **metrics}) + "\n")
            self.jsonl.flush()


class ListReporter:
    """Keeps every report in memory (tests, notebooks)."""

    def __init__(self) -> None:
        self.reports: list[tuple[int, dict[str, float]]] = []
        self.checkpoints: list[str] = []

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        self.reports.append((step, dict(metrics)))
        if checkpoint:
            self.checkpoints.append(checkpoint)
