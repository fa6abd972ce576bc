"""Hugging Face ``generate`` behind the generator seam: batched, left-padded, pure sampling (no top-k/top-p).

On one process it samples from the training policy object itself; with FSDP2 ranks from an unsharded
copy that ``load_weights`` refreshes after each update. ``sleep``/``wake`` have nothing to free.
"""

from __future__ import annotations

import torch

from grpo.rollout import Completion, SamplingParams


class HFGenerator:
    def __init__(self, model, stop_id: int, pad_id: int):
        self.model = model
        self.stop_id = stop_id
        self.pad_id = pad_id

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        from transformers import GenerationConfig

        width = max(len(p) for p in prompts)
        input_ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompts])
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
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

    def load_weights(self, state_dict: dict) -> None:
        """Copy the trained policy's full (unsharded) weights into the sampling copy (FSDP2 ranks only: on
        one process the sampler is the policy module itself and the trainer never calls this)."""
        self.model.load_state_dict(state_dict, strict=False)

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass
