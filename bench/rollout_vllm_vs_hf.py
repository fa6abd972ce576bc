"""Rollout tokens/s on a GPU: our vLLM generator vs Hugging Face ``generate``, the same prompts in one run.

A random-weight Qwen2.5-0.5B-shaped model (``grpo.shapes``; no hub here), bf16. Every side gets the same
``--prompts`` random prompts of ``--prompt-length`` tokens, ``--samples`` times each, and generates
exactly ``--new-tokens`` tokens per sample (the stop id is one the model cannot emit), at temperature 1:
- ``vllm``: ``grpo.rollout.vllm.VLLMGenerator`` (what a trial samples with; CUDA graphs unless ``--eager``);
- ``hf``: ``grpo.rollout.hf.HFGenerator`` (the trainer's fallback; it keeps logits for the log-probs,
  so it batches as many sequences as 4 GB of logits allow);
- ``hf_plain``: ``model.generate`` on the whole batch, no log-probs (HF's best case).
The ratio is vLLM's tokens/s over the faster HF side. Two more figures say where time goes:
- ``vllm_no_logprobs``: the same engine asked for no log-probs (the trainer needs them; this prices them);
- ``*_varlen``: lengths as RL turns have them (each sample's length uniform in [new_tokens/8, new_tokens]),
  counting only the tokens each sample asked for: vLLM retires a sequence when it ends (continuous
  batching), HF's static batch decodes until its longest one ends (its time is the full-length run's). A full warm-up call each is left out (vLLM compiles
a Triton log-softmax kernel on its first batch of a shape); the best of ``--repeats`` timed calls counts.

    python bench/rollout_vllm_vs_hf.py [--prompts 64] [--samples 8] [--prompt-length 128] [--new-tokens 128]

Needs a CUDA GPU and vLLM. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo.rollout import SamplingParams  # noqa: E402
from grpo.rollout.hf import HFGenerator  # noqa: E402
from grpo.shapes import VOCAB_SIZE, write_random_model  # noqa: E402

NEVER = VOCAB_SIZE  # an id past the vocabulary: no side ever stops early


def timed(fn, repeats: int) -> tuple[float, object]:
    """The best wall time of ``repeats`` calls after one warm-up call, and the last output."""
    out = fn()
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--prompt-length", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--eager", action="store_true", help="vLLM without CUDA graphs (starts faster, samples slower)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    from grpo.rollout.vllm import EngineSettings, VLLMGenerator

    model_dir = write_random_model(args.shape, Path(tempfile.mkdtemp(prefix="bench-rollout-")) / args.shape)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, VOCAB_SIZE - 10, (args.prompt_length,), generator=g).tolist() for _ in range(args.prompts)]
    batch = [p for p in prompts for _ in range(args.samples)]
    sampling = SamplingParams(max_new_tokens=args.new_tokens, temperature=1.0)
    tokens = len(batch) * args.new_tokens

    started = time.perf_counter()
    settings = EngineSettings(
        str(model_dir),
        max_model_len=args.prompt_length + args.new_tokens + 8,
        gpu_memory_utilization=args.gpu_memory_utilization,
        enforce_eager=args.eager,
        max_num_seqs=min(1024, len(batch)),
    )
    engine = VLLMGenerator(settings, stop_id=NEVER)
    startup_s = time.perf_counter() - started
    vllm_s, out = timed(lambda: engine.generate(batch, sampling), args.repeats)
    assert sum(len(c.token_ids) for c in out) == tokens, "vLLM stopped early"

    from vllm import SamplingParams as VLLMSampling
    from vllm.inputs import TokensPrompt

    requests = [TokensPrompt(prompt_token_ids=p) for p in batch]
    bare = VLLMSampling(temperature=1.0, max_tokens=args.new_tokens, ignore_eos=True, detokenize=False)
    bare_s, _ = timed(lambda: engine.llm.generate(requests, bare, use_tqdm=False), args.repeats)
    lengths = torch.randint(args.new_tokens // 8, args.new_tokens + 1, (len(batch),), generator=g).tolist()
    varied = [VLLMSampling(temperature=1.0, max_tokens=n, ignore_eos=True, logprobs=0, detokenize=False) for n in lengths]
    varlen_s, _ = timed(lambda: engine.llm.generate(requests, varied, use_tqdm=False), args.repeats)

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).cuda().eval()
    ids = torch.tensor(batch, device="cuda")

    def plain():
        with torch.no_grad():
            return model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, pad_token_id=0, eos_token_id=None,
            )

    plain_s, _ = timed(plain, args.repeats)
    hf = HFGenerator(model, stop_id=NEVER, pad_id=0)  # after plain's warm-up: one timed call (it is slow)
    torch.cuda.synchronize()
    started = time.perf_counter()
    out = hf.generate(batch, sampling)
    torch.cuda.synchronize()
    hf_s = time.perf_counter() - started
    assert sum(len(c.token_ids) for c in out) == tokens, "HF stopped early"

    figures = {
        "bench": "rollout_vllm_vs_hf",
        "device": torch.cuda.get_device_name(),
        "shape": args.shape,
        "sequences": len(batch),
        "new_tokens": args.new_tokens,
        "cuda_graphs": not args.eager,
        "vllm_startup_s": round(startup_s, 1),
        "vllm_tokens_per_s": round(tokens / vllm_s),
        "hf_tokens_per_s": round(tokens / hf_s),
        "hf_plain_tokens_per_s": round(tokens / plain_s),
        "vllm_no_logprobs_tokens_per_s": round(tokens / bare_s),
        "vllm_varlen_tokens_per_s": round(sum(lengths) / varlen_s),
        "hf_plain_varlen_tokens_per_s": round(sum(lengths) / plain_s),
    }
    figures["ratio"] = round(figures["vllm_tokens_per_s"] / max(figures["hf_tokens_per_s"], figures["hf_plain_tokens_per_s"]), 2)
    print(f"vLLM {figures['vllm_tokens_per_s']:,} tokens/s, HF generate {figures['hf_tokens_per_s']:,} (ours) / "
          f"{figures['hf_plain_tokens_per_s']:,} (plain): {figures['ratio']}x")
    figures["ratio_varlen"] = round(figures["vllm_varlen_tokens_per_s"] / figures["hf_plain_varlen_tokens_per_s"], 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
