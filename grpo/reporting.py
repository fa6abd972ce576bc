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
        self.steps: list[int] = []
        self.evals: list[float] = []
        self.checkpoint: str | None = None

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        parts = [f"{k if k.startswith('eval/') else k.split('/')[-1]}={metrics[k]:.4g}" for k in self.HEADLINE if k in metrics]
        saved = f" (checkpoint {checkpoint})" if checkpoint else ""
        print(f"step {step}: " + " ".join(parts) + saved, file=self.stream, flush=True)
        self.steps.append(step)
        self.checkpoint = checkpoint or self.checkpoint
        if "eval/avg_pass_at_1" in metrics:
            self.evals.append(metrics["eval/avg_pass_at_1"])
        if self.jsonl is not None:
            self.jsonl.write(json.dumps({"step": step, **metrics}) + "\n")
            self.jsonl.flush()


    def closing_line(self, total_steps: int, resume_from: str | None) -> str:
        """What the run did, once it ended: its steps, held-out pass@1 as first and last reported, the last
        checkpoint; or, when no step ran, why (``resume_from`` already at ``total_steps``)."""
        if not self.steps:
            where = f"resume_from {resume_from} is at or past" if resume_from else "nothing left before"
            return f"no step to run: {where} total_steps = {total_steps}; raise it (--set total_steps=N) to train further"
        evals = f"; held-out pass@1 {self.evals[0]:.3f} -> {self.evals[-1]:.3f}" if self.evals else ""
        saved = f"; last checkpoint {self.checkpoint}" if self.checkpoint else ""
        return f"done: steps {self.steps[0]}-{self.steps[-1]} of {total_steps}{evals}{saved}"


class ListReporter:
    """Keeps every report in memory (tests, notebooks)."""

    def __init__(self) -> None:
        self.reports: list[tuple[int, dict[str, float]]] = []
        self.checkpoints: list[str] = []

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        self.reports.append((step, dict(metrics)))
        if checkpoint:
            self.checkpoints.append(checkpoint)
