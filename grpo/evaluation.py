"""Held-out evaluation: sample the eval tasks, compute ``eval/*`` metrics, write the trajectories.

Every eval draws from the same seed (HF sampling; vLLM keeps its engine's), so two evals differ by the
policy rather than by the dice, and in a fork of the random state, so evals (one more on resume) leave
training's samples as they were. A streamed eval (``rollout.turns: per_episode``) draws one thing, its rollout
seed; a packed member's eval in a thread beside others' draws it from a generator of its own holding the same
seed instead (``eval_seeds``), and leaves torch's global RNG alone.

Trajectories go to ``{output_dir}/global_step_{N}/{env_key}.jsonl`` (one JSON line per episode:
``input_prompt``, ``output_response``, ``score``, ``stop_reason``, ``env_extras``) and one line per eval
to ``{output_dir}/aggregated_results.jsonl``; N counts the policy updates done before the eval.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from grpo.build import Models
from grpo.chat import ChatFormat
from grpo.config import TrainerConfig
from grpo.episodes import EpisodeLimits, Trajectory, collect
from grpo.metrics import SCORE, SampleOutcome, eval_gain, eval_metrics
from grpo.rollout import drawing_from
from toolenvs.outcomes import passed
from toolenvs.seam import EnvBackend
from toolenvs.task import Task

log = logging.getLogger(__name__)
EVAL_SEED_OFFSET = 1_000_003  # eval's seed, cfg.seed + this: apart from training's cfg.seed + rank


def evaluate(cfg: TrainerConfig, models: Models, eval_tasks: list[Task], backend: EnvBackend, global_step: int,
             own_seeds: bool = False) -> dict[str, float]:
    """Sample every held-out task ``eval.n_samples`` times; write the trajectories when output_dir is set.
    ``own_seeds``: as ``sample_eval``'s (a packed member's eval in a thread: ``grpo.pack.Pack.step_round``)."""
    started = time.perf_counter()
    trajectories = sample_eval(cfg, models.generator, models.chat, eval_tasks, backend, own_seeds)
    metrics = {**eval_summary(trajectories, cfg.eval.n_samples, global_step), "timing/eval_s": time.perf_counter() - started}
    failed = [t for t in trajectories if t.env_error]
    if failed:  # left out of n: a flaky environment moves pass@1, so say so
        log.warning("eval at step %d: %d of %d episodes failed in the environment (left out); the first: %s",
                    global_step, len(failed), len(trajectories), failed[0].error)
    if cfg.output_dir:
        write_eval(cfg.output_dir, global_step, trajectories, metrics, models.chat)
    return metrics


def sample_eval(cfg: TrainerConfig, generator, chat: ChatFormat, eval_tasks: list[Task], backend: EnvBackend,
                own_seeds: bool = False) -> list[Trajectory]:
    """The eval's episodes: every task ``eval.n_samples`` times from the eval's own seed, in a fork of the random state;
    with ``own_seeds``, the generator's (a streaming one whose ``seeds`` may be set: ``ServedAdapter``) drawn from
    ``eval_seeds`` for the eval, and torch's global RNG untouched (no fork: other threads may be drawing from it)."""
    limits = EpisodeLimits.of(cfg.rollout)
    if not own_seeds:
        with torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else []):
            torch.manual_seed(eval_seed(cfg))
            return collect(eval_tasks, cfg.eval.n_samples, backend, generator, chat, limits)
    with drawing_from(generator, eval_seeds(cfg)):
        return collect(eval_tasks, cfg.eval.n_samples, backend, generator, chat, limits)


def eval_seed(cfg: TrainerConfig) -> int:
    """Every eval's seed: apart from training's (``cfg.seed`` + rank)."""
    return cfg.seed + EVAL_SEED_OFFSET


def eval_seeds(cfg: TrainerConfig) -> torch.Generator:
    """The eval's seed in a generator of its own: a streamed eval's one draw (its rollout seed) from it is the draw
    a forked eval makes from the reseeded global RNG, so an eval that uses it samples what a forked one samples."""
    return torch.Generator().manual_seed(eval_seed(cfg))


def share_base_eval(cfg: TrainerConfig, line: dict[str, Any]) -> dict[str, float]:
    """The sweep's one eval of the base policy, as this trial's step 0: its line (marked ``shared``) starts
    the trial's own ``aggregated_results.jsonl``, so the trial's curve starts from it; returns its metrics."""
    if cfg.output_dir:
        Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
        append_aggregate(cfg.output_dir, {**line, "global_step": 0, "shared": True})
    return {k: float(v) for k, v in line.items() if isinstance(v, int | float) and k.startswith(("eval/", "timing/eval"))}


class Evals:
    """A trial's held-out evals: the newest one's metrics ride along with every report, and ``eval/score``
    is the mean of the last ``window`` evals' pass@1 minus the base policy's (step 0). Kept in checkpoints,
    so a resumed trial neither evaluates again nor forgets the curve it scores."""

    def __init__(self, window: int):
        self.window = window
        self.latest: dict[str, float] = {}
        self.history: dict[int, float] = {}  # global step -> eval/avg_pass_at_1

    def has(self, step: int) -> bool:
        return step in self.history

    def add(self, step: int, metrics: dict[str, float]) -> None:
        self.latest = {k: v for k, v in metrics.items() if k.startswith(("eval/", "timing/eval"))}
        self.history[step] = metrics["eval/avg_pass_at_1"]

    def metrics(self) -> dict[str, float]:
        if 0 not in self.history:
            return dict(self.latest)
        trained = [value for step, value in sorted(self.history.items()) if step > 0]
        return {**self.latest, SCORE: eval_gain(trained, self.history[0], self.window)}

    def state(self) -> dict[str, Any]:
        return {"latest": self.latest, "history": {str(k): v for k, v in self.history.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        self.latest = dict(state.get("latest", {}))
        self.history = {int(k): v for k, v in state.get("history", {}).items()}


def eval_summary(trajectories: list[Trajectory], n_samples: int, global_step: int) -> dict[str, float]:
    outcomes = [SampleOutcome(t.env_key, t.group_id, t.reward, t.env_error) for t in trajectories]
    return {**eval_metrics(outcomes, n_samples), "eval/global_step": float(global_step)}


def task_results(trajectories: list[Trajectory]) -> dict[str, list[int]]:
    """Per held-out task, ``[passes, valid episodes]``: what a verdict's bootstrap over tasks resamples."""
    results: dict[str, list[int]] = {}
    for t in trajectories:
        counts = results.setdefault(t.task_key, [0, 0])
        if not t.env_error:
            counts[0] += passed(t.reward)
            counts[1] += 1
    return results


def task_envs(trajectories: list[Trajectory]) -> dict[str, str]:
    """Each held-out task's env_key: what a per-env bootstrap picks its tasks by."""
    return {t.task_key: t.env_key for t in trajectories}


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
    append_aggregate(root, {"global_step": global_step, **metrics, "tasks": task_results(trajectories), "task_envs": task_envs(trajectories)})
    return step_dir


def append_aggregate(output_dir: str | Path, line: dict[str, Any]) -> None:
    """One eval's line in ``aggregated_results.jsonl``: its metrics, its per-task results and each task's env."""
    with open(Path(output_dir) / "aggregated_results.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


def main(argv: list[str] | None = None) -> None:
    """``python -m grpo.evaluation '<trainer config JSON>' OUT_DIR``: evaluate the base policy once, for a
    sweep's trials to share (their curves start from it): dumps and ``aggregated_results.jsonl`` in OUT_DIR."""
    import sys

    from grpo.build import build_models, open_environments
    from grpo.data import trial_tasks
    from toolenvs.lifeline import exit_with_parent

    exit_with_parent(os.getppid())  # a driver killed meanwhile takes the eval with it
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # the HTTP clients' per-request lines stay out
    logging.getLogger("grpo").setLevel(logging.INFO)
    logging.getLogger("grpo.warmstart").setLevel(logging.WARNING)  # the driver found or built the base, and said which
    raw, out = (argv or sys.argv[1:])[:2]
    cfg = TrainerConfig.model_validate({**json.loads(raw), "output_dir": out})
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    train_tasks, eval_tasks = trial_tasks(cfg)
    models = build_models(cfg, train_tasks)
    with open_environments(cfg, eval_tasks) as envs:
        metrics = evaluate(cfg, models, eval_tasks, envs, global_step=0)
    print(f"base eval: held-out pass@1 {metrics['eval/avg_pass_at_1']:.3f} over {len(eval_tasks)} tasks x {cfg.eval.n_samples} samples "
          f"in {metrics['timing/eval_s']:.0f} s ({out})", flush=True)
    if metrics["eval/env_error_frac"] > cfg.eval.max_base_env_errors:
        print(f"{100 * metrics['eval/env_error_frac']:.1f}% of the base eval's episodes were environment errors (left out), "
              f"above eval.max_base_env_errors={cfg.eval.max_base_env_errors:g} (the first error is logged above)", flush=True)


if __name__ == "__main__":
    main()
