from __future__ import annotations

import pytest

from grpo.data import TaskSampler, split_tasks


def test_split_is_deterministic_disjoint_and_capped(tasks):
    train, held = split_tasks(tasks, 0.25, seed=3)
    assert len(held) == 18 and len(train) == len(tasks) - 18
    assert not {t.task_key for t in train} & {t.task_key for t in held}
    assert [t.task_key for t in split_tasks(tasks, 0.25, seed=3)[1]] == [t.task_key for t in held]
    assert [t.task_key for t in split_tasks(tasks, 0.25, seed=4)[1]] != [t.task_key for t in held]
    assert len(split_tasks(tasks, 0.25, seed=3, max_eval=5)[1]) == 5
    with pytest.raises(ValueError, match="leaves none to train on"):
        split_tasks(tasks[:2], 0.9, seed=0)


def test_sampler_covers_every_task_each_epoch(tasks):
    sampler = TaskSampler(tasks[:10], seed=1)
    first, second = sampler.next_batch(10), sampler.next_batch(10)
    assert sorted(t.task_key for t in first) == sorted(t.task_key for t in tasks[:10]) == sorted(t.task_key for t in second)
    assert [t.task_key for t in TaskSampler(tasks[:10], seed=1).next_batch(4)] == [t.task_key for t in first[:4]]
