"""A real CPU sweep watched while it runs: ``python -m sweep run`` with Ray's dashboard and the live page on,
the dashboard asked over HTTP, the live page loaded in headless Chromium (DOM dumps and screenshots) whenever
it has something new, until it turns into the final report.

One such sweep serves both the report's end-to-end tests and the live page's (``watched_sweep`` in
``tests/sweep/conftest.py``): two trials of up to three steps on the tiny policy, eval every step, ASHA and
the zero-signal rule on.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import yaml

from tests.conftest import TEST_MODEL
from tests.support.processes import kill_by_env, kill_group, pids_with_env

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ["verdict", "leaderboard", "confirmation", "curves", "verdicts", "envs", "sweep-envs", "importance", "looked", "diagnoses", "trajectories"]
DUMP_EVERY_S = 2.0


def chromium() -> str | None:
    return next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)


def report_space(storage: Path) -> dict:
    """Two trials of up to three steps on the tiny policy, eval every step, zero-signal rule on. Each step rolls
    out 128 episodes so a trial runs for several seconds even on a quick machine: the page rebuilds at most every
    3 s, and with 4-episode steps (a quarter second) the trials ended between two builds, never seen running."""
    return {
        "name": "report_e2e",
        "trainer": {"total_steps": 3, "model": TEST_MODEL, "rollout": {"prompts_per_step": 8, "n_samples_per_prompt": 16, "max_turns": 2},
                    "eval": {"interval": 1, "max_tasks": 2, "n_samples": 2}},
        "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}, "algorithm.kl_coef": {"choice": [0.0, 0.05]}},
        "search": {"searcher": "optuna", "num_samples": 2, "n_startup_trials": 2, "seed": 3, "metric": "eval/avg_pass_at_1"},
        "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
        "stopping": {"zero_signal": {"enabled": True, "threshold": 1e-3, "patience": 3}},
        "resources": {"cpus_per_trial": 1},
        "logging": {"progress": False, "tensorboard": False},
        "max_concurrent_trials": 2,
        "storage": str(storage),
    }


@dataclass
class Seen:
    """What a page shows: its live status line, sections, leaderboard rows (header -> cell) and learning curves."""

    status: str = ""
    sections: list[str] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    curves: str = ""  # a digest of the learning-curves image, "" when there is none
    screenshot: Path | None = None


class _PageParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.seen, self._header, self._row, self._cell = Seen(), [], None, None
        self._in_table = self._in_status = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.seen.sections.append(a.get("id", ""))
        elif tag == "table":
            self._in_table = a.get("id") == "leaderboard-table"
        elif tag == "p" and a.get("id") == "live-status":
            self._in_status = True
        elif tag == "img" and a.get("id") == "plot-learning-curves":
            self.seen.curves = hashlib.sha256((a.get("src") or "").encode()).hexdigest()[:16]
        elif self._in_table and tag == "tr":
            self._row = []
        elif self._in_table and tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_table = False
        elif tag == "p":
            self._in_status = False
        elif self._in_table and tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell or "")
            self._cell = None
        elif self._in_table and tag == "tr" and self._row is not None:
            if self._header:
                self.seen.rows.append(dict(zip(self._header, self._row)))
            else:
                self._header = self._row
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._in_status:
            self.seen.status += data


def parse_page(text: str) -> Seen:
    parser = _PageParser()
    parser.feed(text)
    return parser.seen


@dataclass
class Watched:
    path: Path
    log: str = ""
    browser: str | None = None
    dashboard_url: str = ""
    dashboard_port_taken: int = 0  # the port asked for, held by someone else while the driver starts
    dashboard_answered_while_running: bool = False
    dashboard_after_exit: int | None = None  # its HTTP status after the driver exited; None: nothing answered
    leftover_processes: int = 0
    live_url: str = ""
    snapshots: list[Seen] = field(default_factory=list)
    final_html: str = ""
    screenshots: list[Path] = field(default_factory=list)


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _printed(log: Path, prefix: str) -> str:
    lines = [line for line in log.read_text().splitlines() if line.startswith(prefix)]
    return lines[0].removeprefix(prefix).split()[0] if lines else ""


class _Browser:
    def __init__(self, path: str, tmp: Path):
        self.path, self.tmp = path, tmp
        self.flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp / 'profile'}", "--window-size=1280,2000"]

    def dump(self, url: str) -> Seen:
        dom = subprocess.run([self.path, *self.flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
        return parse_page(dom)

    def screenshot(self, url: str, name: str) -> Path | None:
        """The page as a PNG; None when Chromium wrote none (the driver ended as it loaded)."""
        shot = self.tmp / name
        subprocess.run([self.path, *self.flags, f"--screenshot={shot}", url], capture_output=True, timeout=120, check=True)
        return shot if shot.exists() else None


def _follow_state(w: Watched, driver: subprocess.Popen, latest: dict) -> None:
    """Poll ``state.json`` as an open page does, named (so the driver waits for us at the end, whatever Chromium
    loads from this address meanwhile), keep its newest version in ``latest``, and fetch the page as soon as it
    is the final report."""
    while driver.poll() is None:
        try:
            with urllib.request.urlopen(f"{w.live_url}state.json?viewer=watcher", timeout=10) as r:
                state = json.loads(r.read())
            if state["final"]:
                with urllib.request.urlopen(f"{w.live_url}?viewer=watcher", timeout=30) as r:
                    w.final_html = r.read().decode()
                return
            latest["version"] = state["version"]
        except OSError:
            pass
        time.sleep(0.5)


def _watch_page(w: Watched, driver: subprocess.Popen, browser: _Browser | None) -> None:
    """Until the page turns into the final report (or the driver ends): a DOM dump whenever it has something
    new, at most every ``DUMP_EVERY_S``, and a screenshot when the rows first appear and when they change."""
    latest: dict = {}
    follower = threading.Thread(target=_follow_state, args=(w, driver, latest), daemon=True)
    follower.start()
    shown, last_dump, last_rows = None, 0.0, None
    while follower.is_alive():
        version = latest.get("version")
        if browser and version is not None and version != shown and time.monotonic() - last_dump > DUMP_EVERY_S:
            shown, last_dump = version, time.monotonic()
            seen = browser.dump(w.live_url)
            rows = [(r.get("trial"), r.get("steps"), r.get("stopped")) for r in seen.rows]
            if rows and rows != last_rows and len(w.screenshots) < 4 and seen.status.startswith("Live"):
                seen.screenshot = browser.screenshot(w.live_url, f"live_{len(w.snapshots)}.png")
                w.screenshots += [seen.screenshot] if seen.screenshot else []
            last_rows = rows or last_rows
            w.snapshots.append(seen)
        time.sleep(0.5)


def _check_dashboard(w: Watched, driver: subprocess.Popen, deadline_s: float = 120) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and driver.poll() is None:
        if _status(w.dashboard_url) == 200 and driver.poll() is None:
            w.dashboard_answered_while_running = True
            return
        time.sleep(1)


def run_watched(tmp: Path, cache: Path) -> Watched:
    """Run the sweep under ``tmp``, watching it; the driver and every Ray process it started are stopped after."""
    (tmp / "space.yaml").write_text(yaml.safe_dump(report_space(tmp / "results")))
    w = Watched(tmp / "results" / "report_e2e", browser=chromium())
    browser = _Browser(w.browser, tmp) if w.browser else None
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    env = {**os.environ, "GRPO_SWEEP_CACHE": str(cache), "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    env.pop("GRPO_SWEEP_DASHBOARD", None)  # this one sweep runs with Ray's dashboard, as users get it
    log = tmp / "run.log"
    squatter = socket.socket()  # as a Ray left running holds 8265: the dashboard must move, not fail the sweep
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    w.dashboard_port_taken = squatter.getsockname()[1]
    args = ["run", str(tmp / "space.yaml"), "--dashboard-port", str(w.dashboard_port_taken), "--live-port", "0"]
    with open(log, "w") as out:
        driver = subprocess.Popen([sys.executable, "-m", "sweep", *args], cwd=ROOT, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while driver.poll() is None and time.monotonic() < deadline and not (_printed(log, "live page: ") and _printed(log, "Ray dashboard: ")):
            time.sleep(0.2)
        w.live_url, w.dashboard_url = _printed(log, "live page: "), _printed(log, "Ray dashboard: ")
        # the dashboard is checked beside the page: on a quick machine the trials would end while it starts
        checker = threading.Thread(target=_check_dashboard, args=(w, driver), daemon=True)
        if w.dashboard_url:
            checker.start()
        if w.live_url:
            _watch_page(w, driver, browser)
        if w.dashboard_url:
            checker.join()
        driver.wait(timeout=900)
        if w.dashboard_url:
            w.dashboard_after_exit = _status(w.dashboard_url)
        deadline = time.monotonic() + 15
        while pids_with_env("RAY_TMPDIR", ray_tmp) and time.monotonic() < deadline:
            time.sleep(0.5)
        w.leftover_processes = len(pids_with_env("RAY_TMPDIR", ray_tmp))
    finally:
        squatter.close()
        if driver.poll() is None:
            kill_group(driver)
        kill_by_env("RAY_TMPDIR", ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
        w.log = log.read_text()
    assert driver.returncode == 0, w.log[-5000:]
    if browser and w.final_html:
        final = tmp / "final.html"
        final.write_text(w.final_html)
        w.screenshots += [shot] if (shot := browser.screenshot(final.as_uri(), "final.png")) else []
    return w
