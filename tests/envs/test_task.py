from __future__ import annotations

import json

import pytest

from envs.task import load_tasks
from grpo.configbase import ConfigError

GOOD = {"task_key": "t1", "prompt": "Book it.", "env_key": "hotel", "verifier": {"type": "booking_made"}}


def _write(tmp_path, records):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def test_loads_good_records(tmp_path):
    assert load_tasks(_write(tmp_path, [GOOD]))[0].task_key == "t1"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("{not json", "tasks.jsonl:2: not valid JSON"),
        ({**GOOD, "task_key": "t2", "colour": "red"}, "tasks.jsonl:2: unknown key 'colour'"),
        ({k: v for k, v in GOOD.items() if k != "prompt"} | {"task_key": "t2"}, "tasks.jsonl:2: key 'prompt' is required"),
        (GOOD, "tasks.jsonl:2: key 'task_key' = 't1' appears twice"),
        ({**GOOD, "task_key": "t2", "modality": "vision"}, "key 'modality' = 'vision'"),
    ],
)
def test_bad_records_name_file_line_and_key(tmp_path, record, message):
    with pytest.raises(ConfigError, match=message.replace("'", ".").replace("(", r"\(")):
        load_tasks(_write(tmp_path, [GOOD, record]))
