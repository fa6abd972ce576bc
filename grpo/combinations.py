"""Rules about combining settings, one predicate each, called wherever the combination is checked.

A rule here is a pure function of a validated ``TrainerConfig`` and where it runs (how many workers, on a
GPU or not). ``sweep validate`` calls it before anything starts, with the space file's resources; the trainer
(``grpo.trainer.start_process``, ``grpo.build``) and a pack (``grpo.pack``) call it again with the world they
found, so a trial started some other way is refused with the same words. Each clash names the key to change,
as a space file names it, and the fix. Imports no torch.

Leaves out: rules within one section (pydantic validators on the config) and rules that only a sweep has
(its searcher, scheduler and space: ``sweep.spec``).
"""

from __future__ import annotations

from typing import NamedTuple

from configkit.base import ConfigError
from grpo.config import TrainerConfig


class Clash(NamedTuple):
    """A setting that does not go with another: the key to change (as a space file names it) and the rest of the sentence."""

    key: str
    text: str

    def __str__(self) -> str:
        return f"{self.key} {self.text}"


def worker_clashes(cfg: TrainerConfig, workers: int) -> list[Clash]:
    """What stops ``cfg`` training on ``workers`` workers (FSDP2 ranks; 1: one process)."""
    many = f"with {workers} workers (resources.workers_per_trial)"
    clashes = []
    r, a = cfg.rollout, cfg.algorithm
    if r.prompts_per_step % workers:
        clashes.append(Clash("trainer.rollout.prompts_per_step", f"= {r.prompts_per_step} {many}: every worker needs the same number of "
                                                                  f"tasks; use a multiple of {workers}"))
    per_worker = r.prompts_per_step // workers * r.n_samples_per_prompt
    if per_worker < a.mini_batches:
        clashes.append(Clash("trainer.algorithm.mini_batches", f"= {a.mini_batches} exceeds the {per_worker} episodes each of {workers} "
                                                                "worker(s) trains on; lower it, or roll out more per step"))
    if workers == 1:
        return clashes
    if cfg.model.cpu_offload:
        clashes.append(Clash("trainer.model.cpu_offload", f"= true {many}: offloaded shards would need collectives on CPU tensors, which the "
                                                           "workers' NCCL group cannot run; set it false, or run one worker per trial"))
    if cfg.model.lora is not None:
        clashes.append(Clash("trainer.model.lora", f"{many}: LoRA trials run on one worker for now (sharded adapters are unverified); "
                                                   "set resources.workers_per_trial: 1, or drop model.lora"))
    if cfg.model.micro_batch_tokens is not None:
        clashes.append(Clash("trainer.model.micro_batch_tokens", f"= {cfg.model.micro_batch_tokens} {many}: micro-batches by length would "
                                                                 "differ in number between workers, whose FSDP2 collectives must pair; "
                                                                 "use model.micro_batch_size, or one worker"))
    if a.dynamic_sampling.enabled and a.loss_agg == "seq-mean-token-sum-norm":
        clashes.append(Clash("trainer.algorithm.dynamic_sampling.enabled", f"= true {many} and algorithm.loss_agg seq-mean-token-sum-norm: "
                                                                            "the groups that train are dealt to the workers and the shorter "
                                                                            "shares padded with empty rows, which this aggregation counts (it "
                                                                            "divides by every sequence); use loss_agg token-mean or "
                                                                            "seq-mean-token-mean, or one worker"))
    return clashes


def pack_clashes(cfg: TrainerConfig, workers: int, gpu: bool) -> list[Clash]:
    """What stops ``cfg`` being packed with other trials on one shared base (``resources.trials_per_worker`` > 1,
    ``grpo.pack``), on ``workers`` workers, on a GPU or not. Which keys a pack's members must share is
    ``grpo.config.pack_wide``."""
    why = "; or resources.trials_per_worker: 1"
    clashes = []
    if cfg.model.lora is None:
        clashes.append(Clash("trainer.model.lora", f"= None: packed trials share one frozen base, each training its own LoRA adapter; "
                                                   f"set it (e.g. {{rank: 16}}){why}"))
    if cfg.rollout.turns == "per_episode" and cfg.rollout.backend == "hf":
        clashes.append(Clash("trainer.rollout.turns", f"= 'per_episode': a pack's members sample with plain batched turns on HF (per-episode "
                                                      f"turns in a pack need vLLM's streaming engine, rollout.backend: vllm); set it to batched{why}"))
    if workers > 1:
        clashes.append(Clash("resources.workers_per_trial", f"= {workers} with packed trials: a pack is one process (FSDP2-sharded LoRA "
                                                            f"is unverified); set it to 1{why}"))
    if gpu:
        clashes.append(Clash("resources.gpus_per_trial", f"> 0 with packed trials: a pack on a GPU has not run on one yet "
                                                         f"(tests/gpu/test_pack_gpu.py in scripts/gpu_check.sh); set it to 0{why}"))
    return clashes


def pack_rolls_out_together(cfg: TrainerConfig) -> bool:
    """Whether a pack of ``cfg``'s members runs their rollouts at once (``grpo.pack.Pack.step_round``): on vLLM's
    streaming engine (``rollout.turns: per_episode``), which batches every member's live requests; on HF, or a
    batch per turn, members step in turn."""
    return cfg.rollout.backend == "vllm" and cfg.rollout.turns == "per_episode"


def refuse(clashes: list[Clash], error: type[ConfigError] = ConfigError) -> None:
    """Raise the clashes found where a trial starts (``error``, one line each); nothing when there are none."""
    if clashes:
        raise error("\n".join(map(str, clashes)))
