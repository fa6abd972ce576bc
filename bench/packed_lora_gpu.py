"""Packed LoRA trials on one GPU and one vLLM engine, against the same trials run one after another.

K LoRA trials (rank 16; learning rates 1e-2, 3e-3, 1e-3, 3e-4, ...; seed i) on a random-weight
Qwen2.5-0.5B-shaped model (``grpo.shapes``; no hub here) against the local hotel MCP server, ``--steps`` GRPO
steps each, rollouts by vLLM:
- ``alone``: each trial as ``sweep run`` would run it unpacked: its own process, its own engine, its base
  FSDP2-wrapped in bf16, one after another (``grpo.trainer.train``);
- ``packed``: all K in one process (``grpo.pack.train_packed``): one base, moved to the GPU whole (float32),
  one engine holding every member's adapter. With ``--turns per_episode`` (the default) the engine is vLLM's
  streaming one and each round runs every member's rollouts at once on it (``grpo.pack.Pack.step_round``), then
  their updates in turn, then their evals due at once; with ``--turns batched``, a batch per turn and members
  stepping in turn. The lone trials sample with the same ``--turns``, so the ratio is the packing's alone.
Each side is timed from its process's start to its end (imports, model loading and engine start-up counted).
Trials per GPU-hour: K trials over each side's seconds; the figure is their ratio (issue 36's target: >= 3 at
K=4, 20 steps). Each member's curve beside its lone run: per step ``policy/kl`` and ``rollout/logprob_gap``;
the tolerance stated and checked: every step's gap below 0.05 on both sides (each samples its own current
adapter), and the last step's KL packed/alone within [0.5, 2] (bf16 FSDP2 alone, float32 packed, and vLLM
samples drawn in another order: close, not equal).

    python bench/packed_lora_gpu.py [--k 4] [--steps 20] [--turns per_episode|batched]

``--smoke``: the same bench on CPU with the tiny test model and HF rollouts (two trials, two steps, batched
turns: HF packs step in turn): checks the bench runs, measures nothing. Needs a CUDA GPU and vLLM otherwise. Writes its runs to ``bench/data/``
and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import record  # noqa: E402

LRS = [1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6]
TARGET = 3.0
GAP_MAX = 0.05
KL_RATIO = (0.5, 2.0)
TINY_MODEL = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "warmstart_steps": 20, "warmstart_batch_size": 8}


def trial_config(model: dict, lr: float, seed: int, steps: int, out: str, backend: str, turns: str = "batched"):
    """A trial's config; the backend goes in after validation, as the config refuses LoRA with vLLM until it is verified."""
    from grpo.config import TrainerConfig

    cfg = TrainerConfig.model_validate({
        "model": {**model, "lora": {"rank": 16, "alpha": 32.0}},
        "optim": {"lr": lr},
        "algorithm": {"kl_coef": 0.01, "entropy_coef": 0.01, "mini_batches": 1},  # a random model's rewards are all 0: the entropy term moves the adapters
        "rollout": {"prompts_per_step": 8, "n_samples_per_prompt": 4, "max_turns": 2, "max_generate_length": 32,
                    "max_input_length": 1536, "max_sequence_length": 2048},
        "total_steps": steps, "seed": seed, "output_dir": out,
    })
    if backend == "hf":
        return cfg
    vllm = cfg.rollout.vllm.model_copy(update={"gpu_memory_utilization": 0.3, "enforce_eager": True})
    return cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"backend": "vllm", "vllm": vllm, "turns": turns})})


def child(args) -> int:
    """One side in this process: ``--run alone`` (one trial) or ``--run packed`` (all K); writes each trial's reports."""
    from grpo.reporting import ListReporter

    model = json.loads(args.model)
    ids = [args.trial] if args.run == "alone" else list(range(args.k))
    cfgs = [trial_config(model, LRS[i], i, args.steps, str(Path(args.out).parent / f"{args.run}_{i}"), args.backend, args.turns) for i in ids]
    reporters = [ListReporter() for _ in cfgs]
    if args.run == "alone":
        from grpo.trainer import train

        train(cfgs[0], reporters[0])
    else:
        from grpo.pack import train_packed

        train_packed(cfgs, reporters)
    Path(args.out).write_text(json.dumps({str(i): [m for _, m in r.reports] for i, r in zip(ids, reporters)}))
    return 0


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, *argv], check=True, cwd=ROOT)
    return time.perf_counter() - started


def curve(reports: list[dict]) -> dict:
    return {"kl": [m.get("policy/kl") for m in reports], "gap": [m.get("rollout/logprob_gap") for m in reports]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--turns", choices=["per_episode", "batched"], default="per_episode",
                        help="per_episode: the streaming engine, a pack's members rolling out at once; batched: a batch per turn, members in turn")
    parser.add_argument("--smoke", action="store_true", help="CPU, the tiny test model, HF rollouts, 2 trials x 2 steps: the bench runs")
    parser.add_argument("--run", choices=["alone", "packed"], help=argparse.SUPPRESS)
    parser.add_argument("--trial", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="vllm", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        return child(args)
    if args.k > len(LRS):
        parser.error(f"--k {args.k}: at most {len(LRS)} (one learning rate each)")

    work = Path(tempfile.mkdtemp(prefix="bench-packed-"))
    if args.smoke:
        args.k, args.steps, args.turns, backend, model = min(args.k, 2), min(args.steps, 2), "batched", "hf", TINY_MODEL
    else:
        from grpo.shapes import write_random_model

        backend, model = "vllm", {"name_or_path": str(write_random_model(args.shape, work / args.shape)), "dtype": "bfloat16"}
    common = ["--k", str(args.k), "--steps", str(args.steps), "--model", json.dumps(model), "--backend", backend, "--turns", args.turns]
    alone_s, reports = [], {}
    for i in range(args.k):
        out = work / f"alone_{i}.json"
        alone_s.append(timed([*common, "--run", "alone", "--trial", str(i), "--out", str(out)]))
        reports[f"alone_{i}"] = json.loads(out.read_text())[str(i)]
        print(json.dumps({"side": "alone", "trial": i, "lr": LRS[i], "seconds": round(alone_s[-1], 1)}), flush=True)
    packed_s = timed([*common, "--run", "packed", "--out", str(work / "packed.json")])
    packed = json.loads((work / "packed.json").read_text())
    print(json.dumps({"side": "packed", "trials": args.k, "seconds": round(packed_s, 1)}), flush=True)

    runs, misses = [], []
    for i in range(args.k):
        a, p = curve(reports[f"alone_{i}"]), curve(packed[str(i)])
        ratio = p["kl"][-1] / a["kl"][-1] if a["kl"][-1] and p["kl"][-1] is not None else None
        gaps = [g for g in a["gap"] + p["gap"] if g is not None]
        runs.append({"trial": i, "lr": LRS[i], "alone_s": round(alone_s[i], 2), "alone": a, "packed": p, "last_kl_ratio": ratio})
        if not args.smoke and (not gaps or max(gaps) >= GAP_MAX):
            misses.append(f"trial {i}: log-prob gap {max(gaps, default=float('nan')):.3f} (each side must sample its own current adapter)")
        if not args.smoke and (ratio is None or not KL_RATIO[0] <= ratio <= KL_RATIO[1]):
            misses.append(f"trial {i}: last KL packed/alone {ratio}")
    speedup = sum(alone_s) / packed_s
    summary = {"shape": "tiny (smoke, CPU)" if args.smoke else args.shape, "k": args.k, "steps": args.steps, "backend": backend, "turns": args.turns,
               "alone_s": round(sum(alone_s), 1), "packed_s": round(packed_s, 1),
               "trials_per_gpu_hour_alone": round(3600 * args.k / sum(alone_s), 2), "trials_per_gpu_hour_packed": round(3600 * args.k / packed_s, 2),
               "speedup": round(speedup, 2), "target": TARGET, "target_met": None if args.smoke else speedup >= TARGET,
               "curves_within_tolerance": None if args.smoke else not misses, "tolerance": {"gap_max": GAP_MAX, "last_kl_ratio": list(KL_RATIO)}}
    if args.smoke:  # measures nothing: its file stays out of bench/data
        record("packed_lora_gpu_smoke", runs, summary, folder=work)
    else:
        record("packed_lora_gpu", runs, summary)
    for miss in misses:
        print(f"packed_lora_gpu: {miss}", file=sys.stderr)
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
