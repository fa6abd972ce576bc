"""Sweep notifications to a Slack-compatible incoming webhook: start, each trial's end, the sweep's end or failure.

The webhook URL comes only from the environment (``GRPO_SWEEP_SLACK_WEBHOOK``): it is a secret, so it is
never logged, never put in a config and never in a message. A webhook that is down, slow or refusing never
fails the sweep: each post has a short timeout, a failure is one logged warning (without the URL), and
after ``MAX_FAILURES`` failures in a row the notifier goes quiet. Messages are posted in order from the
Tune driver's loop (``{"text": ...}``, which Slack, Mattermost, Rocket.Chat and Discord's ``/slack``
endpoints accept). Leaves out: threads, rich blocks, per-step messages.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

from ray.tune import Callback

from configkit import environ
from grpo.metrics import shown
from sweep.spec.webhook import webhook_url
from sweep.store.uris import bare_uri
from sweep.trials.stoppers import VARIANCE, fate
from sweep.watch.text import fmt

WEBHOOK_ENV = environ.GRPO_SWEEP_SLACK_WEBHOOK.name
MAX_FAILURES = 3
log = logging.getLogger(__name__)


def post(url: str, text: str, timeout_s: float) -> bool:
    """POST ``{"text": text}``; False (and a warning without any part of the URL) on any failure."""
    try:
        request = urllib.request.Request(url, data=json.dumps({"text": text}).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
        return True
    except Exception as exc:  # a notification must never take the sweep down
        log.warning("sweep notification not delivered (%s): %s", WEBHOOK_ENV, failure_reason(exc))
        return False


def failure_reason(exc: BaseException) -> str:
    """A failed post's reason without the URL: an HTTP status, a network error's kind, else the exception's type."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, OSError):
        return f"{type(exc.reason).__name__}: {exc.reason.strerror or 'no details'}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return type(exc).__name__


def results_location(storage: str, name: str) -> str:
    """Where the sweep's results are, as a user would open them: an S3 URI or an absolute local path."""
    if "://" in storage:
        return f"{bare_uri(storage)}/{name}"
    return str(Path(storage).expanduser().resolve() / name)


def last_error_line(trial) -> str:
    """The exception line of the trial's newest error (Tune writes it on the driver before syncing it to storage)."""
    path = trial.error_file
    text = Path(path).read_text() if path and Path(path).is_file() else str(trial.get_error() or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


class SweepNotifier(Callback):
    """A Tune callback posting one line per event to the webhook named by ``$webhook_env``."""

    def __init__(self, name: str, results: str, metric: str, mode: str, total_steps: int,
                 zero_signal: tuple[float, int] | None = None, timeout_s: float = 5.0, webhook_env: str = WEBHOOK_ENV):
        self.name, self.results, self.metric, self.mode = name, results, metric, mode
        self.webhook_env = webhook_env  # the URL is read at each post, never kept: Tune pickles its callbacks into tuner.pkl
        self.total_steps, self.zero_signal, self.timeout_s = total_steps, zero_signal, timeout_s
        self.failures = 0
        self.variances: dict[str, list[float]] = defaultdict(list)

    def send(self, text: str) -> None:
        url = webhook_url(self.webhook_env)
        if not url or self.failures >= MAX_FAILURES:
            return
        self.failures = 0 if post(url, text, self.timeout_s) else self.failures + 1
        if self.failures == MAX_FAILURES:
            log.warning("sweep notifications off for the rest of this sweep: %d failures in a row", MAX_FAILURES)

    def setup(self, stop=None, num_samples=None, total_num_samples=None, **info) -> None:
        trials = total_num_samples or num_samples
        self.send(f"sweep {self.name} started: {trials} trials of up to {self.total_steps} steps, optimising {self.metric}; results: {self.results}")

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        if VARIANCE in result:
            self.variances[trial.trial_id].append(float(result[VARIANCE]))

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        self.send(f"sweep {self.name}: trial {trial.trial_id} {self.stop_reason(trial)}{self.summary(trial)}")

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        self.send(f"sweep {self.name}: trial {trial.trial_id} failed{self.summary(trial)}: {last_error_line(trial)}"[:1500])

    def on_experiment_end(self, trials, **info) -> None:
        failed = [t for t in trials if t.status == "ERROR"]
        if trials and len(failed) == len(trials):
            self.send(f"sweep {self.name} failed: every trial ({len(trials)}) errored; results: {self.results}")
            return
        best = self.best(trials)
        head = f"best {best.trial_id} {self.metric}={fmt(shown(best.last_result, self.metric), '.3g')}; " if best else ""
        self.send(f"sweep {self.name} ended: {len(trials)} trials, {len(failed)} failed; {head}results: {self.results}")

    def sweep_failed(self, error: BaseException) -> None:
        """For the driver: the sweep itself stopped with an exception (Tune's callbacks never see that)."""
        self.send(f"sweep {self.name} failed: {type(error).__name__}: {error}; results so far: {self.results}"[:1500])

    def sweep_interrupted(self, signal_name: str | None) -> None:
        """For the driver: Ctrl-C, or SIGTERM (a preemption, ``docker stop``) stopped it before the sweep ended, the only
        word someone away from its terminal gets; ``None``: it stopped because another driver took the sweep over."""
        if signal_name is None:
            self.send(f"sweep {self.name}: another driver took it over; this driver stopped its trials and leaves the sweep "
                      f"to it; results: {self.results}")
            return
        self.send(f"sweep {self.name} interrupted ({signal_name}) before it ended; its trials stopped where their checkpoints "
                  f"left them: continue it with `python -m sweep resume {self.results}`")

    def stop_reason(self, trial) -> str:
        steps = int(trial.last_result.get("training_iteration", 0))
        status = fate(steps, self.total_steps, self.variances[trial.trial_id], self.zero_signal)
        if status == "finished":
            return status
        if status == "zero signal":
            return f"stopped at step {steps}: zero signal"
        return f"stopped early at step {steps} (scheduler)"

    def summary(self, trial) -> str:
        value = shown(trial.last_result, self.metric)
        config = ", ".join(f"{k}={fmt(v, '.3g')}" for k, v in sorted((trial.config or {}).items()))
        parts = ([f"{self.metric}={fmt(value, '.3g')}"] if value is not None else []) + ([config] if config else [])
        return f" ({'; '.join(parts)})" if parts else ""

    def best(self, trials):
        scored = [(value, t) for t in trials if (value := shown(t.last_result, self.metric)) is not None]
        pick = max if self.mode == "max" else min
        return pick(scored, key=lambda pair: pair[0], default=(None, None))[1]


def notifiers(cfg) -> list[Callback]:
    """``[SweepNotifier]`` when ``GRPO_SWEEP_SLACK_WEBHOOK`` is set, else ``[]`` (for the tuner's callbacks)."""
    if not environ.GRPO_SWEEP_SLACK_WEBHOOK.is_set():
        return []
    return [SweepNotifier(cfg.name, results_location(cfg.storage, cfg.name), cfg.search.metric,
                          cfg.search.mode, cfg.trainer.total_steps, cfg.stopping.zero_signal.rule())]
