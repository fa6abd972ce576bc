"""How the policy's full weights reach a vLLM engine's workers (``grpo.rollout.vllm.SleepingEngine.load_weights``):
in buckets of at most ``rollout.vllm.weight_bucket_mb``, either written as safetensors to /dev/shm and loaded by the
worker from there (``stage_weights``: the route trials use), or cast on the GPU into flat buffers whose CUDA IPC
handles the worker opens in place (``share_weights``: built, measured by ``bench/weight_sync_gpu.py``). The worker-side
functions (``load_weights_file``, ``load_weights_shared``) run inside the engine's process through its RPC. Imports
no vLLM.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any


def weight_buckets(weights: Iterable[tuple[str, Any]], bucket_bytes: int) -> Iterator[list[tuple[str, Any]]]:
    """Group (name, tensor) pairs into lists of at most ``bucket_bytes`` (a larger tensor travels alone)."""
    bucket: list[tuple[str, Any]] = []
    size = 0
    for name, tensor in weights:
        nbytes = tensor.numel() * tensor.element_size()
        if bucket and size + nbytes > bucket_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += nbytes
    if bucket:
        yield bucket


def staging_dir(bucket_bytes: int) -> Path:
    """Where weight buckets are written: /dev/shm (memory) when it has room for two, else the temp dir
    (a container's default /dev/shm is 64 MB)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > 2 * bucket_bytes:
        return shm
    return Path(tempfile.gettempdir())


def load_weights_file(worker, path: str) -> int:
    """Runs inside the engine's worker process: load a safetensors file into the running model in place."""
    from safetensors.torch import load_file

    tensors = load_file(path, device="cuda")
    worker.model_runner.get_model().load_weights(tensors.items())
    return len(tensors)


def flat_buckets(weights: Iterable[tuple[str, Any]], bucket_bytes: int, dtype, device) -> Iterator[tuple[Any, list[tuple[str, list[int], int]]]]:
    """``weights`` cast to ``dtype`` on ``device``, in buckets of at most ``bucket_bytes`` (``weight_buckets``), each
    one flat buffer with its layout: (name, shape, offset in elements) per tensor, in order."""
    import torch

    cast = ((name, t.detach().to(device=device, dtype=dtype)) for name, t in weights)
    for bucket in weight_buckets(cast, bucket_bytes):
        buffer = torch.empty(sum(t.numel() for _, t in bucket), dtype=dtype, device=device)
        layout, offset = [], 0
        for name, tensor in bucket:
            buffer[offset : offset + tensor.numel()].copy_(tensor.reshape(-1))
            layout.append((name, list(tensor.shape), offset))
            offset += tensor.numel()
        yield buffer, layout


def bucket_views(buffer, layout: list[tuple[str, list[int], int]]) -> list[tuple[str, Any]]:
    """The named tensors of a flat bucket, as views of it (no copy)."""
    return [(name, buffer[offset : offset + math.prod(shape)].view(shape)) for name, shape, offset in layout]


def load_weights_shared(worker, payload: bytes) -> int:
    """Runs inside the engine's worker process: open a bucket the trainer shared by CUDA IPC and load its views in
    place. The handle names the trainer's device ordinal; this process numbers its one GPU from 0, so the ordinal
    is replaced by its own (torch's CUDA reduction: the device is the seventh argument)."""
    import pickle

    import torch

    rebuild, args, layout = pickle.loads(payload)
    args = list(args)
    args[6] = torch.cuda.current_device()
    buffer = rebuild(*args)
    worker.model_runner.get_model().load_weights(bucket_views(buffer, layout))
    torch.cuda.synchronize()  # the trainer frees or reuses the buffer once this call returns
    return len(layout)


def share_weights(weights: Iterable[tuple[str, Any]], bucket_mb: int, dtype: str, call: Callable[[Callable, Any], object]) -> None:
    """The policy's full parameters, cast on the GPU into flat buckets, each sent as a CUDA IPC handle: ``call(fn,
    payload)`` runs ``fn(worker, payload)`` in the engine's workers and returns when they have loaded it."""
    import pickle

    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    for buffer, layout in flat_buckets(weights, bucket_mb * 2**20, _torch_dtype(dtype), "cuda"):
        rebuild, args = reduce_tensor(buffer)
        call(load_weights_shared, pickle.dumps((rebuild, args, layout)))  # bytes: RPC arguments other than plain data arrive changed
        del buffer
    torch.cuda.ipc_collect()  # free the shared blocks the engine has let go of


def stage_weights(weights: Iterable[tuple[str, Any]], bucket_mb: int, dtype: str, send: Callable[[str], object]) -> None:
    """The policy's full parameters, cast to the engine's dtype, written bucket by bucket to one safetensors file
    in shared memory; ``send(path)`` has the engine load each bucket in place before the next overwrites it."""
    from safetensors.torch import save_file

    path = staging_dir(bucket_mb * 2**20) / f"grpo-weights-{os.getpid()}.safetensors"
    cast_to = _torch_dtype(dtype)
    cast = ((name, t.detach().to("cpu", dtype=cast_to).contiguous()) for name, t in weights)
    try:
        for bucket in weight_buckets(cast, bucket_mb * 2**20):
            save_file(dict(bucket), str(path))
            send(str(path))
    finally:
        path.unlink(missing_ok=True)


def _torch_dtype(name: str):
    import torch

    return getattr(torch, name)
