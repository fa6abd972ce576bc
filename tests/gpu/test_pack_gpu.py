"""Two LoRA trials packed on one GPU over one base and one vLLM engine (``grpo.pack``): each member's requests
name its own adapter, each update reloads only that adapter, and the base is moved to the GPU whole; with a batch
per turn (members stepping in turn) and on the streaming engine (``rollout.turns: per_episode``: the members'
rollouts at once, each request naming its member's adapter).

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

from bench.packed_lora_gpu import trial_config  # one LoRA trial on vLLM, built past the config's refusal
from tests.gpu.conftest import needs_vllm

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("turns", ["batched", "per_episode"])
def test_two_packed_lora_trials_each_sample_their_own_adapter(model_05b, tmp_path, turns):
    needs_vllm()
    from grpo.pack import train_packed
    from grpo.reporting import ListReporter

    model = {"name_or_path": model_05b, "dtype": "bfloat16"}
    cfgs = [trial_config(model, 1e-2, 0, 4, str(tmp_path / "a"), "vllm", turns), trial_config(model, 1e-3, 1, 4, str(tmp_path / "b"), "vllm", turns)]
    reporters = [ListReporter(), ListReporter()]
    train_packed(cfgs, reporters)
    runs = [[metrics for _, metrics in r.reports] for r in reporters]
    if os.environ.get("GRPO_GPU_METRICS"):
        with open(os.environ["GRPO_GPU_METRICS"].replace(".json", f"_pack_{turns}.json"), "w") as f:
            json.dump(runs, f, indent=1)
    for steps in runs:
        assert len(steps) == 4
        gaps = [m["rollout/logprob_gap"] for m in steps]
        assert all(g < 0.05 for g in gaps), gaps  # its own adapter, as of its last update
    fast, slow = (runs[0][-1]["policy/kl"], runs[1][-1]["policy/kl"])
    assert fast > slow, (fast, slow)  # ten times the learning rate moved its adapter further from the base
    assert fast > 1e-3, fast  # and far enough that a stale or wrong adapter would show as gap
