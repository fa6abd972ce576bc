"""A GRPO trial on the GPU with vLLM rollouts: five steps on the random 0.5B-shaped model against the
local hotel MCP server, FSDP2 bf16 update, weight sync after every step; turns batched, and per episode
(each episode's turn sent to one streaming engine as its tool result is back).

The proof that sync works: the policy moves far from the frozen reference (KL to it grows well past what
bf16 noise gives) while the sampler's log-probs keep matching the policy's (``rollout/logprob_gap``
< 0.05 every step). A stale engine would show the policy's whole drift as gap. Metrics go to
``GRPO_GPU_METRICS`` (a JSON file) when set, for the note.
"""

from __future__ import annotations

import json
import os

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("turns", ["batched", "per_episode"])  # per_episode: the streaming engine (grpo/rollout/vllm_stream.py)
def test_five_grpo_steps_with_vllm(model_05b, tmp_path, turns):
    pytest.importorskip("vllm", reason="vLLM is not installed here")
    from grpo.config import TrainerConfig
    from grpo.reporting import ListReporter
    from grpo.trainer import train

    cfg = TrainerConfig.model_validate(
        {
            "model": {"name_or_path": model_05b, "dtype": "bfloat16"},
            "optim": {"lr": 1e-3},
            "algorithm": {"kl_coef": 0.01, "entropy_coef": 0.01, "mini_batches": 2},
            "rollout": {
                "backend": "vllm",
                "turns": turns,
                "prompts_per_step": 8,
                "n_samples_per_prompt": 4,
                "max_turns": 2,
                "max_generate_length": 32,
                "max_input_length": 1536,
                "max_sequence_length": 2048,
                "vllm": {"gpu_memory_utilization": 0.3, "enforce_eager": True},
            },
            "total_steps": 5,
            "output_dir": str(tmp_path / "out"),
        }
    )
    reporter = ListReporter()
    train(cfg, reporter)
    steps = [metrics for _, metrics in reporter.reports]
    if os.environ.get("GRPO_GPU_METRICS"):
        path = os.environ["GRPO_GPU_METRICS"]
        with open(path if turns == "batched" else path.replace(".json", f"_{turns}.json"), "w") as f:
            json.dump(steps, f, indent=1)
    assert len(steps) == 5
    gaps = [m["rollout/logprob_gap"] for m in steps]
    assert all(g < 0.05 for g in gaps), gaps
    assert steps[-1]["policy/kl"] > 0.01, [m["policy/kl"] for m in steps]  # the policy moved: a stale sampler would show it
    assert all(m["timing/weight_sync_s"] > 0 for m in steps)


@pytest.mark.timeout(600)
def test_a_lora_trial_with_vllm_samples_its_current_adapter(model_05b, tmp_path):
    """A lone LoRA trial sampled by vLLM (the adapter written and reloaded after every update, the base kept): its
    adapter moves the policy from the reference (entropy bonus: a random model's rewards are all 0, so nothing else
    would move it from B = 0), and the engine's log-probs keep matching the adapted policy's. What the config's
    refusal of ``model.lora`` with ``rollout.backend: vllm`` waits for (the backend goes in after validation)."""
    pytest.importorskip("vllm", reason="vLLM is not installed here")
    from bench.packed_lora_gpu import trial_config  # the packed-LoRA bench's trial: LoRA rank 16, entropy bonus, eager engine
    from grpo.reporting import ListReporter
    from grpo.trainer import train

    cfg = trial_config({"name_or_path": model_05b, "dtype": "bfloat16"}, 1e-2, 0, 4, str(tmp_path / "out"), "vllm")
    reporter = ListReporter()
    train(cfg, reporter)
    steps = [metrics for _, metrics in reporter.reports]
    if os.environ.get("GRPO_GPU_METRICS"):
        with open(os.environ["GRPO_GPU_METRICS"].replace(".json", "_lora.json"), "w") as f:
            json.dump(steps, f, indent=1)
    gaps = [m["rollout/logprob_gap"] for m in steps]
    assert all(g < 0.05 for g in gaps), gaps
    assert steps[-1]["policy/kl"] > 1e-3, [m["policy/kl"] for m in steps]
