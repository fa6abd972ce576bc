"""Two LoRA trials packed on one GPU over one base and one vLLM engine (``grpo.pack``): each member's requests
name its own adapter, each update reloads only that adapter, and the base is moved to the GPU whole.

The proof that each member samples its own, current adapter: with different learning rates the two members
drift apart from the base (``policy/kl``), yet each one's sampler log-probs keep matching its own policy's
(``rollout/logprob_gap`` < 0.05 every step); an engine serving the other member's adapter, a stale version or
the bare base would show the drift as gap. What the sweep's config needs before it lets GPU packs through.
Metrics go to ``GRPO_GPU_METRICS`` (``..._pack.json``) when set, for the note.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.gpu.conftest import needs_vllm

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _cfg(model_05b: str, lr: float, seed: int, out: str):
    from grpo.config import TrainerConfig

    cfg = TrainerConfig.model_validate({
        "model": {"name_or_path": model_05b, "dtype": "bfloat16", "lora": {"rank": 16, "alpha": 32.0}},
        "optim": {"lr": lr},
        "algorithm": {"kl_coef": 0.01, "entropy_coef": 0.01, "mini_batches": 1},  # a random model's rewards are all 0: the entropy term moves the adapters
        "rollout": {"prompts_per_step": 4, "n_samples_per_prompt": 4, "max_turns": 2, "max_generate_length": 32,
                    "max_input_length": 1536, "max_sequence_length": 2048},
        "total_steps": 4, "seed": seed, "output_dir": out,
    })
    # the config refuses LoRA with vLLM until this passes: the backend goes in after validation
    vllm = cfg.rollout.vllm.model_copy(update={"gpu_memory_utilization": 0.3, "enforce_eager": True})
    return cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"backend": "vllm", "vllm": vllm})})


@pytest.mark.timeout(600)
def test_two_packed_lora_trials_each_sample_their_own_adapter(model_05b, tmp_path):
    needs_vllm()
    from grpo.pack import train_packed
    from grpo.reporting import ListReporter

    cfgs = [_cfg(model_05b, 1e-2, 0, str(tmp_path / "a")), _cfg(model_05b, 1e-3, 1, str(tmp_path / "b"))]
    reporters = [ListReporter(), ListReporter()]
    train_packed(cfgs, reporters)
    runs = [[metrics for _, metrics in r.reports] for r in reporters]
    if os.environ.get("GRPO_GPU_METRICS"):
        with open(os.environ["GRPO_GPU_METRICS"].replace(".json", "_pack.json"), "w") as f:
            json.dump(runs, f, indent=1)
    for steps in runs:
        assert len(steps) == 4
        gaps = [m["rollout/logprob_gap"] for m in steps]
        assert all(g < 0.05 for g in gaps), gaps  # its own adapter, as of its last update
    fast, slow = (runs[0][-1]["policy/kl"], runs[1][-1]["policy/kl"])
    assert fast > slow, (fast, slow)  # ten times the learning rate moved its adapter further from the base
    assert fast > 1e-3, fast  # and far enough that a stale or wrong adapter would show as gap
