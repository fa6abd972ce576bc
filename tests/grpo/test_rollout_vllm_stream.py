"""The streaming vLLM generator's own logic on CPU: its engine loop, the episode loop through it, sleep and wake,
and the weight load. A stand-in engine answers in vLLM's place (vLLM needs CUDA); the real one runs in
``tests/gpu/test_vllm_generator.py``."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch
from safetensors.torch import load_file

from grpo.episodes import EpisodeLimits, request_seed, run_episodes
from grpo.rollout import Completion, SamplingParams
from grpo.rollout.vllm import EngineSettings
from grpo.rollout.vllm_stream import EngineLoop, VLLMStreamingGenerator
from grpo.warmstart import reference_conversation
from tests.grpo.test_episodes import SlowClient, _key
from toolenvs.client import EnvClient

LIMITS = EpisodeLimits(max_turns=4, max_generate_length=64, max_sequence_length=1024, temperature=1.0)


class StandInEngine:
    """Answers from a script after ``delay_s`` (awaited, as an engine's step is), recording every call, the
    thread it ran on, and how many requests were live at once."""

    def __init__(self, chat=None, scripts=None, delay_s: float = 0.0, delays: dict[int, float] | None = None):
        self.chat, self.scripts, self.delay_s, self.delays = chat, scripts or {}, delay_s, delays or {}
        self.calls: list[tuple] = []
        self.threads: set[str] = set()
        self.live = self.peak = 0

    def _note(self, *call) -> None:
        self.calls.append(call)
        self.threads.add(threading.current_thread().name)

    async def sample(self, request_id: str, prompt: list[int], sampling: SamplingParams, adapter=None) -> Completion:
        self._note("sample", request_id, sampling.seed)
        self.live += 1
        self.peak = max(self.peak, self.live)
        try:
            await asyncio.sleep(self.delays.get(prompt[0], self.delay_s))
        finally:
            self.live -= 1
        if not self.scripts:
            return Completion(list(prompt[:2]), [0.0, 0.0], "length")
        script = next(v for k, v in self.scripts.items() if tuple(prompt[: len(k)]) == k)
        turn = (sum(1 for t in prompt if t == self.chat.end_id) - 2) // 2
        ids = self.chat.assistant_ids(script[turn])
        return Completion(ids, [0.0] * len(ids), "stop")

    async def sleep(self, level: int) -> None:
        self._note("sleep", level)

    async def wake_up(self, tags=None) -> None:
        self._note("wake_up", tags)

    async def call_workers(self, fn, arg) -> None:
        assert fn.__name__ == "load_weights_file"  # the /dev/shm route
        self._note("load_file", sorted(load_file(arg)))  # read now: the next bucket overwrites the file

    async def reset_prefix_cache(self) -> None:
        self._note("reset_prefix_cache")

    def shutdown(self) -> None:
        self._note("shutdown")


def _generator(engine: StandInEngine, **settings) -> VLLMStreamingGenerator:
    async def make(_settings, _stop):
        return engine

    return VLLMStreamingGenerator(EngineSettings("unused", max_model_len=64, **settings), stop_id=7, make_engine=make)


def test_episodes_through_one_engine_hold_every_live_request_and_keep_their_seeds(hotel_server, chat, tasks):
    """The per-episode loop through the streaming generator: an episode with slow tool calls holds up only itself,
    both episodes' requests are live in the engine at once, every call runs on the engine's own loop, and each
    request carries the seed of its episode and turn (from torch's RNG, as a resumed trial draws it again)."""
    fast, slow = next(t for t in tasks if len(t.solution) == 2), next(t for t in reversed(tasks) if len(t.solution) == 2)
    scripts = {_key(chat, t): [text for text, _ in reference_conversation(t).turns] for t in (fast, slow)}
    engine = StandInEngine(chat, scripts, delay_s=0.05)
    gen = _generator(engine)
    client = SlowClient(EnvClient(hotel_server.base_url), {slow.task_key}, delay_s=0.3)
    try:
        torch.manual_seed(0)
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
        torch.manual_seed(0)
        trajs = asyncio.run(asyncio.wait_for(run_episodes([fast, slow], 1, {"hotel": client}, gen, chat, LIMITS), timeout=60))
    finally:
        gen.close()
    assert [(t.reward, t.stop_reason) for t in trajs] == [(1.0, "done")] * 2
    samples = [c for c in engine.calls if c[0] == "sample"]
    assert len(samples) == sum(t.num_turns for t in trajs) == 6
    assert len({request_id for _, request_id, _ in samples}) == 6  # one id per request
    assert {s for _, _, s in samples} == {request_seed(seed, order, turn) for order in (0, 1) for turn in range(3)}
    assert engine.peak == 2  # the first turns of both episodes were in the engine together
    assert engine.threads == {"vllm-engine-loop"}
    assert not gen.loop.thread.is_alive()  # closed with the generator


def test_a_batch_comes_back_in_the_order_asked_though_it_finishes_in_another():
    engine = StandInEngine(delays={1: 0.2, 2: 0.1, 3: 0.0})
    gen = _generator(engine)
    try:
        out = gen.generate([[1, 10], [2, 20], [3, 30]], SamplingParams(max_new_tokens=2))
    finally:
        gen.close()
    assert [c.token_ids for c in out] == [[1, 10], [2, 20], [3, 30]]
    assert engine.peak == 3


def test_sleep_then_weights_bucket_by_bucket_then_the_prefix_cache_reset():
    """Level 2 drops the weights: sampling before a load is refused; a load wakes the weights, sends each bucket
    (three 1 MiB tensors, 1 MiB buckets: three files), wakes the KV cache and drops the stale prefixes."""
    engine = StandInEngine()
    gen = _generator(engine, weight_bucket_mb=1, dtype="float32")
    try:
        gen.sleep()
        with pytest.raises(RuntimeError, match="load_weights must come before"):
            gen.generate([[1, 2]], SamplingParams(max_new_tokens=2))
        with pytest.raises(RuntimeError, match="load_weights must come before"):
            asyncio.run(gen.agenerate([1, 2], SamplingParams(max_new_tokens=2)))
        weights = [(f"layer{i}.weight", torch.zeros(256, 1024)) for i in range(3)]  # 1 MiB each in float32
        gen.load_weights(weights)
        assert gen.generate([[1, 2]], SamplingParams(max_new_tokens=2))[0].token_ids == [1, 2]
    finally:
        gen.close()
    assert [c for c in engine.calls if c[0] != "sample"] == [
        ("sleep", 2), ("wake_up", ["weights"]), ("load_file", ["layer0.weight"]), ("load_file", ["layer1.weight"]),
        ("load_file", ["layer2.weight"]), ("wake_up", ["kv_cache"]), ("reset_prefix_cache",), ("shutdown",),
    ]


def test_an_engine_that_fails_to_start_leaves_no_loop_behind():
    before = {t.name for t in threading.enumerate()}

    async def broken(_settings, _stop):
        raise RuntimeError("no GPU memory left")

    with pytest.raises(RuntimeError, match="no GPU memory left"):
        VLLMStreamingGenerator(EngineSettings("unused", max_model_len=64), stop_id=7, make_engine=broken)
    assert "vllm-engine-loop" not in {t.name for t in threading.enumerate()} - before


def test_the_engine_loop_refuses_to_wait_on_itself():
    loop = EngineLoop()
    try:
        async def inner():
            return loop.call(lambda: asyncio.sleep(0))

        with pytest.raises(RuntimeError, match="wait on itself"):
            loop.call(inner)
    finally:
        loop.close()
    assert not loop.thread.is_alive()

