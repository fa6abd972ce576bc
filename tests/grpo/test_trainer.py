"""The step loop end to end on CPU: real tiny policy, real MCP server, two GRPO steps."""

from __future__ import annotations

import pytest

from grpo.config import TrainerConfig
from grpo.reporting import ListReporter
from grpo.trainer import train
from tests.conftest import TEST_MODEL


@pytest.mark.slow
def test_two_steps_report_sane_metrics():
    cfg = TrainerConfig.model_validate(
        {"model": TEST_MODEL, "total_steps": 2, "torch_threads": 1, "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 3, "max_turns": 3}}
    )
    reporter = ListReporter()
    train(cfg, reporter)
    assert [step for step, _ in reporter.reports] == [1, 2]
    for _, m in reporter.reports:
        assert 0.0 <= m["reward/avg_pass_at_1"] <= 1.0
        assert 0.0 <= m["reward/variance_per_prompt"] <= 0.25
        assert m["reward/hotel/pass_at_1"] == m["reward/avg_pass_at_1"]  # one env: per-env equals overall
        assert 0.0 <= m["policy/clip_frac"] <= 1.0 and m["policy/kl"] >= 0.0
        assert m["reward/env_error_frac"] == 0.0
        assert 1.0 <= m["rollout/num_turns"] <= 3.0
        assert m["timing/step_s"] > 0 and m["perf/tokens_per_s"] > 0
