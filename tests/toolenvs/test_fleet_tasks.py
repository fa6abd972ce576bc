"""Fleet's task export loads as it is, counts by env and modality, and splits by Fleet's own rules.

The split is checked against SkyRL's own ``prepare_dataset.py`` (``../shared/upstream``, imported from there;
its parquet writer is the one part stood in for: the test keeps the task keys it would write).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import types
from pathlib import Path

import pytest

from configkit.base import ConfigError
from toolenvs.check import shipped_task_files
from toolenvs.fleet_split import fleet_split, skipped_task_keys
from toolenvs.split import stats_rows
from toolenvs.task import load_task_files, load_tasks

UPSTREAM = Path(__file__).resolve().parents[3] / "shared" / "upstream" / "skyrl-1d3b19e" / "skyrl-train"
SAMPLE = UPSTREAM / "data" / "fleet_booking_sample.json"
needs_upstream = pytest.mark.skipif(not SAMPLE.is_file(), reason=f"SkyRL's Fleet sample is not at {SAMPLE} (../shared is absent in a user's clone)")


@needs_upstream
def test_the_upstream_sample_loads_unchanged():
    raw = json.loads(SAMPLE.read_text())
    tasks = load_tasks(SAMPLE)
    assert len(tasks) == 100 and [t.task_key for t in tasks] == [r["key"] for r in raw]
    for task, record in zip(tasks, raw):
        assert (task.env_key, task.env_version, task.data_key, task.data_version) == (record["env_id"], record["version"], record["data_id"], record["data_version"])
        assert task.verifier_func == record["verifier_func"] and task.prompt == record["prompt"] and task.modality == "tool_use"
    assert stats_rows(tasks) == [("booking", "tool_use", 100), ("total", "", 100)]


@needs_upstream
def test_data_stats_prints_100_booking_tool_use_tasks(capsys):
    from sweep.__main__ import main

    assert main(["data", "stats", str(SAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "booking" in out and "tool_use" in out and "100" in out


def _write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


FLEET_TASK = {"key": "t1", "prompt": "Book it.", "env_id": "booking", "version": "v0.0.74", "data_id": "kinesis", "data_version": "v0.0.14",
              "verifier_func": "def validate_task(env, final_answer=None):\n    return 1\n", "task_modality": "tool_use",
              "env_variables": {"CURRENT_DATE": "2026-02-01", "LIMIT": 3, "FLAGS": {"beta": True}}}


def test_json_valued_env_variables_and_the_export_forms(tmp_path):
    [task] = load_tasks(_write(tmp_path, "a.json", [FLEET_TASK]))
    assert task.env_variables == {"CURRENT_DATE": "2026-02-01", "LIMIT": 3, "FLAGS": {"beta": True}}
    assert [t.task_key for t in load_tasks(_write(tmp_path, "b.json", {"tasks": [FLEET_TASK]}))] == ["t1"]
    lines = tmp_path / "c.jsonl"
    lines.write_text(json.dumps(FLEET_TASK) + "\n")
    assert load_tasks(lines)[0].data_key == "kinesis"


def test_computer_use_and_a_task_without_a_verifier_are_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match=r"a.json\[0\] \(task 't1'\): key 'modality' = 'computer_use'.*allowed: tool_use"):
        load_tasks(_write(tmp_path, "a.json", [{**FLEET_TASK, "task_modality": "computer_use"}]))
    no_verifier = {k: v for k, v in FLEET_TASK.items() if k != "verifier_func"}
    with pytest.raises(ConfigError, match=r"b.json\[0\] \(task 't1'\): give exactly one of .*scored 0.0 by Fleet, silently"):
        load_tasks(_write(tmp_path, "b.json", [no_verifier]))
    with pytest.raises(ConfigError, match="verifier_func' must define a top-level function taking the environment"):
        load_tasks(_write(tmp_path, "c.json", [{**FLEET_TASK, "verifier_func": "SCORE = 1\n"}]))


def upstream_split(path: Path) -> dict[str, set[str]]:
    """SkyRL's prepare_dataset.py on ``path``: the task keys it would write to train and validation."""
    captured: dict[str, set[str]] = {}

    class Dataset:
        def __init__(self, records):
            self.records = records

        @classmethod
        def from_list(cls, records):
            return cls(records)

        def to_parquet(self, target):
            captured[Path(target).stem] = {r["task_key"] for r in self.records}

    saved = sys.modules.get("datasets")
    sys.modules["datasets"] = types.SimpleNamespace(Dataset=Dataset)
    try:
        spec = importlib.util.spec_from_file_location("skyrl_prepare_dataset", UPSTREAM / "integrations" / "fleet" / "prepare_dataset.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with contextlib.redirect_stdout(io.StringIO()):
            module.prepare_fleet_dataset(str(path), str(path.parent / "out"))
    finally:
        if saved is None:
            sys.modules.pop("datasets", None)
        else:
            sys.modules["datasets"] = saved
    return captured


@needs_upstream
def test_fleet_split_matches_the_upstream_script_on_its_sample():
    ours = fleet_split(load_tasks(SAMPLE))
    theirs = upstream_split(SAMPLE)
    assert {t.task_key for t in ours.train} == theirs["train"] and len(ours.train) == 15
    assert {t.task_key for t in ours.eval} == theirs["validation"] and len(ours.eval) == 25


@needs_upstream
def test_fleet_split_matches_the_upstream_script_on_every_rule(tmp_path):
    """Five envs of 72-96 tasks (past the 60 eval prompts: the round-robin), a small env (all to train), an
    excluded env, repeated keys and Fleet's skipped keys, as one Fleet-style export."""
    records = [{**{k: v for k, v in t.model_dump(exclude_none=True).items() if k != "modality"}, "task_modality": "tool_use"}
               for t in load_task_files(shipped_task_files())]
    small = [{**records[0], "task_key": f"small-{i}", "env_key": "small"} for i in range(12)]
    dropbox = [{**records[0], "task_key": f"box-{i}", "env_key": "dropbox"} for i in range(9)]
    skipped = [{**records[1], "task_key": key, "env_key": "zillow"} for key in sorted(skipped_task_keys())[:3]]
    every = records + small + dropbox + skipped + records[:4]  # the last four repeat keys
    path = _write(tmp_path, "fleet_export.json", every)
    theirs = upstream_split(path)
    # ours reads the same file; our loader refuses repeated keys, so the rule is checked on the records as they are
    from toolenvs.task import parse_task

    ours = fleet_split([parse_task(r, f"{path}[{i}]") for i, r in enumerate(every)])
    assert {t.task_key for t in ours.train} == theirs["train"]
    assert {t.task_key for t in ours.eval} == theirs["validation"]
    assert len(ours.eval) == 60 and not any(t.env_key in ("dropbox", "small") for t in ours.eval)
