"""A live table of the sweep's trials in the terminal: state, step, the search metric and variance_per_prompt.

A Tune callback in the driver, refreshed as each result arrives: a rich ``Live`` table when stdout is a
terminal, one plain line per event otherwise (CI logs, ``ray job`` output), so nothing is redrawn into a file.
Replaces Tune's own progress output (the sweep runs with ``verbose=0``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ray.tune import Callback

from grpo.metrics import shown
from sweep.trials.stoppers import VARIANCE, no_signal
from sweep.watch.text import fmt


@dataclass
class TrialLine:
    trial: str
    state: str = "PENDING"
    step: int = 0
    metric: float | None = None
    variance_per_prompt: float | None = None
    config: dict[str, Any] = field(default_factory=dict)
    variances: list[float] = field(default_factory=list)


def progress_table(lines: list[TrialLine], metric: str, total_steps: int):
    """The rich table of every trial, in start order."""
    from rich.table import Table

    keys = list(lines[0].config) if lines else []
    table = Table(title=f"Trials ({sum(line.state == 'RUNNING' for line in lines)} running)")
    for column in ["trial", "state", "step", *[k.split(".")[-1] for k in keys], metric.split("/")[-1], "variance_per_prompt"]:
        table.add_column(column, no_wrap=True)
    for line in lines:
        values = [fmt(line.config.get(k)) for k in keys]
        table.add_row(line.trial, line.state, f"{line.step}/{total_steps}", *values, fmt(line.metric), fmt(line.variance_per_prompt))
    return table


class LiveProgress(Callback):
    """Keeps one ``TrialLine`` per trial and redraws (or prints) on every start, result and end."""

    def __init__(self, metric: str, total_steps: int, keys: list[str], zero_signal: tuple[float, int] | None = None, console=None):
        self.metric, self.total_steps, self.keys = metric, total_steps, list(dict.fromkeys(keys))
        self.zero_signal = zero_signal
        self.console = console
        self.lines: dict[str, TrialLine] = {}
        self._live = None

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks with the experiment; a console and a live display do not pickle (nor need to)."""
        return {**self.__dict__, "console": None, "_live": None}

    def setup(self, **info: Any) -> None:
        from rich.console import Console

        self.console = self.console or Console()
        if self.console.is_terminal:
            from rich.live import Live

            self._live = Live(progress_table([], self.metric, self.total_steps), console=self.console, refresh_per_second=2)
            self._live.start()

    def _line(self, trial) -> TrialLine:
        line = self.lines.setdefault(trial.trial_id, TrialLine(trial.trial_id))
        line.config = {k: trial.config.get(k) for k in self.keys}
        return line

    def _update(self, trial, state: str, result: dict[str, Any] | None = None) -> None:
        line = self._line(trial)
        line.state = state
        if result:
            line.step = int(result.get("training_iteration", line.step))
            line.metric = shown(result, self.metric) if self.metric in result else line.metric
            line.variance_per_prompt = result.get(VARIANCE, line.variance_per_prompt)
            if VARIANCE in result:
                line.variances.append(float(result[VARIANCE]))
        if self._live is not None:
            self._live.update(progress_table(list(self.lines.values()), self.metric, self.total_steps))
        else:
            short = self.metric.split("/")[-1]
            self.console.print(
                f"trial {line.trial} {state.lower()} step {line.step}/{self.total_steps} {short} {fmt(line.metric)} "
                f"variance_per_prompt {fmt(line.variance_per_prompt)}",
                soft_wrap=True,
                highlight=False,
            )

    def on_trial_start(self, iteration: int, trials: list, trial, **info: Any) -> None:
        self._update(trial, "RUNNING")

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info: Any) -> None:
        self._update(trial, "RUNNING", result)

    def on_trial_complete(self, iteration: int, trials: list, trial, **info: Any) -> None:
        line = self._line(trial)
        if line.step >= self.total_steps:
            self._update(trial, "FINISHED")
        else:
            zero = self.zero_signal and no_signal(line.variances, *self.zero_signal)
            self._update(trial, "STOPPED (zero signal)" if zero else "STOPPED")

    def on_trial_error(self, iteration: int, trials: list, trial, **info: Any) -> None:
        self._update(trial, "ERROR")

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
