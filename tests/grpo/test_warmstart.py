"""The per-env warm-start settings (``model.warmstart_envs``): each env's weight, generated task sets and
give-up share, worked by hand; unset (or set to the defaults), every recipe keeps its key and its draws."""

from __future__ import annotations

import pytest
import torch

from grpo import warmstart
from grpo.config import ModelConfig, WarmstartEnvConfig
from grpo.warmstart import Conversation, env_setting, warmstart_env_problems, with_env_give_ups, with_give_ups
from toolenvs.local import generated_tasks
from toolenvs.protocol import DONE

HOTEL, OUTLOOK = generated_tasks("hotel", 1)[:4], generated_tasks("outlook", 1)[:2]


def _model(**envs) -> ModelConfig:
    return ModelConfig(warmstart_steps=10, warmstart_augment=2, warmstart_give_up=0.4,
                       warmstart_envs={k: WarmstartEnvConfig(**v) for k, v in envs.items()})


def test_unset_or_default_entries_keep_the_recipe_s_key_and_set_ones_change_it():
    tasks = HOTEL + OUTLOOK
    plain = warmstart.cache_key(_model(), tasks)
    assert warmstart.cache_key(_model(hotel={}), tasks) == plain  # an entry equal to the defaults changes nothing
    assert warmstart.cache_key(_model(hotel={"weight": 1.0, "augment": None}), tasks) == plain
    assert warmstart.cache_key(_model(outlook={"weight": 0}), tasks) != plain
    assert warmstart.cache_key(_model(outlook={"give_up": 0.4}), tasks) != plain  # said explicitly: part of the recipe


def test_an_env_s_own_setting_wins_and_the_model_wide_one_fills_the_rest():
    cfg = _model(outlook={"weight": 3.0, "give_up": 0.0})
    assert env_setting(cfg, "outlook") == (3.0, 2, 0.0)  # augment: the model-wide 2
    assert env_setting(cfg, "hotel") == (1.0, 2, 0.4)
    tasks = warmstart.warmstart_tasks(_model(outlook={"augment": 0}), HOTEL + OUTLOOK)
    # hotel: its 4 + 2 generated sets; outlook: its 2 and none generated
    assert sum(t.env_key == "outlook" for t in tasks) == 2
    assert sum(t.env_key == "hotel" for t in tasks) == 4 + len(generated_tasks("hotel", 1)) + len(generated_tasks("hotel", 2))


def test_give_ups_env_by_env():
    conversations = [Conversation([{"role": "user", "content": str(i)}], [("<tool_call>x</tool_call>", "r"), (DONE, None)]) for i in range(6)]
    envs = ["a", "a", "a", "a", "b", "b"]
    mixed = with_env_give_ups(conversations, envs, {"a": 0.5, "b": 0.0}, seed=0)
    gave_up = [i for i, c in enumerate(mixed) if c.turns == [(DONE, None)]]
    assert len(gave_up) == 2 and all(envs[i] == "a" for i in gave_up)  # round(0.5 * 4) of a's, none of b's
    assert with_env_give_ups(conversations, envs, {"a": 0.5, "b": 0.0}, seed=0) == mixed  # seeded
    # unset per-env settings: the model-wide draw, exactly as before them
    assert warmstart._give_up_mix(_model(), conversations, envs, 0) == with_give_ups(conversations, 0.4, 0)
    assert warmstart._give_up_mix(_model(a={"give_up": 0.0}, b={"give_up": 0.0}), conversations, envs, 0) is None


def test_problems_name_the_key_and_the_envs():
    tasks = HOTEL + OUTLOOK
    assert warmstart_env_problems(_model(zillow={"weight": 2}), tasks) == [
        "key 'model.warmstart_envs.zillow': no training task has env_key 'zillow' (they have: hotel, outlook)"]
    assert "every env's weight is 0 (hotel, outlook)" in warmstart_env_problems(_model(hotel={"weight": 0}, outlook={"weight": 0}), tasks)[0]
    assert warmstart_env_problems(_model(hotel={"weight": 0}), tasks) == []
    with pytest.raises(ValueError):
        WarmstartEnvConfig(give_up=1.0)


class _Recorder(torch.nn.Module):
    """A model that remembers the first token of every sequence it trains on."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(8, 8)
        self.seen: list[int] = []

    def forward(self, input_ids, attention_mask):
        self.seen += input_ids[:, 0].tolist()
        return type("Out", (), {"logits": self.embed(input_ids)})()


def test_weights_decide_which_conversations_are_drawn():
    examples = [([i, 1, 2], [0, 1, 1]) for i in (3, 4, 5)]
    model = _Recorder()
    warmstart.supervised_train(model, examples, pad_id=0, steps=20, lr=1e-3, batch_size=4, seed=0, weights=[0.0, 1.0, 3.0])
    assert 3 not in model.seen and model.seen.count(5) > model.seen.count(4) > 0  # weight 0: never; 3: about thrice 1's
    uniform = _Recorder()
    warmstart.supervised_train(uniform, examples, pad_id=0, steps=20, lr=1e-3, batch_size=4, seed=0)
    assert set(uniform.seen) == {3, 4, 5}


def test_held_out_coverage_adds_that_env_s_held_out_tasks_only():
    from pathlib import Path

    from grpo.config import TrainerConfig
    from grpo.data import base_tasks, trial_tasks

    data = Path(__file__).resolve().parents[2] / "toolenvs" / "data"
    cfg = TrainerConfig(env={"tasks_path": [str(data / "hotel.jsonl"), str(data / "outlook.jsonl")]}, eval={"interval": 5, "max_tasks_per_env": 5})
    train, held_out = trial_tasks(cfg)
    assert base_tasks(cfg, train) == train  # unset: the training tasks alone (the shipped bases' recipes)
    seen = cfg.model_copy(update={"model": cfg.model.model_copy(update={"warmstart_envs": {"outlook": WarmstartEnvConfig(held_out=True)}})})
    covered = base_tasks(seen, train)
    assert covered[: len(train)] == train
    assert [t.task_key for t in covered[len(train):]] == [t.task_key for t in held_out if t.env_key == "outlook"] and len(covered) == len(train) + 5
    assert warmstart.cache_key(seen.model, covered) != warmstart.cache_key(cfg.model, train)
