"""Kill -9 a sweep's driver mid-sweep, then ``sweep resume``: locally, and from S3 alone on a "second machine".

Two trials, one at a time, six steps each, a checkpoint every two. The driver (and with it the whole local
Ray, as when a machine dies) is killed once the first trial has finished and the second has a checkpoint
but has not finished. After ``sweep resume`` both trials have steps 1..6 exactly once; the finished trial
was not rerun (not even when Tune's last snapshot predates its last step: its last checkpoint is marked); the interrupted one continued right after its newest checkpoint, not from step 1. The same
with packed LoRA trials: three, two at a time sharing a pack host, killed with their host.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from pyarrow.fs import FileSelector, FileType

from sweep.store.driver import DRIVER_FILE
from sweep.store.results import trial_history
from sweep.store.storage import Storage, open_storage
from sweep.store.study import optuna_db_path
from sweep.trials import attempts
from sweep.trials.checkpoints import MARKER
from sweep.watch.notify import WEBHOOK_ENV
from tests.conftest import TEST_MODEL
from tests.support.processes import kill_by_env, kill_group, pids_with_env
from tests.support.s3 import moto_server, s3_bucket  # noqa: F401
from tests.support.webhook import Webhook

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6


def space(storage: str, packed: bool = False) -> dict:
    """Two trials one at a time; ``packed``: three LoRA trials, two at a time in one pack host (``sweep.trials.packing``)."""
    data = {
        "name": "resume",
        "trainer": {
            "total_steps": STEPS,
            "model": TEST_MODEL,
            "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2},
            "eval": {"interval": 3, "max_tasks": 2, "n_samples": 2},
            "checkpoint": {"interval": 2},
        },
        "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}},
        "search": {"searcher": "optuna", "num_samples": 2, "n_startup_trials": 2, "seed": 3},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 1},
        "max_concurrent_trials": 1,
        "storage": storage,
    }
    if packed:
        data["trainer"]["model"] = {**TEST_MODEL, "lora": {"rank": 2, "alpha": 4.0}}
        data["search"]["num_samples"] = 3
        data.update(resources={"cpus_per_trial": 2, "trials_per_worker": 2}, max_concurrent_trials=2)
    return data


def trial_dirs(store: Storage) -> list[str]:
    infos = store.fs.get_file_info(FileSelector(store.path("resume"), allow_not_found=True))
    return sorted(i.path for i in infos if i.type == FileType.Directory and i.base_name.startswith("run_trial_"))


def marked_steps(store: Storage, trial: str) -> list[int]:
    """Steps of the trial's checkpoints that Tune persisted whole (the trial marked them)."""
    infos = store.fs.get_file_info(FileSelector(trial, allow_not_found=True))
    return sorted(int(i.base_name.rsplit("_", 1)[1]) for i in infos
                  if i.base_name.startswith("checkpoint_") and store.fs.get_file_info(f"{i.path}/{MARKER}").type == FileType.File)


def raw_rows(store: Storage, trial: str) -> list[dict]:
    path = f"{trial}/result.json"
    if store.fs.get_file_info(path).type == FileType.NotFound:
        return []
    with store.fs.open_input_stream(path) as f:
        lines = f.read().decode().splitlines()
    return [json.loads(line) for line in lines if line.strip().endswith("}")]


def wait_for_kill_point(store: Storage, driver: subprocess.Popen, log: Path, deadline_s: float) -> None:
    """Until one trial has finished and another has a marked checkpoint but has not finished."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        assert driver.poll() is None, "the sweep ended before the test could kill it:\n" + log.read_text()[-4000:]
        trials = trial_dirs(store)
        steps = {t: max((r["training_iteration"] for r in raw_rows(store, t)), default=0) for t in trials}
        finished = [t for t in trials if steps[t] >= STEPS]
        midway = [t for t in trials if marked_steps(store, t) and steps[t] < STEPS]
        if finished and midway:
            return
        time.sleep(0.2)
    raise TimeoutError("no trial finished while another was midway")


def ray_left(ray_tmp: str, wait_s: float = 30.0) -> list[int]:
    """The processes of the test's Ray still running ``wait_s`` seconds after its driver ended (none, once it shut Ray down)."""
    deadline = time.monotonic() + wait_s
    while (left := pids_with_env("RAY_TMPDIR", ray_tmp)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def run_cli(args: list[str], env: dict, cwd: Path, ray_tmp: str, log: Path) -> subprocess.Popen:
    """``python -m sweep ...`` in its own process group, output to ``log`` (a pipe could fill and stall it)."""
    env = {**env, "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "sweep", *args], cwd=cwd, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT)


def kill_midway(store: Storage, space_file: Path, env: dict, tmp_path: Path) -> tuple[float, dict[str, tuple[int, int]]]:
    """Run the sweep and kill its driver and Ray; when, and per trial its last reported step and newest marked checkpoint."""
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    try:
        driver = run_cli(["run", str(space_file)], env, ROOT, ray_tmp, tmp_path / "run.log")
        try:
            wait_for_kill_point(store, driver, tmp_path / "run.log", deadline_s=900)
        finally:
            kill_group(driver)  # the driver and its local Ray die together, as on a lost machine
            kill_by_env("RAY_TMPDIR", ray_tmp)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    killed_at = time.time()
    return killed_at, {t: (max((r["step"] for r in raw_rows(store, t)), default=0), max(marked_steps(store, t), default=0)) for t in trial_dirs(store)}


def resume(experiment: str, env: dict, cwd: Path, log: Path) -> int:
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    try:
        resumed = run_cli(["resume", experiment], env, cwd, ray_tmp, log)
        try:
            return resumed.wait(timeout=900)
        finally:
            kill_group(resumed)
            kill_by_env("RAY_TMPDIR", ray_tmp)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.e2e
# Local storage is the packed variant's; a plain trial's resume from its checkpoint is the S3 variant's and tests/sweep/test_trial_restart.py's
# (a third variant, plain trials on local storage, cost CI 96 s and covered nothing those two do not).
@pytest.mark.parametrize("where", ["s3", "packed"])
def test_killed_sweep_resumes_each_trial_from_its_checkpoint(where, tmp_path, private_cache, request):
    if where == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        storage, env = bucket.uri("sweeps"), {**os.environ, **bucket.env}
    else:
        storage, env = str(tmp_path / "results"), dict(os.environ)
    env["GRPO_SWEEP_CACHE"] = str(private_cache)
    store = open_storage(storage)
    space_file = tmp_path / "space.yaml"
    space_file.write_text(yaml.safe_dump(space(storage, packed=where == "packed")))
    killed_at, at_kill = kill_midway(store, space_file, env, tmp_path)

    refused = subprocess.run([sys.executable, "-m", "sweep", "run", str(space_file)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "sweep resume" in refused.stderr and "--fresh" in refused.stderr, refused.stderr

    second_machine = tmp_path / "second"  # an empty working directory; with S3 also an empty cache and no local study
    second_machine.mkdir()
    if where == "s3":
        optuna_db_path(store, "resume").unlink(missing_ok=True)
        env["GRPO_SWEEP_CACHE"] = str(tmp_path / "empty-cache")
    code = resume(f"{storage}/resume", env, second_machine, tmp_path / "resume.log")
    assert code == 0, (tmp_path / "resume.log").read_text()[-4000:]

    rows = json.loads(store.read_text("resume", "leaderboard.json"))
    assert len(rows) == (3 if where == "packed" else 2) and all(r["status"] == "finished" and r["steps"] == STEPS for r in rows), rows
    continued = []
    for trial in trial_dirs(store):
        history = trial_history(trial, store.fs)
        assert [(r["training_iteration"], r["step"]) for r in history] == [(s, s) for s in range(1, STEPS + 1)]
        assert marked_steps(store, trial)[-1] == STEPS  # the last checkpoint is marked too, though Tune stops the trial at its report
        reported, checkpointed = at_kill.get(trial, (0, 0))
        redone = [r["step"] for r in history if r["timestamp"] > killed_at]
        if reported >= STEPS:
            assert redone == [], f"{trial}: finished before the kill, yet ran again"
        elif checkpointed:
            continued.append((checkpointed, redone))
    # the trial killed midway went on right after its newest checkpoint, not from step 1
    assert continued and all(redone == list(range(checkpointed + 1, STEPS + 1)) for checkpointed, redone in continued), continued
    if where == "s3":
        assert_everything_in_the_bucket(request.getfixturevalue("s3_bucket"))


def assert_everything_in_the_bucket(bucket) -> None:
    keys = bucket.keys("sweeps/resume/")
    names = {k.removeprefix("sweeps/resume/") for k in keys}
    assert {"leaderboard.json", "sweep_config.json", "optuna.db", "tuner.pkl"} <= names
    assert sum(k.endswith("/result.json") for k in keys) == 2
    assert sum(k.endswith(f"checkpoint_{STEPS:06d}/trainer_state.json") for k in keys) == 2
    trajectories = [k for k in keys if "/trajectories/" in k]
    assert sum(k.endswith("aggregated_results.jsonl") for k in trajectories) == 2
    assert not any(k.endswith("global_step_0/hotel.jsonl") for k in trajectories)  # the base is evaluated once, by the driver
    assert sum(k.endswith("global_step_0/hotel.jsonl") for k in keys if "/base_evals/" in k) == 1
    assert sum(k.endswith(f"global_step_{STEPS}/hotel.jsonl") for k in trajectories) == 2

    import optuna

    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "optuna.db"
        db.write_bytes(bucket.read("sweeps/resume/optuna.db"))
        study = optuna.load_study(study_name="resume", storage=f"sqlite:///{db}")
        assert len(study.trials) == 2 and all(t.state.name == "COMPLETE" for t in study.trials)


@pytest.mark.slow
@pytest.mark.e2e
def test_a_trial_that_finished_after_tunes_last_snapshot_is_not_run_again(tmp_path, private_cache):
    """The driver dies after a trial's last step but before Tune snapshotted its end (the snapshot, at most a
    second old, still has it running from an older checkpoint): made exact here by putting back the
    experiment's snapshot taken midway once the sweep ended. The resumed trial finds its last checkpoint
    marked, reports its recorded last step once more and runs none again."""
    storage = str(tmp_path / "results")
    store = open_storage(storage)
    data = space(storage)
    data.update(space={"optim.lr": {"grid": [1e-3]}}, search={"searcher": "grid", "num_samples": 1})
    space_file = tmp_path / "space.yaml"
    space_file.write_text(yaml.safe_dump(data))
    env = {**os.environ, "GRPO_SWEEP_CACHE": str(private_cache)}
    experiment, midway = Path(storage) / "resume", tmp_path / "midway"

    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    try:
        driver = run_cli(["run", str(space_file)], env, ROOT, ray_tmp, tmp_path / "run.log")
        try:
            deadline = time.monotonic() + 600
            while not midway.exists() and driver.poll() is None and time.monotonic() < deadline:
                trials = trial_dirs(store)
                if trials and marked_steps(store, trials[0]) and max((r["step"] for r in raw_rows(store, trials[0])), default=0) < STEPS:
                    shutil.copytree(experiment, midway, ignore=lambda folder, names: [n for n in names if (Path(folder) / n).is_dir()])
                time.sleep(0.05)
            assert driver.wait(timeout=max(1.0, deadline - time.monotonic())) == 0, (tmp_path / "run.log").read_text()[-4000:]
        finally:
            kill_group(driver)
            kill_by_env("RAY_TMPDIR", ray_tmp)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert midway.exists(), "the sweep ended before a snapshot could be taken midway"
    (trial,) = trial_dirs(store)
    ran = {r["step"]: r["timestamp"] for r in trial_history(trial, store.fs)}
    assert sorted(ran) == list(range(1, STEPS + 1)) and marked_steps(store, trial)[-1] == STEPS
    for name in os.listdir(experiment):  # the sweep's end as Tune had snapshotted it midway
        if (experiment / name).is_file() and (name.startswith(("experiment_state", "search_gen_state", "searcher-state")) or name == "tuner.pkl"):
            (experiment / name).unlink()
    for kept in midway.iterdir():
        shutil.copy2(kept, experiment / kept.name)

    (tmp_path / "second").mkdir()
    assert resume(str(experiment), env, tmp_path / "second", tmp_path / "resume.log") == 0, (tmp_path / "resume.log").read_text()[-4000:]
    tried = attempts.read(store.fs, trial)
    assert len(tried) == 2 and tried[1].resumed_from == STEPS and tried[1].ended is not None, tried  # Tune did start it again
    assert {r["step"]: r["timestamp"] for r in trial_history(trial, store.fs)} == ran  # and no step ran again
    rows = json.loads(store.read_text("resume", "leaderboard.json"))
    assert [(r["status"], r["steps"]) for r in rows] == [("finished", STEPS)], rows


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_ctrl_c_stops_a_sweep_for_resume_and_judges_nothing(tmp_path, private_cache, stop):
    """Ctrl-C (SIGINT to the driver's process group, as a terminal sends it) once a trial has reported: the driver exits
    130 naming the resume command, with no leaderboard (Tune's own handler ended the run as if it had finished: a
    leaderboard, report and confirm stage of a sweep cut short, exit 0); ``sweep resume`` then runs it to its end.
    SIGTERM to the driver alone (``kill``, ``docker stop``, a preemption) does the same, exit 143 (Ray's handler made it a
    silent exit 15), and its Ray is shut down, its ``driver.lock`` removed."""
    import signal

    storage = tmp_path / "results"
    store = open_storage(str(storage))
    space_file = tmp_path / "space.yaml"
    space_file.write_text(yaml.safe_dump(space(str(storage))))
    env = {**os.environ, "GRPO_SWEEP_CACHE": str(private_cache)}
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    log = tmp_path / "run.log"
    try:
        with Webhook() as hook:  # the word someone away from the terminal gets
            driver = run_cli(["run", str(space_file), "--no-dashboard", "--no-live"], {**env, WEBHOOK_ENV: hook.url}, ROOT, ray_tmp, log)
            try:
                deadline = time.monotonic() + 600
                while not any(raw_rows(store, t) for t in trial_dirs(store)):
                    assert driver.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
                    time.sleep(0.2)
                if stop == "ctrl-c":
                    os.killpg(driver.pid, signal.SIGINT)
                else:
                    driver.send_signal(signal.SIGTERM)
                code = driver.wait(timeout=180)
                left = ray_left(ray_tmp) if stop == "sigterm" else []
            finally:
                kill_group(driver)
                kill_by_env("RAY_TMPDIR", ray_tmp)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    said = log.read_text()
    name = "SIGINT" if stop == "ctrl-c" else "SIGTERM"
    assert hook.texts[0].startswith("sweep resume started") and hook.texts[-1].startswith(f"sweep resume interrupted ({name}) before it ended"), hook.texts
    assert f"`python -m sweep resume {storage / 'resume'}`" in hook.texts[-1]
    assert code == (130 if stop == "ctrl-c" else 143), said[-4000:]
    assert (f"interrupted ({name}): the sweep stopped where its last snapshot and checkpoints left it; continue it with "
            f"`python -m sweep resume {storage / 'resume'}`") in said, said[-4000:]
    assert not (storage / "resume" / "leaderboard.json").exists() and (storage / "resume" / "tuner.pkl").exists()
    assert not (storage / "resume" / DRIVER_FILE).exists() and "Traceback" not in said
    if stop == "sigterm":
        assert left == [], left  # its Ray went with it
        return
    assert resume(str(storage / "resume"), env, ROOT, tmp_path / "resume.log") == 0, (tmp_path / "resume.log").read_text()[-4000:]
    rows = json.loads((storage / "resume" / "leaderboard.json").read_text())
    assert len(rows) == 2 and all(r["steps"] == STEPS for r in rows), rows
