"""``sweep envs check`` replays reference solutions live and keeps only the tasks they solve."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from toolenvs.check import check_tasks
from toolenvs.task import Task

ROOT = Path(__file__).resolve().parents[2]


def test_check_keeps_only_tasks_whose_solution_passes(tasks, tmp_path):
    good = tasks[:2]
    broken = Task.model_validate({**tasks[2].model_dump(), "task_key": "broken", "verifier": {**tasks[2].verifier, "nights": 99}})
    report = check_tasks([*good, broken])
    assert [t.task_key for t in report.kept()] == [t.task_key for t in good]
    [(task, why)] = report.failed["hotel"]
    assert task.task_key == "broken" and "verifier gave 0.0" in why

    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t.model_dump()) + "\n" for t in [*good, broken]))
    kept = tmp_path / "kept.jsonl"
    run = subprocess.run([sys.executable, "-m", "sweep", "envs", "check", str(path), "--write", str(kept)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1  # something failed
    assert "broken" in run.stdout
    assert [json.loads(line)["task_key"] for line in kept.read_text().splitlines()] == [t.task_key for t in good]


def test_a_task_the_local_app_cannot_judge_is_named_not_replayed(tasks, tmp_path):
    """An unknown verifier type (a traceback from the app's verify before) and a Fleet verifier_func on a local app
    are each named with the file and line, and the other tasks are checked all the same."""
    from toolenvs.check import checkable_tasks

    odd = {**tasks[1].model_dump(), "task_key": "odd", "verifier": {"type": "no_such_verifier"}}
    hosted = {**tasks[2].model_dump(), "task_key": "hosted", "verifier": None, "verifier_func": "def verify(env): return 1.0"}
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in [tasks[0].model_dump(), odd, hosted]))
    found, problems = checkable_tasks([path])
    assert [t.task_key for t in found] == [tasks[0].task_key]
    assert problems[0].startswith(f"{path}:2 (task 'odd'): 1 hotel task(s) name a verifier type the app does not have: odd ('no_such_verifier')")
    assert problems[1].startswith(f"{path}:3 (task 'hosted'): 1 task(s) have a Fleet verifier_func, which only Fleet runs")


def test_a_verifier_spec_missing_a_field_is_named_not_replayed(tasks, tmp_path):
    """A booking_made spec without its check_in: `envs check` crashed on the verifier's KeyError (a traceback, no table);
    now it is named with its file and line, and the others are replayed."""
    made = next(t for t in tasks if t.verifier["type"] == "booking_made")
    partial = {**made.model_dump(), "task_key": "partial", "verifier": {"type": "booking_made", "hotel_id": made.verifier["hotel_id"]}}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(made.model_dump()) + "\n" + json.dumps(partial) + "\n")
    run = subprocess.run([sys.executable, "-m", "sweep", "envs", "check", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stdout + run.stderr, run.stderr
    assert f"not checked: {path}:2 (task 'partial'): 1 hotel task(s) have a verifier spec the app cannot judge as meant: partial (lacks 'check_in', 'nights'" in run.stderr
    assert "1 task(s) checked" in run.stderr and made.task_key not in run.stderr
