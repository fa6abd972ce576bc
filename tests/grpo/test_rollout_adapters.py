"""A LoRA policy's adapter served by a vLLM engine, on CPU: the adapter written as a peft folder (read back by
peft itself, it is the trained adapter and no other), the engine asked to load each version under a fresh id
and to drop the old one, every request carrying the current one. vLLM's own modules are stood in (it needs
CUDA); the real engine runs in ``tests/gpu/test_vllm_lora.py``."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from grpo.build import Models
from grpo.config import TrainerConfig
from grpo.lora import add_adapter, with_adapter
from grpo.policy import load_policy
from grpo.rollout import Completion, SamplingParams
from grpo.rollout.adapters import AdapterShelf, engine_lora_rank, write_adapter
from grpo.rollout.vllm import EngineSettings, VLLMGenerator, engine_kwargs, engine_settings
from grpo.trainer import sync_sampler
from tests.conftest import TEST_MODEL

LORA = {"rank": 4, "alpha": 8.0}


def _cfg() -> TrainerConfig:
    return TrainerConfig.model_validate({"model": {**TEST_MODEL, "lora": LORA}})


def _moved(policy, name: str, seed: int) -> None:
    """Adapter ``name``'s B matrices drawn away from 0, as training would move them."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for key, param in policy.named_parameters():
            if f"lora_B.{name}." in key:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)


def _policy(tiny_base: str):
    cfg = _cfg()
    policy = with_adapter(load_policy(tiny_base, True), cfg.model.lora, seed=1)
    add_adapter(policy, "second", cfg.model.lora, seed=2)
    _moved(policy, "default", 3)
    _moved(policy, "second", 4)
    return policy


def _logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_vllm_takes_the_smallest_lora_rank_that_holds_the_adapter():
    assert [engine_lora_rank(r) for r in (1, 4, 8, 9, 64, 300, 512)] == [8, 8, 8, 16, 64, 320, 512]
    with pytest.raises(ValueError, match=r"model.lora.rank 513 .* largest max_lora_rank \(512\)"):
        engine_lora_rank(513)


def test_a_written_adapter_is_that_adapter_read_back_by_peft(tiny_base, tmp_path):
    """Of a policy with two trained adapters, the one written is the one peft loads onto a fresh base: its logits
    and not the other's, and its file holds the adapter's tensors under names without the adapter's."""
    from peft import PeftModel

    policy = _policy(tiny_base)
    folder = write_adapter(policy, "second", tmp_path / "second")
    assert sorted(p.name for p in folder.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    names = list(load_file(folder / "adapter_model.safetensors"))
    assert names and all(("lora_A" in n or "lora_B" in n) and "second" not in n for n in names)
    ids = torch.tensor([[3, 9, 4, 12, 7, 5]])
    policy.eval()
    policy.set_adapter("second")
    second = _logits(policy, ids)
    policy.set_adapter("default")
    first = _logits(policy, ids)
    loaded = PeftModel.from_pretrained(load_policy(tiny_base, False), str(folder)).eval()
    assert torch.allclose(_logits(loaded, ids), second, atol=1e-6)
    assert not torch.allclose(second, first, atol=1e-3)  # the adapters differ: the check could fail


class StandInLLM:
    """vLLM's ``LLM`` in its place: records how it was built and every call, answers two tokens."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list[tuple] = []
        self.llm_engine = SimpleNamespace(add_lora=self._add_lora, remove_lora=self._remove_lora)

    def _add_lora(self, request) -> bool:
        folder = Path(request.lora_path)
        self.calls.append(("add_lora", request.lora_name, request.lora_int_id, sorted(p.name for p in folder.iterdir())))
        return True

    def _remove_lora(self, lora_id: int) -> bool:
        self.calls.append(("remove_lora", lora_id))
        return True

    def generate(self, prompts, params, use_tqdm=False, lora_request=None):
        self.calls.append(("generate", len(prompts), None if lora_request is None else (lora_request.lora_name, lora_request.lora_int_id)))
        chosen = [{5: SimpleNamespace(logprob=-0.5)}, {7: SimpleNamespace(logprob=-0.25)}]
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[5, 7], logprobs=chosen, finish_reason="stop")]) for _ in prompts]

    def sleep(self, level: int) -> None:
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None) -> None:
        self.calls.append(("wake_up", tags))

    def reset_prefix_cache(self) -> None:
        self.calls.append(("reset_prefix_cache",))


def install_stand_in_vllm(monkeypatch, llm: type) -> None:
    """vLLM's modules as the generator imports them, with ``llm`` as its ``LLM``, and no GPU in view."""
    vllm = types.ModuleType("vllm")
    vllm.LLM = llm
    vllm.SamplingParams = lambda **kwargs: SimpleNamespace(**kwargs)
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = dict
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = lambda name, lora_id, path: SimpleNamespace(lora_name=name, lora_int_id=lora_id, lora_path=path)
    for name, module in {"vllm": vllm, "vllm.inputs": inputs, "vllm.lora": types.ModuleType("vllm.lora"), "vllm.lora.request": request}.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.fixture
def stand_in_vllm(monkeypatch):
    install_stand_in_vllm(monkeypatch, StandInLLM)


def test_the_engine_serves_each_new_version_of_the_adapter_and_drops_the_old(tiny_base, stand_in_vllm):
    """A LoRA trial's engine: built with LoRA on at the rank it needs, sleeping at level 1 (the base stays); the
    base alone until the first load, then every request with the current version; each load a fresh id and name,
    the old one removed first and its folder deleted."""
    settings = engine_settings(_cfg(), tiny_base, rank=0)
    assert (settings.max_loras, settings.max_lora_rank, settings.sleep_level) == (1, 8, 1)
    assert {k: engine_kwargs(settings)[k] for k in ("enable_lora", "max_loras", "max_lora_rank")} == {"enable_lora": True, "max_loras": 1, "max_lora_rank": 8}
    assert "enable_lora" not in engine_kwargs(EngineSettings("m", max_model_len=64))
    generator = VLLMGenerator(settings, stop_id=7)
    engine = generator.llm
    policy = _policy(tiny_base)
    sampling = SamplingParams(max_new_tokens=2)

    assert generator.generate([[1, 2]], sampling)[0].token_ids == [5, 7]
    generator.load_adapter(policy)
    first = generator.adapter
    assert first is not None and Path(first.path).is_dir()
    generator.generate([[1, 2], [3]], sampling)
    generator.sleep()
    _moved(policy, "default", 5)
    generator.load_adapter(policy)  # after an update: wakes, loads the new version, drops the old
    generator.generate([[1]], sampling)
    files = ["adapter_config.json", "adapter_model.safetensors"]
    assert engine.calls == [
        ("generate", 1, None),
        ("add_lora", "default-1", 1, files),
        ("generate", 2, ("default-1", 1)),
        ("sleep", 1),
        ("wake_up", None),
        ("remove_lora", 1),  # before the add: a full engine would otherwise evict another adapter to make room
        ("add_lora", "default-2", 2, files),  # a name per version: no cached prefix of version 1 is reused
        ("generate", 1, ("default-2", 2)),
    ]
    assert not Path(first.path).exists() and Path(generator.adapter.path).is_dir()
    written = load_file(Path(generator.adapter.path) / "adapter_model.safetensors")
    trained = {k.replace(".default.", "."): v.detach() for k, v in policy.named_parameters() if ".default." in k}
    assert trained.keys() == written.keys() and all(torch.equal(written[k], v) for k, v in trained.items())  # the new B, the same A
    root = generator.shelf.root
    del generator, engine
    import gc

    gc.collect()
    assert not root.exists()  # the shelf goes with its generator


class StandInStreamingEngine:
    """vLLM's ``AsyncLLM`` in its place (a ``StreamingEngine``): records every call, answers two tokens."""

    def __init__(self):
        self.calls: list[tuple] = []

    async def sample(self, request_id, prompt, sampling, adapter=None):
        self.calls.append(("sample", len(prompt), None if adapter is None else (adapter.served_name, adapter.id)))
        return Completion([5, 7], [-0.5, -0.25], "stop")

    async def add_adapter(self, version) -> bool:
        self.calls.append(("add", version.served_name, version.id, sorted(p.name for p in Path(version.path).iterdir())))
        return True

    async def remove_adapter(self, adapter_id: int) -> bool:
        self.calls.append(("remove", adapter_id))
        return True

    async def sleep(self, level: int) -> None:
        self.calls.append(("sleep", level))

    async def wake_up(self, tags=None) -> None:
        self.calls.append(("wake_up", tags))

    async def call_workers(self, fn, arg) -> None:
        self.calls.append(("call_workers",))

    async def reset_prefix_cache(self) -> None:
        self.calls.append(("reset_prefix_cache",))

    def shutdown(self) -> None:
        self.calls.append(("shutdown",))


def test_the_streaming_engine_serves_adapters_by_the_same_rules(tiny_base):
    """rollout.turns per_episode with LoRA, and a pack's members on one streaming engine: the base until an adapter's
    first load, then each request (batched or alone) with its name's current version; each load a fresh id, the old
    one removed first; each member's requests and loads its own; a member that leaves takes its adapter out."""
    import asyncio

    from grpo.rollout.vllm import ServedAdapter
    from grpo.rollout.vllm_stream import VLLMStreamingGenerator

    engine = StandInStreamingEngine()

    async def make(_settings, _stop):
        return engine

    generator = VLLMStreamingGenerator(EngineSettings("m", max_model_len=64, max_loras=2, max_lora_rank=8, sleep_level=1), stop_id=7, make_engine=make)
    assert generator.serves_adapter and generator.streams
    policy = _policy(tiny_base)  # adapters "default" and "second"
    first, second = ServedAdapter(generator, "default"), ServedAdapter(generator, "second")
    assert first.streams and first.serves_adapter
    sampling = SamplingParams(max_new_tokens=2, seed=3)
    try:
        assert asyncio.run(first.agenerate([1, 2], sampling)).token_ids == [5, 7]
        first.load_adapter(policy)
        second.load_adapter(policy)
        asyncio.run(first.agenerate([1], sampling))
        second.generate([[1, 2], [3]], sampling)
        generator.sleep()
        first.load_adapter(policy)  # after its update: wakes, loads the new version, drops the old
        asyncio.run(first.agenerate([1], sampling))
        generator.drop_adapter("second")
        files = ["adapter_config.json", "adapter_model.safetensors"]
        assert engine.calls == [
            ("sample", 2, None),
            ("add", "default-1", 1, files),
            ("add", "second-2", 2, files),
            ("sample", 1, ("default-1", 1)),
            ("sample", 2, ("second-2", 2)),
            ("sample", 1, ("second-2", 2)),
            ("sleep", 1),
            ("wake_up", None),
            ("remove", 1),
            ("add", "default-3", 3, files),
            ("sample", 1, ("default-3", 3)),
            ("remove", 2),
        ]
        assert list(generator.shelf.current) == ["default"]
    finally:
        generator.close()


class Recording:
    def __init__(self, serves_adapter: bool, needs_weight_sync: bool):
        self.serves_adapter, self.needs_weight_sync, self.calls = serves_adapter, needs_weight_sync, []

    def load_adapter(self, policy) -> None:
        self.calls.append("adapter")

    def load_weights(self, weights) -> None:
        self.calls.append(sorted(name for name, _ in weights))


@pytest.mark.parametrize(("serves", "sync", "want"), [(True, True, ["adapter"]), (False, True, [["w"]]), (False, False, [])])
def test_the_sampler_takes_the_adapter_the_weights_or_nothing(serves, sync, want):
    generator = Recording(serves, sync)
    policy = torch.nn.Module()
    policy.w = torch.nn.Parameter(torch.zeros(2))
    sync_sampler(Models(None, policy, None, None, generator))
    assert generator.calls == want


def test_a_shelf_counts_versions_per_name_with_ids_unique_across_names(tiny_base, tmp_path):
    policy = _policy(tiny_base)
    shelf = AdapterShelf(tmp_path)
    a1, b1, a2 = shelf.write(policy, "default"), shelf.write(policy, "second"), shelf.write(policy, "default")
    assert shelf.current == {}  # written is not current: the engine has not taken it yet
    assert [shelf.commit(v) for v in (a1, b1, a2)] == [None, None, a1] and [a1.id, b1.id, a2.id] == [1, 2, 3]
    assert shelf.current == {"default": a2, "second": b1} and [v.served_name for v in (a1, b1, a2)] == ["default-1", "second-2", "default-3"]
    shelf.close()
    assert not shelf.root.exists()
