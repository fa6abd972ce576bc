"""The building room: what a trial trains with, made from its config once (the step loop is ``grpo.trainer``).

``build_models``: the chat format, the policy and its frozen reference (FSDP2-wrapped when there are
several ranks or a GPU; with ``model.lora`` the policy carries a peft adapter and the reference is that
policy with the adapter off, ``grpo.lora``), the optimizer and the sampler (the policy itself with HF on one CPU process, an
unsharded copy with HF on several ranks, or a vLLM engine). ``open_environments``: the environment
backend the config names (``toolenvs.backend``), for the trial's env_keys. ``sweep forecast`` builds from here
too, without the loop. Leaves out: stepping, evaluating and checkpointing (``grpo.trainer``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from configkit import environ
from grpo.chat import ChatFormat
from grpo.combinations import refuse, worker_clashes
from grpo.config import TrainerConfig
from grpo.data import base_tasks
from grpo.distributed import ONE_PROCESS, Ranks, barrier, device, on_gpu, parallelize
from grpo.lora import AdapterOff, base_of, trainable_parameters, with_adapter
from grpo.policy import load_policy
from grpo.rollout import Generator
from grpo.rollout.hf import HFGenerator
from grpo.tiny import load_tiny_tokenizer
from grpo.warmstart import base_policy_path
from toolenvs.seam import EnvBackend
from toolenvs.task import Task


@dataclass
class Models:
    """What a trial trains with: chat format, policy, frozen reference (None when kl_coef is 0), optimizer, sampler."""

    chat: ChatFormat
    policy: torch.nn.Module
    reference: torch.nn.Module | AdapterOff | None  # AdapterOff: the LoRA policy with its adapter switched off
    optimizer: torch.optim.Optimizer
    generator: Generator
    ranks: Ranks = ONE_PROCESS


def build_models(cfg: TrainerConfig, tasks: Sequence[Task], ranks: Ranks = ONE_PROCESS) -> Models:
    """Policy and reference, FSDP2-wrapped when there are several ranks or a GPU, an AdamW on the policy,
    and the generator that samples from it (refreshed after every update when it is not the policy itself)."""
    refuse(worker_clashes(cfg, ranks.world))  # LoRA on several ranks is unverified, among others
    tokenizer, load, model_dir = policy_source(cfg, tasks, ranks)
    chat = ChatFormat(tokenizer)
    m = cfg.model
    bf16 = on_gpu() and m.dtype == "bfloat16"
    if m.lora is None:
        policy = parallelize(load(True), ranks, bf16=bf16, activation_checkpointing=m.activation_checkpointing, cpu_offload=m.cpu_offload)
        reference = parallelize(load(False), ranks, bf16=bf16, cpu_offload=m.cpu_offload) if cfg.algorithm.kl_coef > 0 else None
    else:
        policy, reference = lora_policy(cfg, load, ranks, bf16)
    optimizer = torch.optim.AdamW(trainable_parameters(policy), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
    return Models(chat, policy, reference, optimizer, make_generator(cfg, chat, model_dir, policy, load, ranks), ranks)


def lora_policy(cfg: TrainerConfig, load, ranks: Ranks, bf16: bool):
    """The policy with a LoRA adapter (``model.lora``) and its reference, the same module with the adapter
    off (None when kl_coef is 0): no second copy of the base. The adapter goes on before FSDP2, which
    then wraps the base's layers, adapters inside (the one-GPU path; several ranks are refused, ``grpo.combinations``)."""
    m = cfg.model
    policy = with_adapter(load(True), m.lora, cfg.seed)
    parallelize(base_of(policy), ranks, bf16=bf16, activation_checkpointing=m.activation_checkpointing, cpu_offload=m.cpu_offload)
    return policy, AdapterOff(policy) if cfg.algorithm.kl_coef > 0 else None


def make_generator(cfg: TrainerConfig, chat: ChatFormat, model_dir: str, policy, load, ranks: Ranks) -> Generator:
    """The rollout backend the config names, on this rank's device."""
    streams = cfg.rollout.turns == "per_episode"
    if cfg.rollout.backend == "vllm":
        from grpo.rollout.vllm import VLLMGenerator, engine_settings
        from grpo.rollout.vllm_stream import VLLMStreamingGenerator

        local_rank = int(environ.LOCAL_RANK.get("0"))
        engine = VLLMStreamingGenerator if streams else VLLMGenerator  # one engine holding every live request, or a batch per turn
        return engine(engine_settings(cfg, model_dir, ranks.rank), chat.end_id, local_rank)  # starts from model_dir's weights
    if not ranks.sharded:
        return HFGenerator(policy, stop_id=chat.end_id, pad_id=chat.pad_id, streams=streams)
    sampler = load(False).to(device())
    return HFGenerator(sampler, stop_id=chat.end_id, pad_id=chat.pad_id, needs_weight_sync=True, streams=streams)


def policy_source(cfg: TrainerConfig, tasks: Sequence[Task], ranks: Ranks):
    """The tokenizer, a loader ``trainable -> model`` and the model's directory: a pretrained HF model
    (``model.name_or_path``) or the tiny warm-started base policy (rank 0 builds it once; the others then
    find it cached)."""
    if cfg.model.name_or_path:
        from grpo.pretrained import load_model, load_pretrained_tokenizer

        return load_pretrained_tokenizer(cfg.model), lambda trainable: load_model(cfg.model, trainable), cfg.model.name_or_path
    seen = base_tasks(cfg, tasks)
    found = base_policy_path(cfg.model, seen) if ranks.main else None
    barrier(ranks)
    base = str(found or base_policy_path(cfg.model, seen, announce=False))
    return load_tiny_tokenizer(base), lambda trainable: load_policy(base, trainable), base


def open_environments(cfg: TrainerConfig, tasks: Sequence[Task]) -> EnvBackend:
    """The environment backend ``env.backend`` names, for the env_keys of ``tasks`` (enter it to start it)."""
    return cfg.env.backend.open(sorted({t.env_key for t in tasks}))


def release_cached_memory() -> None:
    """On a GPU, give torch's cached blocks back: the update's peak stays reserved by its allocator, and a
    vLLM engine waking in its own process needs that memory."""
    if on_gpu():
        import gc

        gc.collect()
        torch.cuda.empty_cache()
