"""The GRPO step loop: an outline of named calls. Usable without Tune: ``train(cfg, reporter)``.

One step: draw tasks, run ``n_samples_per_prompt`` episodes of each in the environments, compute
group-relative advantages, update the policy, report metrics once. Held-out eval runs before the first
step (the base policy), after every ``eval.interval``-th step and after the last; each report carries the
newest. Checkpoints (``grpo.checkpoint``) make a trial resumable at its next step with the same data
order. With several ranks (``grpo.distributed``) each runs the episodes of its share of the step's tasks
and the update is FSDP2 data-parallel; rank 0 evaluates and reports metrics computed over every rank's
episodes. What the loop trains with is built in ``grpo.build``; after each update a sampler that is not
the policy itself gets its weights, and the gap between its log-probs and the policy's
(``rollout/logprob_gap``) is checked every step. Which tasks a step draws is the sampler's business
(``grpo.data.make_sampler``: shuffled epochs or the curriculum, which learns from every step's episodes),
and how many rounds it rolls out is ``grpo.dynamic``'s (dynamic sampling).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grpo.batching import training_batch
from grpo.build import Models, build_models, open_environments, release_cached_memory
from grpo.checkpoint import TrainerState, load_checkpoint, save_checkpoint
from grpo.combinations import refuse, worker_clashes
from grpo.config import TrainerConfig
from grpo.curriculum import CurriculumSampler
from grpo.data import TaskSampler, make_sampler, trial_tasks
from grpo.distributed import Ranks, full_parameters, init_ranks, shutdown
from grpo.dynamic import StepRollouts, roll_out
from grpo.episodes import Trajectory
from grpo.evaluation import Evals, evaluate, share_base_eval
from grpo.metrics import SampleOutcome, reward_metrics, rollout_metrics
from grpo.process import resident_gib
from grpo.reporting import Reporter
from grpo.rollout import check_logprob_gap
from grpo.schedule import lr_multiplier
from grpo.update import UpdateSettings, policy_update
from toolenvs.seam import EnvBackend
from toolenvs.task import Task

log = logging.getLogger(__name__)


def train(cfg: TrainerConfig, reporter: Reporter, base_eval: dict[str, Any] | None = None) -> None:
    """Run GRPO steps up to ``cfg.total_steps`` (from ``resume_from``'s next step), reporting after each;
    the newest eval metrics ride along, and a checkpoint every ``checkpoint.interval`` steps. ``base_eval``:
    the base policy's eval line a sweep made once for its trials to share (then this trial makes none)."""
    ranks = start_process(cfg)
    train_tasks, eval_tasks = trial_tasks(cfg)
    models = build_models(cfg, train_tasks, ranks)
    progress = start_progress(cfg, models, train_tasks, eval_tasks, base_eval)
    with open_environments(cfg, train_tasks + eval_tasks) as envs:
        for step in range(progress.first_step, cfg.total_steps + 1):
            metrics, saved = train_step(cfg, models, progress, envs, step)
            if ranks.main or getattr(reporter, "all_ranks", False):  # Ray Train wants a report from every rank
                reporter.report(step, metrics, saved)
    shutdown(ranks)


CHECKPOINT_PREFIX = "grpo-checkpoints-"  # a temporary checkpoint folder's, where no folder was given


@dataclass
class Progress:
    """Where a trial is besides its weights: data order, shuffle, evals, held-out tasks, first step, checkpoint root.
    ``grpo.pack`` keeps one per packed trial and steps it with ``train_step``."""

    sampler: TaskSampler | CurriculumSampler
    shuffle: torch.Generator
    evals: Evals
    eval_tasks: list[Task]
    first_step: int
    saves_to: Path | None


def start_progress(
    cfg: TrainerConfig, models: Models, train_tasks: list[Task], eval_tasks: list[Task], base_eval: dict[str, Any] | None = None
) -> Progress:
    """Seed the global RNG, then the data order, shuffle and evals, from ``resume_from`` when it is set."""
    ranks = models.ranks
    # seeded after the models: building the cached base policy (or not) must not change the samples; ranks sample differently
    torch.manual_seed(cfg.seed + ranks.rank)
    sampler, shuffle = make_sampler(cfg, train_tasks), torch.Generator().manual_seed(cfg.seed)
    evals = Evals(cfg.eval.score_window)
    first_step = resume(cfg, models, sampler, shuffle, evals) + 1
    if base_eval is not None and first_step == 1 and eval_tasks and ranks.main:
        evals.add(0, share_base_eval(cfg, base_eval))
    saves_to = checkpoint_root(cfg, ranks) if cfg.checkpoint.interval else None
    return Progress(sampler, shuffle, evals, eval_tasks, first_step, saves_to)


def train_step(cfg: TrainerConfig, models: Models, progress: Progress, envs: EnvBackend, step: int) -> tuple[dict[str, float], str | None]:
    """Step ``step`` of the loop: its learning rate, the eval where training starts, the GRPO step, the
    evals and checkpoint it is due; returns what to report (the newest evals ride along) and the checkpoint.
    In three parts, which a pack runs apart (``grpo.pack.Pack.step_round``: its members' rollouts at once)."""
    begin_step(cfg, models, progress, envs, step)
    return end_step(cfg, models, progress, envs, step, run_step(cfg, models, progress.sampler, envs, progress.shuffle))


def begin_step(cfg: TrainerConfig, models: Models, progress: Progress, envs: EnvBackend, step: int) -> None:
    """Before the rollouts: the step's learning rate, and the eval where training starts (unless it is had)."""
    set_learning_rate(cfg, models.optimizer, step)
    if progress.eval_tasks and step == progress.first_step and models.ranks.main and not progress.evals.has(step - 1):
        progress.evals.add(step - 1, evaluate(cfg, models, progress.eval_tasks, envs, global_step=step - 1))  # where training starts


def end_step(cfg: TrainerConfig, models: Models, progress: Progress, envs: EnvBackend, step: int,
             metrics: dict[str, float], evaluated: dict[str, float] | None = None) -> tuple[dict[str, float], str | None]:
    """After the update: the eval and the checkpoint the step is due; (what to report, the checkpoint or None).
    ``evaluated``: the due eval's metrics when it has been made already (a pack evaluates its members at once)."""
    ranks, evals = models.ranks, progress.evals
    eval_now = eval_due(cfg, models, progress, step)
    assert evaluated is None or eval_now, f"an eval made after step {step}, which is due none"
    if eval_now:
        evals.add(step, evaluated if evaluated is not None else evaluate(cfg, models, progress.eval_tasks, envs, global_step=step))
    saved = None
    if progress.saves_to and due(step, cfg.checkpoint.interval, cfg.total_steps):
        state = TrainerState(step, progress.sampler.state(), evals.state())
        saved = str(save_checkpoint(progress.saves_to, state, models.policy, models.optimizer, progress.shuffle, cfg.checkpoint.keep_last, ranks))
    return {**metrics, **evals.metrics()}, saved


def eval_due(cfg: TrainerConfig, models: Models, progress: Progress, step: int) -> bool:
    """Whether this rank evaluates after step ``step`` (every ``eval.interval``-th and the last; rank 0 only)."""
    return bool(progress.eval_tasks) and due(step, cfg.eval.interval, cfg.total_steps) and models.ranks.main


def start_process(cfg: TrainerConfig) -> Ranks:
    """Threads, the rank group, the checks every rank's share must pass, and the resolved config written
    beside the trial's outputs (there are no secrets in it)."""
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    ranks = init_ranks()
    check_world(cfg, ranks)
    if cfg.output_dir and ranks.main:
        Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
        saved = Path(cfg.output_dir) / "trainer_config.json"
        partial = saved.with_name(f"{saved.name}.partial-{os.getpid()}")  # whole or not at all: the report parses it
        partial.write_text(cfg.model_dump_json(indent=2))
        partial.replace(saved)
    return ranks


def check_world(cfg: TrainerConfig, ranks: Ranks) -> None:
    """The settings train on this many ranks: every rank gets the same tasks and mini-batches (``grpo.combinations``)."""
    refuse(worker_clashes(cfg, ranks.world))


def due(step: int, interval: int, total_steps: int) -> bool:
    """Every ``interval``-th step and the last (never when ``interval`` is 0)."""
    return bool(interval) and (step % interval == 0 or step == total_steps)


def resume(cfg: TrainerConfig, models: Models, sampler: TaskSampler, shuffle: torch.Generator, evals: Evals) -> int:
    """Restore from ``cfg.resume_from`` if set; returns the last finished step (0 for a fresh start)."""
    if not cfg.resume_from:
        return 0
    state = load_checkpoint(cfg.resume_from, models.policy, models.optimizer, shuffle, models.ranks)
    sync_sampler(models)
    sampler.restore(state.sampler)
    evals.restore(state.evals)
    return state.step


def sync_sampler(models: Models) -> None:
    """The sampler takes the policy's weights after they changed: the adapter alone when the sampler keeps the
    frozen base (a LoRA policy on vLLM), every parameter when it samples from a copy, nothing when it samples
    from the policy module itself."""
    if models.generator.serves_adapter:
        models.generator.load_adapter(models.policy)
    elif models.generator.needs_weight_sync:
        models.generator.load_weights(full_parameters(models.policy))


def checkpoint_root(cfg: TrainerConfig, ranks: Ranks) -> Path:
    """``checkpoint.dir``, else ``output_dir/checkpoints``, else a temporary folder of one process's own: ranks
    made apart would each make another, and a sharded checkpoint needs every rank's shards in one folder."""
    if cfg.checkpoint.dir:
        return Path(cfg.checkpoint.dir)
    if cfg.output_dir:
        return Path(cfg.output_dir) / "checkpoints"
    if ranks.world > 1:
        raise ValueError(f"checkpoint.interval = {cfg.checkpoint.interval} with {ranks.world} workers needs checkpoint.dir or output_dir "
                         "(every worker writes its shards into one folder); `sweep train` makes one for you")
    return temporary_checkpoints()


def temporary_checkpoints() -> Path:
    """A new temporary checkpoint folder (``sweep train`` makes one for all its ranks; a lone process, its own)."""
    return Path(tempfile.mkdtemp(prefix=CHECKPOINT_PREFIX))


def set_learning_rate(cfg: TrainerConfig, optimizer: torch.optim.Optimizer, step: int) -> None:
    o = cfg.optim
    lr = o.lr * lr_multiplier(step, cfg.total_steps, o.warmup_steps, o.lr_schedule, o.min_lr_ratio)
    for group in optimizer.param_groups:
        group["lr"] = lr


def run_step(cfg: TrainerConfig, models: Models, sampler: TaskSampler | CurriculumSampler, envs: EnvBackend, shuffle: torch.Generator) -> dict[str, float]:
    """One GRPO step on tasks from the sampler (this rank runs its share; with dynamic sampling, more
    rounds replace groups without signal: ``grpo.dynamic``): rollouts, advantages, update."""
    started = time.perf_counter()
    rollouts = roll_out(cfg, models, sampler, envs)
    return learn(cfg, models, sampler, shuffle, rollouts, time.perf_counter() - started)


def learn(cfg: TrainerConfig, models: Models, sampler: TaskSampler | CurriculumSampler, shuffle: torch.Generator,
          rollouts: StepRollouts, rollout_s: float) -> dict[str, float]:
    """The step after its rollouts (which took ``rollout_s``): the sampler learns from them, the policy is updated
    on them, the sampler gets the new weights; the step's metrics."""
    started = time.perf_counter()
    everyone = rollouts.everyone
    failed = [t for t in everyone if t.env_error]
    if len(failed) == len(everyone):
        raise RuntimeError(f"every episode of this step failed in the environment; the first: {everyone[0].error}")
    if failed:  # left out of their groups' advantages and counted; say why, so a flaky environment shows
        log.warning("%d of %d episodes failed in the environment (left out); the first: %s", len(failed), len(everyone), failed[0].error)
    sampler.observe(everyone)  # the curriculum's pass-rate estimates (the plain sampler ignores them)
    models.generator.sleep()
    stats = policy_update(models.policy, models.reference, models.optimizer, training_batch(rollouts.mine, cfg, models.chat.pad_id),
                          UpdateSettings.of(cfg), shuffle, models.ranks)
    release_cached_memory()
    synced = time.perf_counter()
    sync_sampler(models)
    models.generator.wake()
    stats["timing/weight_sync_s"] = time.perf_counter() - synced
    stats["perf/rss_gib"] = resident_gib()
    check_logprob_gap(stats["rollout/logprob_gap"], cfg.rollout.logprob_gap_warn, cfg.rollout.logprob_gap_max)
    lr = models.optimizer.param_groups[0]["lr"]
    step_s = rollout_s + time.perf_counter() - started
    return {**step_metrics(everyone, stats, rollout_s, step_s, lr), **rollouts.metrics, **sampler.metrics()}


def step_metrics(episodes: list[Trajectory], stats: dict[str, float], rollout_s: float, step_s: float, lr: float) -> dict[str, float]:
    outcomes = [SampleOutcome(t.env_key, t.group_id, t.reward, t.env_error) for t in episodes]
    tokens = sum(len(t.token_ids) for t in episodes)
    return {
        **reward_metrics(outcomes),
        **rollout_metrics(episodes),
        **stats,
        "policy/lr": lr,
        "timing/rollout_s": rollout_s,
        "timing/step_s": step_s,
        "perf/tokens_per_s": tokens / step_s if step_s > 0 else 0.0,
    }
