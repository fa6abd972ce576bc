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

Not yet run on a GPU (written 2026-11-28 with no GPU lent): ``tests/gpu/test_vllm_generator.py`` runs it, and
``rollout.turns: per_episode`` with ``backend: vllm`` stays refused until that test has passed on one.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from configkit import environ
from grpo.distributed import ray_gpu_ids
from grpo.rollout import Completion, SamplingParams
from grpo.rollout.vllm import EngineSettings, SleepingEngine, engine_visible_devices, visible_devices

T = TypeVar("T")


class StreamingEngine(Protocol):
    """What the generator needs of an asynchronous engine; every call runs on the engine's loop."""

    async def sample(self, request_id: str, prompt: list[int], sampling: SamplingParams) -> Completion: ...

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
    requests at once (the same engine); sleep, wake and weights by ``SleepingEngine``'s rules, on the engine's loop."""

    needs_weight_sync = True
    streams = True
    serves_adapter = False  # LoRA: the batched engine only, for now (grpo.rollout.vllm.VLLMGenerator.load_adapter)

    def __init__(self, settings: EngineSettings, stop_id: int, local_rank: int = 0,
                 make_engine: Callable[[EngineSettings, int], Awaitable[StreamingEngine]] | None = None):
        if settings.max_loras:
            raise ValueError("model.lora with rollout.turns 'per_episode': the streaming engine serves no adapter yet (its weight "
                             "sync would push the merged model into a LoRA engine); set rollout.turns: batched")
        self.settings = settings
        self.stop_id = stop_id
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
        self.wake()
        request_id = f"grpo-{next(self._ids)}"
        return await self.loop.acall(lambda: self.engine.sample(request_id, prompt, sampling))

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        self.wake()
        ids = [f"grpo-{next(self._ids)}" for _ in prompts]

        async def every() -> list[Completion]:
            return list(await asyncio.gather(*(self.engine.sample(i, p, sampling) for i, p in zip(ids, prompts))))

        return self.loop.call(every)

    def rollout_seed(self) -> int:
        """From torch's RNG, as the HF generator's: the trial's checkpoint holds it, so a resumed trial draws the same."""
        import torch

        return int(torch.randint(0, 2**31 - 1, (1,)).item())

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

    async def sample(self, request_id: str, prompt: list[int], sampling: SamplingParams) -> Completion:
        from vllm.inputs import TokensPrompt

        from grpo.rollout.vllm import completion_of, vllm_sampling

        final = None
        params = vllm_sampling(sampling, self.stop_id, final_only=True)
        async for output in self.engine.generate(TokensPrompt(prompt_token_ids=prompt), params, request_id):
            final = output
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM returned no output for request {request_id}")
        return completion_of(final.outputs[0])

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
