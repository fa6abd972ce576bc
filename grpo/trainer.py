"""The GRPO step loop: an outline of named calls. Usable without Tune: ``train(cfg, reporter)``.

One step: draw tasks, run ``n_samples_per_prompt`` episodes of each against the environment, compute
group-relative advantages, update the policy, report metrics once. Held-out eval runs before step 1 (the
base policy), after every ``eval.interval``-th step and after the last; each report carries the newest.
Checkpoints (``grpo.checkpoint``) make a trial resumable at its next step with the same data order.
With several ranks (``grpo.distributed``) each runs the episodes of its share of the step's tasks and
the update is FSDP2 data-parallel; rank 0 evaluates and reports metrics computed over every rank's
episodes. The sampler is a generator behind ``grpo.rollout``'s seam (Hugging Face ``generate`` or a
colocated vLLM engine); after each update a sampler that is not the policy itself gets its weights, and
the gap between its log-probs and the policy's (``rollout/logprob_gap``) is checked every step.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from envs.client import EnvClient
from envs.local.launch import EnvServerPool
from grpo.algorithm import group_advantages
from grpo.batching import collate
from grpo.chat import ChatFormat
from grpo.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from grpo.config import TrainerConfig
from grpo.data import TaskSampler, trial_tasks
from grpo.distributed import ONE_PROCESS, Ranks, barrier, device, full_parameters, gather_lists, init_ranks, on_gpu, parallelize, shutdown
from grpo.episodes import EpisodeLimits, Trajectory, run_episodes
from grpo.evaluation import eval_summary, write_eval
from grpo.metrics import SampleOutcome, reward_metrics, rollout_metrics
from grpo.policy import load_policy
from grpo.process import resident_gib
from grpo.reporting import Reporter
from grpo.rollout import Generator
from grpo.rollout.hf import HFGenerator
from grpo.schedule import lr_multiplier
from grpo.tiny import load_tokenizer
from grpo.update import UpdateSettings, policy_update
from grpo.warmstart import base_policy_path

log = logging.getLogger(__name__)


@dataclass
class Models:
    """What a trial trains with: chat format, policy, frozen reference (None when kl_coef is 0), optimizer, sampler."""

    chat: ChatFormat
    policy: torch.nn.Module
    reference: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    generator: Generator
    ranks: Ranks = ONE_PROCESS


def train(cfg: TrainerConfig, reporter: Reporter) -> None:
    """Run GRPO steps up to ``cfg.total_steps`` (from ``resume_from``'s next step), reporting after each;
    the newest eval metrics ride along, and a checkpoint every ``checkpoint.interval`` steps."""
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    ranks = init_ranks()
    check_world(cfg, ranks)
    if cfg.output_dir and ranks.main:  # the resolved config beside the trial's outputs (there are no secrets in it)
        Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(cfg.output_dir) / "trainer_config.json").write_text(cfg.model_dump_json(indent=2))
    train_tasks, eval_tasks = trial_tasks(cfg)
    models = build_models(cfg, train_tasks, ranks)
    # seeded after the models: building the cached base policy (or not) must not change the samples; ranks sample differently
    torch.manual_seed(cfg.seed + ranks.rank)
    sampler = TaskSampler(train_tasks, cfg.seed)
    shuffle = torch.Generator().manual_seed(cfg.seed)
    first_step = resume(cfg, models, sampler, shuffle) + 1
    saves_to = checkpoint_root(cfg) if cfg.checkpoint.interval else None
    latest_eval: dict[str, float] = {}
    with EnvServerPool(sorted({t.env_key for t in train_tasks + eval_tasks})) as urls:
        for step in range(first_step, cfg.total_steps + 1):
            set_learning_rate(cfg, models.optimizer, step)
            if eval_tasks and step == first_step and ranks.main:
                latest_eval = evaluate(cfg, models, eval_tasks, urls, global_step=step - 1)  # where training starts
            tasks = sampler.next_batch(cfg.rollout.prompts_per_step)[ranks.rank :: ranks.world]
            metrics = run_step(cfg, models, tasks, urls, shuffle)
            last = step == cfg.total_steps
            if eval_tasks and (step % cfg.eval.interval == 0 or last) and ranks.main:
                latest_eval = evaluate(cfg, models, eval_tasks, urls, global_step=step)
            saved = None
            if saves_to and (step % cfg.checkpoint.interval == 0 or last):
                state = TrainerState(step, sampler.state())
                saved = str(save_checkpoint(saves_to, state, models.policy, models.optimizer, shuffle, cfg.checkpoint.keep_last, ranks))
            if ranks.main or getattr(reporter, "all_ranks", False):  # Ray Train wants a report from every rank
                reporter.report(step, {**metrics, **latest_eval}, saved)
    shutdown(ranks)


def check_world(cfg: TrainerConfig, ranks: Ranks) -> None:
    """Every rank must get the same number of tasks and run the same number of mini-batches."""
    if cfg.rollout.prompts_per_step % ranks.world:
        raise ValueError(f"rollout.prompts_per_step={cfg.rollout.prompts_per_step} must be a multiple of the {ranks.world} workers")
    if cfg.model.cpu_offload and ranks.sharded:
        raise ValueError(f"model.cpu_offload with {ranks.world} workers: offloaded shards need collectives on CPU tensors, which NCCL cannot run; use one worker")
    per_rank = cfg.rollout.prompts_per_step // ranks.world * cfg.rollout.n_samples_per_prompt
    if per_rank < cfg.algorithm.mini_batches:
        raise ValueError(f"algorithm.mini_batches={cfg.algorithm.mini_batches} exceeds the {per_rank} episodes each of {ranks.world} workers trains on")


def resume(cfg: TrainerConfig, models: Models, sampler: TaskSampler, shuffle: torch.Generator) -> int:
    """Restore from ``cfg.resume_from`` if set; returns the last finished step (0 for a fresh start)."""
    if not cfg.resume_from:
        return 0
    state = load_checkpoint(cfg.resume_from, models.policy, models.optimizer, shuffle, models.ranks)
    if models.generator.needs_weight_sync:
        models.generator.load_weights(full_parameters(models.policy))
    sampler.restore(state.sampler)
    return state.step


EVAL_SEED_OFFSET = 1_000_003  # eval's seed, cfg.seed + this: apart from training's cfg.seed + rank


def checkpoint_root(cfg: TrainerConfig) -> Path:
    if cfg.checkpoint.dir:
        return Path(cfg.checkpoint.dir)
    if cfg.output_dir:
        return Path(cfg.output_dir) / "checkpoints"
    return Path(tempfile.mkdtemp(prefix="grpo-checkpoints-"))


def evaluate(cfg: TrainerConfig, models: Models, eval_tasks, urls: dict[str, str], global_step: int) -> dict[str, float]:
    """Sample every held-out task ``eval.n_samples`` times; write the trajectories when output_dir is set.

    Every eval draws from the same seed (HF sampling; vLLM keeps its engine's), so two evals differ by the
    policy rather than by the dice, and in a fork of the random state, so evals (one more on resume) leave
    training's samples as they were."""
    started = time.perf_counter()
    limits = episode_limits(cfg)
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else []):
        torch.manual_seed(cfg.seed + EVAL_SEED_OFFSET)
        trajectories = collect(eval_tasks, cfg, urls, models.generator, models.chat, limits, cfg.eval.n_samples)
    metrics = {**eval_summary(trajectories, cfg.eval.n_samples, global_step), "timing/eval_s": time.perf_counter() - started}
    if cfg.output_dir:
        write_eval(cfg.output_dir, global_step, trajectories, metrics, models.chat)
    return metrics


def build_models(cfg: TrainerConfig, tasks, ranks: Ranks = ONE_PROCESS) -> Models:
    """Policy and reference, FSDP2-wrapped when there are several ranks or a GPU; the generator samples
    from the policy itself (HF, one CPU process), an unsharded copy (HF, several ranks) or a vLLM engine,
    refreshed after every update."""
    tokenizer, load, model_dir = policy_source(cfg, tasks, ranks)
    chat = ChatFormat(tokenizer)
    m = cfg.model
    bf16 = on_gpu() and m.dtype == "bfloat16"
    shard = {"bf16": bf16, "activation_checkpointing": m.activation_checkpointing, "cpu_offload": m.cpu_offload}
    policy = parallelize(load(True), ranks, **shard)
    reference = parallelize(load(False), ranks, bf16=bf16, cpu_offload=m.cpu_offload) if cfg.algorithm.kl_coef > 0 else None
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
    return Models(chat, policy, reference, optimizer, make_generator(cfg, chat, model_dir, policy, load, ranks), ranks)


def make_generator(cfg: TrainerConfig, chat: ChatFormat, model_dir: str, policy, load, ranks: Ranks) -> Generator:
    """The rollout backend the config names, on this rank's device."""
    if cfg.rollout.backend == "vllm":
        from grpo.pretrained import vllm_hf_overrides
        from grpo.rollout.vllm import EngineSettings, VLLMGenerator

        v, r = cfg.rollout.vllm, cfg.rollout
        settings = EngineSettings(
            model_dir=model_dir,
            max_model_len=r.max_input_length + r.max_generate_length,
            gpu_memory_utilization=v.gpu_memory_utilization,
            dtype="bfloat16" if cfg.model.dtype == "bfloat16" else "float32",
            enforce_eager=v.enforce_eager,
            max_num_seqs=v.max_num_seqs,
            sleep_level=v.sleep_level,
            weight_bucket_mb=v.weight_bucket_mb,
            seed=cfg.seed + ranks.rank,
            hf_overrides=vllm_hf_overrides(cfg.model, model_dir),
        )
        return VLLMGenerator(settings, chat.end_id, int(os.environ.get("LOCAL_RANK", "0")))  # starts from model_dir's weights
    if not ranks.sharded:
        return HFGenerator(policy, stop_id=chat.end_id, pad_id=chat.pad_id)
    sampler = load(False).to(device())
    return HFGenerator(sampler, stop_id=chat.end_id, pad_id=chat.pad_id, needs_weight_sync=True)


def policy_source(cfg: TrainerConfig, tasks, ranks: Ranks):
    """The tokenizer, a loader ``trainable -> model`` and the model's directory: a pretrained HF model
    (``model.name_or_path``) or the tiny warm-started base policy (rank 0 builds it once; the others then
    find it cached)."""
    if cfg.model.name_or_path:
        from grpo.pretrained import load_model
        from grpo.pretrained import load_tokenizer as load_pretrained_tokenizer

        return load_pretrained_tokenizer(cfg.model), lambda trainable: load_model(cfg.model, trainable), cfg.model.name_or_path
    if ranks.main:
        base_policy_path(cfg.model, tasks, cfg.seed)
    barrier(ranks)
    base = str(base_policy_path(cfg.model, tasks, cfg.seed))
    return load_tokenizer(base), lambda trainable: load_policy(base, trainable), base


def run_step(cfg: TrainerConfig, models: Models, tasks, urls: dict[str, str], shuffle: torch.Generator) -> dict[str, float]:
    """One GRPO step: rollouts, advantages, update; returns the step's metrics."""
    started = time.perf_counter()
    limits = episode_limits(cfg)
    trajectories = collect(tasks, cfg, urls, models.generator, models.chat, limits)
    rollout_s = time.perf_counter() - started
    for t in trajectories:  # group ids unique over ranks: rank r numbers its groups r, r + world, ...
        t.group_id = t.group_id * models.ranks.world + models.ranks.rank
    everyone = gather_lists(trajectories, models.ranks)
    if all(t.env_error for t in everyone):
        raise RuntimeError(f"every episode of this step failed in the environment; the first: {everyone[0].error}")
    batch = training_batch(trajectories, trajectory_advantages(trajectories, cfg), models.chat.pad_id)
    models.generator.sleep()
    stats = policy_update(models.policy, models.reference, models.optimizer, batch, update_settings(cfg), shuffle, models.ranks)
    release_cached_memory()  # the update's peak stays reserved by torch's allocator; a vLLM engine waking in its own process needs it
    synced = time.perf_counter()
    if models.generator.needs_weight_sync:
        models.generator.load_weights(full_parameters(models.policy))
    models.generator.wake()
    stats["timing/weight_sync_s"] = time.perf_counter() - synced
    stats["perf/rss_gib"] = resident_gib()
    check_logprob_gap(stats["rollout/logprob_gap"], cfg.rollout.logprob_gap_warn, cfg.rollout.logprob_gap_max)
    return step_metrics(everyone, stats, rollout_s, time.perf_counter() - started, models.optimizer.param_groups[0]["lr"])


def release_cached_memory() -> None:
    if on_gpu():
        import gc

        gc.collect()
        torch.cuda.empty_cache()


def check_logprob_gap(gap: float, warn: float, fail: float | None) -> None:
    """The sampler's and the policy's log-probs of the sampled tokens must agree: a jump means the sampler
    is not sampling from the policy being trained (a weight sync that did not take)."""
    if fail is not None and gap > fail:
        raise RuntimeError(
            f"rollout/logprob_gap {gap:.3f} > rollout.logprob_gap_max {fail}: the sampler's log-probs no longer match the policy's, "
            "so its weights are not the trained ones (a failed weight sync?); the trial stops rather than train off-policy"
        )
    if gap > warn:
        log.warning("rollout/logprob_gap %.3f > rollout.logprob_gap_warn %s: the sampler drifts from the policy", gap, warn)


def training_batch(trajectories: list[Trajectory], advantages: list[float], pad_id: int):
    """Every episode of this rank; those that failed in the environment keep their row with nothing to
    train on (so every rank has the same number of sequences and mini-batches)."""
    ids = [t.token_ids or [pad_id, pad_id] for t in trajectories]
    masks = [[0] * len(i) if t.env_error else t.loss_mask for t, i in zip(trajectories, ids)]
    sampled = [t.sampler_logprobs if t.token_ids else [float("nan")] * 2 for t in trajectories]
    return collate(ids, masks, [0.0 if t.env_error else a for t, a in zip(trajectories, advantages)], pad_id, sampled)


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
        micro_batch_size=cfg.model.micro_batch_size,
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
