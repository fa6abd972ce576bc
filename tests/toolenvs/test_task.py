from __future__ import annotations

import json
import re

import pytest

from configkit.base import ConfigError
from toolenvs.task import load_tasks

GOOD = {"task_key": "t1", "prompt": "Book it.", "env_key": "hotel", "verifier": {"type": "booking_made"}}
CODE = "def verify(final_state):\n    return float(len(final_state['bookings']) == 1)\n"
NO_VERIFIER = {k: v for k, v in GOOD.items() if k != "verifier"} | {"task_key": "t2"}


def _write(tmp_path, records):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def test_loads_good_records(tmp_path):
    assert load_tasks(_write(tmp_path, [GOOD]))[0].task_key == "t1"


def test_full_record_with_verifier_code(tmp_path):
    record = {
        "task_key": "t3", "prompt": "Book H01.", "env_key": "hotel", "env_version": "2",
        "env_variables": {"CURRENT_DATE": "2026-01-01", "LOGGED_IN_USER": "alice"}, "verifier_code": CODE,
        "solution": [{"name": "book_hotel", "arguments": {"hotel_id": "H01", "check_in": "2026-02-01", "nights": 1}}],
    }
    task = load_tasks(_write(tmp_path, [record]))[0]
    assert task.verifier is None and task.verifier_code == CODE and task.modality == "tool_use" and task.env_version == "2"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("{not json", "tasks.jsonl:2: not valid JSON"),
        ({**GOOD, "task_key": "t2", "colour": "red"}, "tasks.jsonl:2 (task 't2'): unknown key 'colour'"),
        ({k: v for k, v in GOOD.items() if k != "prompt"} | {"task_key": "t2"}, "tasks.jsonl:2 (task 't2'): key 'prompt' is required"),
        (GOOD, "tasks.jsonl:2: key 'task_key' = 't1' appears twice"),
        ({**GOOD, "task_key": "t2", "modality": "vision"}, "key 'modality' = 'vision'"),
        ({**GOOD, "task_key": "t2", "verifier_code": CODE}, "tasks.jsonl:2 (task 't2'): give exactly one of 'verifier'"),
        ({k: v for k, v in GOOD.items() if k != "verifier"} | {"task_key": "t2"}, "tasks.jsonl:2 (task 't2'): give exactly one"),
        (NO_VERIFIER | {"verifier_code": "def verify(s):\n  return ("}, "tasks.jsonl:2 (task 't2'): key 'verifier_code' is not valid Python"),
        (NO_VERIFIER | {"verifier_code": "def check(s):\n  return 1.0"}, "must define a top-level function verify"),
        (NO_VERIFIER | {"verifier_code": 42}, "key 'verifier_code' must be a string"),
        ("[1, 2]", "tasks.jsonl:2: a task record must be a JSON object"),
        # JSON keeps the last of a repeated key silently: refused, as in the YAML configs, nested keys dotted
        (json.dumps({**GOOD, "task_key": "t2"})[:-1] + ', "prompt": "Cancel it."}', "tasks.jsonl:2 (task 't2'): key 'prompt' appears twice"),
        (json.dumps({**GOOD, "task_key": "t2", "env_variables": {"CURRENT_DATE": "2026-01-01"}}).replace(
            '{"CURRENT_DATE"', '{"CURRENT_DATE": "2025-01-01", "CURRENT_DATE"'), "key 'env_variables.CURRENT_DATE' appears twice"),
        # a field under Fleet's name and ours with two values: which is meant is not guessed
        ({**GOOD, "task_key": "t2", "key": "t9"}, "(task 't2'): keys 'key' ('t9') and 'task_key' ('t2') are one field"),
        # an env key names the eval's trajectory file ({env_key}.jsonl) and metrics (reward/{env_key}/...)
        ({**GOOD, "task_key": "t2", "env_key": "Booking App/../x"},
         "(task 't2'): key 'env_key' = 'Booking App/../x': an env key is letters, digits, '.', '_' and '-', not '.' or '..'"),
        ({**GOOD, "task_key": "t2", "env_key": "booking:v0.0.74"}, "(a version goes in env_version: the env key is the name before the ':')"),
        ({k: v for k, v in GOOD.items() if k not in ("task_key", "env_key")} | {"key": "t2", "env_id": "../up"}, "key 'env_key' = '../up': an env key is"),
    ],
)
def test_bad_records_name_file_line_and_key(tmp_path, record, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_tasks(_write(tmp_path, [GOOD, record]))


def test_a_field_under_both_names_with_one_value_reads_once(tmp_path):
    task = load_tasks(_write(tmp_path, [{**GOOD, "key": "t1", "env_id": "hotel"}]))[0]
    assert (task.task_key, task.env_key) == ("t1", "hotel")


def test_a_repeated_key_in_a_fleet_array_names_its_index(tmp_path):
    path = tmp_path / "fleet.json"
    path.write_text("[" + json.dumps(GOOD) + ", " + json.dumps({**GOOD, "task_key": "t2"})[:-1] + ', "env_key": "mail"}]')
    with pytest.raises(ConfigError, match=re.escape("fleet.json[1] (task 't2'): key 'env_key' appears twice")):
        load_tasks(path)


@pytest.mark.parametrize(("text", "message"), [
    ("", "no tasks in it"), ("\n\n", "no tasks in it"), ("[]", "no tasks in it"), ('{"tasks": []}', "no tasks in it"),
    ('{"items": [{"prompt": "x"}]}', "one JSON object with none of a task's keys (it has 'items')"),
])
def test_a_file_without_tasks_says_so(tmp_path, text, message):
    """An empty file was read as no tasks, and each command guessed why later ("no training tasks left: lower
    --eval-ratio"); `envs check` checked nothing and exited 0. Now the file is named, with what a task file is."""
    path = tmp_path / "tasks.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {message}")):
        load_tasks(path)
