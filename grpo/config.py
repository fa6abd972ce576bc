"""TrainerConfig: every key of one GRPO trial, typed, bounded and documented once.

Imports no torch, so the sweep driver validates trial configs instantly. Any field here can be swept by
its dotted path (``optim.lr``, ``algorithm.kl_coef``, ``rollout.n_samples_per_prompt``). One module on purpose,
past 300 lines: it is the schema a reader looks keys up in, and most of its lines are the fields' descriptions.
Rules that combine sections are ``grpo.combinations``'; the backends' own keys are ``toolenvs.backend``'s members.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from configkit.base import StrictModel
from grpo.losses import PolicyLossName
from toolenvs.backend import BackendConfig, LocalBackendConfig, absorb_moved_keys

CurriculumLevel = Literal["task", "env", "both"]  # data.curriculum.level (grpo.curriculum reads its names from here)
EnvPotential = Literal["pooled", "tasks"]  # data.curriculum.env_potential

MAX_SEED = 2**31 - 1  # numpy takes seeds below 2**32, torch's generators below 2**63: offsets (ranks, confirm's seeds) stay in both
CHECKPOINT_STATE_FILE = "trainer_state.json"  # what makes a folder a grpo-sweep checkpoint (grpo.checkpoint writes it last)
DEFAULT_TASKS = str(Path(__file__).resolve().parent.parent / "toolenvs" / "data" / "hotel.jsonl")


class RopeScalingConfig(StrictModel):
    """YaRN context extension of a pretrained model: ``factor`` x ``original_max_position_embeddings`` positions."""

    rope_type: Literal["yarn"] = Field("yarn", description="Only YaRN is supported (what Qwen3 documents for long context).")
    factor: float = Field(gt=1, description="Context multiplier, e.g. 2.0 takes Qwen3's 32768 to 65536.")
    original_max_position_embeddings: int = Field(ge=1, description="The model's native context (Qwen3: 32768).")

    def max_positions(self) -> int:
        return int(self.factor * self.original_max_position_embeddings)


LORA_DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")  # every linear layer of a Qwen2/Qwen3 decoder block


class LoraConfig(StrictModel):
    """A LoRA adapter (peft) on the policy: only the adapter trains, and the reference is the base with
    the adapter switched off (no second model copy). One worker, HF rollouts only, for now."""

    rank: int = Field(16, ge=1, description="Rank r of each adapter's A (r x in) and B (out x r) matrices.")
    alpha: float = Field(32.0, gt=0, description="LoRA alpha: the adapter's update is scaled by alpha / rank.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapter's input in training (0: none, so the update's forward is deterministic).")
    target_modules: list[str] = Field(
        default_factory=lambda: list(LORA_DEFAULT_TARGETS),
        min_length=1,
        description="Names of the linear layers that get an adapter (peft's target_modules: a module whose name ends with one of these). Default: every linear layer of a Qwen2-architecture decoder block, attention and MLP.",
    )


# Keys a pack of LoRA trials (``resources.trials_per_worker``, ``grpo.pack``) shares: they make or feed its one
# base (the model, and the training tasks its warm-start saw), or are its process's (and its one sampler's: the
# rollout backend and its vLLM engine). All else is the trial's
# (model.lora, model.micro_batch_size and micro_batch_tokens included: an adapter and how its update is chunked are a member's own).
EVAL_SPLIT_KEYS = ("eval.ratio", "eval.split_seed", "eval.tasks_path", "eval.max_tasks", "eval.max_tasks_per_env")  # what picks the held-out tasks
PACK_WIDE_KEYS = ("model", "env", "torch_threads", "rollout.backend", "rollout.vllm", "rollout.turns", *EVAL_SPLIT_KEYS)  # turns: which engine the pack holds


def pack_wide(key: str) -> bool:
    """Whether dotted ``key`` must be equal across a pack: a key under ``PACK_WIDE_KEYS``, not under ``model.lora``."""
    if key in ("model.lora", "model.micro_batch_size", "model.micro_batch_tokens") or key.startswith("model.lora."):
        return False
    return any(key == wide or key.startswith(wide + ".") for wide in PACK_WIDE_KEYS)


class WarmstartEnvConfig(StrictModel):
    """How one environment enters the tiny model's warm-start (``model.warmstart_envs``): what shapes a mix of
    environments into the classes users see (one the base already solves, one it never solves, some between)
    without touching the task files. A field left None takes the model-wide setting."""

    weight: float = Field(
        1.0, ge=0, description="Relative weight of this env's conversations in the warm-start's batches (per conversation; 1: as many draws "
        "as its share of the data, 2: twice that, 0: left out, so the base has never seen this env's tools or tasks)."
    )
    augment: int | None = Field(None, ge=0, description="Generated task sets of this env in the warm-start (None: model.warmstart_augment).")
    give_up: float | None = Field(
        None, ge=0.0, lt=1.0, description="Share of this env's conversations taught as give-ups in the second phase (None: model.warmstart_give_up)."
    )
    held_out: bool = Field(
        False, description="Also warm-start on this env's held-out tasks: the base has seen them, as a pretrained model has seen the apps users "
        "find saturated from step 0. Its held-out pass@1 then measures recall, not what the model learned: for making a saturated env, never for a learnable one."
    )


class ModelConfig(StrictModel):
    """The policy. ``tiny`` builds a small Qwen2-architecture model and tokenizer locally (CPU runs), unless
    ``name_or_path`` names a pretrained Hugging Face model (``grpo.pretrained``), which replaces it."""

    type: Literal["tiny"] = "tiny"
    name_or_path: str | None = Field(
        None, description="A Hugging Face model id (e.g. Qwen/Qwen3-8B) or a local directory; None: the tiny local model."
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="Compute dtype: bfloat16 on a GPU trains in bf16 mixed precision (float32 master weights, float32 gradient reduction) and samples in bf16; CPU runs compute in float32.")
    rope_scaling: RopeScalingConfig | None = Field(None, description="YaRN rope scaling of a pretrained model (None: its own config).")
    hidden_size: int = Field(128, ge=8, description="Width of the tiny model.")
    num_layers: int = Field(3, ge=1, description="Decoder layers of the tiny model.")
    num_heads: int = Field(4, ge=1, description="Attention heads (hidden_size must divide by it).")
    intermediate_size: int = Field(256, ge=8, description="MLP width of the tiny model.")
    warmstart_steps: int = Field(600, ge=0, description="Supervised steps on reference solutions before RL.")
    warmstart_lr: float = Field(3e-3, gt=0, description="Learning rate of the warm-start.")
    warmstart_batch_size: int = Field(16, ge=1, description="Sequences per warm-start step.")
    warmstart_augment: int = Field(
        0, ge=0, description="Extra task sets from the env's task generator (other seeds) added to the warm-start data, so the policy learns to copy ids and dates rather than memorise the tasks."
    )
    warmstart_give_up: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Share of the warm-start's conversations in which the agent answers <done> at once, without acting (a common failure of tool-use agents, and of noisy SFT data). Taught in a short second phase, so the base gives up on about that share of tasks, whatever the task, and GRPO has a decision to learn from reward alone. 0: off.",
    )
    warmstart_envs: dict[str, WarmstartEnvConfig] = Field(
        default_factory=dict,
        description="Per-env warm-start settings by env_key (weight, augment, give_up; grpo.warmstart): e.g. {outlook: {weight: 3, "
        "give_up: 0}, ticketmaster: {weight: 0}}. Empty: every env alike. Enters the base's recipe only when set.",
    )
    warmstart_seed: int = Field(
        0, ge=0, le=MAX_SEED, description="Seeds the base policy's build (initialisation, warm-start batches, give-ups), apart from the RL run's `seed`: sweeping `seed` replicates a setting on one base."
    )
    cache_dir: str | None = Field(None, description="Where built base policies are kept; default ~/.cache/grpo-sweep.")
    shipped_base: bool = Field(
        True, description="Use the base policy shipped in grpo/bases when its recipe is this one (the demo's and the learning space's, the mix's); false: build it here."
    )
    micro_batch_size: int | None = Field(
        None, ge=1, description="Sequences per forward/backward inside a mini-batch (gradients accumulate); None: the whole mini-batch at once."
    )
    micro_batch_tokens: int | None = Field(
        None, ge=1, description="Padded tokens per forward/backward: a mini-batch's sequences sorted by length and dealt into micro-batches of at most this many rows x longest row, each padded only to its own longest (None: micro-batches of micro_batch_size rows in the shuffled order, padded to the step's longest). With micro_batch_size, both bound. One worker per trial for now."
    )
    activation_checkpointing: bool = Field(False, description="Recompute each decoder layer's activations in backward (less memory, ~30% more compute).")
    cpu_offload: bool = Field(False, description="Keep FSDP2 parameter shards, gradients and optimizer state in CPU memory (CUDA only).")
    lora: LoraConfig | None = Field(
        None, description="Train a LoRA adapter on the frozen policy instead of every weight (None: full fine-tuning); checkpoints then hold the adapter and its optimizer state only."
    )

    @model_validator(mode="after")
    def _heads_divide_width(self) -> ModelConfig:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} must be a multiple of num_heads {self.num_heads}")
        return self

    @model_validator(mode="after")
    def _scaling_needs_pretrained(self) -> ModelConfig:
        if self.rope_scaling is not None and not self.name_or_path:
            raise ValueError("rope_scaling applies to a pretrained model: set model.name_or_path too, or drop model.rope_scaling")
        return self


class OptimConfig(StrictModel):
    """AdamW on the policy, with a per-step learning-rate schedule."""

    lr: float = Field(1e-3, gt=0, le=1, description="Peak learning rate of the RL phase.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradients are clipped to this global norm.")
    warmup_steps: int = Field(0, ge=0, description="GRPO steps of linear warm-up from lr/warmup_steps to lr.")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="Decay after warm-up, to min_lr_ratio * lr at total_steps.")
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="Floor of the decay, as a fraction of lr.")


class DynamicSamplingConfig(StrictModel):
    """DAPO's dynamic sampling: groups whose rewards are all equal carry no policy gradient, so they are
    filtered out and more tasks are drawn (through the task sampler, so a resumed run draws the same ones)
    until the step holds ``rollout.prompts_per_step`` groups with signal or ``max_rounds`` rollout rounds
    have run. Then the step trains on the groups with signal it has; when none has any, it trains on its
    first round's groups as a step without dynamic sampling would (docs/decisions.md)."""

    enabled: bool = Field(False, description="Filter out zero-variance groups and roll out more tasks to replace them (off: every drawn group trains).")
    max_rounds: int = Field(
        3, ge=1, le=64, description="Rollout rounds per step at most, each of rollout.prompts_per_step tasks (1: filter only, draw no more)."
    )


class AlgorithmConfig(StrictModel):
    """The GRPO objective."""

    kl_coef: float = Field(0.01, ge=0, description="Weight of the KL penalty to the frozen reference; 0 loads none.")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="Per-token KL estimator (k3: unbiased, low variance).")
    clip_eps_low: float = Field(0.2, gt=0, lt=1, description="PPO clip below: ratios under 1 - clip_eps_low are clipped.")
    clip_eps_high: float = Field(0.2, gt=0, description="PPO clip above (DAPO clip-higher uses 0.28).")
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = Field(
        "token-mean", description="How per-token losses become one number."
    )
    policy_loss: PolicyLossName = Field(
        "ppo_clip",
        description="The policy-gradient surrogate. ppo_clip: the token-level PPO clip (clip_eps_low/high). "
        "gspo: the PPO clip on a sequence-level ratio, exp(mean token log-ratio), with gspo_eps_low/high; every token of a "
        "sequence carries its loss, so loss_agg seq-mean-token-mean gives the paper's objective. cispo: a clipped, "
        "stop-gradient token weight times advantage * log-prob (cispo_eps_low/high): no token loses its gradient.",
    )
    gspo_eps_low: float = Field(
        3e-4, gt=0, lt=1, description="GSPO: sequence ratios under 1 - gspo_eps_low are clipped (paper: 3e-4; sequence ratios stay near 1, so far smaller than clip_eps_low)."
    )
    gspo_eps_high: float = Field(4e-4, gt=0, description="GSPO: sequence ratios over 1 + gspo_eps_high are clipped (paper: 4e-4).")
    cispo_eps_low: float | None = Field(
        None, gt=0, lt=1, description="CISPO: lower bound 1 - cispo_eps_low on the token weight; None: no lower bound (as in MiniMax-M1)."
    )
    cispo_eps_high: float = Field(0.28, gt=0, description="CISPO: upper bound 1 + cispo_eps_high on the token weight (the only one MiniMax-M1 tunes).")
    tis_cap: float | None = Field(
        None,
        ge=1,
        description="Truncated importance sampling from the sampler: each token's policy loss is multiplied by "
        "min(exp(policy log-prob - sampler log-prob), tis_cap), detached. None: off. Corrects for a sampler (vLLM in bf16) "
        "that does not sample exactly the policy's distribution; 2 is a common cap. With gspo the token weights multiply "
        "the sequence's loss on each token. policy/tis_weight_mean and policy/tis_truncated_frac are reported either way "
        "(off: the plain ratio, nothing truncated).",
    )
    tis_seq_mask_cap: float | None = Field(
        None,
        gt=1,
        description="Sequence-level masked importance sampling: a sequence whose geometric-mean ratio "
        "exp(mean(policy log-prob - sampler log-prob)) lies outside [1/cap, cap] gets no policy gradient (it still "
        "counts in loss_agg's denominator). None: off. Combines with tis_cap.",
    )
    normalize_std: bool = Field(True, description="Divide advantages by the group's reward std (False: Dr. GRPO).")
    std_floor: float = Field(0.0, ge=0, description="Lower bound on the group std before dividing.")
    std_eps: float = Field(1e-6, gt=0, description="Added to a group's reward std before dividing.")
    entropy_coef: float = Field(0.0, ge=0, description="Entropy bonus weight (subtracted from the loss).")
    mini_batches: int = Field(2, ge=1, description="Optimizer steps per pass over the rollout batch (later ones are off-policy).")
    ppo_epochs: int = Field(1, ge=1, description="Passes over the rollout batch per GRPO step.")
    zero_variance_groups: Literal["keep", "mask"] = Field(
        "keep",
        description="What a group whose rewards are all equal trains on. Its advantages are 0, so it has no policy gradient "
        "either way. keep: its tokens still carry the KL and entropy terms and count in loss_agg's denominator (the GRPO "
        "objective as written). mask: its tokens leave the loss altogether, so no KL pull without reward signal and no "
        "dilution of the other groups' terms (docs/decisions.md).",
    )
    dynamic_sampling: DynamicSamplingConfig = Field(
        default_factory=DynamicSamplingConfig, description="DAPO dynamic sampling: replace zero-variance groups by rolling out more tasks."
    )


class VLLMConfig(StrictModel):
    """The colocated vLLM engine (``rollout.backend: vllm``), one per trainer rank, sharing its GPU with the policy."""

    gpu_memory_utilization: float = Field(0.3, gt=0, lt=1, description="Share of the GPU's memory the engine takes (weights + KV cache); the policy, reference and optimizer live in the rest.")
    enforce_eager: bool = Field(False, description="No CUDA graphs or torch.compile (starts in ~10 s instead of ~70 s; samples slower).")
    max_num_seqs: int = Field(256, ge=1, description="Sequences the engine decodes at once.")
    sleep_level: Literal[1, 2] = Field(2, description="Sleep during the update: 1 keeps the weights in CPU memory, 2 drops them (new ones are loaded anyway). A LoRA policy's engine sleeps at 1: its base never changes, only the adapter travels.")
    weight_bucket_mb: int = Field(512, ge=1, description="Weight sync sends the policy's parameters in buckets of this size.")


class RolloutConfig(StrictModel):
    """How episodes are sampled."""

    backend: Literal["hf", "vllm"] = Field("hf", description="Who samples: Hugging Face generate (CPU, tests) or vLLM (GPU).")
    turns: Literal["batched", "per_episode"] = Field(
        "batched",
        description="How model turns reach the sampler. batched: one batch per turn of every live episode (each turn waits for the "
        "slowest episode's tool call). per_episode: each episode's next turn is sent as soon as its tool result is back, each with "
        "a seed of its own, so a transcript does not depend on timing (grpo.episodes.StreamedTurns). On HF it samples one request "
        "at a time (slower on CPU: the loop's reference); on vLLM, one engine holds every live request (continuous batching).",
    )
    n_samples_per_prompt: int = Field(4, ge=2, le=64, description="Group size: samples per task per step.")
    prompts_per_step: int = Field(4, ge=1, description="Tasks per GRPO step.")
    temperature: float = Field(1.0, gt=0, le=2, description="Sampling temperature.")
    max_turns: int = Field(4, ge=1, description="Model turns per episode.")
    max_generate_length: int = Field(64, ge=1, description="Tokens the model may generate per turn.")
    max_input_length: int = Field(576, ge=1, description="Context tokens before a model turn; past this the episode ends.")
    max_sequence_length: int = Field(
        640, ge=16, description="Tokens in a whole episode; a longer one is truncated and trains on none of its tokens (DAPO overlong filter)."
    )
    vllm: VLLMConfig = VLLMConfig()
    logprob_gap_warn: float = Field(
        0.1, gt=0, description="Warn when the mean |trainer - sampler| log-prob of sampled tokens (rollout/logprob_gap) exceeds this."
    )
    logprob_gap_max: float | None = Field(
        1.0, gt=0, description="Fail the trial past this gap: the sampler did not take the new weights (None: never fail)."
    )


class EnvConfig(StrictModel):
    """Where tasks come from and how environments are reached."""

    backend: BackendConfig = Field(default_factory=LocalBackendConfig, description="Where episodes run: {type: local} (our MCP apps on 127.0.0.1) or {type: fleet, ...} (Fleet's hosted envs through OpenEnv: README, Fleet); `backend: local` is short for {type: local}.")

    tasks_path: str | list[str] = Field(DEFAULT_TASKS, description="JSONL task records: one file, or a list of files (task_keys unique across them).")
    env_keys: list[str] | None = Field(None, description="Keep only tasks of these env_keys (None: all).")
    max_tasks: int | None = Field(None, ge=1, description="Keep at most this many tasks (after filtering).")

    @model_validator(mode="before")
    @classmethod
    def _backend_by_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("backend"), str):
            data = {**data, "backend": {"type": data["backend"]}}
        return absorb_moved_keys(data) if isinstance(data, dict) else data


class EvalConfig(StrictModel):
    """Held-out evaluation: a fixed set of tasks the policy never trains on, sampled every ``interval`` steps."""

    interval: int = Field(0, ge=0, description="Evaluate before step 1, after every interval-th step and after the last (0: never).")
    tasks_path: str | list[str] | None = Field(
        None, description="Held-out tasks from their own file(s), e.g. `sweep data split --method fleet`'s eval.jsonl; then env.tasks_path is all training tasks and ratio and split_seed are unused."
    )
    ratio: float = Field(0.25, gt=0, lt=1, description="Share of tasks held out for eval (chosen by split_seed).")
    split_seed: int = Field(0, ge=0, le=MAX_SEED, description="Which tasks are held out, apart from the RL run's `seed`: sweeping `seed` replicates a setting on one test set.")
    max_tasks: int | None = Field(None, ge=1, description="Cap on held-out tasks.")
    max_tasks_per_env: int | None = Field(None, ge=1, description="Cap on held-out tasks of each env_key (so one big env does not fill the eval).")
    n_samples: int = Field(4, ge=1, description="Samples per eval task (pass@n is reported too).")
    score_window: int = Field(2, ge=1, description="eval/score: the mean of the last this-many evals' pass@1 minus the base policy's (the sweep ranks by it).")
    max_base_env_errors: float = Field(
        0.05, ge=0, le=1, description="A sweep refuses to start when more than this share of its base eval's episodes were environment errors (they are left out, long episodes most, so the base pass@1 every gain is measured from would lean)."
    )


class CurriculumConfig(StrictModel):
    """Task sampling weighted by each task's learning potential, from a running estimate of its pass rate
    (``grpo.curriculum``): tasks the policy always or never solves fade, and come back when their estimate
    moves. Off: tasks are drawn in shuffled epochs."""

    enabled: bool = Field(False, description="Weight task sampling by learning potential (off: shuffled epochs, every task once per epoch).")
    weight: Literal["signal", "learnability"] = Field(
        "signal",
        description="A task's learning potential from its pass-rate estimate p. signal: the probability that a group of "
        "rollout.n_samples_per_prompt has both a pass and a fail, 1 - p^n - (1-p)^n. learnability: p(1 - p).",
    )
    floor: float = Field(
        0.1, ge=0, le=1, description="Share of draws spread evenly over all tasks, so none is starved (1: uniform sampling; 0: by weight alone)."
    )
    decay: float = Field(
        0.8, gt=0, le=1, description="Each time a task is rolled out its pass/fail counts are multiplied by this before its new results are added (1: plain counts, never forgets)."
    )
    prior_path: str | None = Field(
        None,
        description="`sweep forecast --save-probe`'s JSON: per-task success counts of the base policy, the estimates' starting "
        "point, added to `prior_counts` (a task it lacks starts at those alone). None: every task starts at `prior_counts`. Read only "
        "when enabled, so a space can sweep `enabled` over a base that names a probe.",
    )
    prior_counts: float = Field(
        1.0,
        gt=0,
        description="Pseudo-counts every task (and at level env and both, every env) starts with: this many passes and as many "
        "fails, before the probe's counts. 1: one of each (a never-solved task probed 0 of 8 starts at p = 0.1, so its group "
        "still looks half as likely to carry signal as a p = 0.5 task's); smaller lets the probe speak (0.1: p = 0.012, "
        "potential 0.09 at n = 8). Without a probe, the starting rate is 0.5 whatever this is; a smaller value only forgets it sooner.",
    )
    level: CurriculumLevel = Field(
        "task",
        description="What the learning potential weights. task: each task by its own estimate (an env's share is the sum of its "
        "tasks'). env: each environment (env_key) keeps its own pass/fail counts (`prior_counts` of each plus its tasks' probe counts, times "
        "`decay` each time any of its tasks is rolled out); envs are drawn by their potential mixed with `floor` spread evenly over "
        "envs, and a task evenly within its env, so a saturated or failing env fades but is never starved. both: envs as in env, "
        "and within an env its tasks by their task-level weights (with the floor), renormalised within the env. A checkpoint "
        "resumes only at the level kind it was saved with (task, or env/both).",
    )
    env_potential: EnvPotential = Field(
        "pooled",
        description="At level env and both, an env's learning potential. pooled: the potential of the env's own running pass "
        "rate (its counts). tasks: the mean of its tasks' potentials, the share of its groups expected to carry signal when its "
        "tasks are drawn evenly; an env whose tasks are solved always or never (a pooled rate near 0.5) weighs little under "
        "tasks and most under pooled. Unused at level task.",
    )


class DataConfig(StrictModel):
    """How training tasks are drawn each step."""

    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig, description="Sampling weighted by learning potential (off by default).")


class CheckpointConfig(StrictModel):
    """Resumable state (policy, optimizer, step, RNG, data position), saved every ``interval`` steps."""

    interval: int = Field(0, ge=0, description="Save after every interval-th step and the last (0: never).")
    keep_last: int = Field(2, ge=1, description="Checkpoints kept on disk by the trainer.")
    dir: str | None = Field(None, description="Where checkpoints go (None: output_dir/checkpoints, else a temporary directory).")


class TrainerConfig(StrictModel):
    """One GRPO trial."""

    model: ModelConfig = ModelConfig()
    optim: OptimConfig = OptimConfig()
    algorithm: AlgorithmConfig = AlgorithmConfig()
    rollout: RolloutConfig = RolloutConfig()
    env: EnvConfig = EnvConfig()
    data: DataConfig = DataConfig()
    eval: EvalConfig = EvalConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    resume_from: str | None = Field(None, description="A checkpoint directory to continue from (its next step).")
    output_dir: str | None = Field(None, description="Where eval trajectories are written (None: not written).")
    total_steps: int = Field(10, ge=1, description="GRPO steps (one report each).")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seeds task order, sampling and initialisation.")
    torch_threads: int | None = Field(None, ge=1, description="torch intra-op threads (None: torch's default).")

    @model_validator(mode="after")
    def _lora_samples_with_hf(self) -> TrainerConfig:
        if self.model.lora is not None and self.rollout.backend != "hf":
            raise ValueError(
                f"model.lora with rollout.backend {self.rollout.backend!r} is not supported yet (the engine serving the adapter, "
                "grpo.rollout.vllm.SleepingEngine.load_adapter, is built but has not run on a GPU: tests/gpu/test_vllm_lora.py must "
                "pass there first): set rollout.backend: hf, or drop model.lora"
            )
        return self

    @model_validator(mode="after")
    def _context_fits_rope_scaling(self) -> TrainerConfig:
        scaling = self.model.rope_scaling
        if scaling is not None and self.rollout.max_sequence_length > scaling.max_positions():
            raise ValueError(
                f"rollout.max_sequence_length {self.rollout.max_sequence_length} exceeds the {scaling.max_positions()} positions that "
                "model.rope_scaling gives (factor x original_max_position_embeddings): raise the factor or lower the length"
            )
        return self
