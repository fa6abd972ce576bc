"""Data-parallel training with FSDP2: the process group, sharding, and the few collectives the trainer needs.

One trainer process per rank (torchrun, ``python -m sweep train --workers N``, or a Ray Train worker).
Each rank runs the episodes of its share of the step's tasks, with a full (unsharded) copy of the policy
as its generator, so ranks never wait on each other during multi-turn rollouts; the update runs on the
FSDP2-sharded policy, whose gradients are averaged across ranks. Losses are normalised by the global
token (or sequence) count, so N ranks give the same update as one process on the combined batch.
Without a process group every function here is the single-process identity: the same code path runs
on a laptop, under Tune with one worker, and on N CPU or GPU ranks.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from configkit import environ


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def sharded(self) -> bool:
        return self.world > 1


ONE_PROCESS = Ranks()


def init_ranks() -> Ranks:
    """Join the process group the launcher describes (``WORLD_SIZE`` > 1), or run as one process.

    On a GPU a single process still gets a (one-rank, NCCL) group, so its policy is FSDP2-wrapped like
    every rank of a bigger trial: bf16 mixed precision and offload come from the same ``parallelize``.
    """
    if dist.is_available() and dist.is_initialized():
        return Ranks(dist.get_rank(), dist.get_world_size())
    world = int(environ.WORLD_SIZE.get("1") or 1)
    if world <= 1:
        if on_gpu():
            device()
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        return Ranks()
    dist.init_process_group("nccl" if on_gpu() else "gloo")
    return Ranks(dist.get_rank(), dist.get_world_size())


def visible_gpus(value: str | None) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES``'s GPUs in order (``"4, 5"`` gives ``["4", "5"]``; empty: none), or None when unset."""
    return None if value is None else [d.strip() for d in value.split(",") if d.strip()]


_PINNED: list[str] | None = None  # the GPU a pack host trains on, its members' trials holding its shares (pin_gpu)


def pin_gpu(gpu: str) -> None:
    """Train this process on GPU ``gpu`` (as ``CUDA_VISIBLE_DEVICES`` names it) though Ray gave it none.

    A pack host is a ``num_gpus=0`` actor: its members' trials hold the GPU's shares (``sweep.trials.packing``),
    so Ray's ids are empty there (``on_gpu()`` would be False) and Ray may have blanked ``CUDA_VISIBLE_DEVICES``.
    Call it first thing in that process, before anything asks ``on_gpu()`` or touches CUDA."""
    global _PINNED
    if on_gpu.cache_info().currsize or torch.cuda.is_initialized():
        raise RuntimeError(f"pin_gpu({gpu!r}) after this process already chose its device: pin first")
    environ.CUDA_VISIBLE_DEVICES.set(gpu)
    _PINNED = [gpu]
    if torch.cuda.is_available() and torch.cuda.device_count() != 1:  # CUDA had read the variable before: the pin did nothing
        raise RuntimeError(f"pin_gpu({gpu!r}): this process sees {torch.cuda.device_count()} GPUs; CUDA started before the pin")


def ray_gpu_ids() -> list[str] | None:
    """The GPUs Ray assigned to this process (or ``pin_gpu`` gave it), or None outside a Ray worker."""
    if _PINNED is not None:
        return list(_PINNED)
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized() or ray.get_runtime_context().worker.mode != ray.WORKER_MODE:
        return None
    return [str(g) for g in ray.get_gpu_ids()]


@functools.cache
def on_gpu() -> bool:
    """Whether this process trains on a GPU: CUDA is there and, inside Ray, Ray gave it one (a
    ``num_gpus=0`` worker on a GPU node sees every GPU but must not take one). Fixed for a process's life."""
    return torch.cuda.is_available() and ray_gpu_ids() != []


def device() -> torch.device:
    if on_gpu():
        local = int(environ.LOCAL_RANK.get("0") or 0)
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def parallelize(
    model: torch.nn.Module, ranks: Ranks, bf16: bool = False, activation_checkpointing: bool = False, cpu_offload: bool = False
) -> torch.nn.Module:
    """Shard a causal LM with FSDP2, in this order: activation checkpointing (per decoder layer), then
    ``fully_shard`` on each decoder layer, then on the root (embeddings, final norm, head).

    On a CPU without a process group the model is returned as it is. On a GPU it is moved there first.
    ``bf16`` keeps float32 parameters and optimizer state but computes in bfloat16 and reduces gradients
    in float32 (the CUDA setting; CPU runs keep float32). ``cpu_offload`` keeps shards, gradients and
    optimizer state in CPU memory (CUDA only).
    """
    if activation_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    gpu = on_gpu()
    if not (ranks.sharded or gpu):
        return model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    if gpu and not cpu_offload:
        model.to(device())
    mesh = init_device_mesh(device().type, (ranks.world,))
    options: dict[str, Any] = {"mesh": mesh}
    if bf16:
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if cpu_offload and gpu:
        options["offload_policy"] = CPUOffloadPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, **options)
    fully_shard(model, **options)
    return model


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a Hugging Face causal LM (``model.model.layers``)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise TypeError(f"{type(model).__name__}: no model.layers to shard; parallelize knows Hugging Face causal LMs")
    return list(layers)


def full_parameters(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Each parameter unsharded, one at a time (every rank must iterate: gathering a shard is a collective).

    What a generator's weight sync consumes: at most one full parameter beyond the shards is alive at once.
    """
    for name, param in model.named_parameters():
        value = param.detach()
        yield name, value.full_tensor() if hasattr(value, "full_tensor") else value


def sum_across(values: torch.Tensor | float, ranks: Ranks) -> torch.Tensor:
    """The sum over ranks of a tensor or number (a float64 tensor; the value itself on one process)."""
    tensor = torch.as_tensor(values, dtype=torch.float64).clone()
    if ranks.sharded:
        if dist.get_backend() == "nccl":
            tensor = tensor.to(device())
        dist.all_reduce(tensor)
    return tensor


def gather_lists(items: list, ranks: Ranks) -> list:
    """Every rank's list, concatenated in rank order, on every rank."""
    if not ranks.sharded:
        return list(items)
    gathered: list[list] = [[] for _ in range(ranks.world)]
    dist.all_gather_object(gathered, items)
    return [item for part in gathered for item in part]


def barrier(ranks: Ranks) -> None:
    if ranks.sharded:
        dist.barrier()


def torchrun(workers: int, args: list[str]) -> int:
    """Run ``python <args>`` as ``workers`` ranks on this machine (torch's own launcher); the exit status."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={workers}", *args]
    return subprocess.run(command, check=False).returncode


def shutdown(ranks: Ranks) -> None:
    if ranks.sharded and dist.is_initialized():
        dist.destroy_process_group()

