"""A LoRA adapter served by a vLLM engine (``model.lora`` with ``rollout.backend: vllm``), without vLLM.

After each update the trained adapter is written as a peft folder (``adapter_config.json`` and
``adapter_model.safetensors``, the format vLLM's LoRA loader reads) under a fresh id and a name unique to
the version: vLLM caches an adapter by its id and keys its prefix cache by its name, so neither can serve
the old weights; the old id is dropped. The base never changes, so the engine loads it once. One engine
can hold several named adapters (a pack's members): each name has its own versions. ``grpo.rollout.vllm``
asks the engine; this module only writes and counts. Imports no vLLM.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

ENGINE_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)  # the max_lora_rank values vLLM's LoRAConfig accepts


def engine_lora_rank(rank: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds an adapter of ``rank``."""
    for allowed in ENGINE_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"model.lora.rank {rank} is above vLLM's largest max_lora_rank ({ENGINE_LORA_RANKS[-1]}); lower it, or sample with rollout.backend: hf")


@dataclass(frozen=True)
class AdapterVersion:
    """One written adapter: its name (the trial's adapter), vLLM's ``lora_int_id`` for it (unique, > 0) and its folder."""

    name: str
    id: int
    path: str

    @property
    def served_name(self) -> str:
        """vLLM's ``lora_name`` for this version: unique per version (vLLM keys cached prefixes by it)."""
        return f"{self.name}-{self.id}"


def adapter_tensors(policy: torch.nn.Module, name: str) -> dict[str, torch.Tensor]:
    """Adapter ``name``'s weights under the names peft saves them by (adapter name left out), whole and on CPU."""
    from peft import get_peft_model_state_dict

    state = get_peft_model_state_dict(policy, adapter_name=name, save_embedding_layers=False)  # "auto" looks the base up (the hub)
    out = {}
    for key, value in state.items():
        value = value.detach()
        value = value.full_tensor() if hasattr(value, "full_tensor") else value  # FSDP2 shards
        out[key] = value.to("cpu").contiguous()
    return out


def write_adapter(policy: torch.nn.Module, name: str, folder: Path) -> Path:
    """Adapter ``name`` of the peft ``policy`` as a peft folder (what ``PeftModel.from_pretrained`` and vLLM read)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=False)
    policy.peft_config[name].save_pretrained(str(folder))
    save_file(adapter_tensors(policy, name), str(folder / "adapter_model.safetensors"))
    return folder


class AdapterShelf:
    """Where one process writes its adapters, and which version of each name is current."""

    def __init__(self, root: Path | None = None):
        self.root = Path(tempfile.mkdtemp(prefix="grpo-adapters-", dir=root))
        self._ids = itertools.count(1)
        self.current: dict[str, AdapterVersion] = {}

    def write(self, policy: torch.nn.Module, name: str) -> AdapterVersion:
        """Adapter ``name`` written as a new version (not yet current: ``commit`` once the engine has it)."""
        number = next(self._ids)
        return AdapterVersion(name, number, str(write_adapter(policy, name, self.root / f"{name}-{number}")))

    def commit(self, version: AdapterVersion) -> AdapterVersion | None:
        """``version`` is its name's current one; returns the one it replaces (to ``retire``), or None."""
        old = self.current.get(version.name)
        self.current[version.name] = version
        return old

    def retire(self, version: AdapterVersion) -> None:
        """Delete a replaced version's folder (once the engine has let it go)."""
        shutil.rmtree(version.path, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.current.clear()
