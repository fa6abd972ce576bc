"""Seconds per GRPO step: our trainer vs TRL's ``GRPOTrainer``, side by side in one process on CPU.

Same tiny warm-started model and tokenizer, same single-turn hotel tasks (the one-call families), same
settings: 8 prompts x 4 samples per step, up to 64 new tokens, temperature 1, KL 0.01 to a frozen
reference (k3 in both), one optimizer step per batch, AdamW at the same LR, the same torch threads.
Ours runs each episode against the live MCP server (one model turn, then the verifier reads the
server's state); TRL's reward function replays the parsed call in-process against the same app code,
which is cheaper than a server round trip, so the comparison does not flatter us. The first step of
each (warm-up: allocation, server start) is left out. Means and medians are both given: on a shared
machine one step slowed by another process moves a mean of six a long way. ``ours_rollout_s`` is the part
of our step spent in episodes (generation, tool calls, verification).

    python bench/trainer_vs_trl.py [--steps 6] [--threads 2] [--rounds 1]

``--rounds N`` runs ours then TRL N times and pools their steps, so a burst of load from another process
falls on both rather than on whichever ran during it.

Needs ``trl`` (``pip install trl``; not a dependency of the project). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import record  # noqa: E402
from grpo.chat import opening_messages  # noqa: E402
from grpo.config import DEFAULT_TASKS, TrainerConfig  # noqa: E402
from grpo.reporting import ListReporter  # noqa: E402
from grpo.trainer import train  # noqa: E402
from grpo.warmstart import base_policy_path  # noqa: E402
from toolenvs.local import get_app, tool_signatures  # noqa: E402
from toolenvs.protocol import ToolCall, parse_action  # noqa: E402
from toolenvs.task import Task, load_tasks  # noqa: E402

PROMPTS, SAMPLES, NEW_TOKENS, LR, KL = 8, 4, 64, 1e-4, 0.01
MODEL = {"hidden_size": 128, "num_layers": 3, "num_heads": 4, "intermediate_size": 256, "warmstart_steps": 150}


def single_turn_tasks(path: Path) -> list[Task]:
    """The hotel tasks solved by one tool call, written to ``path`` (our trainer reads a file)."""
    tasks = [t for t in load_tasks(DEFAULT_TASKS) if len(t.solution) == 1]
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return tasks


def ours(tasks_file: Path, steps: int, threads: int) -> tuple[list[float], list[float]]:
    """Seconds per step and seconds of rollout per step, warm-up step left out."""
    cfg = TrainerConfig.model_validate(
        {
            "model": MODEL,
            "total_steps": steps + 1,
            "torch_threads": threads,
            "seed": 0,
            "env": {"tasks_path": str(tasks_file)},
            "optim": {"lr": LR},
            "algorithm": {"kl_coef": KL, "kl_estimator": "k3", "mini_batches": 1, "ppo_epochs": 1},
            "rollout": {
                "prompts_per_step": PROMPTS,
                "n_samples_per_prompt": SAMPLES,
                "max_turns": 1,
                "max_generate_length": NEW_TOKENS,
                "temperature": 1.0,
            },
        }
    )
    reporter = ListReporter()
    train(cfg, reporter)
    timed = [m for _, m in reporter.reports[1:]]
    return [m["timing/step_s"] for m in timed], [m["timing/rollout_s"] for m in timed]


def reward_by_replay(completions, task_json, **_) -> list[float]:
    """TRL reward function: parse the answer, replay it against the app in-process, run the verifier."""
    rewards = []
    for completion, raw in zip(completions, task_json):
        task = Task.model_validate_json(raw)
        text = completion[0]["content"] if isinstance(completion, list) else completion
        action = parse_action(text)
        if not isinstance(action, ToolCall):
            rewards.append(0.0)
            continue
        app = get_app(task.env_key)
        start, final, _ = app.replay(task.env_variables, task.initial_state, [(action.name, action.arguments)])
        rewards.append(app.verify(final, start, task.verifier))
    return rewards


def trl_steps(tasks: list[Task], base: Path, steps: int, threads: int, out: Path) -> list[float]:
    from datasets import Dataset
    from transformers import Qwen2ForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo.tiny import load_tiny_tokenizer

    tokenizer = load_tiny_tokenizer(str(base))
    rows = [
        {"prompt": opening_messages(t.prompt, tool_signatures(get_app(t.env_key)), t.env_variables), "task_json": t.model_dump_json()}
        for t in tasks
    ]
    times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *args, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, *args, **kwargs):
            times.append(time.perf_counter() - self.started)

    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        fp16=False,
        report_to=[],
        logging_steps=1000,
        save_strategy="no",
        max_steps=steps + 1,
        learning_rate=LR,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        per_device_train_batch_size=PROMPTS * SAMPLES,
        gradient_accumulation_steps=1,
        num_generations=SAMPLES,
        max_completion_length=NEW_TOKENS,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        beta=KL,
        num_iterations=1,
        loss_type="grpo",
        seed=0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    model = Qwen2ForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_by_replay,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[StepTimer()],
    )
    torch.set_num_threads(threads)
    trainer.train()
    return times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="timed steps of each (after one warm-up step)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="alternate ours and TRL this many times, steps pooled")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        tasks_file = Path(tmp) / "single_turn.jsonl"
        tasks = single_turn_tasks(tasks_file)
        base = base_policy_path(TrainerConfig.model_validate({"model": MODEL}).model, tasks)
        ours_s, rollout_s, trl_s = [], [], []
        for round_ in range(args.rounds):
            step_s, rolled_s = ours(tasks_file, args.steps, args.threads)
            ours_s += step_s
            rollout_s += rolled_s
            trl_s += trl_steps(tasks, base, args.steps, args.threads, Path(tmp) / f"trl{round_}")
    ours_mean, trl_mean = statistics.fmean(ours_s), statistics.fmean(trl_s)
    ours_median, trl_median = statistics.median(ours_s), statistics.median(trl_s)
    print(
        f"ours: {ours_mean:.3f} s/step over {len(ours_s)} steps {[round(s, 3) for s in ours_s]} (rollout {[round(s, 3) for s in rollout_s]})"
    )
    print(f"TRL:  {trl_mean:.3f} s/step over {len(trl_s)} steps {[round(s, 3) for s in trl_s]}")
    runs = [{"side": "ours", "step_s": round(t, 4), "rollout_s": round(r, 4)} for t, r in zip(ours_s, rollout_s)]
    runs += [{"side": "trl", "step_s": round(t, 4)} for t in trl_s]
    record("trainer_vs_trl", runs, {
        "ours_s": round(ours_mean, 4),
        "baseline_s": round(trl_mean, 4),
        "ratio": round(ours_mean / trl_mean, 3),
        "ours_median_s": round(ours_median, 4),
        "baseline_median_s": round(trl_median, 4),
        "ratio_median": round(ours_median / trl_median, 3),
        "ours_rollout_s": round(statistics.fmean(rollout_s), 4),
        "steps": len(ours_s),
        "rounds": args.rounds,
        "prompts": PROMPTS,
        "samples": SAMPLES,
        "threads": args.threads,
    })

if __name__ == "__main__":
    main()
