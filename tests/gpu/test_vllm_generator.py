"""The vLLM generator on a GPU: token-in/token-out, log-probs that match the policy's, sleep, and weight sync.

A random 0.5B-shaped model: the engine starts from its directory; changing the policy's weights and
loading them must change what the engine samples, and its log-probs must then match the new weights
(not the old ones) to bf16 accuracy. Each test has a watchdog: a half-loaded engine can hang ``generate``.
"""

from __future__ import annotations

import math

import pytest
import torch

from tests.gpu.conftest import needs_vllm

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _policy_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    from grpo.policy import token_logprobs

    ids = torch.tensor([prompt + completion], device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        logprobs, _ = token_logprobs(model, ids, torch.ones_like(ids), 1.0, first_target=len(prompt) - 1)
    return logprobs[0, len(prompt) - 1 :].tolist()


def _gap(model, prompts, completions) -> float:
    gaps = [
        abs(a - b)
        for p, c in zip(prompts, completions)
        for a, b in zip(_policy_logprobs(model, p, c.token_ids), c.logprobs)
        if math.isfinite(b)
    ]
    return sum(gaps) / len(gaps)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("route", ["shm", "ipc"])
def test_generate_sleep_and_weight_sync(model_05b, route):
    """Either weight route (/dev/shm files, or CUDA IPC handles: ``EngineSettings.weight_route``)."""
    needs_vllm()
    from transformers import AutoModelForCausalLM

    from grpo.distributed import full_parameters
    from grpo.rollout import SamplingParams
    from grpo.rollout.vllm import EngineSettings, VLLMGenerator

    policy = AutoModelForCausalLM.from_pretrained(model_05b, dtype=torch.float32).cuda().eval()
    stop = 7
    engine = VLLMGenerator(EngineSettings(model_05b, max_model_len=512, gpu_memory_utilization=0.35, enforce_eager=True, weight_route=route),
                           stop_id=stop)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, 150000, (24,), generator=g).tolist() for _ in range(16)]
    sampling = SamplingParams(max_new_tokens=32, temperature=1.0)

    before = engine.generate(prompts, sampling)
    assert all(len(c.token_ids) <= 32 and c.finish_reason in ("stop", "length") for c in before)
    assert all(c.token_ids[-1] == stop for c in before if c.finish_reason == "stop")
    assert _gap(policy, prompts, before) < 0.05  # vLLM's processed log-probs are the policy's distribution

    # the update: move the weights well away, then sync through sleep (level 2 drops the engine's weights)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn_like(p) * p.std().clamp(min=1e-2))
    engine.sleep()
    engine.load_weights(full_parameters(policy))
    after = engine.generate(prompts, sampling)
    assert _gap(policy, prompts, after) < 0.05  # matches the NEW weights
    greedy = SamplingParams(max_new_tokens=16, temperature=1e-3)
    old_policy = AutoModelForCausalLM.from_pretrained(model_05b, dtype=torch.float32).cuda().eval()
    assert _gap(old_policy, prompts, after) > 0.2  # and not the old ones
    new_greedy = [c.token_ids for c in engine.generate(prompts, greedy)]
    engine.sleep()
    engine.load_weights(full_parameters(old_policy))
    old_greedy = [c.token_ids for c in engine.generate(prompts, greedy)]
    assert sum(a != b for a, b in zip(new_greedy, old_greedy)) >= len(prompts) // 2  # outputs change with the weights


@pytest.mark.timeout(600)
def test_streaming_engine_one_request_at_a_time_seeded_and_synced(model_05b):
    """``rollout.turns: per_episode`` on vLLM (``grpo.rollout.vllm_stream``): requests sent one by one from an
    asyncio loop, all live in one engine, each from its own seed: the same seed gives the same tokens whether its
    request runs alone or among others; the log-probs are the policy's; after a weight load they are the new
    weights' (not the old ones'); the batch call gives what the single requests give."""
    import asyncio

    needs_vllm()
    from transformers import AutoModelForCausalLM

    from grpo.distributed import full_parameters
    from grpo.rollout import SamplingParams
    from grpo.rollout.vllm import EngineSettings
    from grpo.rollout.vllm_stream import VLLMStreamingGenerator

    policy = AutoModelForCausalLM.from_pretrained(model_05b, dtype=torch.float32).cuda().eval()
    engine = VLLMStreamingGenerator(EngineSettings(model_05b, max_model_len=512, gpu_memory_utilization=0.35, enforce_eager=True), stop_id=7)
    try:
        g = torch.Generator().manual_seed(1)
        prompts = [torch.randint(10, 150000, (24,), generator=g).tolist() for _ in range(16)]
        seeded = [SamplingParams(max_new_tokens=32, temperature=1.0, seed=1000 + i) for i in range(16)]

        async def together():
            return await asyncio.gather(*(engine.agenerate(p, s) for p, s in zip(prompts, seeded)))

        many = asyncio.run(together())
        alone = asyncio.run(engine.agenerate(prompts[5], seeded[5]))
        assert alone.token_ids == many[5].token_ids  # its own seed: the same tokens, alone or among 15 others
        assert _gap(policy, prompts, many) < 0.05
        batch = engine.generate([prompts[5]], seeded[5])
        assert batch[0].token_ids == alone.token_ids

        with torch.no_grad():
            for p in policy.parameters():
                p.add_(torch.randn_like(p) * p.std().clamp(min=1e-2))
        engine.sleep()
        engine.load_weights(full_parameters(policy))
        after = asyncio.run(together())
        assert _gap(policy, prompts, after) < 0.05  # the new weights
        old_policy = AutoModelForCausalLM.from_pretrained(model_05b, dtype=torch.float32).cuda().eval()
        assert _gap(old_policy, prompts, after) > 0.2  # not the old ones
    finally:
        engine.close()
