from __future__ import annotations

from pathlib import Path

import pytest

from grpo.data import TaskSampler, held_out_split


def test_split_is_deterministic_disjoint_and_capped(tasks):
    train, held = held_out_split(tasks, 0.25, seed=3)
    assert len(held) == 18 and len(train) == len(tasks) - 18
    assert not {t.task_key for t in train} & {t.task_key for t in held}
    assert [t.task_key for t in held_out_split(tasks, 0.25, seed=3)[1]] == [t.task_key for t in held]
    assert [t.task_key for t in held_out_split(tasks, 0.25, seed=4)[1]] != [t.task_key for t in held]
    assert len(held_out_split(tasks, 0.25, seed=3, max_eval=5)[1]) == 5
    with pytest.raises(ValueError, match="leaves none to train on"):
        held_out_split(tasks[:2], 0.9, seed=0)


def test_sampler_covers_every_task_each_epoch(tasks):
    sampler = TaskSampler(tasks[:10], seed=1)
    first, second = sampler.next_batch(10), sampler.next_batch(10)
    assert sorted(t.task_key for t in first) == sorted(t.task_key for t in tasks[:10]) == sorted(t.task_key for t in second)
    assert [t.task_key for t in TaskSampler(tasks[:10], seed=1).next_batch(4)] == [t.task_key for t in first[:4]]


def test_several_task_files_are_one_task_set_with_unique_keys(tmp_path):
    from configkit.base import ConfigError
    from grpo.config import EnvConfig
    from grpo.data import select_tasks

    data = Path(__file__).resolve().parents[2] / "toolenvs" / "data"
    both = select_tasks(EnvConfig(tasks_path=[str(data / "hotel.jsonl"), str(data / "zillow.jsonl")], env_keys=["zillow"]))
    assert both and {t.env_key for t in both} == {"zillow"}
    with pytest.raises(ConfigError) as caught:  # each unknown name once, each near miss said for its name
        select_tasks(EnvConfig(tasks_path=[str(data / "hotel.jsonl"), str(data / "zillow.jsonl")], env_keys=["hotle", "zilow", "hotle", "nope"]))
    assert "have env_key 'hotle', 'zilow', 'nope'; 'hotle': did you mean 'hotel'? 'zilow': did you mean 'zillow'? theirs: hotel, zillow" in str(caught.value)
    copy = tmp_path / "copy.jsonl"
    copy.write_text((data / "hotel.jsonl").read_text())
    with pytest.raises(ConfigError, match="task_key"):
        select_tasks(EnvConfig(tasks_path=[str(data / "hotel.jsonl"), str(copy)]))


def test_held_out_tasks_from_their_own_file(tmp_path, tasks):
    """eval.tasks_path feeds a split made elsewhere (sweep data split --method fleet): train on all of
    env.tasks_path, hold out that file's tasks; one in both is refused by name."""
    import json

    from grpo.config import TrainerConfig
    from grpo.data import trial_tasks

    train_file, eval_file = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    train_file.write_text("".join(json.dumps(t.model_dump(exclude_none=True)) + "\n" for t in tasks[:50]))
    eval_file.write_text("".join(json.dumps(t.model_dump(exclude_none=True)) + "\n" for t in tasks[50:]))
    cfg = TrainerConfig.model_validate({"env": {"tasks_path": str(train_file)}, "eval": {"interval": 5, "tasks_path": str(eval_file), "max_tasks": 10}})
    train, held = trial_tasks(cfg)
    assert [t.task_key for t in train] == [t.task_key for t in tasks[:50]] and [t.task_key for t in held] == [t.task_key for t in tasks[50:60]]
    overlap = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"tasks_path": str(train_file)})})
    with pytest.raises(ValueError, match="50 task\\(s\\) are also training tasks"):
        trial_tasks(overlap)
