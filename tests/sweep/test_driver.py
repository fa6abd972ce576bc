# ruff: noqa: F811  (the fixture is imported by name and requested by name)
"""A second driver of the same sweep is refused before it deletes or restores anything (``sweep.store.driver``).

The first driver is a real process of its own that claimed the sweep with the real code; the commands run in-process
through ``python -m sweep``'s ``main``, with the bases and Tune recorded instead of done (``test_bad_inputs.started``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.store.driver import DRIVER_FILE, Driver, claim, pid_namespace, process_alive, process_start, release, standing
from sweep.store.storage import open_storage
from tests.sweep.test_bad_inputs import BASE, run_main, started, write_files  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
BUILDING = "results/t/base_evals/x/aggregated_results.jsonl"  # what a first start building its bases has written


@pytest.fixture
def first_driver(tmp_path):
    """A process that claimed sweep ``t`` under ``tmp_path/results`` (as ``sweep run`` does first) and goes on running."""
    code = ("import sys, time\nfrom sweep.store.driver import claim\nfrom sweep.store.storage import open_storage\n"
            "claim(open_storage(sys.argv[1]), 't', 'sweep run')\nprint('claimed', flush=True)\ntime.sleep(300)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "results")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "claimed"
        yield child
    finally:
        child.kill()
        child.wait()


def test_a_second_run_or_resume_while_the_first_drives_is_refused_and_deletes_nothing(tmp_path, monkeypatch, capsys, started, first_driver):
    """While the first start builds its bases (its folder holds base evals, no config yet), a second `run` deleted
    that folder and started beside it. Refused now, with or without --fresh, naming the process; and so is `resume`
    once the sweep has begun. Once the first process is gone (killed outright, its marker left), `run` goes on."""
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE, BUILDING: "{}\n"})
    for argv in (["run", "space.yaml"], ["run", "space.yaml", "--fresh"]):
        code, out, err = run_main(argv, capsys)
        assert code == 2 and f"`sweep run` is driving this sweep now (process {first_driver.pid} on this machine" in err, err
        assert f"kill -INT {first_driver.pid}" in err and "Traceback" not in out + err
    assert (tmp_path / BUILDING).read_text() == "{}\n" and started == []
    write_files(tmp_path, {"results/t/tuner.pkl": "", "results/t/experiment_state-2026-12-03.json": "{}"})
    (tmp_path / "results" / "t" / "sweep_config.json").write_text(json.dumps(_saved_config(tmp_path)))
    code, out, err = run_main(["resume", "results/t"], capsys)
    assert code == 2 and f"(process {first_driver.pid} on this machine" in err and "a second `sweep resume`" in err, err
    assert started == []
    for name in ("tuner.pkl", "sweep_config.json", "experiment_state-2026-12-03.json"):
        (tmp_path / "results" / "t" / name).unlink()
    first_driver.send_signal(signal.SIGKILL)
    first_driver.wait()
    assert (tmp_path / "results" / "t" / DRIVER_FILE).exists()  # killed outright: its marker stays
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 0, err
    assert started == ["environment", "bases", "tune"]
    assert not (tmp_path / "results" / "t" / DRIVER_FILE).exists()  # the run's own marker, removed when it ended


def test_confirm_waits_for_the_sweeps_driver_and_holds_the_sweep_while_it_confirms(tmp_path, monkeypatch, capsys, started, first_driver):
    """`sweep confirm` of a sweep a driver runs (a resume retrying its errored trials, about to rank it anew) is refused;
    and while a confirm runs its confirming sweep, the sweep is its: a `resume` of it is refused until it ends."""
    import sweep.run

    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE, "results/t/tuner.pkl": "", "results/t/experiment_state-2026-12-03.json": "{}"})
    (tmp_path / "results" / "t" / "sweep_config.json").write_text(json.dumps(_saved_config(tmp_path)))
    code, out, err = run_main(["confirm", "results/t"], capsys)
    assert code == 2 and f"`sweep run` is driving this sweep now (process {first_driver.pid} on this machine" in err, err
    first_driver.kill()
    first_driver.wait()
    seen = []

    def confirming(cfg, **kwargs):  # the confirming sweep, run while `sweep confirm` holds the sweep it confirms
        seen.append(json.loads((tmp_path / "results" / "t" / DRIVER_FILE).read_text())["command"])
        seen.append(subprocess.run([sys.executable, "-m", "sweep", "resume", "results/t"], cwd=tmp_path, capture_output=True, text=True,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120))  # another process
        raise RuntimeError("stop here")

    monkeypatch.setattr(sweep.run, "run_sweep", confirming)
    write_files(tmp_path, {"results/t/leaderboard.json": json.dumps([{"trial": "a", "config": {"optim.lr": 1e-3}, "gain": 0.1}])})
    with pytest.raises(RuntimeError, match="stop here"):
        run_main(["confirm", "results/t"], capsys)
    command, resumed = seen
    assert command == "sweep confirm" and resumed.returncode == 2, resumed.stdout + resumed.stderr
    assert f"`sweep confirm` is driving this sweep now (process {os.getpid()} on this machine" in resumed.stderr, resumed.stderr
    assert not (tmp_path / "results" / "t" / DRIVER_FILE).exists()  # released however it ended


def test_a_marker_from_another_host_is_refused_by_run_and_noted_by_fresh_and_resume(tmp_path, monkeypatch, capsys, started):
    """Another host's process cannot be checked from here: `run` refuses, naming the host and how to start over;
    `run --fresh` and `resume` (continuing a sweep whose machine died, from another) go on and say whose it was."""
    monkeypatch.chdir(tmp_path)
    other = {"host": f"not-{socket.gethostname()}", "pid": 4242, "pid_start": "17", "started": time.time() - 600, "command": "sweep run",
             "pid_ns": pid_namespace()}
    write_files(tmp_path, {"space.yaml": BASE, BUILDING: "{}\n", f"results/t/{DRIVER_FILE}": json.dumps(other)})
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 2 and f"process 4242 on host {other['host']}" in err and "--fresh" in err, err
    assert (tmp_path / BUILDING).exists() and started == []
    code, out, err = run_main(["run", "space.yaml", "--fresh"], capsys)
    assert code == 0 and f"process 4242 on host {other['host']}" in err and "going on" in err, err
    assert started == ["environment", "bases", "tune"] and not (tmp_path / "results" / "t" / DRIVER_FILE).exists()
    write_files(tmp_path, {"results/t/tuner.pkl": "", "results/t/experiment_state-2026-12-03.json": "{}",
                           f"results/t/{DRIVER_FILE}": json.dumps(other)})
    code, out, err = run_main(["resume", "results/t"], capsys)
    assert code == 0 and "going on" in err and "resuming" in out, err
    assert started[-3:] == ["environment", "bases", "tune"] and not (tmp_path / "results" / "t" / DRIVER_FILE).exists()


def test_a_marker_from_another_container_on_this_host_is_not_read_by_its_process_id(tmp_path, monkeypatch, capsys, started):
    """Two containers may share the host's name, each with its own process ids: a marker from another pid namespace
    names no process here (its id may be free here, or another's), so it is refused as another host's is."""
    monkeypatch.chdir(tmp_path)
    there = {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": None, "started": time.time(), "command": "sweep run",
             "pid_ns": "pid:[1]"}
    write_files(tmp_path, {"space.yaml": BASE, BUILDING: "{}\n", f"results/t/{DRIVER_FILE}": json.dumps(there)})
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 2 and f"process {os.getpid()} in another container (process namespace) on this host" in err, err
    assert (tmp_path / BUILDING).exists() and started == []


def test_a_process_is_the_one_that_wrote_the_marker_only_with_its_start_time(first_driver):
    """An id alone may name a later process given the same id: the start time tells them apart (Linux)."""
    if process_start(first_driver.pid) is None:
        pytest.skip("no /proc here: the id alone is checked")
    assert process_alive(first_driver.pid, process_start(first_driver.pid)) and process_alive(first_driver.pid, None)
    assert not process_alive(first_driver.pid, str(int(process_start(first_driver.pid)) + 1))
    first_driver.kill()
    first_driver.wait()
    assert not process_alive(first_driver.pid, None)


def test_standing_by_hand():
    marker = Driver("node-a", 100, "5", 0.0, "sweep run", "pid:[1]")
    assert standing(marker, "node-a", lambda pid, start: True, 7, "pid:[1]") == "live"
    assert standing(marker, "node-a", lambda pid, start: False, 7, "pid:[1]") == "gone"
    assert standing(marker, "node-a", lambda pid, start: True, 100, "pid:[1]") == "gone"  # this very process (a resume after its own run)
    assert standing(marker, "node-b", lambda pid, start: True, 7, "pid:[1]") == "elsewhere"
    # a container sharing the host's name, its own process ids: process 100 here is not the one that wrote it
    assert standing(marker, "node-a", lambda pid, start: True, 7, "pid:[2]") == "elsewhere"


def test_release_removes_only_its_own_marker(tmp_path):
    store = open_storage(str(tmp_path))
    mine = claim(store, "t", "sweep run")
    later = {**json.loads((tmp_path / "t" / DRIVER_FILE).read_text()), "pid": os.getpid() + 1}
    (tmp_path / "t" / DRIVER_FILE).write_text(json.dumps(later))
    release(store, "t", mine)
    assert json.loads((tmp_path / "t" / DRIVER_FILE).read_text()) == later
    (tmp_path / "t" / DRIVER_FILE).write_text(json.dumps(mine.__dict__))
    release(store, "t", mine)
    assert not (tmp_path / "t" / DRIVER_FILE).exists()


def _saved_config(tmp_path: Path) -> dict:
    """The config `run` saves for BASE (what `resume` reads)."""
    from sweep.spec.loader import load_space

    return json.loads(load_space(tmp_path / "space.yaml").model_copy(update={"storage": str(tmp_path / "results")}).model_dump_json())
