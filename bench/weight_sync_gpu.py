"""Weight sync on a GPU: the policy's full weights into a sleeping vLLM engine, by each route, in one run.

A random-weight Qwen2.5-0.5B-shaped policy (``grpo.shapes``; no hub here) in float32 on the GPU, as a trial
holds it; an engine per route (``grpo.rollout.vllm.EngineSettings.weight_route``), started in eager mode:
- ``shm``: each bucket written as a safetensors file in /dev/shm and loaded by the engine's worker (the route
  trials use);
- ``ipc``: each bucket cast on the GPU into one flat buffer whose CUDA IPC handle goes through the same RPC;
  the worker loads views of it in place (no host copy, no Ray).
Each timed sync is what a trainer step pays (``timing/weight_sync_s``): the engine asleep at level 2, then
``load_weights`` (wake the weights, load every bucket, wake the KV cache, reset the prefix cache); the median
of ``--repeats``. After the timed syncs the policy's weights are moved and synced once more, and the engine's
log-probs of its own samples must match the moved policy's (``gap`` below 0.05), so a route that loads
nothing or the wrong tensors fails here. Issue 36's target: 0.5 s at 0.5B.

    python bench/weight_sync_gpu.py [--shape qwen2.5-0.5b] [--repeats 5] [--bucket-mb 512]

Needs a CUDA GPU and vLLM. Prints one line per timed sync, then one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo.distributed import full_parameters  # noqa: E402
from grpo.rollout import SamplingParams  # noqa: E402
from grpo.shapes import VOCAB_SIZE, write_random_model  # noqa: E402

ROUTES = ("shm", "ipc")
TARGET_S = 0.5


def gap(policy, engine, prompts: list[list[int]]) -> float:
    """Mean |engine log-prob - policy log-prob| over the tokens the engine sampled for ``prompts``."""
    from grpo.policy import token_logprobs

    out = engine.generate(prompts, SamplingParams(max_new_tokens=24, temperature=1.0))
    diffs = []
    for prompt, completion in zip(prompts, out):
        ids = torch.tensor([prompt + completion.token_ids], device="cuda")
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            mine = token_logprobs(policy, ids, torch.ones_like(ids), 1.0, first_target=len(prompt) - 1)[0][0, len(prompt) - 1 :]
        diffs += [abs(a - b) for a, b in zip(mine.tolist(), completion.logprobs)]
    return sum(diffs) / len(diffs)


def run_route(route: str, model_dir: Path, policy, args, prompts) -> dict:
    from grpo.rollout.vllm import EngineSettings, VLLMGenerator

    settings = EngineSettings(str(model_dir), max_model_len=256, gpu_memory_utilization=args.gpu_memory_utilization, enforce_eager=True,
                              sleep_level=2, weight_bucket_mb=args.bucket_mb, weight_route=route)
    engine = VLLMGenerator(settings, stop_id=VOCAB_SIZE)  # an id past the vocabulary: samples run their full length
    times = []
    try:
        for i in range(args.repeats):
            engine.sleep()
            torch.cuda.synchronize()
            started = time.perf_counter()
            engine.load_weights(full_parameters(policy))
            torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
            print(json.dumps({"route": route, "sync": i, "seconds": round(times[-1], 4)}), flush=True)
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(torch.randn_like(p) * p.std().clamp(min=1e-2) * 0.5)
        engine.sleep()
        engine.load_weights(full_parameters(policy))
        return {"seconds": statistics.median(times), "all": [round(t, 4) for t in times], "gap": gap(policy, engine, prompts)}
    finally:
        del engine
        gc.collect()
        torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bucket-mb", type=int, default=512)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.25)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    model_dir = write_random_model(args.shape, Path(tempfile.mkdtemp(prefix="bench-sync-")) / args.shape)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).cuda().eval()
    gb = sum(p.numel() for p in policy.parameters()) * 2 / 1e9  # what travels: bf16
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, VOCAB_SIZE - 10, (16,), generator=g).tolist() for _ in range(8)]
    results, failed = {}, []
    for route in ROUTES:
        try:
            results[route] = run_route(route, model_dir, policy, args, prompts)
        except Exception as exc:  # a route that fails is reported, and the bench fails after its line
            results[route] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            failed.append(route)
    line = {"bench": "weight_sync_gpu", "shape": args.shape, "weights_gb": round(gb, 3), "bucket_mb": args.bucket_mb, "target_s": TARGET_S}
    for route, r in results.items():
        if "error" in r:
            line[f"{route}_error"] = r["error"]
            continue
        line.update({f"{route}_s": round(r["seconds"], 4), f"{route}_s_per_gb": round(r["seconds"] / gb, 4), f"{route}_gap": round(r["gap"], 4),
                     f"{route}_all_s": r["all"]})
        if r["gap"] >= 0.05:
            failed.append(f"{route} (gap {r['gap']:.3f}: the engine does not sample the synced weights)")
    if "shm_s" in line and "ipc_s" in line:
        line["ipc_speedup"] = round(line["shm_s"] / line["ipc_s"], 2)
    best = min((line[f"{r}_s"] for r in ROUTES if f"{r}_s" in line), default=None)
    line["target_met"] = best is not None and best <= TARGET_S
    print(json.dumps(line))
    if failed:
        print(f"weight_sync_gpu: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
