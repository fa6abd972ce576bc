"""``sweep report`` on a real CPU sweep (Ray Tune, Optuna, ASHA, the zero-signal rule, eval dumps), the
page opened in headless Chromium; the statuses and diagnoses checked against the sweep's own numbers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from sweep.__main__ import main
from sweep.report.build import build_report
from sweep.report.envs import env_status
from sweep.verdict.thresholds import Thresholds
from tests.sweep.live_watch import SECTIONS

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR", Path(tempfile.gettempdir()) / "artifacts")) / "sweep-report"
PROBE = """<script>addEventListener("load", () => document.body.setAttribute("data-probe", JSON.stringify({
  images: [...document.images].map(i => [i.id, i.complete && i.naturalWidth > 0, i.naturalWidth]),
  leaderboard_rows: document.querySelectorAll("#leaderboard-table tr").length - 1,
  sections: [...document.querySelectorAll("section")].map(s => s.id)})));</script>"""


@pytest.fixture(scope="module")
def real_sweep(watched_sweep) -> Path:
    """Two trials of up to three steps on the tiny policy, eval every step, zero-signal rule on (``tests/sweep/live_watch.py``;
    the live page's tests watched it run)."""
    return watched_sweep.path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _known_numbers(sweep: Path) -> dict[str, dict]:
    """Per trial, straight from the files: steps, variance per step, eval points per env, leaderboard status."""
    board = {r["trial"]: r["status"] for r in json.loads((sweep / "leaderboard.json").read_text())}
    known = {}
    for result in sweep.glob("*/result.json"):
        rows = _lines(result)
        trial = rows[-1]["trial_id"]
        evals = _lines(sweep / "trajectories" / trial / "aggregated_results.jsonl")
        known[trial] = {"steps": len(rows), "variance": [r["reward/variance_per_prompt"] for r in rows], "status": board[trial],
                        "hotel": [(e["global_step"], e["eval/hotel/pass_at_1"]) for e in evals],
                        "best": max(e["eval/avg_pass_at_1"] for e in evals if e["global_step"] >= 1)}
    return known


@pytest.mark.slow
@pytest.mark.e2e
def test_report_of_a_real_sweep_matches_its_numbers(real_sweep, tmp_path, capsys):
    assert main(["report", str(real_sweep)]) == 0
    out = real_sweep / "report"
    assert {"index.html", "summary.md", "learning_curves.png", "score_vs_params.png"} <= {p.name for p in out.iterdir()}
    assert "## Leaderboard" in capsys.readouterr().out

    known = _known_numbers(real_sweep)
    rep = build_report(str(real_sweep), tmp_path)
    early = "ASHA" if (real_sweep / "sweep_config.json").exists() else "stopped early (scheduler)"
    words = {"finished": "finished", "stopped early": early, "zero signal": "zero signal", "error": "error"}
    assert {t.trial_id: (t.steps, t.stop) for t in rep.trials} == {k: (v["steps"], words[v["status"]]) for k, v in known.items()}
    assert {t.trial_id: t.best for t in rep.trials} == pytest.approx({k: v["best"] for k, v in known.items()})
    best = known[rep.trials[0].trial_id]["hotel"]
    last = sum(v for _, v in best[-2:]) / 2  # the demo's window: the last two evals
    assert [(r.env, r.base_step) for r in rep.env_rows] == [("hotel", 0)]
    assert rep.env_rows[0].base == pytest.approx(best[0][1]) and rep.env_rows[0].last == pytest.approx(last)
    # one env: its bootstrap over the env's tasks is the trial's own score's (the same tasks, draws and seed)
    env, score = rep.env_rows[0], rep.judged[0].score
    assert env.low is not None and (env.delta, env.low, env.high) == pytest.approx((score.gain, score.low, score.high))
    assert env.status == env_status(env.base, env.last, env.low, env.high, Thresholds())
    silent = {k for k, v in known.items() if max(v["variance"]) == 0}
    labels = {j.trial_id: j.verdict.label for j in rep.judged}
    assert {k for k, label in labels.items() if label == "no signal"} <= silent, labels
    assert all(labels[k] in ("no signal", "no eval", "error") for k in silent), labels  # a trial that never had a signal never learned
    # 2 eval tasks x 2 samples per trained eval; the shared base eval (step 0) is the driver's, under base_evals/
    assert rep.trajectories.episodes == sum(2 * 2 * sum(step >= 1 for step, _ in v["hotel"]) for v in known.values())
    assert "variance_per_prompt" in (out / "summary.md").read_text()


def _chromium() -> str | None:
    return next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)


@pytest.mark.slow
@pytest.mark.e2e
def test_the_page_renders_in_headless_chromium(real_sweep, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium on this machine: `apt-get install -y chromium` (scripts/ci_deps.sh does it in CI)")
    out = real_sweep / "report"
    if not (out / "index.html").exists():
        assert main(["report", str(real_sweep)]) == 0
    probe = tmp_path / "probe.html"
    probe.write_text((out / "index.html").read_text().replace("</body>", PROBE + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2600"]
    dom = subprocess.run([browser, *flags, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120).stdout
    marker = 'data-probe="'
    assert marker in dom, dom[-2000:]
    seen = json.loads(dom.split(marker, 1)[1].split('"', 1)[0].replace("&quot;", '"'))
    assert seen["leaderboard_rows"] == len(list(real_sweep.glob("*/result.json")))
    assert seen["sections"] == SECTIONS
    assert [(i[0], i[1]) for i in seen["images"]] == [("plot-learning-curves", True), ("plot-score-vs-swept-keys", True)]

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "index.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", (out / "index.html").as_uri()], capture_output=True, timeout=120, check=True)
    shutil.copy(out / "index.html", ARTIFACTS / "index.html")
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[1] == 1280 and pixels.std() > 0.05  # not a blank page
