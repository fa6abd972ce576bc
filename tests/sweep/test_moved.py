"""A sweep saved before ``sweep/`` moved into rooms still resumes and reports (``sweep.moved``).

``data/old_layout_sweep.tar.gz`` is a sweep written by the flat layout (the code of 0ad01ef, with
``data/make_old_layout_sweep.py``): ``tests/sweep/test_resume.py``'s two trials, its driver killed once one trial
had finished and the other had a checkpoint. What Tune pickled names the classes by their old modules
(``sweep.checkpoints.MarkPersisted``, ``sweep.live_page.LiveFeed``, ``sweep.space.OptunaSpace``, ...), and its saved
config has the client limits at their old place (``env.max_concurrent``), and its searcher the study file's path
where it was made (``/tmp/old-layout*/...``), not where the test unpacks it.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from sweep.store.results import trial_history
from sweep.store.storage import open_storage
from tests.sweep.test_resume import ROOT, STEPS, resume, trial_dirs

FIXTURE = Path(__file__).parent / "data" / "old_layout_sweep.tar.gz"
OLD_NAMES = (b"sweep.checkpoints", b"sweep.live_page", b"sweep.space")


# The repository the fixture was made from (a worktree of 0ad01ef): its saved configs name the task file there.
MADE_IN = "/tmp/oldlayout"


def unpack(target: Path) -> Path:
    """The fixture, its saved configs' task file pointed at this checkout's (a sweep whose task file is gone is
    refused on resume, rightly; what this test checks is the old module paths, not a moved task file)."""
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(target, filter="data")
    experiment = target / "resume"
    for config in [experiment / "sweep_config.json", *experiment.glob("trajectories/*/trainer_config.json")]:
        text = config.read_text()
        assert MADE_IN in text, config  # the fixture is the one this rewrite was written for
        config.write_text(text.replace(MADE_IN, str(ROOT)))
    return experiment


def test_what_tune_pickled_under_the_old_names_loads_into_the_new_rooms(tmp_path):
    from sweep.store.study import studies_open_at

    experiment = unpack(tmp_path)
    tuner = (experiment / "tuner.pkl").read_bytes()
    assert all(name in tuner for name in OLD_NAMES[:2])  # the fixture really is the old layout
    (searcher,) = experiment.glob("searcher-state-*.pkl")
    assert OLD_NAMES[2] in searcher.read_bytes() and b"old-layout" in searcher.read_bytes()  # its study where it was made
    with studies_open_at(experiment / "optuna.db"):  # as `sweep resume` restores it
        state = pickle.loads(tuner)
        saved = pickle.loads(searcher.read_bytes())
    callbacks = {type(c).__module__ for c in state["_run_config"].callbacks}
    assert {"sweep.trials.checkpoints", "sweep.watch.live_page"} <= callbacks, callbacks
    assert type(saved["_space"]).__module__ == "sweep.spec.space"
    assert saved["_storage"].url == f"sqlite:///{experiment / 'optuna.db'}"  # the study beside the sweep, not the one it was saved with
    assert [t.state.name for t in saved["_ot_study"].trials] == ["COMPLETE", "RUNNING"]


@pytest.mark.slow
@pytest.mark.e2e
def test_a_sweep_saved_by_the_old_layout_resumes_and_reports(tmp_path, private_cache, tiny_base):
    experiment = unpack(tmp_path / "results")
    store = open_storage(str(tmp_path / "results"))
    env = {**os.environ, "GRPO_SWEEP_CACHE": str(private_cache)}
    (tmp_path / "second").mkdir()
    code = resume(str(experiment), env, tmp_path / "second", tmp_path / "resume.log")
    assert code == 0, (tmp_path / "resume.log").read_text()[-4000:]
    rows = json.loads(store.read_text("resume", "leaderboard.json"))
    assert [(r["status"], r["steps"]) for r in rows] == [("finished", STEPS)] * 2, rows
    for trial in trial_dirs(store):
        assert [r["step"] for r in trial_history(trial, store.fs)] == list(range(1, STEPS + 1))
    import optuna  # the study beside the sweep, where it is now, was the one resumed (not the path it was saved at)

    study = optuna.load_study(study_name="resume", storage=f"sqlite:///{experiment / 'optuna.db'}")
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    report = subprocess.run([sys.executable, "-m", "sweep", "report", str(experiment), "--out", str(tmp_path / "report")],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report" / "index.html").is_file()
