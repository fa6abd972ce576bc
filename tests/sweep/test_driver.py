# ruff: noqa: F811  (the fixture is imported by name and requested by name)
"""A second driver of the same sweep is refused before it deletes or restores anything (``sweep.store.driver``).

The first driver is a real process of its own that claimed the sweep with the real code; the commands run in-process
through ``python -m sweep``'s ``main``, with the bases and Tune recorded instead of done (``test_bad_inputs.started``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from configkit.base import ConfigError
from sweep.store.driver import DRIVER_FILE, Driver, claim, pid_namespace, process_alive, process_start, release, standing, still_held
from sweep.store.storage import open_storage
from tests.support.processes import kill_by_env
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
        assert f"`kill {first_driver.pid}`" in err and "Traceback" not in out + err
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
    write_files(tmp_path, {f"results/t/{DRIVER_FILE}.partial-{first_driver.pid}-1": "{"})  # and a beat it was writing
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 0, err
    assert started == ["environment", "bases", "base evals", "tune"]
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


def _other_host_driver(tmp_path: Path) -> subprocess.Popen:
    """A process that claims sweep ``t`` as if it ran on host node-b, beating every 0.2 s."""
    code = ("import socket, sys, time\nsocket.gethostname = lambda: 'node-b'\nfrom sweep.store.driver import claim\n"
            "from sweep.store.storage import open_storage\nclaim(open_storage(sys.argv[1]), 't', 'sweep run')\n"
            "print('claimed', flush=True)\ntime.sleep(300)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "results")], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "GRPO_SWEEP_DRIVER_BEAT_S": "0.2"})
    assert child.stdout.readline().strip() == "claimed"
    return child


def test_another_hosts_marker_is_refused_while_it_beats_and_taken_over_once_silent(tmp_path, monkeypatch, capsys, started):
    """Another host's process cannot be asked: its marker is watched for 4 of its beats. A driver that beats is refused, by
    `run --fresh` too, its folder untouched; killed outright (its machine lost), its marker stops beating, and `run`
    (as a launcher restarting the sweep on a new machine runs it) and `resume` go on, saying whose it was."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRPO_SWEEP_DRIVER_BEAT_S", "0.2")
    write_files(tmp_path, {"space.yaml": BASE, BUILDING: "{}\n"})
    child = _other_host_driver(tmp_path)
    try:
        for argv in (["run", "space.yaml"], ["run", "space.yaml", "--fresh"]):
            code, out, err = run_main(argv, capsys)
            assert code == 2 and f"process {child.pid} on host node-b" in err and "and it beats" in err, err
        assert (tmp_path / BUILDING).exists() and started == []
    finally:
        child.kill()
        child.wait()
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 0 and f"process {child.pid} on host node-b" in err and "no heartbeat in 1 s: that driver is gone; going on" in err, err
    assert started == ["environment", "bases", "base evals", "tune"] and not (tmp_path / "results" / "t" / DRIVER_FILE).exists()
    silent = {"host": "node-c", "pid": 4242, "pid_start": "17", "started": time.time() - 600, "command": "sweep resume", "every": 0.2}
    write_files(tmp_path, {"results/t/tuner.pkl": "", "results/t/experiment_state-2026-12-03.json": "{}", f"results/t/{DRIVER_FILE}": json.dumps(silent)})
    code, out, err = run_main(["resume", "results/t"], capsys)
    assert code == 0 and "process 4242 on host node-c" in err and "going on" in err and "resuming" in out, err
    assert started[-4:] == ["environment", "bases", "base evals", "tune"] and not (tmp_path / "results" / "t" / DRIVER_FILE).exists()


def test_markers_of_another_container_or_another_folder(tmp_path, monkeypatch, capsys, started):
    """A container sharing the host's name has its own process ids: its marker is watched as another host's, never read by
    its id. A marker naming another folder is a copy's (the folder copied while its sweep ran): no obstacle here."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRPO_SWEEP_DRIVER_BEAT_S", "0.2")
    there = {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": None, "started": time.time(), "command": "sweep run",
             "pid_ns": "pid:[1]", "every": 0.2}  # this very process's id, in another namespace: not this process
    write_files(tmp_path, {"space.yaml": BASE, BUILDING: "{}\n", f"results/t/{DRIVER_FILE}": json.dumps(there)})
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 0 and f"process {os.getpid()} in another container (process namespace) on this host" in err and "going on" in err, err
    copied = {**there, "pid_ns": pid_namespace(), "pid": os.getppid(), "folder": str(tmp_path / "elsewhere" / "t")}
    write_files(tmp_path, {f"results/t/{DRIVER_FILE}": json.dumps(copied)})
    write_files(tmp_path, {"results/t/tuner.pkl": "", "results/t/experiment_state-2026-12-03.json": "{}"})
    (tmp_path / "results" / "t" / "sweep_config.json").write_text(json.dumps(_saved_config(tmp_path)))
    code, out, err = run_main(["resume", "results/t"], capsys)
    assert code == 0 and "watching" not in err, err  # the parent process is alive, but its marker is another folder's


def test_a_process_is_the_one_that_wrote_the_marker_only_with_its_start_time(first_driver):
    """An id alone may name a later process given the same id: the start time tells them apart (psutil's, on every system)."""
    assert process_alive(first_driver.pid, process_start(first_driver.pid)) and process_alive(first_driver.pid, None)
    assert not process_alive(first_driver.pid, repr(float(process_start(first_driver.pid)) + 1))
    first_driver.kill()
    first_driver.wait()
    assert not process_alive(first_driver.pid, None)


def test_standing_by_hand():
    marker = Driver("node-a", 100, "5", 0.0, "sweep run", "pid:[1]", "/r/t")
    here = Driver("node-a", 7, None, 0.0, "sweep run", "pid:[1]", "/r/t")
    assert standing(marker, here, lambda pid, start: True) == "live"
    assert standing(marker, here, lambda pid, start: False) == "gone"
    assert standing(marker, Driver("node-a", 100, None, 0.0, "sweep resume", "pid:[1]", "/r/t"), lambda pid, start: True) == "gone"  # itself
    assert standing(marker, Driver("node-b", 7, None, 0.0, "sweep run", "pid:[1]", "/r/t"), lambda pid, start: True) == "elsewhere"
    assert standing(marker, Driver("node-a", 7, None, 0.0, "sweep run", "pid:[2]", "/r/t"), lambda pid, start: True) == "elsewhere"
    assert standing(marker, Driver("node-a", 7, None, 0.0, "sweep run", "pid:[1]", "/r/copy"), lambda pid, start: True) == "gone"
    assert standing(Driver("node-a", 100, "5", 0.0, "sweep run"), Driver("node-a", 7, None, 0.0, "x"), lambda pid, start: True) == "live"


def test_a_claim_beats_until_released_and_release_removes_only_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_DRIVER_BEAT_S", "0.05")
    store = open_storage(str(tmp_path))
    held = claim(store, "t", "sweep run")
    time.sleep(0.5)
    beats = json.loads((tmp_path / "t" / DRIVER_FILE).read_text())["beat"]
    assert beats >= 3, beats
    release(held)
    assert not (tmp_path / "t" / DRIVER_FILE).exists() and not held.thread.is_alive()
    held = claim(store, "t", "sweep run")
    later = {**json.loads((tmp_path / "t" / DRIVER_FILE).read_text()), "pid": os.getpid() + 1}
    (tmp_path / "t" / DRIVER_FILE).write_text(json.dumps(later))
    time.sleep(0.2)  # its beat stops writing once the marker is another's
    assert json.loads((tmp_path / "t" / DRIVER_FILE).read_text()) == later and not held.thread.is_alive()
    with pytest.raises(ConfigError, match=f"another driver claimed this sweep after this one \\(process {os.getpid() + 1} on host"):
        still_held(held)
    release(held)
    assert json.loads((tmp_path / "t" / DRIVER_FILE).read_text()) == later


def test_a_signal_as_the_marker_is_written_leaves_no_marker(tmp_path, monkeypatch):
    """A SIGTERM landing while the claim wrote its marker (a second on S3) left the marker naming this process."""
    from sweep.store.driver import driving
    from sweep.store.signals import Stopped

    store = open_storage(str(tmp_path))
    write = type(store).write_text

    def written_then_stopped(self, text, *parts):
        write(self, text, *parts)
        raise Stopped(signal.SIGTERM)

    monkeypatch.setattr(type(store), "write_text", written_then_stopped)
    with pytest.raises(Stopped), driving(store, "t", "sweep run"):
        pytest.fail("the block ran")
    assert not (tmp_path / "t" / DRIVER_FILE).exists()
    monkeypatch.undo()
    held = claim(store, "t", "sweep run")  # stopped as it started its beat: a thread never started is not waited for
    held.stop.set()
    held.thread.join()
    held.thread = threading.Thread(target=lambda: None)
    release(held)
    assert not (tmp_path / "t" / DRIVER_FILE).exists()


def test_a_driver_whose_sweep_another_driver_took_over_stops_within_a_beat(tmp_path, monkeypatch, capsys, started):
    """A driver whose beats failed long enough (an S3 outage of a minute) is counted gone, and a resume on another machine
    claims the sweep. Once its beat reads the other claim it stops its trials as on Ctrl-C (it went on running them beside
    the other's until it ended), leaves the folder and the other's marker as they are, and says who took it."""
    import sweep.run

    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE})
    marker = tmp_path / "results" / "t" / DRIVER_FILE
    other = {}

    def fit(cfg, store, make_tuner, watch):  # the trials running when another driver claims the sweep
        other.update({**json.loads(marker.read_text()), "host": "node-b", "pid": 4242, "command": "sweep resume"})
        marker.write_text(json.dumps(other))
        time.sleep(60)  # the beat (every second here) interrupts it
        started.append("fit ended")
        return 0

    monkeypatch.setattr(sweep.run, "_fit_and_report", fit)
    began = time.monotonic()
    code, out, err = run_main(["run", "space.yaml"], capsys)
    said = ("another driver took this sweep over while this one ran it (`sweep resume` of process 4242 on host node-b); this one "
            "stopped its trials and leaves the sweep to it")
    assert code == 2 and said in err, err
    assert time.monotonic() - began < 30 and "fit ended" not in started and "Traceback" not in out + err
    assert json.loads(marker.read_text()) == other and (tmp_path / "results" / "t" / "sweep_config.json").exists()


def test_sigterm_stops_a_driver_as_ctrl_c_does_and_removes_its_marker(tmp_path, monkeypatch, capsys, started):
    """SIGTERM (`kill`, `docker stop`, a preemption) during the bases' minutes killed the driver outright, its marker left
    behind; now it stops as Ctrl-C does: exit 143, said, no traceback, its marker and its unstarted folder removed, and
    the signal's earlier handler back after the command."""
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": BASE})
    seen = []

    def unhandled(signum, frame):  # were the driver's handler missing, the test fails here instead of pytest being killed
        seen.append("SIGTERM reached the test's own handler")

    before = signal.signal(signal.SIGTERM, unhandled)
    try:
        _run_stopped_in_its_bases(tmp_path, monkeypatch, capsys, seen)
    finally:
        now = signal.signal(signal.SIGTERM, before)
    assert now is unhandled  # the earlier handler back after the command


def _run_stopped_in_its_bases(tmp_path, monkeypatch, capsys, seen):
    import sweep.trials.base_evals

    def bases(cfg):
        seen.append((tmp_path / "results" / "t" / DRIVER_FILE).exists())
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        seen.append("not stopped")

    monkeypatch.setattr(sweep.trials.base_evals, "build_bases", bases)
    code, out, err = run_main(["run", "space.yaml"], capsys)
    assert code == 143 and "interrupted (SIGTERM)" in err and "Traceback" not in out + err, (code, out, err)
    assert seen == [True] and not (tmp_path / "results" / "t").exists()


def test_signals_ignored_at_the_start_stay_ignored():
    """SIGHUP under `nohup` is ignored: the driver keeps it so (its terminal gone, it goes on); SIGTERM stops it meanwhile."""
    from sweep.store.signals import Stopped, handlers_kept, stopping_on_signals

    earlier = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stopping_on_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            with handlers_kept():
                signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as ray.init replaces it
            with pytest.raises(Stopped) as stopped:
                signal.raise_signal(signal.SIGTERM)
            assert stopped.value.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, earlier)


def test_a_second_signal_does_not_cut_the_first_ones_cleanup_short():
    """The first SIGTERM stops the driver; a second (or a SIGHUP) while its cleanup runs (an S3 deletion, Ray's shutdown)
    is noted, not raised, so the marker is still removed. Outside a driver the handlers are the earlier ones again."""
    from sweep.store.signals import Stopped, signal_of, stopping_on_signals

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
    cleaned = []
    with pytest.raises(Stopped) as stopped:
        with stopping_on_signals():
            try:
                signal.raise_signal(signal.SIGTERM)
            finally:
                signal.raise_signal(signal.SIGHUP)
                signal.raise_signal(signal.SIGTERM)
                cleaned.append(signal_of(KeyboardInterrupt()))
    assert stopped.value.signum == signal.SIGTERM and cleaned == [signal.SIGTERM]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == before


def test_sigterm_while_ray_starts_stops_the_driver_as_after():
    """`ray.init` replaces SIGTERM's handler with `sys.exit(15)` as it begins: a SIGTERM in its seconds was a silent exit
    15. Now it is a `Stopped`, and the Ray begun is shut down."""
    code = ("import os, signal, sys, threading\nimport ray\nfrom sweep.run import local_ray\n"
            "from sweep.store.signals import Stopped, stopping_on_signals\nfrom sweep.watch.live_server import Watch\n"
            "real = ray.init\n"
            "def init(*args, **kwargs):\n"
            "    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
            "    return real(*args, **kwargs)\n"
            "ray.init = init\n"
            "try:\n"
            "    with stopping_on_signals(), local_ray(Watch(dashboard=False, live=False)):\n"
            "        print('ray started whole', flush=True)\n"
            "except Stopped as stopped:\n"
            "    print('stopped', signal.Signals(stopped.signum).name, ray.is_initialized(), flush=True)\n"
            "    sys.exit(3)\n")
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)})
    finally:
        kill_by_env("RAY_TMPDIR", ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 3 and "stopped SIGTERM False" in done.stdout, (done.returncode, done.stdout, done.stderr[-3000:])


CONFIRMED = BASE + "confirm: {top: 1}\n"


def _confirm_stopped(tmp_path: Path, how: str):
    """`run_confirm` as it runs after a sweep: the sweep held by its `driving`, then its confirming sweep's fit stopped by
    SIGTERM, or the sweep taken over by another host's driver."""
    import sweep.run
    from sweep.store.driver import driving
    from sweep.store.signals import signal_of

    def run_confirm(uri, *args, **kwargs):
        with driving(open_storage(str(tmp_path / "results")), "t", "sweep confirm"):
            if how == "sigterm":
                try:  # the confirming sweep's fit, as `_fit_and_report` ends it
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(30)
                except KeyboardInterrupt as stopped:
                    raise sweep.run.Interrupted(uri + "_confirm", signal_of(stopped)) from None
            marker = tmp_path / "results" / "t" / DRIVER_FILE
            marker.write_text(json.dumps({**json.loads(marker.read_text()), "host": "node-b", "pid": 4242}))
            time.sleep(30)
        return 0

    return run_confirm


@pytest.mark.parametrize("how", ["sigterm", "taken over"])
def test_a_confirm_stage_stopped_says_how_and_exits_so(tmp_path, monkeypatch, capsys, started, how):
    """The confirm stage after `run`: SIGTERM exited 130 naming SIGINT, and a takeover was "confirm stage skipped", exit 0."""
    import sweep.confirm

    monkeypatch.chdir(tmp_path)
    write_files(tmp_path, {"space.yaml": CONFIRMED})
    monkeypatch.setattr(sweep.confirm, "run_confirm", _confirm_stopped(tmp_path, how))
    code, out, err = run_main(["run", "space.yaml"], capsys)
    if how == "sigterm":
        assert code == 143 and f"interrupted (SIGTERM): the sweep stopped where its last snapshot and checkpoints left it; continue it " \
                               f"with `python -m sweep resume {tmp_path / 'results' / 't'}`" in err, (code, out, err)
    else:
        assert code == 2 and "another driver took this sweep over while this one ran it (`sweep confirm` of process 4242 on host node-b)" in err, (code, out, err)
    assert "confirm stage skipped" not in out and "Traceback" not in out + err


def _saved_config(tmp_path: Path) -> dict:
    """The config `run` saves for BASE (what `resume` reads)."""
    from sweep.spec.loader import load_space

    return json.loads(load_space(tmp_path / "space.yaml").model_copy(update={"storage": str(tmp_path / "results")}).model_dump_json())
