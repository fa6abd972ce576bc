"""GRPO visibly learns on CPU: the learning space's trainer raises held-out pass@1 over its warm-started base.

The slow test starts from the space's shipped base policy (``grpo/bases``; building it takes about 17
minutes on 2 cores, and another CPU's build can copy worse: README) and runs its trainer for a third of
the space's steps (its cosine decay over those), reading the held-out evals (at steps 0 and 10) from
``aggregated_results.jsonl`` (global step 0 is the base) and the episodes from each eval's trajectories. The control with a learning rate 100x
smaller is in README's numbers, not here: it takes as long again and asserts something flat.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.spec.loader import load_space
from toolenvs.protocol import DONE

SPACE = Path(__file__).resolve().parents[2] / "sweep" / "search_spaces" / "learning_cpu.yaml"


def _give_up_share(step_dir: Path) -> float:
    """Share of the eval's episodes whose first answer is <done>: the agent gave up without acting."""
    episodes = [json.loads(line) for line in (step_dir / "hotel.jsonl").read_text().splitlines()]
    return sum(e["output_response"].startswith(DONE) for e in episodes) / len(episodes)


@pytest.mark.slow
def test_good_learning_rate_raises_held_out_pass_at_1(tmp_path):
    from grpo.reporting import ListReporter
    from grpo.trainer import train

    trainer = load_space(SPACE).trainer
    total = trainer.total_steps // 3  # held-out evals at 0 and the end (training draws the same either way)
    cfg = trainer.model_copy(update={"total_steps": total, "output_dir": str(tmp_path),
                                     "eval": trainer.eval.model_copy(update={"interval": total})})
    train(cfg, ListReporter())
    evals = [json.loads(line) for line in (tmp_path / "aggregated_results.jsonl").read_text().splitlines()]
    eval_steps = [e["global_step"] for e in evals]
    curve = [round(e["eval/avg_pass_at_1"], 3) for e in evals]
    give_ups = [round(_give_up_share(tmp_path / f"global_step_{s}"), 3) for s in eval_steps]
    assert eval_steps == list(range(0, cfg.total_steps + 1, cfg.eval.interval))
    assert 0.1 <= curve[0] <= 0.6, curve  # the base succeeds sometimes
    assert 0.25 <= give_ups[0] <= 0.55, give_ups  # and gives up on about model.warmstart_give_up of the tasks
    assert curve[-1] - curve[0] >= 0.15, curve  # GRPO raises it
    assert give_ups[-1] <= give_ups[0] / 2, give_ups  # by learning, from reward alone, that acting pays
