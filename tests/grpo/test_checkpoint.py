"""Checkpoints: an exact round trip, pruning, and a run killed with SIGKILL that resumes from its last
checkpoint, repeats no step, and matches an uninterrupted run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from grpo.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from grpo.config import TrainerConfig
from grpo.data import TaskSampler
from grpo.policy import load_policy
from grpo.reporting import ListReporter
from grpo.trainer import train
from tests.conftest import TEST_MODEL

ROOT = Path(__file__).resolve().parents[2]


def test_round_trip_restores_weights_optimizer_rng_and_data_position(tiny_base, tasks, tmp_path):
    policy = load_policy(tiny_base)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    policy(input_ids=torch.tensor([[1, 2, 3]])).logits.sum().backward()
    optimizer.step()
    sampler, shuffle = TaskSampler(tasks, seed=5), torch.Generator().manual_seed(9)
    sampler.next_batch(7)
    torch.manual_seed(123)
    path = save_checkpoint(tmp_path, TrainerState(3, sampler.state()), policy, optimizer, shuffle, keep_last=2)
    expected_next = ([t.task_key for t in sampler.next_batch(5)], torch.rand(3), torch.rand(2, generator=shuffle))

    fresh = load_policy(tiny_base)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
    fresh_sampler, fresh_shuffle = TaskSampler(tasks, seed=5), torch.Generator()
    state = load_checkpoint(path, fresh, fresh_opt, fresh_shuffle)
    fresh_sampler.restore(state.sampler)
    assert state.step == 3 and path.name == "global_step_3"
    assert all(torch.equal(a, b) for a, b in zip(policy.state_dict().values(), fresh.state_dict().values()))
    first = next(iter(optimizer.state.values()))["exp_avg"]
    assert torch.equal(first, next(iter(fresh_opt.state.values()))["exp_avg"])
    got_next = ([t.task_key for t in fresh_sampler.next_batch(5)], torch.rand(3), torch.rand(2, generator=fresh_shuffle))
    assert got_next[0] == expected_next[0] and torch.equal(got_next[1], expected_next[1]) and torch.equal(got_next[2], expected_next[2])


def test_keep_last_prunes_older_checkpoints(tiny_base, tasks, tmp_path):
    policy = load_policy(tiny_base)
    optimizer = torch.optim.AdamW(policy.parameters())
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, TrainerState(step, TaskSampler(tasks, 0).state()), policy, optimizer, torch.Generator(), keep_last=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["global_step_2", "global_step_3"]
    with pytest.raises(FileNotFoundError, match="not a grpo-sweep checkpoint"):
        load_checkpoint(tmp_path, policy, optimizer, torch.Generator())


def _sweep_train(config: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sweep", "train", str(config), *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_kill_9_after_a_checkpoint_then_resume_matches_an_uninterrupted_run(tmp_path):
    base = {
        "model": TEST_MODEL,
        "total_steps": 4,
        "torch_threads": 1,
        "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 3, "max_turns": 2},
        "optim": {"lr": 1e-3},
    }
    straight = ListReporter()
    train(TrainerConfig.model_validate({**base, "checkpoint": {"interval": 2, "dir": str(tmp_path / "a")}}), straight)
    assert [s for s, _ in straight.reports] == [1, 2, 3, 4]

    config = tmp_path / "trainer.yaml"
    config.write_text(json.dumps({**base, "checkpoint": {"interval": 2, "dir": str(tmp_path / "b")}}))
    victim = _sweep_train(config, "--metrics-jsonl", str(tmp_path / "killed.jsonl"))
    deadline = time.monotonic() + 300
    while not (tmp_path / "b" / "global_step_2").is_dir():  # renamed into place only once complete
        assert victim.poll() is None and time.monotonic() < deadline, "the run ended before its step-2 checkpoint"
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    assert victim.wait() == -signal.SIGKILL
    done_before = [json.loads(line)["step"] for line in (tmp_path / "killed.jsonl").read_text().splitlines()]
    assert done_before[:1] == [1] and 4 not in done_before  # killed mid-run (step 2 saved, maybe not yet reported)

    resumed = _sweep_train(config, "--set", f"resume_from={tmp_path / 'b' / 'global_step_2'}", "--metrics-jsonl", str(tmp_path / "resumed.jsonl"))
    assert resumed.wait(timeout=300) == 0, resumed.stdout.read().decode()[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "resumed.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [3, 4]  # no step repeated or skipped
    for (_, want), got in zip(straight.reports[2:], rows):
        for key in ("reward/avg_pass_at_1", "rollout/response_tokens", "policy/loss", "policy/kl", "policy/grad_norm"):
            assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-7), key
