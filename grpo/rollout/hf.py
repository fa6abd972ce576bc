"""Hugging Face ``generate`` behind the generator seam: batched, left-padded, pure sampling (no top-k/top-p);
with ``streams``, also one request at a time from its own seed (``agenerate``).

The KV cache is transformers' static one, allocated once for the prompt width plus ``max_new_tokens``: the
default dynamic cache grows by concatenation at every token, which re-copies the whole cache each step (on
the mix's eval, 800 episodes, the static cache is 1.96x faster with the same tokens; on the hotel's 144, 0.95x: ``bench/hf_kv_cache.py``).
Its memory is the dynamic cache's at its longest, which the logits kept per sequence already bound. Compilation,
which transformers starts by itself for a static cache on a GPU, stays off: each turn's batch has a new shape.

On one process it samples from the training policy object itself (``needs_weight_sync`` False); with
FSDP2 ranks from an unsharded copy that ``load_weights`` refreshes after each update. Runs on the
model's device (CPU, or CUDA as the GPU fallback). ``sleep``/``wake`` have nothing to free.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from grpo.distributed import device
from grpo.rollout import Completion, SamplingParams, draw_rollout_seed

LOGITS_BUDGET_BYTES = 4 * 2**30  # generate keeps every step's logits: a 152K vocabulary needs ~78 MB per sequence per 128 tokens
KV_CACHES = ("static", "dynamic")  # static: the default; dynamic: transformers' own default, the bench's baseline


class HFGenerator:
    serves_adapter = False  # samples from the policy module itself, or an unsharded copy of its weights
    def __init__(self, model, stop_id: int, pad_id: int, needs_weight_sync: bool = False, streams: bool = False,
                 kv_cache: str = "static"):
        if kv_cache not in KV_CACHES:
            raise ValueError(f"kv_cache {kv_cache!r}: one of {', '.join(KV_CACHES)}")
        self.model = model
        self.kv_cache = kv_cache
        self.stop_id = stop_id
        self.pad_id = pad_id
        self.needs_weight_sync = needs_weight_sync
        self.streams = streams  # rollout.turns: per_episode (``agenerate``, one request at a time)

    async def agenerate(self, prompt: list[int], sampling: SamplingParams) -> Completion:
        """One request alone, sampled from its own seed (``sampling.seed``), in a fork of the RNG: what a
        streaming engine does, on HF. It computes without yielding, so on CPU it batches nothing (slower than
        ``generate``): it is the per-episode loop's reference, not its speed."""
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(sampling.seed if sampling.seed is not None else 0)
            return self._generate([prompt], sampling)[0]

    def rollout_seed(self) -> int:
        return draw_rollout_seed()

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """All prompts, in as few ``generate`` calls as the logits they keep allow (one, for a small vocabulary)."""
        vocab = self.model.get_output_embeddings().weight.shape[0]
        per_sequence = sampling.max_new_tokens * vocab * 4 * 2  # the kept logits and their float32 log-softmax
        size = max(1, LOGITS_BUDGET_BYTES // per_sequence)
        return [c for start in range(0, len(prompts), size) for c in self._generate(prompts[start : start + size], sampling)]

    @torch.no_grad()
    def _generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        from transformers import GenerationConfig

        width = max(len(p) for p in prompts)
        where = device()  # where the model computes (its parameters may be offloaded to CPU memory)
        input_ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompts], device=where)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=where)
        config = GenerationConfig(
            do_sample=True,
            temperature=sampling.temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=self.stop_id,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_logits=True,
            cache_implementation=self.kv_cache,
            disable_compile=True,
        )
        was_training = self.model.training
        self.model.eval()
        out = self.model.generate(input_ids=input_ids, attention_mask=attention, generation_config=config)
        self.model.train(was_training)
        new_ids = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1).float() / sampling.temperature
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, new_ids.unsqueeze(-1)).squeeze(-1)
        return [self._completion(row, lp) for row, lp in zip(new_ids.tolist(), logprobs.tolist())]

    def _completion(self, ids: list[int], logprobs: list[float]) -> Completion:
        if self.stop_id in ids:
            end = ids.index(self.stop_id) + 1
            return Completion(ids[:end], logprobs[:end], "stop")
        return Completion(ids, logprobs, "length")

    @torch.no_grad()
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy the trained policy's full (unsharded) parameters into the sampling copy, one at a time."""
        own = dict(self.model.named_parameters())
        for name, tensor in weights:
            if name in own:
                own[name].copy_(tensor)

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass
