"""Held-out evaluation: sample the eval tasks, compute ``eval/*`` metrics, write the trajectories.

Trajectories go to ``{output_dir}/global_step_{N}/{env_key}.jsonl`` (one JSON line per episode:
``input_prompt``, ``output_response``, ``score``, ``stop_reason``, ``env_extras``) and one line per eval
to ``{output_dir}/aggregated_results.jsonl``; N counts the policy updates done before the eval.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from grpo.chat import ChatFormat
from grpo.episodes import Trajectory
from grpo.metrics import SampleOutcome, eval_metrics


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
                       "tool_errors": t.tool_errors, "env_error": t.error},
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
