"""The generator seam: ``generate(prompt ids batch, sampling) -> completions``, ``load_weights``, ``sleep``/``wake``.

The trainer sees only this protocol; ``hf.py`` implements it with Hugging Face ``generate`` (CPU and
fallback); a vLLM implementation is one more module here (issue 9), never a branch in the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float = 1.0


@dataclass(frozen=True)
class Completion:
    """Sampled ids (ending in the stop id when ``finish_reason == 'stop'``) and their log-probs."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]


class Generator(Protocol):
    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]: ...

    def load_weights(self, state_dict: dict) -> None: ...

    def sleep(self) -> None: ...

    def wake(self) -> None: ...
