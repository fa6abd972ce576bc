"""The live sweep page: the report of the results so far, made by the report's own pieces (``sweep.report``:
load, judge, summaries, plots, sections, HTML), served by the driver while the sweep runs (``sweep.watch.live_server``)
and, once the sweep has ended, the final report itself.

``LiveFeed``, a Tune callback in the driver, keeps every trial's reported rows and its state: pending, running,
or why it ended (finished, the scheduler's early stop, the zero-signal rule, an error: ``sweep.trials.stoppers.fate``,
the leaderboard's words). ``LivePage`` builds the page from them when a browser asks and something changed (at
most every ``MIN_REBUILD_S``: a build draws the plots), adding what the trials wrote to storage themselves
(eval points, eval dumps). The page polls ``state.json`` and reloads when there is something new.
Leaves out the hyperparameter importance (the Optuna study settles as trials end; the final report has it)
and restarts after a trial's process died (the final report counts them).
"""

from __future__ import annotations

import html
import json
import shutil
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray.tune import Callback

from sweep.trials.stoppers import VARIANCE, fate
from sweep.watch.live_server import POLL_S, LiveServer

MIN_REBUILD_S = 3.0
LINGER_S = 10.0  # how long the driver waits, at the end, for open pages to load the final report
# Tune's states on first sight; a trial already ended then ended before a ``sweep resume``: storage has its rows
STATES = {"PENDING": "pending", "RUNNING": "running", "PAUSED": "paused", "TERMINATED": "earlier", "ERROR": "earlier"}


@dataclass
class LiveTrial:
    trial_id: str
    folder: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)  # step -> the trial's report of it
    state: str = "pending"  # pending | running | paused | finished | stopped early | zero signal | error | earlier
    error: str = ""


_current: LiveFeed | None = None


def current_feed() -> LiveFeed | None:
    """The feed Tune set up in this process (a restored sweep's Tuner unpickles its own copy, so it is found here)."""
    return _current


def _last_line(path: str | None) -> str:
    try:
        lines = Path(path).read_text().strip().splitlines() if path else []
    except OSError:
        return ""
    return lines[-1] if lines else ""


class LiveFeed(Callback):
    """Every trial's rows and state, as Tune tells the driver; ``version`` counts the changes."""

    def __init__(self, total_steps: int, zero_signal: tuple[float, int] | None = None):
        self.total_steps, self.zero_signal = total_steps, zero_signal
        self.version = 0
        self._trials: dict[str, LiveTrial] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks into every experiment snapshot: the rows stay out (storage has them)."""
        return {"total_steps": self.total_steps, "zero_signal": self.zero_signal}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)

    def setup(self, **info: Any) -> None:
        global _current
        _current = self

    def snapshot(self) -> tuple[int, list[LiveTrial]]:
        with self._lock:
            return self.version, [LiveTrial(**{**t.__dict__, "rows": dict(t.rows), "config": dict(t.config)}) for t in self._trials.values()]

    def _update(self, trial, state: str | None = None, result: dict[str, Any] | None = None) -> None:
        with self._lock:
            line = self._trials.setdefault(trial.trial_id, LiveTrial(trial.trial_id))
            line.config, line.folder = dict(trial.config), Path(trial.path).name if trial.path else ""
            if result is not None and "training_iteration" in result:
                step = int(result["training_iteration"])  # a redone step's report replaces the first, and those after it
                line.rows = {**{s: r for s, r in line.rows.items() if s < step}, step: result}
            if state == "ended":
                variances = [float(r[VARIANCE]) for _, r in sorted(line.rows.items()) if VARIANCE in r]
                state = fate(max(line.rows, default=0), self.total_steps, variances, self.zero_signal)
            if state == "error":
                line.error = _last_line(getattr(trial, "error_file", None)) or "the trial raised"
            line.state = state or line.state
            self.version += 1

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        for trial in trials:
            if trial.trial_id not in self._trials:
                self._update(trial, STATES.get(trial.status, "pending"))

    def on_trial_start(self, iteration: int, trials: list, trial, **info: Any) -> None:
        self._update(trial, "running")

    def on_trial_result(self, iteration: int, trials: list, trial, result: dict, **info: Any) -> None:
        self._update(trial, "running", result)

    def on_trial_complete(self, iteration: int, trials: list, trial, **info: Any) -> None:
        self._update(trial, "ended")

    def on_trial_error(self, iteration: int, trials: list, trial, **info: Any) -> None:
        self._update(trial, "error")


def live_report(uri: str, trials: list[LiveTrial], keys: list[str], out: Path):
    """The report (``sweep.report.build.assemble``) of the trials so far, the feed's states as their fates; a
    trial that ended before a ``sweep resume`` is read from storage, and judged from its files, as the report does."""
    from sweep.report.build import assemble
    from sweep.report.importance import Importance
    from sweep.report.load import load_trial, sweep_of, trial_from_rows
    from sweep.report.store import SweepStore

    store = SweepStore(uri)
    data = [load_trial(store, t.folder) if t.state == "earlier" else
            trial_from_rows(store, t.trial_id, t.folder, t.config, [t.rows[s] for s in sorted(t.rows)], t.error) for t in trials]
    board = [{"trial": t.trial_id, "status": t.state} for t in trials if t.state != "earlier"]
    later = Importance(reason="worked out from the Optuna study when the sweep ends (the final report has it)")
    return assemble(store, sweep_of(store, data, board, keys), out, None, later)


SCRIPT = """<script>
const shown = %s;
const here = new URL(location.href);
const me = here.searchParams.get("viewer") || Math.random().toString(36).slice(2, 12);  // this tab, across reloads
async function poll() {
  try {
    const state = await (await fetch("state.json?viewer=" + me, {cache: "no-store", credentials: "same-origin"})).json();
    if (state.version !== shown) { here.searchParams.set("viewer", me); location.replace(here.href); return; }
  } catch (e) {}  // the driver has gone: the page stays as it is
  setTimeout(poll, %d);
}
setTimeout(poll, %d);
</script>"""


def status_line(version: int, trials: list[LiveTrial]) -> str:
    states = Counter(t.state for t in trials)
    now = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "no trial yet"
    results = sum(len(t.rows) for t in trials)
    return (f"Live, the results so far: {now}; {results} results; built {time.strftime('%H:%M:%S', time.gmtime())} UTC. "
            "The page reloads as results arrive and becomes the final report when the sweep ends.")


def _note_page(note: str, script: str = "") -> bytes:
    return f'<!doctype html><html><head><meta charset="utf-8"></head><body><p id="live-status">{html.escape(note)}</p>{script}</body></html>'.encode()


class LivePage:
    """The page ``LiveServer`` serves: rebuilt from the feed when asked and stale, the final report once set."""

    def __init__(self, uri: str, keys: list[str], feed=current_feed):
        self.uri, self.keys, self._feed = uri, keys, feed
        self._out: Path | None = None  # the plots of each build, embedded in the page: made at the first build
        self._lock = threading.Lock()
        self._built: tuple[int, bytes, float] | None = None  # (feed version, page, when)
        self._final: bytes | None = None

    def _version(self) -> int:
        feed = self._feed()
        return feed.version if feed else 0

    def state(self) -> dict[str, Any]:
        final = self._final is not None
        return {"version": "final" if final else str(self._version()), "final": final}

    def html(self) -> bytes:
        with self._lock:
            if self._final is not None:
                return self._final
            version = self._version()
            if self._built and (self._built[0] == version or time.monotonic() - self._built[2] < MIN_REBUILD_S):
                return self._built[1]
            self._built = (version, self._build(), time.monotonic())
            return self._built[1]

    def _build(self) -> bytes:
        from sweep.report.render import sections, to_html

        feed = self._feed()
        version, trials = feed.snapshot() if feed else (0, [])
        script = SCRIPT % (json.dumps(str(version)), POLL_S * 1000, POLL_S * 1000)
        if not trials:
            return _note_page("Live: the sweep is starting; no trial has been created yet. This page reloads when one is.", script)
        self._out = self._out or Path(tempfile.mkdtemp(prefix="grpo-live-"))
        try:
            rep = live_report(self.uri, trials, self.keys, self._out)
        except Exception as exc:  # noqa: BLE001 - the sweep goes on; the page says why it has nothing to show, and retries
            return _note_page(f"The live page could not be built ({type(exc).__name__}: {exc}); it retries as results arrive.", script)
        return to_html(rep, sections(rep), status_line(version, trials), script).encode()

    def finish(self, final_page: Path | None) -> None:
        """From now on, serve the final report (or, without one, say where to get it)."""
        with self._lock:
            if final_page is not None and final_page.exists():
                self._final = final_page.read_bytes()
            else:
                self._final = _note_page("The sweep has ended; its report could not be written: see the driver's output.")

    def close(self) -> None:
        if self._out is not None:
            shutil.rmtree(self._out, ignore_errors=True)


class LiveSite:
    """The page and its server, for one sweep run."""

    def __init__(self, uri: str, keys: list[str], host: str, port: int, token: str | None):
        global _current
        _current = None  # an earlier sweep's feed in this process is not this one's: Tune sets this one's up
        self.page = LivePage(uri, keys)
        self.server = LiveServer(self.page, host, port, token).start()

    @property
    def url(self) -> str:
        return self.server.url

    def finish(self, final_page: Path | None) -> None:
        """Serve the final report, and give the pages open now a moment to load it."""
        self.page.finish(final_page)
        self.server.wait_for_viewers(LINGER_S)

    def close(self) -> None:
        self.server.stop()
        self.page.close()
