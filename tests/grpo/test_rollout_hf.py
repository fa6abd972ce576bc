"""HF generate behind the generator seam: finish reasons, and log-probs equal to a recomputed forward."""

from __future__ import annotations

import pytest
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


def test_the_static_kv_cache_samples_what_the_dynamic_one_does(tiny_base, chat, tasks, monkeypatch):
    """The default preallocated cache (no per-token concatenation) draws the same tokens from the same seed as
    transformers' own dynamic cache, with log-probs equal to rounding; and it is the one generate uses."""
    import transformers.cache_utils

    built = []
    real_init = transformers.cache_utils.StaticCache.__init__
    monkeypatch.setattr(transformers.cache_utils.StaticCache, "__init__", lambda self, *a, **k: (built.append(1), real_init(self, *a, **k))[1])
    model = load_policy(tiny_base, trainable=False)
    prompts = [chat.encode(t.prompt) for t in tasks[:4]]  # different lengths: left padding in both caches
    sampling = SamplingParams(max_new_tokens=16, temperature=1.0)
    runs = {}
    for cache in ("static", "dynamic"):
        built.clear()
        torch.manual_seed(3)
        chosen = {} if cache == "static" else {"kv_cache": cache}  # static: the default
        runs[cache] = HFGenerator(model, stop_id=chat.end_id, pad_id=chat.pad_id, **chosen).generate(prompts, sampling)
        assert bool(built) == (cache == "static")
    for s, d in zip(runs["static"], runs["dynamic"]):
        assert s.token_ids == d.token_ids and s.finish_reason == d.finish_reason
        assert torch.allclose(torch.tensor(s.logprobs), torch.tensor(d.logprobs), atol=1e-4)


def test_an_unknown_kv_cache_is_refused():
    with pytest.raises(ValueError, match="kv_cache 'paged': one of static, dynamic"):
        HFGenerator(None, stop_id=1, pad_id=0, kv_cache="paged")
