"""One vLLM engine holding every live request (``rollout.turns: per_episode`` on a GPU).

``grpo.episodes`` sends each episode's next turn as soon as its tool result is back (``agenerate``); here every
such request goes into one asynchronous engine (vLLM's ``AsyncLLM``), which batches whatever is live at each of
its steps (continuous batching across episodes and turns), so no turn waits for the slowest episode's tool call.
Each request carries its own seed (``SamplingParams.seed``), so a transcript does not depend on timing.

The engine lives on an event loop of its own, in a daemon thread (``EngineLoop``): the trainer's calls
(``generate``, ``sleep``, ``load_weights``) block on it, the episode loop's ``agenerate`` awaits it from its own
loop. Weights, sleep and wake follow ``grpo.rollout.vllm.SleepingEngine`` (the staging through shared memory, level-2 sleep,
prefix cache reset after a load), through the async engine's calls. vLLM is imported only in ``AsyncVLLM``; the
generator itself drives any ``StreamingEngine`` (a stand-in one on CPU tests the loop and the state machine).

Ran on one H200 on 2026-11-28 (38e8ce3: ``tests/gpu/test_vllm_generator.py`` and five GRPO steps). With
``settings.max_loras`` > 0 it keeps the base and serves LoRA adapters, each request naming its adapter's current
version (``SleepingEngine.load_adapter``): a LoRA trial's, or every member of a pack at once (``grpo.pack``); that
side is tested on CPU with an HF-backed stand-in and has not run on a GPU.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from configkit import environ
from grpo.distributed import ray_gpu_ids
from grpo.rollout import Completion, SamplingParams, draw_rollout_seed
from grpo.rollout.adapters import AdapterVersion
from grpo.rollout.vllm import EngineSettings, SleepingEngine, engine_visible_devices, visible_devices

T = TypeVar("T")


class StreamingEngine(Protocol):
    """What the generator needs of an asynchronous engine; every call runs on the engine's loop."""

    async def sample(self, request_id: str, prompt: list[int], sampling: SamplingParams, adapter: AdapterVersion | None = None) -> Completion:
        """One request, through ``adapter`` (a loaded version) or the base (None)."""
        ...

    async def add_adapter(self, version: AdapterVersion) -> bool: ...

    async def remove_adapter(self, adapter_id: int) -> bool: ...

    async def sleep(self, level: int) -> None: ...

    async def wake_up(self, tags: list[str] | None = None) -> None: ...

    async def call_workers(self, fn: Callable, arg: Any) -> None: ...

    async def reset_prefix_cache(self) -> None: ...

    def shutdown(self) -> None: ...


class EngineLoop:
    """An asyncio loop on a daemon thread of its own: coroutines handed in from any thread, or awaited from any
    other loop, run there (an async engine's background tasks belong to the loop it was made on)."""

    def __init__(self, name: str = "vllm-engine-loop"):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the loop and wait for it here (never from the loop's own thread: that would deadlock)."""
        if threading.current_thread() is self.thread:
            raise RuntimeError("EngineLoop.call from the engine's own loop would wait on itself")
        return asyncio.run_coroutine_threadsafe(_awaited(make), self.loop).result()

    async def acall(self, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make()`` on the loop; the caller's own loop goes on meanwhile."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_awaited(make), self.loop))

    def close(self, timeout_s: float = 10.0) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout_s)
        if not self.thread.is_alive():
            self.loop.close()


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


class VLLMStreamingGenerator(SleepingEngine):
    """The generator seam over one asynchronous engine: ``agenerate`` per request, ``generate`` as all of a batch's
    requests at once (the same engine); sleep, wake, weights and adapters by ``SleepingEngine``'s rules, on the
    engine's loop. With ``settings.max_loras`` > 0 the engine keeps the base and serves adapters (a LoRA trial's, or
    a pack's members': ``agenerate_as``), from any number of threads at once."""

    needs_weight_sync = True
    streams = True

    def __init__(self, settings: EngineSettings, stop_id: int, local_rank: int = 0,
                 make_engine: Callable[[EngineSettings, int], Awaitable[StreamingEngine]] | None = None, adapter_name: str = "default"):
        """``adapter_name``: the peft adapter the engine serves when ``settings.max_loras`` > 0 (a LoRA trial's)."""
        self.settings = settings
        self.stop_id = stop_id
        self._open_shelf(adapter_name)
        self._ids = itertools.count()
        self.loop = EngineLoop()
        make = make_engine or AsyncVLLM.start
        try:
            with visible_devices(engine_visible_devices(local_rank, environ.CUDA_VISIBLE_DEVICES.get(), ray_gpu_ids())):
                self.engine = self.loop.call(lambda: make(settings, stop_id))  # made on its loop: its output handler runs there
        except BaseException:
            self.loop.close()
            raise

    async def agenerate(self, prompt: list[int], sampling: SamplingParams) -> Completion:
        return await self.agenerate_as(self.adapter_name, prompt, sampling)

    async def agenerate_as(self, name: str, prompt: list[int], sampling: SamplingParams) -> Completion:
        """One request through adapter ``name``'s current version (the base when it has none, or the engine serves none)."""
        self.wake()
        request_id, version = f"grpo-{next(self._ids)}", self.version_of(name)
        return await self.loop.acall(lambda: self.engine.sample(request_id, prompt, sampling, version))

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        return self.generate_as(self.adapter_name, prompts, sampling)

    def generate_as(self, name: str, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        self.wake()
        ids, version = [f"grpo-{next(self._ids)}" for _ in prompts], self.version_of(name)

        async def every() -> list[Completion]:
            return list(await asyncio.gather(*(self.engine.sample(i, p, sampling, version) for i, p in zip(ids, prompts))))

        return self.loop.call(every)

    def rollout_seed(self) -> int:
        """From torch's RNG, as the HF generator's: the trial's checkpoint holds it, so a resumed trial draws the same."""
        return draw_rollout_seed()

    def _add_lora(self, version: AdapterVersion) -> bool:
        return self.loop.call(lambda: self.engine.add_adapter(version))

    def _remove_lora(self, adapter_id: int) -> None:
        self.loop.call(lambda: self.engine.remove_adapter(adapter_id))

    def _sleep(self, level: int) -> None:
        self.loop.call(lambda: self.engine.sleep(level))

    def _wake(self, tags: list[str] | None) -> None:
        self.loop.call(lambda: self.engine.wake_up(tags))

    def _call_workers(self, fn: Callable, arg: Any) -> None:
        self.loop.call(lambda: self.engine.call_workers(fn, arg))

    def _reset_prefix_cache(self) -> None:
        self.loop.call(self.engine.reset_prefix_cache)

    def close(self) -> None:
        """Shut the engine down on its own loop (where its background tasks live), then stop the loop."""
        async def shutdown() -> None:
            self.engine.shutdown()

        try:
            self.loop.call(shutdown)
        finally:
            self.loop.close()


class AsyncVLLM:
    """vLLM's ``AsyncLLM`` as a ``StreamingEngine`` (GPU; the one place this module imports vLLM)."""

    def __init__(self, engine: Any, stop_id: int):
        self.engine = engine
        self.stop_id = stop_id

    @classmethod
    async def start(cls, settings: EngineSettings, stop_id: int) -> AsyncVLLM:
        from grpo.rollout.vllm import engine_kwargs, no_vllm

        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise no_vllm(exc) from None
        environ.VLLM_ALLOW_INSECURE_SERIALIZATION.set_default("1")  # collective_rpc with our load function
        args = AsyncEngineArgs(**engine_kwargs(settings), disable_log_stats=True)
        return cls(AsyncLLM.from_engine_args(args), stop_id)

    async def sample(self, request_id: str, prompt: list[int], sampling: SamplingParams, adapter: AdapterVersion | None = None) -> Completion:
        from vllm.inputs import TokensPrompt

        from grpo.rollout.vllm import completion_of, lora_request, vllm_sampling

        final = None
        params = vllm_sampling(sampling, self.stop_id, final_only=True)
        lora = None if adapter is None else lora_request(adapter)
        async for output in self.engine.generate(TokensPrompt(prompt_token_ids=prompt), params, request_id, lora_request=lora):
            final = output
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM returned no output for request {request_id}")
        return completion_of(final.outputs[0])

    async def add_adapter(self, version: AdapterVersion) -> bool:
        from grpo.rollout.vllm import lora_request

        return await self.engine.add_lora(lora_request(version))

    async def remove_adapter(self, adapter_id: int) -> bool:
        return await self.engine.remove_lora(adapter_id)

    async def sleep(self, level: int) -> None:
        await self.engine.sleep(level)

    async def wake_up(self, tags: list[str] | None = None) -> None:
        await self.engine.wake_up(tags)

    async def call_workers(self, fn: Callable, arg: Any) -> None:
        await self.engine.collective_rpc(fn, args=(arg,))

    async def reset_prefix_cache(self) -> None:
        await self.engine.reset_prefix_cache()

    def shutdown(self) -> None:
        self.engine.shutdown()
