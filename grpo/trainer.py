"""The GRPO step loop: an outline of named calls. Usable without Tune: ``train(cfg, reporter)``.

One step: draw tasks, run ``n_samples_per_prompt`` episodes of each against the environment, compute
group-relative advantages, update the policy, report metrics once. Held-out eval runs before step 1 (the
base policy), after every ``eval.interval``-th step and after the last; each report carries the newest.
Checkpoints (``grpo.checkpoint``) make a trial resumable at its next step with the same data order.
Leaves out: FSDP2 (issue 4), vLLM (issue 9).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import torch

from envs.client import EnvClient
from envs.local.launch import LocalEnvServer
from grpo.algorithm import group_advantages
from grpo.batching import collate
from grpo.chat import ChatFormat
from grpo.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from grpo.config import TrainerConfig
from grpo.data import TaskSampler, trial_tasks
from grpo.episodes import EpisodeLimits, Trajectory, run_episodes
from grpo.evaluation import eval_summary, write_eval
from grpo.metrics import SampleOutcome, reward_metrics, rollout_metrics
from grpo.policy import load_policy
from grpo.reporting import Reporter
from grpo.rollout.hf import HFGenerator
from grpo.schedule import lr_multiplier
from grpo.tiny import load_tokenizer
from grpo.update import UpdateSettings, policy_update
from grpo.warmstart import base_policy_path


@dataclass
class Models:
    """What a trial trains with: chat format, policy, frozen reference (None when kl_coef is 0), optimizer, sampler."""

    chat: ChatFormat
    policy: torch.nn.Module
    reference: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    generator: HFGenerator


def train(cfg: TrainerConfig, reporter: Reporter) -> None:
    """Run GRPO steps up to ``cfg.total_steps`` (from ``resume_from``'s next step), reporting after each;
    the newest eval metrics ride along, and a checkpoint every ``checkpoint.interval`` steps."""
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    torch.manual_seed(cfg.seed)
    if cfg.output_dir:  # the resolved config beside the trial's outputs (there are no secrets in it)
        Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(cfg.output_dir) / "trainer_config.json").write_text(cfg.model_dump_json(indent=2))
    train_tasks, eval_tasks = trial_tasks(cfg)
    models = build_models(cfg, train_tasks)
    sampler = TaskSampler(train_tasks, cfg.seed)
    shuffle = torch.Generator().manual_seed(cfg.seed)
    first_step = resume(cfg, models, sampler, shuffle) + 1
    saves_to = checkpoint_root(cfg) if cfg.checkpoint.interval else None
    latest_eval: dict[str, float] = {}
    with ExitStack() as stack:
        env_keys = sorted({t.env_key for t in train_tasks + eval_tasks})
        urls = {key: stack.enter_context(LocalEnvServer(key)).base_url for key in env_keys}
        for step in range(first_step, cfg.total_steps + 1):
            set_learning_rate(cfg, models.optimizer, step)
            if eval_tasks and step == first_step:
                latest_eval = evaluate(cfg, models, eval_tasks, urls, global_step=step - 1)  # where training starts
            metrics = run_step(cfg, models, sampler.next_batch(cfg.rollout.prompts_per_step), urls, shuffle)
            last = step == cfg.total_steps
            if eval_tasks and (step % cfg.eval.interval == 0 or last):
                latest_eval = evaluate(cfg, models, eval_tasks, urls, global_step=step)
            saved = None
            if saves_to and (step % cfg.checkpoint.interval == 0 or last):
                state = TrainerState(step, sampler.state())
                saved = str(save_checkpoint(saves_to, state, models.policy, models.optimizer, shuffle, cfg.checkpoint.keep_last))
            reporter.report(step, {**metrics, **latest_eval}, saved)


def resume(cfg: TrainerConfig, models: Models, sampler: TaskSampler, shuffle: torch.Generator) -> int:
    """Restore from ``cfg.resume_from`` if set; returns the last finished step (0 for a fresh start)."""
    if not cfg.resume_from:
        return 0
    state = load_checkpoint(cfg.resume_from, models.policy, models.optimizer, shuffle)
    sampler.restore(state.sampler)
    return state.step


def checkpoint_root(cfg: TrainerConfig) -> Path:
    if cfg.checkpoint.dir:
        return Path(cfg.checkpoint.dir)
    if cfg.output_dir:
        return Path(cfg.output_dir) / "checkpoints"
    return Path(tempfile.mkdtemp(prefix="grpo-checkpoints-"))


def evaluate(cfg: TrainerConfig, models: Models, eval_tasks, urls: dict[str, str], global_step: int) -> dict[str, float]:
    """Sample every held-out task ``eval.n_samples`` times; write the trajectories when output_dir is set."""
    started = time.perf_counter()
    limits = episode_limits(cfg)
    trajectories = collect(eval_tasks, cfg, urls, models.generator, models.chat, limits, cfg.eval.n_samples)
    metrics = {**eval_summary(trajectories, cfg.eval.n_samples, global_step), "timing/eval_s": time.perf_counter() - started}
    if cfg.output_dir:
        write_eval(cfg.output_dir, global_step, trajectories, metrics, models.chat)
    return metrics


def build_models(cfg: TrainerConfig, tasks) -> Models:
    base = str(base_policy_path(cfg.model, tasks, cfg.seed))
    chat = ChatFormat(load_tokenizer(base))
    policy = load_policy(base, trainable=True)
    reference = load_policy(base, trainable=False) if cfg.algorithm.kl_coef > 0 else None
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
    return Models(chat, policy, reference, optimizer, HFGenerator(policy, stop_id=chat.end_id, pad_id=chat.pad_id))


def run_step(cfg: TrainerConfig, models: Models, tasks, urls: dict[str, str], shuffle: torch.Generator) -> dict[str, float]:
    """One GRPO step: rollouts, advantages, update; returns the step's metrics."""
    started = time.perf_counter()
    limits = episode_limits(cfg)
    trajectories = collect(tasks, cfg, urls, models.generator, models.chat, limits)
    rollout_s = time.perf_counter() - started
    advantages = trajectory_advantages(trajectories, cfg)
    trained = [(t, a) for t, a in zip(trajectories, advantages) if not t.env_error]
    if not trained:
        raise RuntimeError(f"every episode of this step failed in the environment; the first: {trajectories[0].error}")
    batch = collate([t.token_ids for t, _ in trained], [t.loss_mask for t, _ in trained], [a for _, a in trained], models.chat.pad_id)
    stats = policy_update(models.policy, models.reference, models.optimizer, batch, update_settings(cfg), shuffle)
    return step_metrics(trajectories, stats, rollout_s, time.perf_counter() - started, models.optimizer.param_groups[0]["lr"])


def episode_limits(cfg: TrainerConfig) -> EpisodeLimits:
    r = cfg.rollout
    return EpisodeLimits(r.max_turns, r.max_generate_length, r.max_sequence_length, r.temperature, r.max_input_length)


def update_settings(cfg: TrainerConfig) -> UpdateSettings:
    a = cfg.algorithm
    return UpdateSettings(
        clip_low=a.clip_eps_low,
        clip_high=a.clip_eps_high,
        kl_coef=a.kl_coef,
        mini_batches=a.mini_batches,
        max_grad_norm=cfg.optim.max_grad_norm,
        temperature=cfg.rollout.temperature,
        kl_estimator=a.kl_estimator,
        loss_agg=a.loss_agg,
        entropy_coef=a.entropy_coef,
        ppo_epochs=a.ppo_epochs,
        norm_length=cfg.rollout.max_sequence_length,
    )


def set_learning_rate(cfg: TrainerConfig, optimizer: torch.optim.Optimizer, step: int) -> None:
    o = cfg.optim
    lr = o.lr * lr_multiplier(step, cfg.total_steps, o.warmup_steps, o.lr_schedule, o.min_lr_ratio)
    for group in optimizer.param_groups:
        group["lr"] = lr


def collect(tasks, cfg: TrainerConfig, urls: dict[str, str], generator, chat: ChatFormat, limits: EpisodeLimits, n_samples: int | None = None) -> list[Trajectory]:
    """Episodes grouped by task (``n_samples`` consecutive ones per task, default ``n_samples_per_prompt``)."""

    async def run() -> list[Trajectory]:
        clients = {key: EnvClient(url, cfg.env.max_concurrent, cfg.env.call_timeout_s) for key, url in urls.items()}
        return await run_episodes(tasks, n_samples or cfg.rollout.n_samples_per_prompt, clients, generator, chat, limits)

    return asyncio.run(run())


def trajectory_advantages(trajectories: list[Trajectory], cfg: TrainerConfig) -> list[float]:
    """Group-relative advantages in trajectory order (groups are consecutive runs of ``n_samples_per_prompt``)."""
    n, a = cfg.rollout.n_samples_per_prompt, cfg.algorithm
    rewards = torch.tensor([t.reward for t in trajectories]).view(-1, n)
    valid = torch.tensor([not t.env_error for t in trajectories]).view(-1, n)
    return group_advantages(rewards, valid, a.std_eps, a.normalize_std, a.std_floor).flatten().tolist()


def step_metrics(trajectories: list[Trajectory], stats: dict[str, float], rollout_s: float, step_s: float, lr: float) -> dict[str, float]:
    outcomes = [SampleOutcome(t.env_key, t.group_id, t.reward, t.env_error) for t in trajectories]
    tokens = sum(len(t.token_ids) for t in trajectories)
    return {
        **reward_metrics(outcomes),
        **rollout_metrics(trajectories),
        **stats,
        "policy/lr": lr,
        "timing/rollout_s": rollout_s,
        "timing/step_s": step_s,
        "perf/tokens_per_s": tokens / step_s if step_s > 0 else 0.0,
    }
