"""``python -m sweep data split``: deterministic by seed, per-env ratio and cap, held-out envs, filters."""

from __future__ import annotations

import json

import pytest

from configkit.base import ConfigError
from sweep.__main__ import main
from toolenvs.split import SplitSpec, split_tasks, table_rows
from toolenvs.task import Task, load_tasks

SIZES = {"hotel": 20, "mail": 30, "repo": 10}


def _tasks() -> list[Task]:
    return [
        Task(task_key=f"{env}-{i:02d}", prompt=f"Do {i}.", env_key=env, verifier={"type": "x"})
        for env, n in SIZES.items() for i in range(n)
    ]


def _keys(tasks: list[Task]) -> list[str]:
    return [t.task_key for t in tasks]


def test_ratio_per_env_and_deterministic_by_seed():
    tasks = _tasks()
    split = split_tasks(tasks, SplitSpec(eval_ratio=0.2, seed=3))
    assert {e: n for e, _, n, _, _ in table_rows(split, ())} == {"hotel": 4, "mail": 6, "repo": 2, "total": 12}
    assert sorted(_keys(split.train) + _keys(split.eval)) == sorted(_keys(tasks)) and not split.dropped
    again = split_tasks(list(reversed(tasks)), SplitSpec(eval_ratio=0.2, seed=3))
    assert set(_keys(again.eval)) == set(_keys(split.eval))  # the file order does not matter, the seed does
    other = split_tasks(tasks, SplitSpec(eval_ratio=0.2, seed=4))
    assert set(_keys(other.eval)) != set(_keys(split.eval))
    assert _keys(split.train) == [k for k in _keys(tasks) if k in set(_keys(split.train))]  # input order kept


def test_an_env_does_not_reshuffle_the_others():
    tasks = _tasks()
    with_repo = split_tasks(tasks, SplitSpec(seed=1))
    without = split_tasks([t for t in tasks if t.env_key != "repo"], SplitSpec(seed=1))
    assert [k for k in _keys(with_repo.eval) if not k.startswith("repo")] == _keys(without.eval)


def test_cap_held_out_env_filter_and_max_tasks():
    tasks = _tasks()
    split = split_tasks(tasks, SplitSpec(eval_ratio=0.5, eval_cap_per_env=5, held_out_envs=("mail",), seed=0))
    rows = {e: (tr, ev, dr, note) for e, tr, ev, dr, note in table_rows(split, ("mail",))}
    assert rows["hotel"] == (15, 5, 0, "") and rows["repo"] == (5, 5, 0, "")
    assert rows["mail"] == (0, 5, 25, "held out")  # never trained on; eval capped, the rest dropped
    only = split_tasks(tasks, SplitSpec(env_keys=("hotel", "repo"), max_tasks=10, seed=0))
    assert len(only.train) + len(only.eval) == 10 and {t.env_key for t in only.train + only.eval} <= {"hotel", "repo"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SplitSpec(eval_ratio=1.0), "--eval-ratio = 1.0: must be in [0, 1)"),
        (SplitSpec(held_out_envs=("zillow",)), "--held-out-env zillow: no such env_key in the tasks (present: hotel, mail, repo)"),
        (SplitSpec(env_keys=("hotel",), held_out_envs=("hotel",)), "no training tasks left"),
        (SplitSpec(eval_cap_per_env=0), "--eval-cap-per-env = 0: must be at least 1"),
    ],
)
def test_bad_options_say_what_is_allowed(spec, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        split_tasks(_tasks(), spec)


def test_cli_writes_loadable_files_and_prints_the_table(tmp_path, capsys):
    source = tmp_path / "tasks.jsonl"
    source.write_text("".join(json.dumps(t.model_dump(exclude_none=True)) + "\n" for t in _tasks()))
    argv = ["data", "split", str(source), "--eval-ratio", "0.2", "--eval-cap-per-env", "3", "--held-out-env", "repo", "--seed", "7"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "held out" in out and "hotel" in out and "wrote 44 tasks" in out
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    for name in ("train.jsonl", "eval.jsonl"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    train, eval_ = load_tasks(tmp_path / "a" / "train.jsonl"), load_tasks(tmp_path / "a" / "eval.jsonl")
    assert len(train) == 44 and len(eval_) == 9 and not {t.env_key for t in train} & {"repo"}
    assert main(["data", "split", str(source), "--held-out-env", "nope", "--out", str(tmp_path / "c")]) == 2
