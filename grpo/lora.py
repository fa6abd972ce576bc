"""LoRA on the policy (``model.lora``), with peft: the adapter, and the reference as the adapter switched off.

``with_adapter`` wraps a loaded causal LM in peft's ``get_peft_model``: the base weights freeze and only
the adapter's A and B matrices train (B starts at zero, so the adapted policy starts as the base).
``AdapterOff`` is the frozen reference without a second model copy: it scores like a model, running the
policy's forward inside ``disable_adapter()``. Checkpoints keep the trainable parameters only
(``grpo.checkpoint``), so a LoRA checkpoint is the adapter and its optimizer state.
``add_adapter`` puts another on the same base (packed trials, ``grpo.pack``). Leaves out: merging the adapter into the base, LoRA on
FSDP2-sharded ranks (refused in ``grpo.combinations``) or with a vLLM sampler (built: the engine serves the
adapter, ``grpo.rollout.adapters``; refused in ``grpo.config`` until it has run on a GPU).
"""

from __future__ import annotations

import warnings

import torch

from grpo.config import LoraConfig


def with_adapter(model: torch.nn.Module, lora: LoraConfig, seed: int, name: str = "default") -> torch.nn.Module:
    """``model`` (changed in place) inside a peft ``PeftModel`` with one adapter, ``name``; only the adapter trains.

    The adapter's A matrices are drawn from their own generator seeded by ``seed`` (the trial's), so the
    start does not depend on what the global RNG did before (building a base policy, or finding it cached)."""
    from peft import get_peft_model

    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.* is deprecated", category=FutureWarning)  # peft reads it
        torch.manual_seed(seed)
        adapted = get_peft_model(model, peft_settings(lora), adapter_name=name)
    adapted.train(model.training)
    return adapted


def add_adapter(policy: torch.nn.Module, name: str, lora: LoraConfig, seed: int) -> None:
    """One more adapter, ``name``, on a ``PeftModel`` (a packed trial's, ``grpo.pack``), drawn as ``with_adapter``
    draws a lone one from the same seed; it trains once ``policy.set_adapter(name)`` makes it the active one."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy.add_adapter(name, peft_settings(lora))


def peft_settings(lora: LoraConfig):
    from peft import LoraConfig as PeftLoraConfig

    return PeftLoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=list(lora.target_modules), bias="none")


def base_of(model: torch.nn.Module) -> torch.nn.Module:
    """The Hugging Face model itself: under a ``PeftModel`` its wrapped base (adapter layers in place), else the model."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """What the optimizer steps: every parameter without LoRA, the adapter's with it (the base is frozen)."""
    return [p for p in model.parameters() if p.requires_grad]


class AdapterOff:
    """The reference policy of a LoRA policy: the same module, called with its adapter disabled.

    Scores like a model (``token_logprobs`` calls it and reads its ``modules()``); holds no weights of
    its own and is never trained or checkpointed."""

    def __init__(self, policy: torch.nn.Module):
        self.policy = policy

    def __call__(self, *args, **kwargs):
        with self.policy.disable_adapter():
            return self.policy(*args, **kwargs)

    def modules(self):
        return self.policy.modules()
