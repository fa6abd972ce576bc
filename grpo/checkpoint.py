"""Save and restore everything a trial needs to continue exactly: policy, optimizer, step, RNG, data position.

Only the parameters that train are saved: all of them, or a LoRA policy's adapter (its frozen base is
rebuilt from the config on resume, so a LoRA checkpoint is the adapter and its optimizer state). A packed
trial's adapter (``grpo.pack``: one named adapter of several on a shared base, the active one) is saved under
peft's lone-adapter name, so its checkpoint resumes alone or in any pack.

Tensors go through torch distributed checkpoint (``get_state_dict`` / ``dcp.save``), which is what the
FSDP2 path will shard; the small rest (step, sampler position, RNG states) is a JSON and a torch file
beside them. A checkpoint is written to ``global_step_{N}.tmp`` and renamed when complete, so a crash
mid-save never leaves a half checkpoint that looks whole. ``keep_last`` prunes older ones.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from grpo.config import CHECKPOINT_STATE_FILE
from grpo.distributed import ONE_PROCESS, Ranks, barrier

STATE_FILE = CHECKPOINT_STATE_FILE
RNG_FILE = "rng.pt"
SAVED_ADAPTER = "default"  # peft's name for a lone adapter; a packed trial's is saved under it


@dataclass
class TrainerState:
    """What is not a tensor of the model or optimizer: the finished step and the task sampler's position."""

    step: int
    sampler: dict[str, Any]
    evals: dict[str, Any] = field(default_factory=dict)  # grpo.evaluation.Evals.state(): the held-out curve so far


@contextmanager
def _single_process_ok() -> Iterator[None]:
    """DCP warns that it saves in one process when no process group exists; that is intended here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def save_checkpoint(
    root: str | Path, state: TrainerState, policy, optimizer, shuffle: torch.Generator, keep_last: int, ranks: Ranks = ONE_PROCESS
) -> Path:
    """Write ``root/global_step_{step}`` atomically; returns its path. Every rank calls it: each writes its
    shards and its own RNG file, rank 0 the rest, the rename and the pruning. On a rank whose node does
    not share rank 0's disk, that rank renames its own part into place (Ray Train then merges the parts)."""
    import torch.distributed.checkpoint as dcp

    root = Path(root)
    final = root / f"global_step_{state.step}"
    tmp = root / f"global_step_{state.step}.tmp"
    if ranks.main:
        shutil.rmtree(tmp, ignore_errors=True)
    barrier(ranks)
    tmp.mkdir(parents=True, exist_ok=True)
    model_sd, optim_sd = trained_state_dict(policy, optimizer)
    with _single_process_ok():
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(tmp / "dcp"))
    rng = {"torch": torch.get_rng_state(), "shuffle": shuffle.get_state(), "python": random.getstate()}
    torch.save(rng, tmp / rng_file(ranks.rank))
    barrier(ranks)
    meta = json.dumps({"step": state.step, "sampler": state.sampler, "world": ranks.world, "evals": state.evals})
    if ranks.main:
        (tmp / STATE_FILE).write_text(meta)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        prune(root, keep_last)
    barrier(ranks)
    if not ranks.main and tmp.is_dir() and not final.exists():  # this node's disk is not rank 0's
        (tmp / STATE_FILE).write_text(meta)
        tmp.rename(final)
    return final


def rng_file(rank: int) -> str:
    return RNG_FILE if rank == 0 else f"rng_{rank}.pt"


def load_checkpoint(path: str | Path, policy, optimizer, shuffle: torch.Generator, ranks: Ranks = ONE_PROCESS) -> TrainerState:
    """Restore policy, optimizer and RNG states in place; returns the step and sampler position."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    path = Path(path)
    if not (path / STATE_FILE).is_file():
        raise FileNotFoundError(f"{path}: not a grpo-sweep checkpoint (no {STATE_FILE})")
    model_sd, optim_sd = trained_state_dict(policy, optimizer)
    loaded = {"model": model_sd, "optim": optim_sd}
    with _single_process_ok():
        dcp.load(loaded, checkpoint_id=str(path / "dcp"))
    model_sd, optim_sd = loaded["model"], loaded["optim"]
    if packed_adapter(policy):
        model_sd, optim_sd = renamed_adapter(model_sd, optim_sd, SAVED_ADAPTER, packed_adapter(policy))
    set_state_dict(policy, optimizer, model_state_dict=model_sd, optim_state_dict=optim_sd, options=trained_only(policy))
    meta = json.loads((path / STATE_FILE).read_text())
    if meta.get("world", 1) != ranks.world:
        raise ValueError(f"{path}: saved by {meta.get('world', 1)} workers, resumed with {ranks.world}; resume with the same number")
    rng = torch.load(path / rng_file(ranks.rank), weights_only=False)
    torch.set_rng_state(rng["torch"])
    shuffle.set_state(rng["shuffle"])
    random.setstate(rng["python"])
    return TrainerState(step=meta["step"], sampler=meta["sampler"], evals=meta.get("evals", {}))


def trained_only(policy):
    """DCP options that leave out frozen parameters (a LoRA policy's base: the adapter alone is saved and
    loaded; the base comes from where it was built). None, DCP's default, when every parameter trains."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    if all(p.requires_grad for p in policy.parameters()):
        return None
    return StateDictOptions(ignore_frozen_params=True, strict=False)


def trained_state_dict(policy, optimizer) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy's and the optimizer's state dicts, without frozen parameters when there are any. The
    key filter backs DCP's ``ignore_frozen_params``, which keeps the second name of a tied weight (a
    frozen embedding shows again as ``lm_head.weight``)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    options = trained_only(policy)
    model_sd, optim_sd = get_state_dict(policy, optimizer, options=options)
    if options is not None:
        frozen = {name for name, p in policy.named_parameters(remove_duplicate=False) if not p.requires_grad}
        model_sd = {key: value for key, value in model_sd.items() if key not in frozen}
    adapter = packed_adapter(policy)
    return renamed_adapter(model_sd, optim_sd, adapter, SAVED_ADAPTER) if adapter else (model_sd, optim_sd)


def packed_adapter(policy) -> str | None:
    """The active adapter's name when it is not peft's lone ``default`` (a packed trial's, ``grpo.pack``), else None."""
    name = getattr(policy, "active_adapter", None)  # a PeftModel's property (a plain HF model has a method of that name)
    return name if isinstance(name, str) and name != SAVED_ADAPTER else None


def renamed_adapter(model_sd: dict[str, Any], optim_sd: dict[str, Any], old: str, new: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy's and optimizer's state dicts with adapter ``old``'s keys (``...lora_A.{old}.weight``) named as
    ``new``'s; the values are the same objects, so loading into the renamed dicts loads into the originals."""
    pattern = re.compile(rf"\.(lora_\w+?)\.{re.escape(old)}\.")

    def name(key: str) -> str:
        return pattern.sub(rf".\1.{new}.", key)

    optim = {**optim_sd, "state": {name(k): v for k, v in optim_sd.get("state", {}).items()}}
    if "param_groups" in optim_sd:
        optim["param_groups"] = [{**g, "params": [name(k) for k in g["params"]]} for g in optim_sd["param_groups"]]
    return {name(k): v for k, v in model_sd.items()}, optim


def prune(root: Path, keep_last: int) -> None:
    """Delete all but the newest ``keep_last`` complete checkpoints under root."""
    done = sorted((p for p in root.glob("global_step_*") if p.is_dir() and not p.name.endswith(".tmp")), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    for old in done[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
