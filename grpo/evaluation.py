"""Held-out evaluation: sample the eval tasks, compute ``eval/*`` metrics, write the trajectories.

Every eval draws from the same seed (HF sampling; vLLM keeps its engine's), so two evals differ by the
policy rather than by the dice, and in a fork of the random state, so evals (one more on resume) leave
training's samples as they were.

Trajectories go to ``{output_dir}/global_step_{N}/{env_key}.jsonl`` (one JSON line per episode:
``input_prompt``, ``output_response``, ``score``, ``stop_reason``, ``env_extras``) and one line per eval
to ``{output_dir}/aggregated_results.jsonl``; N counts the policy updates done before the eval.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import torch

from envs.backend import EnvBackend
from envs.task import Task
from grpo.build import Models
from grpo.chat import ChatFormat
from grpo.config import TrainerConfig
from grpo.episodes import EpisodeLimits, Trajectory, collect
from grpo.metrics import SampleOutcome, eval_metrics

EVAL_SEED_OFFSET = 1_000_003  # eval's seed, cfg.seed + this: apart from training's cfg.seed + rank


def evaluate(cfg: TrainerConfig, models: Models, eval_tasks: list[Task], backend: EnvBackend, global_step: int) -> dict[str, float]:
    """Sample every held-out task ``eval.n_samples`` times; write the trajectories when output_dir is set."""
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else []):
        torch.manual_seed(cfg.seed + EVAL_SEED_OFFSET)
        trajectories = collect(eval_tasks, cfg.eval.n_samples, backend, models.generator, models.chat, EpisodeLimits.of(cfg.rollout))
    metrics = {**eval_summary(trajectories, cfg.eval.n_samples, global_step), "timing/eval_s": time.perf_counter() - started}
    if cfg.output_dir:
        write_eval(cfg.output_dir, global_step, trajectories, metrics, models.chat)
    return metrics


def eval_summary(trajectories: list[Trajectory], n_samples: int, global_step: int) -> dict[str, float]:
    outcomes = [SampleOutcome(t.env_key, t.group_id, t.reward, t.env_error) for t in trajectories]
    return {**eval_metrics(outcomes, n_samples), "eval/global_step": float(global_step)}


def trajectory_record(t: Trajectory, chat: ChatFormat) -> dict:
    return {
        "input_prompt": chat.decode(t.token_ids[: t.prompt_length]),
        "output_response": chat.decode(t.token_ids[t.prompt_length :]),
        "score": t.reward,
        "stop_reason": t.stop_reason,
        "env_extras": {"task_key": t.task_key, "env_key": t.env_key, "turns": t.num_turns, "tool_calls": t.tool_calls,
                       "tool_errors": t.tool_errors, "env_error": t.error, "overlong": t.overlong,
                       "failures": [{"kind": f.kind, "turn": f.turn, "text": f.text} for f in t.failures]},
    }


def write_eval(output_dir: str | Path, global_step: int, trajectories: list[Trajectory], metrics: dict[str, float], chat: ChatFormat) -> Path:
    """Write one eval's trajectories per env and append its metrics; returns the step's directory."""
    root = Path(output_dir)
    step_dir = root / f"global_step_{global_step}"
    step_dir.mkdir(parents=True, exist_ok=True)
    by_env: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        by_env[t.env_key].append(t)
    for env_key, items in by_env.items():
        with open(step_dir / f"{env_key}.jsonl", "w") as f:
            for t in items:
                f.write(json.dumps(trajectory_record(t, chat)) + "\n")
    with open(root / "aggregated_results.jsonl", "a") as f:
        f.write(json.dumps({"global_step": global_step, **metrics}) + "\n")
    return step_dir
