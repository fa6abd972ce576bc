"""GPU fixtures: a random-weight Qwen2.5-0.5B-shaped model on disk (no hub is reachable), written once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def model_05b(tmp_path_factory) -> str:
    from grpo.shapes import write_random_model

    return str(write_random_model("qwen2.5-0.5b", tmp_path_factory.mktemp("qwen05b")))


def needs_vllm():
    return pytest.importorskip("vllm", reason="vLLM is not installed here (the GPU machine carries it: README)")
