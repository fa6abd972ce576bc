"""The live sweep page: who may read it, that it is the report's own build of the results so far, and (slow) a
real CPU sweep watched in headless Chromium while it runs, its Ray dashboard answering meanwhile."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sweep.__main__ import main
from sweep.report.build import build_report
from sweep.report.render import sections
from sweep.watch.live_page import LivePage, LiveTrial, live_report
from sweep.watch.live_server import FORGET_S, LiveServer, allowed, bind_problem, free_port, is_loopback, presented_token
from tests.support.processes import kill_by_env
from tests.sweep.live_watch import SECTIONS, parse_page
from tests.sweep.report_fixture import make_sweep_dir

TOKEN = "tok-3f9a"
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR", Path(tempfile.gettempdir()) / "artifacts")) / "sweep-live"


def test_loopback_is_served_and_elsewhere_needs_the_token():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.0.2.2", "10.0.0.1", "example.org", ""))
    assert allowed("127.0.0.1", None, None) and allowed("::1", None, TOKEN)
    assert not allowed("192.0.2.2", None, TOKEN)
    assert not allowed("192.0.2.2", "wrong", TOKEN)
    assert not allowed("192.0.2.2", TOKEN, None)  # no token set: nothing from elsewhere is served
    assert allowed("192.0.2.2", TOKEN, TOKEN)
    assert bind_problem("127.0.0.1", None) is None and bind_problem("0.0.0.0", TOKEN) is None
    assert "GRPO_SWEEP_LIVE_TOKEN" in bind_problem("0.0.0.0", None)
    assert presented_token("token=abc", {}) == "abc"
    assert presented_token("", {"Authorization": "Bearer abc"}) == "abc"
    assert presented_token("", {"Cookie": "other=1; grpo_live_token=abc"}) == "abc"
    assert presented_token("", {}) is None


def test_binding_elsewhere_without_a_token_is_refused_before_anything_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GRPO_SWEEP_LIVE_TOKEN", raising=False)
    with pytest.raises(ValueError, match="GRPO_SWEEP_LIVE_TOKEN"):
        LiveServer(LivePage(str(tmp_path), []), "0.0.0.0", 0, None)
    assert main(["run", str(tmp_path / "not-read.yaml"), "--live-host", "0.0.0.0"]) == 2
    assert "--live-host 0.0.0.0: the live page would be open to other machines" in capsys.readouterr().err
    assert main(["confirm", str(tmp_path / "no-sweep"), "--live-host", "0.0.0.0"]) == 2  # sweep confirm serves the page too
    assert "--live-host 0.0.0.0" in capsys.readouterr().err


def _own_address() -> str | None:
    """This machine's address on its network (not loopback), or None where it has none."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if is_loopback(address) else address


def _get(url: str, headers: dict | None = None) -> tuple[int, bytes, dict]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_a_client_from_another_address_gets_403_without_the_token(tmp_path):
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to connect from")
    server = LiveServer(LivePage(str(tmp_path), [], feed=lambda: None), "0.0.0.0", 0, TOKEN).start()
    try:
        port = server.server_address[1]
        outside, inside = f"http://{address}:{port}", f"http://127.0.0.1:{port}"
        assert _get(f"{outside}/")[0] == 403
        assert _get(f"{outside}/state.json")[0] == 403
        assert _get(f"{outside}/?token=wrong")[0] == 403
        assert _get(f"{outside}/", {"Authorization": "Bearer wrong"})[0] == 403
        code, body, headers = _get(f"{outside}/?token={TOKEN}")
        assert code == 200 and b"live-status" in body
        cookie = headers["Set-Cookie"].split(";")[0]
        assert cookie == f"grpo_live_token={TOKEN}"
        assert _get(f"{outside}/state.json", {"Cookie": cookie})[0] == 200  # the page's own polls carry the cookie
        assert _get(f"{outside}/state.json", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
        assert _get(f"{inside}/")[0] == 200  # loopback: an SSH tunnel's end
        assert _get(f"{outside}/other?token={TOKEN}")[0] == 404
    finally:
        server.stop()


def test_at_the_end_the_driver_waits_for_each_open_page_two_tabs_on_one_machine_included(tmp_path):
    server = LiveServer(LivePage(str(tmp_path), [], feed=lambda: None), "127.0.0.1", 0, None).start()
    try:
        url = server.url
        assert b'"state.json?viewer=" + me' in _get(url)[1]  # each open page names itself in its polls
        for tab in ("a", "b"):
            assert json.loads(_get(f"{url}state.json?viewer={tab}")[1]) == {"version": "0", "final": False}
        (tmp_path / "index.html").write_text("<html>the final report</html>")
        server.page.finish(tmp_path / "index.html")
        assert _get(f"{url}?viewer=a")[1] == b"<html>the final report</html>"
        started = time.monotonic()
        server.wait_for_viewers(1.5)  # tab b, on the same address, has not loaded it yet
        assert time.monotonic() - started >= 1.5
        assert _get(f"{url}?viewer=b")[1] == b"<html>the final report</html>"
        started = time.monotonic()
        server.wait_for_viewers(5)
        assert time.monotonic() - started < 1
    finally:
        server.stop()


def test_the_server_forgets_a_page_silent_for_long():
    server = LiveServer(LivePage("unused", [], feed=lambda: None), "127.0.0.1", 0, None)
    try:
        server.viewed("closed tab")
        server._viewers["closed tab"] = (time.monotonic() - FORGET_S - 1, False)  # its last poll, long ago
        server.viewed("open tab")
        assert set(server._viewers) == {"open tab"}
    finally:
        server.server_close()


def test_a_taken_dashboard_port_moves_to_a_free_one():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()  # as a Ray left running holds 8265
        taken = held.getsockname()[1]
        moved = free_port("127.0.0.1", taken)
        assert moved != taken and moved > 0
    with socket.socket() as probe:  # what it named is free
        probe.bind(("127.0.0.1", moved))
    assert free_port("127.0.0.1", moved) == moved  # a free port is kept


TWO_RAYS = """
import sys, time
from sweep.run import local_ray
from sweep.watch.live_server import Watch
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # both start their Ray at the same instant
with local_ray(Watch()) as url:
    print("URL", url, flush=True)
    time.sleep(3)  # both dashboards up at once
"""


@pytest.mark.slow
def test_two_sweeps_started_in_the_same_second_both_get_a_dashboard(tmp_path):
    """Ray's default port: each dashboard binds 8265 or the next free port above it as it tries; probing a port
    free and handing it to Ray after let two sweeps started together pick the same one, and one of them died."""
    start = time.time() + 4
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled"}
    try:
        runs = [subprocess.Popen([sys.executable, "-c", TWO_RAYS, str(start)], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True) for _ in range(2)]
        outs = [run.communicate(timeout=180)[0] for run in runs]
    finally:
        kill_by_env("RAY_TMPDIR", ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert [run.returncode for run in runs] == [0, 0], outs
    urls = [line.split()[1] for out in outs for line in out.splitlines() if line.startswith("URL ")]
    assert len(urls) == 2 and urls[0] != urls[1] and all(u.startswith("http://127.0.0.1:") for u in urls), outs


def test_the_live_page_moves_off_a_taken_port_and_says_which():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        server = LiveServer(LivePage("unused", [], feed=lambda: None), "127.0.0.1", taken, None)
        try:
            assert server.moved_from == taken and server.server_address[1] not in (taken, 0)
        finally:
            server.server_close()
    server = LiveServer(LivePage("unused", [], feed=lambda: None), "127.0.0.1", taken, None)  # free again: kept
    try:
        assert server.moved_from is None and server.server_address[1] == taken
    finally:
        server.server_close()


class RecordedFeed:
    """What ``LiveFeed`` holds mid-sweep (the real one is fed by Tune in the slow test below)."""

    def __init__(self, trials: list[LiveTrial]):
        self.trials, self.version = trials, 1

    def snapshot(self):
        return self.version, self.trials


def _recorded(sweep: Path, upto: dict[str, int], states: dict[str, str]) -> list[LiveTrial]:
    trials = []
    for result in sorted(sweep.glob("*/result.json")):
        rows = [json.loads(line) for line in result.read_text().splitlines()]
        trial = rows[0]["trial_id"]
        kept = {r["training_iteration"]: r for r in rows if r["training_iteration"] <= upto.get(trial, 99)}
        config = json.loads((result.parent / "params.json").read_text())
        trials.append(LiveTrial(trial, result.parent.name, config, kept, states[trial]))
    return trials


def test_the_live_page_is_the_reports_own_build_of_the_results_so_far(tmp_path):
    sweep = make_sweep_dir(tmp_path / "fixture_sweep", study=False)
    keys = ["optim.lr", "algorithm.kl_coef"]
    ended = {"aaaa0001": "finished", "bbbb0002": "finished", "cccc0003": "stopped early", "dddd0004": "zero signal"}
    # every trial ended: the same ranking, verdicts and stop reasons as the final report's
    final = build_report(str(sweep), tmp_path / "final")
    whole = live_report(str(sweep), _recorded(sweep, {}, ended), keys, tmp_path / "whole")
    assert [(t.trial_id, t.stop, t.steps) for t in whole.trials] == [(t.trial_id, t.stop, t.steps) for t in final.trials]
    assert [(j.trial_id, j.verdict.label) for j in whole.judged] == [(j.trial_id, j.verdict.label) for j in final.judged]
    assert [s.anchor for s in sections(whole)] == [s.anchor for s in sections(final)] == SECTIONS

    # mid-sweep: the winner at step 1 and running, one not started
    midway = {**ended, "aaaa0001": "running", "bbbb0002": "pending"}
    feed = RecordedFeed(_recorded(sweep, {"aaaa0001": 1, "bbbb0002": 0}, midway))
    page = LivePage(str(sweep), keys, feed=lambda: feed)
    seen = parse_page(page.html().decode())
    assert seen.sections == SECTIONS and seen.curves
    by_trial = {row["trial"]: row for row in seen.rows}
    assert {t: (r["steps"], r["stopped"]) for t, r in by_trial.items()} == {
        "aaaa0001": ("1", "running"), "bbbb0002": ("0", "pending"), "cccc0003": ("2", "ASHA"), "dddd0004": ("2", "zero signal")}
    assert "1 running" in seen.status and "1 pending" in seen.status
    assert page.state() == {"version": "1", "final": False}
    # after a `sweep resume`, trials that had ended are read from storage and judged from their files
    feed.trials = [LiveTrial(t.trial_id, t.folder, state="earlier") if t.trial_id in ("cccc0003", "bbbb0002") else t for t in feed.trials]
    resumed = {t.trial_id: (t.steps, t.stop) for t in live_report(str(sweep), feed.trials, keys, tmp_path / "resumed").trials}
    assert resumed["cccc0003"] == (2, "ASHA") and resumed["bbbb0002"] == (3, "finished") and resumed["aaaa0001"] == (1, "running")
    assert page.html() == page.html()  # nothing new: the page built once is served again

    page.finish(None)  # the sweep ended without a report: the page says so, and stops polling
    assert page.state() == {"version": "final", "final": True}
    assert b"could not be written" in page.html() and b"<script" not in page.html()
    (tmp_path / "index.html").write_text("<html>the final report</html>")
    page.finish(tmp_path / "index.html")
    assert page.html() == b"<html>the final report</html>"
    page.close()


# --- slow: a real sweep, watched while it runs (the sweep is shared with test_report_e2e.py: conftest's watched_sweep)


@pytest.mark.slow
@pytest.mark.e2e
def test_ray_dashboard_answers_during_the_sweep_on_a_free_port_when_its_own_is_taken(watched_sweep):
    w = watched_sweep
    assert w.dashboard_url and w.dashboard_url.startswith("http://127.0.0.1:"), w.log[-3000:]
    assert f"(port {w.dashboard_port_taken} was taken)" in w.log  # the asked port was held: the dashboard moved
    assert f":{w.dashboard_port_taken}" not in w.dashboard_url
    assert w.dashboard_answered_while_running, w.log[-3000:]
    assert w.dashboard_after_exit is None  # the driver's normal exit takes its dashboard down
    assert w.leftover_processes == 0  # no Ray agent outlived the driver


@pytest.mark.slow
@pytest.mark.e2e
def test_live_page_shows_rows_and_curves_as_they_arrive_then_the_final_report(watched_sweep):
    w = watched_sweep
    if not w.browser:
        pytest.skip("no Chromium on this machine: `apt-get install -y chromium` (scripts/ci_deps.sh does it in CI)")
    assert w.live_url and w.live_url.startswith("http://127.0.0.1:"), w.log[-3000:]
    live = [s for s in w.snapshots if s.status.startswith("Live")]
    assert len(live) >= 2, [s.status for s in w.snapshots]
    with_rows = [s for s in live if s.rows]
    assert with_rows, [s.status for s in live]
    total = 3
    assert any(r["stopped"] == "running" and int(r["steps"]) < total for s in with_rows for r in s.rows), [s.rows for s in with_rows]
    steps = [sum(int(r["steps"]) for r in s.rows) for s in with_rows]
    assert steps[-1] > steps[0], steps  # rows change as results arrive
    curves = {s.curves for s in with_rows if s.curves}
    assert len(curves) >= 2, len(curves)  # and so do the learning curves
    assert all(s.sections == SECTIONS for s in with_rows)
    # at the end, the page is the final report written beside the sweep
    final = (w.path / "report" / "index.html").read_text()
    assert w.final_html == final
    ended = parse_page(final)
    assert not ended.status and {r["stopped"] for r in ended.rows} <= {"finished", "ASHA", "zero signal", "error"}
    assert len(w.screenshots) >= 2 and all(p.stat().st_size > 10_000 for p in w.screenshots)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for shot in w.screenshots:
        shutil.copy(shot, ARTIFACTS / shot.name)
    from matplotlib.image import imread

    assert imread(w.screenshots[-1]).std() > 0.05  # not a blank page

