"""HF generate behind the generator seam: finish reasons, and log-probs equal to a recomputed forward."""

from __future__ import annotations

import torch

from grpo.policy import load_policy, token_logprobs
from grpo.rollout import SamplingParams
from grpo.rollout.hf import HFGenerator


def test_logprobs_match_a_forward_pass(tiny_base, chat, tasks):
    torch.manual_seed(0)
    model = load_policy(tiny_base, trainable=False)
    gen = HFGenerator(model, stop_id=chat.end_id, pad_id=chat.pad_id)
    prompts = [chat.encode(t.prompt) for t in tasks[:3]]  # different lengths: left padding matters
    completions = gen.generate(prompts, SamplingParams(max_new_tokens=12, temperature=0.7))
    assert len(completions) == 3
    for prompt, c in zip(prompts, completions):
        assert len(c.token_ids) == len(c.logprobs) <= 12
        assert (c.finish_reason == "stop") == (c.token_ids[-1] == chat.end_id)
        ids = torch.tensor([prompt + c.token_ids])
        recomputed, _ = token_logprobs(model, ids, torch.ones_like(ids), temperature=0.7)
        assert torch.allclose(recomputed[0, len(prompt) - 1 :], torch.tensor(c.logprobs), atol=1e-4)
