"""The vLLM generator's parts that need no GPU: device choice per rank, weight buckets, the sleep state
machine, the missing-vLLM error, and the desync guard. The engine itself is tested in tests/gpu."""

from __future__ import annotations

import logging

import pytest
import torch

from grpo.rollout import check_logprob_gap
from grpo.rollout.vllm import EngineSettings, VLLMGenerator, engine_visible_devices, visible_devices
from grpo.rollout.vllm_stream import VLLMStreamingGenerator
from grpo.rollout.weights import bucket_views, flat_buckets, weight_buckets


@pytest.mark.parametrize(
    ("rank", "visible", "want"),
    [(0, None, "0"), (3, None, "3"), (0, "4,5,6,7", "4"), (2, "4,5,6,7", "6"), (1, " 2 , 3 ", "3"), (0, "GPU-a1b2", "GPU-a1b2")],
)
def test_each_rank_engine_sees_only_its_own_gpu(rank, visible, want):
    assert engine_visible_devices(rank, visible) == want


def test_no_gpu_for_the_rank_is_an_error_not_all_gpus():
    with pytest.raises(RuntimeError, match="num_gpus=0"):
        engine_visible_devices(0, "")  # Ray's value for an actor that asked for no GPU
    with pytest.raises(RuntimeError, match="local rank 2 has no GPU"):
        engine_visible_devices(2, "0,1")
    with pytest.raises(RuntimeError, match="given no GPU"):
        engine_visible_devices(0, None, ray_gpus=[])  # Ray 2.60 leaves the variable unset for num_gpus=0
    assert engine_visible_devices(1, "0,1", ray_gpus=["1"]) == "1"


def test_visible_devices_is_restored(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    with visible_devices("5"):
        import os

        assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,5"


def test_weight_buckets_respect_the_size_and_keep_order():
    weights = [(f"w{i}", torch.zeros(n, dtype=torch.bfloat16)) for i, n in enumerate([100, 200, 50, 600, 10])]  # 2 bytes each
    buckets = list(weight_buckets(iter(weights), bucket_bytes=700))
    assert [[name for name, _ in b] for b in buckets] == [["w0", "w1", "w2"], ["w3"], ["w4"]]  # w3 (1200 B) travels alone
    assert [name for b in buckets for name, _ in b] == [name for name, _ in weights]
    assert list(weight_buckets(iter([]), 10)) == []


def test_flat_buckets_hold_each_tensor_cast_and_give_it_back_as_a_view():
    """The CUDA IPC route's buckets (one flat buffer each, as ``weight_buckets`` groups them): every tensor back by
    name, in the engine's dtype, equal to the original, and a view of its bucket (what the worker loads, uncopied)."""
    g = torch.Generator().manual_seed(0)
    weights = [(f"w{i}", torch.randn(shape, generator=g)) for i, shape in enumerate([(10, 10), (200,), (3, 5, 4), (400,), (7,)])]
    buckets = list(flat_buckets(iter(weights), bucket_bytes=800, dtype=torch.bfloat16, device="cpu"))  # 2 bytes each
    assert [[name for name, _, _ in layout] for _, layout in buckets] == [["w0", "w1", "w2"], ["w3"], ["w4"]]  # 720 B, 800 B, 14 B
    back = [pair for buffer, layout in buckets for pair in bucket_views(buffer, layout)]
    assert [name for name, _ in back] == [name for name, _ in weights]
    for (name, got), (_, want), (buffer, _) in zip(back, weights, [(b, lay) for b, lay in buckets for _ in lay]):
        assert got.dtype == torch.bfloat16 and got.shape == want.shape and torch.equal(got, want.to(torch.bfloat16)), name
        assert got.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()  # a view, not a copy
    assert buckets[0][1] == [("w0", [10, 10], 0), ("w1", [200], 100), ("w2", [3, 5, 4], 300)]


@pytest.mark.parametrize("engine", [VLLMGenerator, VLLMStreamingGenerator], ids=["batched", "streaming"])
def test_without_vllm_the_error_says_how_to_fix_it(engine):
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401

        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    with pytest.raises(RuntimeError, match="rollout.backend='hf'"):
        engine(EngineSettings("some/dir", max_model_len=64), stop_id=1)


def test_level_two_sleep_refuses_to_sample_before_new_weights():
    engine = VLLMGenerator.__new__(VLLMGenerator)  # the state machine only
    engine.settings, engine.asleep = EngineSettings("d", 64, sleep_level=2), True
    with pytest.raises(RuntimeError, match="load_weights must come before"):
        engine.wake()


def test_logprob_gap_guard(caplog):
    check_logprob_gap(0.01, warn=0.1, fail=1.0)  # bf16 noise: fine
    with caplog.at_level(logging.WARNING, logger="grpo.trainer"):
        check_logprob_gap(0.3, warn=0.1, fail=1.0)
    assert "drifts" in caplog.text
    with pytest.raises(RuntimeError, match="failed weight sync"):
        check_logprob_gap(2.5, warn=0.1, fail=1.0)
    check_logprob_gap(2.5, warn=0.1, fail=None)  # the guard can be switched off
