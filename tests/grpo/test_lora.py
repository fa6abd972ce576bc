"""LoRA (``model.lora``) on the tiny model: only the adapter trains, the reference is the base with the
adapter off, the sampler samples the adapted policy, checkpoints hold the adapter alone and resume
exactly, and what is not supported yet is refused by name."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from configkit.base import ConfigError
from grpo.batching import collate
from grpo.build import build_models
from grpo.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from grpo.config import LoraConfig, ModelConfig, TrainerConfig
from grpo.data import TaskSampler
from grpo.distributed import Ranks
from grpo.lora import AdapterOff, trainable_parameters, with_adapter
from grpo.policy import load_policy, token_logprobs
from grpo.rollout import SamplingParams
from grpo.update import UpdateSettings, policy_update
from grpo.warmstart import reference_conversation, supervised_example
from tests.conftest import TEST_MODEL

SMALL_LORA = {"rank": 2, "alpha": 4.0}
SETTINGS = UpdateSettings(clip_low=0.2, clip_high=0.2, kl_coef=0.05, mini_batches=2, max_grad_norm=1.0, temperature=1.0)


def _cfg(**lora) -> TrainerConfig:
    return TrainerConfig.model_validate({"model": {**TEST_MODEL, "lora": {**SMALL_LORA, **lora}}, "optim": {"lr": 1e-2}})


def _batch(chat, tasks, advantages):
    examples = [supervised_example(chat, reference_conversation(t)) for t in tasks]
    return collate([e[0] for e in examples], [e[1] for e in examples], advantages, chat.pad_id)


def _logprobs(model, batch) -> torch.Tensor:
    with torch.no_grad():
        return token_logprobs(model, batch.input_ids, batch.attention_mask)[0] * batch.loss_mask


def _base_weights(policy) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" not in n}


def _adapter_weights(policy) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" in n}


def test_lora_is_off_by_default_and_its_keys_are_bounded():
    assert ModelConfig().lora is None and TrainerConfig().model.lora is None
    default = LoraConfig()
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} == set(default.target_modules)
    for bad in ({"rank": 0}, {"alpha": 0}, {"dropout": 1.0}, {"dropout": -0.1}, {"target_modules": []}, {"ranks": 4}):
        with pytest.raises(ValidationError):
            LoraConfig.model_validate(bad)


def test_vllm_sampler_with_lora_is_refused_by_name():
    with pytest.raises(ValidationError, match="model.lora with rollout.backend 'vllm' is not supported yet.*set rollout.backend: hf"):
        TrainerConfig.model_validate({"model": {"lora": {}}, "rollout": {"backend": "vllm"}})


def test_several_workers_with_lora_are_refused_by_name(tasks):
    with pytest.raises(ConfigError, match=r"trainer.model.lora with 2 workers \(resources.workers_per_trial\): LoRA trials run on one worker"):
        build_models(_cfg(), tasks, Ranks(rank=0, world=2))


def test_several_workers_with_micro_batches_by_tokens_are_refused_by_name(tasks):
    cfg = TrainerConfig.model_validate({"model": {"micro_batch_tokens": 4096}})
    with pytest.raises(ConfigError, match=r"trainer.model.micro_batch_tokens = 4096 with 2 workers .*use model.micro_batch_size, or one worker"):
        build_models(cfg, tasks, Ranks(rank=0, world=2))


def test_default_targets_exist_in_the_tiny_model(tiny_base):
    policy = with_adapter(load_policy(tiny_base), LoraConfig(), seed=0)
    adapted = {n.split(".")[-4] for n, _ in policy.named_parameters() if ".lora_A." in n}  # ...q_proj.lora_A.default.weight
    assert adapted == set(LoraConfig().target_modules)


def test_only_the_adapter_trains_and_the_reference_is_the_same_module(tiny_base, tasks):
    models = build_models(_cfg(), tasks)
    trainable = {n for n, p in models.policy.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    assert {id(p) for p in trainable_parameters(models.policy)} == {id(p) for g in models.optimizer.param_groups for p in g["params"]}
    assert isinstance(models.reference, AdapterOff) and models.reference.policy is models.policy  # no second copy of the base
    assert models.generator.model is models.policy and not models.generator.needs_weight_sync


def test_reference_is_the_base_and_an_update_moves_only_the_adapter(tiny_base, chat, tasks):
    models = build_models(_cfg(), tasks)
    base = load_policy(tiny_base, trainable=False)
    batch = _batch(chat, tasks[:4], [1.0, -1.0, 1.0, -1.0])
    want = _logprobs(base, batch)
    assert torch.equal(_logprobs(models.reference, batch), want)
    assert torch.equal(_logprobs(models.policy, batch), want)  # B starts at zero: the adapted policy starts as the base
    base_before, adapter_before = _base_weights(models.policy), _adapter_weights(models.policy)

    stats = policy_update(models.policy, models.reference, models.optimizer, batch, SETTINGS, torch.Generator().manual_seed(0))

    assert all(torch.equal(base_before[n], p) for n, p in _base_weights(models.policy).items())
    assert all(not torch.equal(adapter_before[n], p) for n, p in _adapter_weights(models.policy).items() if ".lora_B." in n)
    assert torch.equal(_logprobs(models.reference, batch), want)  # the reference is still the base
    assert not torch.allclose(_logprobs(models.policy, batch), want, atol=1e-4)
    assert stats["policy/kl"] > 0


def test_the_sampler_samples_the_adapted_policy(tiny_base, chat, tasks):
    models = build_models(_cfg(), tasks)
    batch = _batch(chat, tasks[:4], [1.0, -1.0, 1.0, -1.0])
    policy_update(models.policy, models.reference, models.optimizer, batch, SETTINGS, torch.Generator().manual_seed(0))
    prompt = batch.input_ids[0][batch.attention_mask[0].bool()].tolist()[:12]
    torch.manual_seed(1)
    completion = models.generator.generate([prompt], SamplingParams(max_new_tokens=8))[0]
    ids = torch.tensor([prompt + completion.token_ids])
    mask = torch.ones_like(ids)
    scored = {
        name: token_logprobs(model, ids, mask)[0][0, len(prompt) - 1 :].detach()
        for name, model in (("policy", models.policy), ("reference", models.reference))
    }
    sampled = torch.tensor(completion.logprobs)
    assert torch.allclose(sampled, scored["policy"], atol=1e-4)
    assert not torch.allclose(sampled, scored["reference"], atol=1e-4)


def _stored_numbers(checkpoint) -> int:
    """Tensor elements in a checkpoint's DCP files (model and optimizer state)."""
    import torch.distributed.checkpoint as dcp

    saved = dcp.FileSystemReader(str(checkpoint / "dcp")).read_metadata().state_dict_metadata
    return sum(m.size.numel() for m in saved.values() if hasattr(m, "size"))


def _bytes(checkpoint) -> int:
    return sum(f.stat().st_size for f in (checkpoint / "dcp").iterdir())


def test_checkpoint_holds_the_adapter_alone_and_resume_is_exact(tiny_base, chat, tasks, tmp_path):
    """Three updates straight, against one update, a checkpoint, a fresh build (another adapter init) and two more."""
    import torch.distributed.checkpoint as dcp

    batches = [_batch(chat, tasks[i : i + 2], [1.0, -1.0]) for i in (0, 2, 4)]
    sampler = TaskSampler(tasks, seed=0)

    def build(seed: int):
        policy = with_adapter(load_policy(tiny_base), LoraConfig(**SMALL_LORA), seed=seed)
        return policy, AdapterOff(policy), torch.optim.AdamW(trainable_parameters(policy), lr=1e-2)

    policy, reference, optimizer = build(0)
    shuffle = torch.Generator().manual_seed(3)
    straight = [policy_update(policy, reference, optimizer, b, SETTINGS, shuffle)["policy/loss"] for b in batches]
    straight_adapter = _adapter_weights(policy)

    policy, reference, optimizer = build(0)
    shuffle = torch.Generator().manual_seed(3)
    first = policy_update(policy, reference, optimizer, batches[0], SETTINGS, shuffle)["policy/loss"]
    path = save_checkpoint(tmp_path / "lora", TrainerState(1, sampler.state()), policy, optimizer, shuffle, keep_last=2)
    full = load_policy(tiny_base)  # a full fine-tuning checkpoint after one step, to compare with
    full_optimizer = torch.optim.AdamW(full.parameters())
    full(input_ids=batches[0].input_ids[:1]).logits.sum().backward()
    full_optimizer.step()
    full_path = save_checkpoint(tmp_path / "full", TrainerState(1, sampler.state()), full, full_optimizer, shuffle, keep_last=2)

    saved = dcp.FileSystemReader(str(path / "dcp")).read_metadata().state_dict_metadata
    model_keys = [k for k in saved if k.startswith("model.")]
    assert model_keys and all(".lora_A." in k or ".lora_B." in k for k in model_keys)  # no base weight, tied head included
    assert any(k.startswith("optim.state.") and "lora_" in k for k in saved)
    assert _stored_numbers(path) < 0.1 * _stored_numbers(full_path)
    assert _bytes(path) < 0.5 * _bytes(full_path)  # on this 32k-parameter model DCP's per-tensor overhead is most of the adapter's files

    policy, reference, optimizer = build(7)  # another init: the checkpoint must replace it
    shuffle = torch.Generator()
    assert load_checkpoint(path, policy, optimizer, shuffle).step == 1
    resumed = [policy_update(policy, reference, optimizer, b, SETTINGS, shuffle)["policy/loss"] for b in batches[1:]]
    assert [first, *resumed] == straight
    assert all(torch.equal(straight_adapter[n], p) for n, p in _adapter_weights(policy).items())


def test_a_lora_trial_resumed_from_its_checkpoint_matches_an_uninterrupted_one(tmp_path):
    """The whole trainer: rollouts from the adapted policy, KL to the adapter-off reference, a checkpoint
    after step 1, and a resumed trial whose steps 2 and 3 report what the straight trial's did."""
    from grpo.reporting import ListReporter
    from grpo.trainer import train

    base = {
        "model": {**TEST_MODEL, "lora": SMALL_LORA},
        "total_steps": 3,
        "torch_threads": 1,
        "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2, "max_generate_length": 24},
        "optim": {"lr": 1e-2},
        "algorithm": {"kl_coef": 0.05},
    }
    straight, resumed = ListReporter(), ListReporter()
    train(TrainerConfig.model_validate({**base, "checkpoint": {"interval": 1, "keep_last": 3, "dir": str(tmp_path / "a")}}), straight)
    resume_from = str(tmp_path / "a" / "global_step_1")
    train(TrainerConfig.model_validate({**base, "resume_from": resume_from, "checkpoint": {"dir": str(tmp_path / "b")}}), resumed)
    assert [s for s, _ in resumed.reports] == [2, 3]
    for (_, want), (_, got) in zip(straight.reports[1:], resumed.reports):
        for key in ("rollout/response_tokens", "policy/loss", "policy/kl", "policy/grad_norm"):
            assert got[key] == want[key], key
    assert straight.reports[-1][1]["policy/kl"] != 0.0  # the adapter moved the policy away from the reference
