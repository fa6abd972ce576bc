"""The generator seam: ``generate(prompt ids batch, sampling) -> completions``, ``load_weights``, ``sleep``/``wake``.

The trainer sees only this protocol and ``make_generator``; ``hf.py`` implements it with Hugging Face
``generate`` (CPU and fallback), ``vllm.py`` with a colocated vLLM engine (GPU). Neither is a branch in
the loop. One step drives a generator as: ``generate`` (many calls: one per batched model turn),
``sleep`` (free memory for the update), ``load_weights`` (the updated policy, parameter by parameter;
only when ``needs_weight_sync``, i.e. the sampler is not the training module itself), ``wake``.

A generator whose ``streams`` is true also serves one request at a time, concurrently (``agenerate``; on a
GPU an engine with continuous batching would hold every live request): ``grpo.episodes`` then sends each
episode's next turn as soon as its tool result is back, with a seed of its own (``SamplingParams.seed``),
instead of one batch per turn that waits for every live episode.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float = 1.0
    seed: int | None = None  # one request's own seed (streamed turns): the same seed samples the same tokens, whenever it runs


@dataclass(frozen=True)
class Completion:
    """Sampled ids (ending in the stop id when ``finish_reason == 'stop'``) and the sampler's log-probs of
    them (temperature applied; NaN where the sampler gave none)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]


class Generator(Protocol):
    needs_weight_sync: bool
    streams: bool  # true: also a StreamingGenerator (rollout.turns: per_episode)
    serves_adapter: bool  # true: also an AdapterServer (a LoRA policy's adapter travels, not its weights)

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]: ...

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None: ...

    def sleep(self) -> None: ...

    def wake(self) -> None: ...


class AdapterServer(Generator, Protocol):
    """A generator that keeps the frozen base and samples through the LoRA policy's adapter."""

    def load_adapter(self, policy: torch.nn.Module) -> None: ...


class StreamingGenerator(Generator, Protocol):
    """A generator that also serves single requests, concurrently, each sampled from its own seed."""

    async def agenerate(self, prompt: list[int], sampling: SamplingParams) -> Completion: ...

    def rollout_seed(self) -> int:
        """A fresh base seed for one rollout, from the trial's RNG (so it is checkpointed and resumed with it)."""
        ...


def draw_rollout_seed(generator: torch.Generator | None = None) -> int:
    """A rollout's base seed (``StreamingGenerator.rollout_seed``), from torch's RNG, or ``generator`` when given (a packed
    member's own state while the members roll out at once): the same draw either way, so both give the same seed."""
    import torch

    return int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())


def check_logprob_gap(gap: float, warn: float, fail: float | None) -> None:
    """The sampler's and the policy's log-probs of the sampled tokens must agree: a jump means the sampler
    is not sampling from the policy being trained (a weight sync that did not take)."""
    if fail is not None and gap > fail:
        raise RuntimeError(
            f"rollout/logprob_gap {gap:.3f} > rollout.logprob_gap_max {fail}: the sampler's log-probs no longer match the policy's, "
            "so its weights are not the trained ones (a failed weight sync?); the trial stops rather than train off-policy"
        )
    if gap > warn:
        log.warning("rollout/logprob_gap %.3f > rollout.logprob_gap_warn %s: the sampler drifts from the policy", gap, warn)


@contextmanager
def drawing_from(generator: Any, seeds: torch.Generator) -> Iterator[None]:
    """``generator``'s rollout seeds drawn from ``seeds`` while the block runs (a packed member's thread beside others':
    its rollouts or its eval), then from torch's RNG again; refused for a generator that does not stream, or whose seeds
    are set already."""
    if not generator.streams or generator.seeds is not None:
        raise ValueError("drawing a rollout's seeds from a generator of its own needs a streaming generator whose seeds are not set already")
    generator.seeds = seeds
    try:
        yield
    finally:
        generator.seeds = None
