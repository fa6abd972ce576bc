"""Kill -9 a running trial's own process (not the driver): Tune starts it again, from its newest checkpoint.

Two trials, one at a time, eight steps each: one checkpoints every step, one never. Each is killed once,
midway, the second in the process the first one finished in (CPU trials reuse it). Both finish with steps
1..8 exactly once: the first continued right after its newest checkpoint (no step before it ran again),
the second started over and its first attempt's steps are gone, not kept beside the new ones; their evals
are not doubled either; the leaderboard says each restarted once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from pyarrow.fs import FileSelector, FileType

from sweep.store.results import recorded_steps, trial_history
from sweep.store.storage import Storage, open_storage
from sweep.trials import attempts
from tests.conftest import TEST_MODEL
from tests.support.processes import kill_by_env, kill_group, pids_with_env
from tests.sweep.test_resume import marked_steps, run_cli

ROOT = Path(__file__).resolve().parents[2]
STEPS = 8  # room to kill a trial between its step 2 and its last
EVALS = 4
KILL_AFTER = 2  # a trial is killed once it reported this step (and, if it checkpoints, has a checkpoint at it)


def space(storage: str) -> dict:
    return {
        "name": "restart",
        "trainer": {
            "total_steps": STEPS,
            "model": TEST_MODEL,
            "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2, "max_generate_length": 32},
            "algorithm": {"mini_batches": 1},
            "eval": {"interval": EVALS, "max_tasks": 2, "n_samples": 2},
        },
        "space": {"checkpoint.interval": {"grid": [1, 0]}},
        "search": {"searcher": "grid", "num_samples": 1},
        "scheduler": {"type": "fifo"},
        "resources": {"cpus_per_trial": 1},
        "max_concurrent_trials": 1,
        "failures": {"max_trial_restarts": 1},
        "storage": storage,
    }


def trial_dirs(store: Storage) -> list[str]:
    infos = store.fs.get_file_info(FileSelector(store.path("restart"), allow_not_found=True))
    return sorted(i.path for i in infos if i.type == FileType.Directory and i.base_name.startswith("run_trial_"))


def checkpoint_interval(store: Storage, trial: str) -> int:
    with store.fs.open_input_stream(f"{trial}/params.json") as f:
        return int(json.loads(f.read().decode())["checkpoint.interval"])


def kill_midway(store: Storage, trial: str, ray_tmp: str, driver_pid: int) -> dict | None:
    """Kill the trial's process if it is midway through its first attempt; what it had done when it died."""
    steps = recorded_steps(trial, store.fs)
    last = max(steps, default=0)
    if not KILL_AFTER <= last < STEPS or len(attempts.read(store.fs, trial)) != 1:
        return None
    if checkpoint_interval(store, trial) and max(marked_steps(store, trial), default=0) < KILL_AFTER:
        return None
    pid = int(steps[last]["pid"])
    assert pid != driver_pid and pid != os.getpid() and pid in pids_with_env("RAY_TMPDIR", ray_tmp), "not a trial process of this test's Ray"
    os.kill(pid, signal.SIGSTOP)  # frozen, so what it had done is read before it dies
    done = {"pid": pid, "reported": max(recorded_steps(trial, store.fs)), "checkpoint": max(marked_steps(store, trial), default=0)}
    os.kill(pid, signal.SIGKILL)
    assert done["reported"] < STEPS, f"{trial} finished before it could be killed"
    return {**done, "at": time.time()}


def run_and_kill_each_trial(store: Storage, space_file: Path, env: dict, log: Path, deadline_s: float = 300) -> tuple[int, dict[str, dict]]:
    """Run the sweep, kill each trial's process once midway; the driver's exit code and what each trial had done."""
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    killed: dict[str, dict] = {}
    try:
        driver = run_cli(["run", str(space_file)], env, ROOT, ray_tmp, log)
        try:
            deadline = time.monotonic() + deadline_s
            while driver.poll() is None and time.monotonic() < deadline:
                for trial in trial_dirs(store):
                    if trial not in killed and (done := kill_midway(store, trial, ray_tmp, driver.pid)):
                        killed[trial] = done
                time.sleep(0.05)
            code = driver.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            kill_group(driver)
            kill_by_env("RAY_TMPDIR", ray_tmp)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return code, killed


@pytest.mark.slow
@pytest.mark.e2e
def test_a_killed_trial_restarts_from_its_checkpoint_and_counts_no_step_twice(tmp_path, private_cache):
    storage = str(tmp_path / "results")
    store = open_storage(storage)
    space_file = tmp_path / "space.yaml"
    space_file.write_text(yaml.safe_dump(space(storage)))
    env = {**os.environ, "GRPO_SWEEP_CACHE": str(private_cache)}
    code, killed = run_and_kill_each_trial(store, space_file, env, tmp_path / "run.log")
    assert code == 0, (tmp_path / "run.log").read_text()[-4000:]
    assert len(killed) == 2, (killed, (tmp_path / "run.log").read_text()[-4000:])

    rows = json.loads(store.read_text("restart", "leaderboard.json"))
    assert [(r["status"], r["steps"], r["restarts"]) for r in rows] == [("finished", STEPS, 1)] * 2, rows

    order = []
    for trial, done in killed.items():
        tried = attempts.read(store.fs, trial)
        assert [(a.ended is None, a.raised) for a in tried] == [(True, None), (False, None)]  # the first died, the second finished
        assert tried[0].pid == done["pid"] != tried[1].pid
        history = attempts.current_rows(trial_history(trial, store.fs), tried)
        assert [(r["training_iteration"], r["step"]) for r in history] == [(s, s) for s in range(1, STEPS + 1)]
        resumed = tried[1].resumed_from
        redone = [r["step"] for r in history if r["timestamp"] > done["at"]]
        assert redone == list(range(resumed + 1, STEPS + 1)), (trial, done, resumed, redone)
        assert [r[attempts.ATTEMPT] for r in history] == [0] * resumed + [1] * (STEPS - resumed)
        if checkpoint_interval(store, trial):  # right after its newest checkpoint (one Tune had persisted, not yet marked, at most)
            assert done["checkpoint"] <= resumed <= done["reported"] and resumed >= KILL_AFTER, (done, resumed)
        else:  # from step 1, its first attempt's steps replaced
            assert resumed == 0
        assert_evals_once(store, history[-1]["trial_id"], resumed)
        order.append(tried)
    first, second = sorted(order, key=lambda tried: tried[0].started)
    assert second[0].pid == first[1].pid  # the second trial ran in the process the first finished in, and survived its death


def assert_evals_once(store: Storage, trial_id: str, resumed: int) -> None:
    """Each eval step once in the trial's eval lines: the base's, every EVALS steps, and where a restart began."""
    lines = [json.loads(line) for line in store.read_text("restart", "trajectories", trial_id, "aggregated_results.jsonl").splitlines()]
    expected = sorted({0, *range(EVALS, STEPS + 1, EVALS)} | ({resumed} if resumed else set()))
    assert [int(line["global_step"]) for line in lines] == expected, lines
