"""GRPO training-step throughput on a GPU: tokens/s and MFU of our FSDP2 bf16 update, beside a plain loop.

Random-weight Qwen2.5-0.5B- and 1.5B-shaped models (``grpo.shapes``), ``--batch`` sequences of
``--seq-length`` random tokens, loss on all but the first 64 positions, advantages +-1. Per shape:
- ``ours``: ``grpo.update.policy_update`` on the policy wrapped by ``grpo.distributed.parallelize``
  (FSDP2 on one NCCL rank, bf16 compute, float32 master weights and reduction), one mini-batch, one
  epoch, no reference (kl_coef 0), ``--micro-batch`` sequences per forward/backward;
- ``plain``: the same model unwrapped, ``torch.autocast`` bf16, Hugging Face's own cross-entropy
  (``labels=``), AdamW: the loop a first attempt would write.
MFU counts model FLOPs only (activation recomputation is not credit): per token 6N + 12·layers·hidden·seq
(PaLM's formula; N includes the tied head), over 989 TFLOP/s, the H100 SXM's dense bf16 peak. Two
warm-up steps each are left out.

    python bench/train_step_gpu.py [--shapes qwen2.5-0.5b,qwen2.5-1.5b] [--batch 16] [--seq-length 2048]

``--lengths varying``: row lengths uniform in [``--seq-length``/8, ``--seq-length``] (as RL episodes vary), right
padding; ``ours`` then deals rows into micro-batches by length (``model.micro_batch_tokens`` = micro-batch x
seq-length), ``plain`` pads every micro-batch to the batch's longest; tokens/s and MFU count real tokens only.

Needs a CUDA GPU. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo.batching import collate  # noqa: E402
from grpo.distributed import init_ranks, parallelize  # noqa: E402
from grpo.shapes import SHAPES, parameter_count, shape_config  # noqa: E402
from grpo.update import UpdateSettings, policy_update  # noqa: E402

PEAK_FLOPS = 989e12


def model_flops_per_token(shape: str, seq_length: int) -> float:
    s = SHAPES[shape]
    return 6 * parameter_count(shape) + 12 * s["num_hidden_layers"] * s["hidden_size"] * seq_length


def fresh_model(shape: str):
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(shape_config(shape))
    model.config.use_cache = False
    return model


def release() -> None:
    """Free the last side's model and optimizer (FSDP2 modules hold reference cycles)."""
    gc.collect()
    torch.cuda.empty_cache()


def steps_per_s(step, n: int) -> float:
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    return n / (time.perf_counter() - started)


def ours(shape: str, batch, micro: int, steps: int, checkpointing: bool, by_length: bool) -> float:
    policy = parallelize(fresh_model(shape), init_ranks(), bf16=True, activation_checkpointing=checkpointing)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-6)
    tokens = micro * batch.input_ids.shape[1] if by_length else None
    settings = UpdateSettings(0.2, 0.2, 0.0, mini_batches=1, max_grad_norm=1.0, temperature=1.0, micro_batch_size=None if by_length else micro,
                              micro_batch_tokens=tokens)
    shuffle = torch.Generator().manual_seed(0)
    rate = steps_per_s(lambda: policy_update(policy, None, optimizer, batch, settings, shuffle), steps)
    torch.cuda.empty_cache()
    return rate


def plain(shape: str, batch, micro: int, steps: int) -> float:
    model = fresh_model(shape)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = batch.input_ids.cuda()
    attention = batch.attention_mask.cuda() if not bool(batch.attention_mask.all()) else None  # equal lengths: as on record, no mask
    labels = ids.masked_fill(torch.nn.functional.pad(batch.loss_mask, (1, 0)).cuda() == 0, -100)

    def step():
        optimizer.zero_grad()
        for s in range(0, len(ids), micro):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids[s : s + micro], attention_mask=None if attention is None else attention[s : s + micro], labels=labels[s : s + micro]).loss
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    rate = steps_per_s(step, steps)
    torch.cuda.empty_cache()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="qwen2.5-0.5b,qwen2.5-1.5b")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-length", type=int, default=2048)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--activation-checkpointing", action="store_true")
    parser.add_argument("--lengths", choices=["equal", "varying"], default="equal")
    args = parser.parse_args()

    g = torch.Generator().manual_seed(0)
    if args.lengths == "equal":
        lengths = [args.seq_length] * args.batch
    else:
        lengths = torch.randint(args.seq_length // 8, args.seq_length + 1, (args.batch,), generator=g).tolist()
    rows = [torch.randint(10, 150000, (n,), generator=g).tolist() for n in lengths]
    masks = [[0] * 64 + [1] * (n - 64) for n in lengths]
    batch = collate(rows, masks, [1.0 if i % 2 else -1.0 for i in range(args.batch)], pad_id=0)
    tokens = sum(lengths)
    figures: dict[str, object] = {"bench": "train_step_gpu", "device": torch.cuda.get_device_name(), "batch": args.batch, "seq_length": args.seq_length,
                                  "lengths": args.lengths, "tokens": tokens}
    for shape in args.shapes.split(","):
        flops = model_flops_per_token(shape, sum(n * n for n in lengths) / tokens)  # attention's term by each row's own length
        sides = {
            "ours": lambda shape=shape: ours(shape, batch, args.micro_batch, args.steps, args.activation_checkpointing, args.lengths == "varying"),
            "plain": lambda shape=shape: plain(shape, batch, args.micro_batch, args.steps),
        }
        for side, run in sides.items():
            key = f"{shape}_{side}"
            try:
                rate = run()
            except torch.OutOfMemoryError:
                figures[f"{key}_tokens_per_s"] = None
                print(f"{shape} {side}: out of memory at micro-batch {args.micro_batch}", flush=True)
                continue
            finally:
                release()
            figures[f"{key}_tokens_per_s"] = round(rate * tokens)
            figures[f"{key}_mfu"] = round(rate * tokens * flops / PEAK_FLOPS, 3)
            print(f"{shape} {side}: {rate * tokens:,.0f} tokens/s, MFU {figures[f'{key}_mfu']:.1%}, peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
            torch.cuda.reset_peak_memory_stats()
        if figures[f"{shape}_ours_tokens_per_s"] and figures[f"{shape}_plain_tokens_per_s"]:
            figures[f"{shape}_ratio"] = round(figures[f"{shape}_ours_tokens_per_s"] / figures[f"{shape}_plain_tokens_per_s"], 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
