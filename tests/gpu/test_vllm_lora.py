"""A LoRA policy's adapter served by vLLM on a GPU (``grpo.rollout.vllm.SleepingEngine.load_adapter``).

A random 0.5B-shaped model with a peft adapter whose B matrices are moved away from 0: the engine keeps the
base and samples through each loaded version of the adapter; its log-probs must match the adapted policy's,
not the base's, and after the adapter moves again and is reloaded (a fresh id), the new adapter's, through a
level-1 sleep. What ``model.lora`` with ``rollout.backend: vllm`` needs before the config lets it through.
"""

from __future__ import annotations

import pytest
import torch

from tests.gpu.conftest import needs_vllm
from tests.gpu.test_vllm_generator import _gap

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _move_adapter(policy, seed: int, adapter: str = "default") -> None:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if f"lora_B.{adapter}." in name:
                param.copy_(torch.randn(param.shape, generator=generator, device="cuda") * 0.02)


@pytest.mark.timeout(600)
def test_the_engine_samples_each_loaded_adapter_not_the_base(model_05b):
    needs_vllm()
    from transformers import AutoModelForCausalLM

    from grpo.config import LoraConfig
    from grpo.lora import with_adapter
    from grpo.rollout import SamplingParams
    from grpo.rollout.adapters import engine_lora_rank
    from grpo.rollout.vllm import EngineSettings, VLLMGenerator

    lora = LoraConfig(rank=16, alpha=32.0)
    base = AutoModelForCausalLM.from_pretrained(model_05b, dtype=torch.float32).cuda().eval()
    policy = with_adapter(AutoModelForCausalLM.from_pretrained(model_05b, dtype=torch.float32).cuda(), lora, seed=0).eval()
    settings = EngineSettings(model_05b, max_model_len=512, gpu_memory_utilization=0.35, enforce_eager=True, sleep_level=1,
                              max_loras=1, max_lora_rank=engine_lora_rank(lora.rank))
    engine = VLLMGenerator(settings, stop_id=7)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, 150000, (24,), generator=g).tolist() for _ in range(16)]
    sampling = SamplingParams(max_new_tokens=32, temperature=1.0)

    _move_adapter(policy, 1)
    engine.load_adapter(policy)
    first = engine.generate(prompts, sampling)
    assert _gap(policy, prompts, first) < 0.05  # the adapted policy's distribution
    assert _gap(base, prompts, first) > 0.1  # not the base's: the adapter is applied

    engine.sleep()  # level 1: the base is kept
    _move_adapter(policy, 2)
    engine.load_adapter(policy)
    second = engine.generate(prompts, sampling)
    assert _gap(policy, prompts, second) < 0.05  # the NEW adapter's
    _move_adapter(policy, 1)
    assert _gap(policy, prompts, second) > 0.1  # and not the first one's (a stale cached adapter would match it)


@pytest.mark.timeout(600)
def test_one_engine_serves_two_adapters_each_its_own(model_05b):
    """A pack's route: two adapters on one engine (``max_loras`` 2), each request naming one; each sample's log-probs
    are its own adapter's, and reloading one leaves the other's served as it was."""
    needs_vllm()
    from transformers import AutoModelForCausalLM

    from grpo.config import LoraConfig
    from grpo.lora import add_adapter, with_adapter
    from grpo.rollout import SamplingParams
    from grpo.rollout.vllm import EngineSettings, ServedAdapter, VLLMGenerator

    lora = LoraConfig(rank=16, alpha=32.0)
    policy = with_adapter(AutoModelForCausalLM.from_pretrained(model_05b, dtype=torch.float32).cuda(), lora, seed=0).eval()
    add_adapter(policy, "b", lora, seed=1)
    policy.cuda()
    engine = VLLMGenerator(EngineSettings(model_05b, max_model_len=512, gpu_memory_utilization=0.35, enforce_eager=True, sleep_level=1,
                                          max_loras=2, max_lora_rank=16), stop_id=7)
    members = {name: ServedAdapter(engine, name) for name in ("default", "b")}
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(10, 150000, (24,), generator=g).tolist() for _ in range(16)]
    sampling = SamplingParams(max_new_tokens=32, temperature=1.0)

    def gap_of(name: str, other: str) -> tuple[float, float]:
        out = members[name].generate(prompts, sampling)
        policy.set_adapter(name)
        own = _gap(policy, prompts, out)
        policy.set_adapter(other)
        return own, _gap(policy, prompts, out)

    _move_adapter(policy, 1, "default")
    _move_adapter(policy, 2, "b")
    for member in members.values():
        member.load_adapter(policy)
    for name, other in (("default", "b"), ("b", "default")):
        own, theirs = gap_of(name, other)
        assert own < 0.05 and theirs > 0.1, (name, own, theirs)
    engine.sleep()
    _move_adapter(policy, 3, "b")
    members["b"].load_adapter(policy)  # b's update: default's adapter stays as it was
    for name, other in (("default", "b"), ("b", "default")):
        own, theirs = gap_of(name, other)
        assert own < 0.05 and theirs > 0.1, (name, own, theirs)
