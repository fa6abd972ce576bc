"""Packed trials: K LoRA trials in one process over one copy of the frozen base (``resources.trials_per_worker``).

A ``Pack`` loads the base once and wraps it in one peft model with a named adapter per member
(``grpo.lora.add_adapter``). Each ``Member`` keeps what makes it a trial of its own: its adapter, an AdamW
over that adapter's parameters alone, its torch and Python RNG states, task sampler, shuffle generator,
evals, output folder and checkpoint root. A member's step is the trainer's own ``train_step`` (or its parts) run with its
adapter active (``set_adapter``: the only parameters that train) and its RNG swapped in, so a packed trial
reports, step for step, what it would have alone. Its reference is the base with every adapter off. Its
checkpoint is its adapter under peft's lone-adapter name and its optimizer (``grpo.checkpoint``), which
resumes alone or in any pack.

Members may join and leave while others run (a Tune scheduler stops one trial; the next takes its place).
Keys under ``grpo.config.PACK_WIDE_KEYS`` must be equal across a pack (they make its base), and so must
the training tasks; a member that differs is refused with ``PackError`` naming the key.
With ``rollout.backend: vllm`` the pack holds one vLLM engine over the base and each member samples through
its own adapter on it (``grpo.rollout.vllm.ServedAdapter``: its requests carry its adapter, its updates reload
only that one; the engine holds up to the pack's capacity). Built and tested on CPU with vLLM stood in.
On a GPU the pack's base is moved to it whole, without FSDP2 (a one-process pack has nothing to shard, and
adapters join after the base is placed; peft puts each on its base layer's device), and trains in float32.
The sweep's config refuses GPU packs and LoRA with vLLM until the GPU check has run them
(``tests/gpu/test_pack_gpu.py``, ``bench/packed_lora_gpu.py``).
With ``rollout.turns: per_episode`` that engine is the streaming one (``grpo.rollout.vllm_stream``), and
``step_round`` runs its members' rollouts at once, each member in a thread of its own sending its requests, through
its own adapter, into the one engine, which batches them together (continuous batching across members, episodes
and turns); then each member's update in turn, then the evals due, all at once the same way (each from the eval's own
seed, ``grpo.evaluation.eval_seeds``), then each member's checkpoint and report in turn. A member's rollout seeds come
from its own RNG state (``ServedAdapter.seeds``), and neither rollouts nor evals draw anything else from torch's global
RNG, so each member reports what it reports alone. Built and tested on CPU with an HF-backed stand-in engine; not run on a GPU.
The environments are the pack's, shared by the members' threads (Fleet's instance cap counts for the process,
whichever loops ask: ``toolenvs.fleet.InstanceSlots``). Leaves out: the eval where a member's training starts at
once with others' (in turn, under ``begin_step``; a sweep's trials share one base eval), rollouts of several
members at once on HF (members step in turn; on CPU a mixed batch is slower, ``bench/mixed_adapters.py``), several ranks, bf16 on a
GPU, and Tune itself (``sweep.trials.packing``, whose host gathers its members' step calls into rounds).
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch

from configkit.base import ConfigError, dotted_keys, get_dotted
from grpo.build import Models, open_environments, policy_source
from grpo.chat import ChatFormat
from grpo.combinations import pack_clashes, pack_rolls_out_together, refuse
from grpo.config import TrainerConfig, pack_wide
from grpo.data import trial_tasks
from grpo.distributed import device, on_gpu
from grpo.dynamic import StepRollouts, roll_out
from grpo.evaluation import evaluate
from grpo.lora import AdapterOff, add_adapter, trainable_parameters, with_adapter
from grpo.reporting import Reporter
from grpo.rollout import drawing_from
from grpo.rollout.adapters import engine_lora_rank
from grpo.rollout.hf import HFGenerator
from grpo.rollout.vllm import ServedAdapter, SleepingEngine, VLLMGenerator, engine_settings
from grpo.rollout.vllm_stream import VLLMStreamingGenerator
from grpo.trainer import Progress, begin_step, end_step, eval_due, learn, start_process, start_progress, train_step
from toolenvs.seam import EnvBackend


class PackError(ConfigError):
    """A trial that cannot join a pack: it would change the shared base, or the pack cannot run where it is."""


Stepped = tuple[int, dict[str, float], str | None]  # a member's step: (its number, what it reports, its checkpoint or None)


@dataclass
class RngState:
    """A member's global random state, swapped in around its work so the others' draws do not move it (on a GPU
    the CUDA generator's too: HF sampling draws from it, and every member's seeding reseeds it)."""

    torch: torch.Tensor
    python: Any
    cuda: torch.Tensor | None = None

    @classmethod
    def now(cls) -> RngState:
        return cls(torch.get_rng_state(), random.getstate(), torch.cuda.get_rng_state() if on_gpu() else None)

    def apply(self) -> None:
        torch.set_rng_state(self.torch)
        random.setstate(self.python)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda)


@dataclass
class Member:
    """One packed trial: its config, its adapter's models (the policy module is the pack's), where it is, its RNG."""

    name: str
    cfg: TrainerConfig
    models: Models
    progress: Progress
    rng: RngState
    next_step: int

    @property
    def done(self) -> bool:
        return self.next_step > self.cfg.total_steps


class Pack:
    """The shared base and its members. Enter it to start the environments; ``join``, ``step``, ``leave``."""

    def __init__(self, cfg: TrainerConfig, capacity: int = 1):
        """``cfg``: any member's config; its pack-wide keys are the pack's (every member must share them).
        ``capacity``: members at once (the adapters a vLLM engine holds)."""
        self.cfg = cfg
        self.ranks = start_process(cfg.model_copy(update={"output_dir": None}))
        refuse(pack_clashes(cfg, self.ranks.world, False), PackError)  # one GPU or none (the sweep's config refuses GPUs for now)
        self.train_tasks, self.eval_tasks = trial_tasks(cfg)
        tokenizer, self._load, model_dir = policy_source(cfg, self.train_tasks, self.ranks)
        self.chat = ChatFormat(tokenizer)
        self.engine = shared_engine(cfg, model_dir, capacity, self.chat.end_id) if cfg.rollout.backend == "vllm" else None
        self.policy: torch.nn.Module | None = None  # the PeftModel, made when the first member joins
        self.members: dict[str, Member] = {}
        self._envs = open_environments(cfg, self.train_tasks + self.eval_tasks)
        self.envs: EnvBackend | None = None
        self._names = 0

    def __enter__(self) -> Pack:
        self.envs = self._envs.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._envs.__exit__(*exc)
        self.envs = None

    def join(self, cfg: TrainerConfig, base_eval: dict[str, Any] | None = None) -> Member:
        """Add a trial: its adapter (drawn from its seed), optimizer and progress, from ``cfg.resume_from`` when set."""
        check_packable(self.cfg, cfg)
        if self.engine is not None and cfg.model.lora is not None and engine_lora_rank(cfg.model.lora.rank) > self.engine.settings.max_lora_rank:
            raise PackError(f"model.lora.rank {cfg.model.lora.rank} is above the pack's vLLM engine's max_lora_rank "
                            f"{self.engine.settings.max_lora_rank} (its first member's rank, rounded up to vLLM's values): "
                            "start the pack with its largest rank, or sweep the rank with resources.trials_per_worker: 1")
        if self.engine is not None and (length := cfg.rollout.max_input_length + cfg.rollout.max_generate_length) > self.engine.settings.max_model_len:
            raise PackError(f"rollout.max_input_length + rollout.max_generate_length ({cfg.rollout.max_input_length} + "
                            f"{cfg.rollout.max_generate_length} = {length}) is above the pack's vLLM engine's max_model_len "
                            f"{self.engine.settings.max_model_len} (its first member's lengths): its episodes would be cut "
                            "or refused; start the pack with its longest lengths, or sweep them with resources.trials_per_worker: 1")
        train_tasks, eval_tasks = trial_tasks(cfg)
        if [t.task_key for t in train_tasks] != [t.task_key for t in self.train_tasks]:
            raise PackError("a packed trial must train on the pack's tasks (its base was warm-started on them); "
                            "the eval split keys (eval.interval, eval.ratio, ...) decide them: keep them equal across the pack")
        start_process(cfg)
        name = f"trial_{self._names}"
        self._names += 1
        if self.policy is None:
            self.policy = with_adapter(self._load(True), cfg.model.lora, cfg.seed, name=name)
            if on_gpu():
                self.policy.to(device())
        else:
            add_adapter(self.policy, name, cfg.model.lora, cfg.seed)
        outer = RngState.now()
        try:
            self._activate(name)
            optimizer = torch.optim.AdamW(trainable_parameters(self.policy), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
            reference = AdapterOff(self.policy) if cfg.algorithm.kl_coef > 0 else None
            if self.engine is not None:
                generator = ServedAdapter(self.engine, name)
            else:
                generator = HFGenerator(self.policy, stop_id=self.chat.end_id, pad_id=self.chat.pad_id)
            models = Models(self.chat, self.policy, reference, optimizer, generator, self.ranks)
            progress = start_progress(cfg, models, train_tasks, eval_tasks, base_eval)  # seeds, then resumes
            member = Member(name, cfg, models, progress, RngState.now(), progress.first_step)
        except BaseException:  # its resume or its sampler failed: its adapter leaves the model and the engine (whose places are few)
            self._drop_adapter(name)
            raise
        finally:
            outer.apply()
        self.members[name] = member
        return member

    def step(self, member: Member) -> Stepped:
        """One GRPO step of ``member`` (its adapter active, its RNG in place): (step, metrics, checkpoint or None)."""
        _not_done(member)
        assert self.envs is not None, "enter the pack (with Pack(cfg) as pack:) before stepping it"
        with self.active(member):
            metrics, saved = train_step(member.cfg, member.models, member.progress, self.envs, member.next_step)
        member.next_step += 1
        return member.next_step - 1, metrics, saved

    @property
    def rolls_out_together(self) -> bool:
        """Whether ``step_round`` runs its members' rollouts at once (``grpo.combinations.pack_rolls_out_together``)."""
        return pack_rolls_out_together(self.cfg)

    def step_round(self, members: Sequence[Member]) -> list[Stepped | Exception]:
        """One step of each of ``members``, in their order: each one's ``step`` result, or the exception its step
        raised (the others go on). When the pack ``rolls_out_together`` their rollouts, and then their evals, run at once
        on the engine (module docstring); otherwise each steps in turn, as ``step``."""
        if not self.rolls_out_together or len(members) < 2:
            return [self._attempt(self.step, m) for m in members]
        assert self.envs is not None and self.engine is not None, "enter the pack (with Pack(cfg) as pack:) before stepping it"
        for member in members:
            _not_done(member)
        failed: dict[str, Exception] = {}
        self._in_turn(members, failed, lambda m: begin_step(m.cfg, m.models, m.progress, self.envs, m.next_step))
        rolled = self._at_once(members, failed, self._roll_out, "pack-rollouts")
        learned = self._in_turn(members, failed, lambda m: learn(m.cfg, m.models, m.progress.sampler, m.progress.shuffle, *rolled[m.name]))
        due = [m for m in members if m.name in learned and eval_due(m.cfg, m.models, m.progress, m.next_step)]
        evaluated = self._at_once(due, failed, self._evaluate, "pack-evals")
        ended = self._in_turn(members, failed, lambda m: self._end(m, learned[m.name], evaluated.get(m.name)))
        return [failed[m.name] if m.name in failed else ended[m.name] for m in members]

    def _in_turn(self, members: Sequence[Member], failed: dict[str, Exception], fn: Callable[[Member], Any]) -> dict[str, Any]:
        """``fn(member)`` for each of ``members`` that has not ``failed`` yet, one after another, its adapter active and
        its RNG in place: what each returned, by name; what one raised goes to ``failed``."""
        done = {m.name: self._attempt(self._as_active, m, fn) for m in members if m.name not in failed}
        return _sorted_out(done, failed)

    def _as_active(self, member: Member, fn: Callable[[Member], Any]) -> Any:
        with self.active(member):
            return fn(member)

    def _at_once(self, members: Sequence[Member], failed: dict[str, Exception], fn: Callable[[Member], Any], name: str) -> dict[str, Any]:
        """``fn(member)`` for each of ``members`` that has not ``failed`` yet, each in a thread of its own against the
        engine, woken first (a member's update that failed after putting it to sleep leaves it asleep, and the threads
        must not race to wake it): what each returned, by name; what one raised goes to ``failed``."""
        live = [m for m in members if m.name not in failed]
        if not live:
            return {}
        assert self.engine is not None
        if isinstance(woke := self._attempt(self.engine.wake), Exception):
            failed.update({m.name: woke for m in live})
            return {}
        with ThreadPoolExecutor(len(live), thread_name_prefix=name) as pool:
            results = pool.map(lambda m: self._attempt(fn, m), live)
            return _sorted_out(dict(zip((m.name for m in live), results)), failed)

    def _roll_out(self, member: Member) -> tuple[StepRollouts, float]:
        """``member``'s rollouts of its next step, in a thread beside the others': its seeds from its own RNG state."""
        generator = member.models.generator
        assert isinstance(generator, ServedAdapter)
        seeds = torch.Generator()
        seeds.set_state(member.rng.torch)
        started = time.perf_counter()
        try:
            with drawing_from(generator, seeds):
                return roll_out(member.cfg, member.models, member.progress.sampler, self.envs), time.perf_counter() - started  # type: ignore[arg-type]
        finally:
            member.rng.torch = seeds.get_state()

    def _evaluate(self, member: Member) -> dict[str, float]:
        """``member``'s eval due after its update, in a thread beside the others': from the eval's own seeds, nothing
        drawn from torch's global RNG (``grpo.evaluation.sample_eval``), so it samples what it samples alone."""
        cfg, progress = member.cfg, member.progress
        return evaluate(cfg, member.models, progress.eval_tasks, self.envs, member.next_step, own_seeds=True)  # type: ignore[arg-type]

    def _end(self, member: Member, metrics: dict[str, float], evaluated: dict[str, float] | None) -> Stepped:
        """``member``'s step after its update and eval (its adapter active, its RNG in place): checkpoint, report."""
        step = member.next_step
        metrics, saved = end_step(member.cfg, member.models, member.progress, self.envs, step, metrics, evaluated)  # type: ignore[arg-type]
        member.next_step += 1
        return step, metrics, saved

    @staticmethod
    def _attempt(fn, *args):
        try:
            return fn(*args)
        except Exception as exc:
            return exc

    def leave(self, member: Member) -> None:
        """Drop a member: its adapter, optimizer state and progress go; the base stays for the next to join."""
        self.members.pop(member.name, None)
        self._drop_adapter(member.name)

    def _drop_adapter(self, name: str) -> None:
        """Adapter ``name`` out of the engine and the model (the last one stays in the model: peft needs one; a member
        that joins next adds its own and it is never active again)."""
        if self.engine is not None:
            self.engine.drop_adapter(name)
        if self.policy is not None and len(self.policy.peft_config) > 1:
            with warnings.catch_warnings():  # peft says which adapter it made active instead: the next step sets its own
                warnings.filterwarnings("ignore", message=f"Adapter {name} was active which is now deleted")
                self.policy.delete_adapter(name)

    @contextmanager
    def active(self, member: Member) -> Iterator[None]:
        """``member``'s adapter is the one that runs and trains, and its RNG state is the global one."""
        outer = RngState.now()
        self._activate(member.name)
        member.rng.apply()
        try:
            yield
        finally:
            member.rng = RngState.now()
            outer.apply()
            member.models.optimizer.zero_grad(set_to_none=True)  # the next member's grad-norm clip walks every adapter's grads

    def _activate(self, name: str) -> None:
        assert self.policy is not None
        self.policy.set_adapter(name)  # peft: only this adapter's parameters require grad now


def _sorted_out(results: dict[str, Any], failed: dict[str, Exception]) -> dict[str, Any]:
    """``results`` by member name without the exceptions, which go to ``failed``."""
    failed.update({name: r for name, r in results.items() if isinstance(r, Exception)})
    return {name: r for name, r in results.items() if not isinstance(r, Exception)}


def _not_done(member: Member) -> None:
    if member.done:
        raise ValueError(f"{member.name} has run its {member.cfg.total_steps} steps")


def shared_engine(cfg: TrainerConfig, model_dir: str, capacity: int, stop_id: int) -> SleepingEngine:
    """The pack's one vLLM engine over its base, holding up to ``capacity`` adapters: the streaming one with
    ``rollout.turns: per_episode`` (``grpo.rollout.vllm_stream``), else a batch per turn (``grpo.rollout.vllm``)."""
    engine = VLLMStreamingGenerator if pack_rolls_out_together(cfg) else VLLMGenerator
    return engine(replace(engine_settings(cfg, model_dir, 0), max_loras=capacity), stop_id)


def check_packable(pack: TrainerConfig, trial: TrainerConfig) -> None:
    """A trial may join a pack when it can be packed at all (``grpo.combinations.pack_clashes``) and agrees with the
    pack on every pack-wide key (``grpo.config.PACK_WIDE_KEYS``)."""
    refuse(pack_clashes(trial, 1, False), PackError)  # a LoRA trial, sampled with HF generate
    differ = base_differences(pack, trial)
    if differ:
        shown = ", ".join(f"'{k}' ({a!r} vs {b!r})" for k, a, b in differ[:5])
        raise PackError(f"packed trials share one base, so these keys must be equal across the pack: {shown}; "
                        "sweep them with resources.trials_per_worker: 1")


def base_differences(a: TrainerConfig, b: TrainerConfig) -> list[tuple[str, Any, Any]]:
    """(dotted key, a's value, b's value) for every pack-wide key on which two trial configs differ."""
    da, db = a.model_dump(), b.model_dump()
    out = []
    for key in dotted_keys(TrainerConfig):
        if pack_wide(key):
            va, vb = get_dotted(da, key), get_dotted(db, key)
            if va != vb:
                out.append((key, va, vb))
    return out


def train_packed(cfgs: Sequence[TrainerConfig], reporters: Sequence[Reporter]) -> None:
    """Run K trials as one pack, in rounds of one step each (``Pack.step_round``), until every one has run its steps
    (``grpo.trainer.train`` for K trials at once; each reports to its own reporter, in the members' order)."""
    with Pack(cfgs[0], len(cfgs)) as pack:
        members = [pack.join(cfg) for cfg in cfgs]
        while live := [i for i, m in enumerate(members) if not m.done]:
            for i, out in zip(live, pack.step_round([members[i] for i in live])):
                if isinstance(out, Exception):
                    raise out
                reporters[i].report(*out)
