"""One policy update on a rollout batch: old and reference log-probs, then ``ppo_epochs`` passes of
``mini_batches`` optimizer steps each.

The first mini-batch is on-policy (ratio 1, so the clip cannot engage); later ones see a policy that has
already moved, which is where PPO clipping matters. The loss is the chosen aggregation of the chosen
policy loss (``algorithm.policy_loss``: PPO clip, GSPO or CISPO), each token's term optionally weighted by
importance sampling from the sampler's log-probs (truncated per token, ``tis_cap``; masked per sequence,
``tis_seq_mask_cap``), plus ``kl_coef`` times the chosen KL estimator minus ``entropy_coef`` times the
entropy, over the model's own tokens only. The trainer stays algorithm-blind: every choice arrives in
``UpdateSettings``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo.algorithm import (
    AGGREGATION_WEIGHTS,
    kl_estimator,
    loss_aggregation,
    masked_mean,
    policy_loss,
    rescale_to_global,
    sequence_importance_mask,
    truncated_importance_weights,
)
from grpo.batching import TrainBatch
from grpo.config import TrainerConfig
from grpo.distributed import ONE_PROCESS, Ranks, device, sum_across
from grpo.losses import POLICY_LOSS_SPECS
from grpo.policy import token_logprobs


@dataclass(frozen=True)
class UpdateSettings:
    clip_low: float | None  # the chosen policy loss's epsilons (grpo.losses); None: no lower bound (CISPO)
    clip_high: float
    kl_coef: float
    mini_batches: int
    max_grad_norm: float
    temperature: float
    kl_estimator: str = "k3"
    loss_agg: str = "token-mean"
    entropy_coef: float = 0.0
    ppo_epochs: int = 1
    norm_length: int = 1  # the constant seq-mean-token-sum-norm divides by (max_sequence_length)
    micro_batch_size: int | None = None  # sequences per forward/backward; None: a whole mini-batch
    micro_batch_tokens: int | None = None  # rows x longest row per micro-batch, rows sorted by length (grpo.update.micro_batches)
    policy_loss: str = "ppo_clip"  # a name in grpo.algorithm.POLICY_LOSSES
    tis_cap: float | None = None  # truncated importance sampling from the sampler's log-probs; None: off
    tis_seq_mask_cap: float | None = None  # sequence-level masked importance sampling; None: off

    @classmethod
    def of(cls, cfg: TrainerConfig) -> UpdateSettings:
        """The update a trial's config asks for: its ``algorithm`` section, with the clip norm (``optim``),
        the sampling temperature and sequence length (``rollout``) and the micro-batch (``model``)."""
        a = cfg.algorithm
        eps_low, eps_high = POLICY_LOSS_SPECS[a.policy_loss].eps_keys
        return cls(
            clip_low=getattr(a, eps_low), clip_high=getattr(a, eps_high), policy_loss=a.policy_loss, tis_cap=a.tis_cap,
            tis_seq_mask_cap=a.tis_seq_mask_cap, kl_coef=a.kl_coef, mini_batches=a.mini_batches,
            max_grad_norm=cfg.optim.max_grad_norm, temperature=cfg.rollout.temperature, kl_estimator=a.kl_estimator,
            loss_agg=a.loss_agg, entropy_coef=a.entropy_coef, ppo_epochs=a.ppo_epochs, norm_length=cfg.rollout.max_sequence_length,
            micro_batch_size=cfg.model.micro_batch_size, micro_batch_tokens=cfg.model.micro_batch_tokens,
        )


def policy_update(
    policy, reference, optimizer, batch: TrainBatch, settings: UpdateSettings, generator: torch.Generator, ranks: Ranks = ONE_PROCESS
) -> dict[str, float]:
    """Run the optimizer steps; returns ``policy/*`` metrics averaged over them (over all ranks' tokens).

    With several ranks every rank passes its own part of the step's batch (the same number of
    sequences on each, so every rank runs the same number of mini-batches: FSDP2 collectives need all).
    With one mini-batch and one epoch the update is on-policy, so the old log-probs are the first
    forward's own (detached) and the separate no-grad pass is skipped. ``rollout/logprob_gap`` compares
    the policy's log-probs of the sampled tokens with the sampler's. ``policy/update_kl`` compares the probe's
    log-probs before the steps with after; on-policy, "before" is the one step's own forward (no extra pass)
    unless dropout makes a training forward differ from an evaluation one.
    """
    batch = batch.to(device())  # the GPU even when FSDP2 offloads the parameters to CPU memory
    first = first_target(batch.loss_mask)
    probe = batch.select(slice(0, UPDATE_PROBE))  # where the update's size is measured
    on_policy = settings.ppo_epochs * settings.mini_batches == 1
    with torch.no_grad():
        old_logprobs = None if on_policy else scored(policy, batch, settings, first)
        ref_logprobs = scored(reference, batch, settings, first) if reference is not None else None
        if not on_policy:
            before = old_logprobs[: len(probe)]
        elif _deterministic_in_training(policy):
            before = None  # the step's own forward, below
        else:
            before = scored(policy, probe, settings, first)
    totals: dict[str, float] = {}
    steps = 0
    policy.train()
    for _ in range(settings.ppo_epochs):
        order = torch.randperm(len(batch), generator=generator)
        for index in (c for c in order.chunk(settings.mini_batches) if len(c)):
            index = index.to(batch.input_ids.device)
            old = None if old_logprobs is None else old_logprobs[index]
            ref = None if ref_logprobs is None else ref_logprobs[index]
            stats, own = _step(policy, optimizer, batch.select(index), old, ref, settings, ranks, first)
            if before is None:  # on-policy: the whole batch in one step, its rows in ``index``'s order
                before = own[torch.argsort(index)][: len(probe)]
            for key, value in stats.items():
                totals[key] = totals.get(key, 0.0) + value
            steps += 1
    policy.eval()
    with torch.no_grad():
        after = scored(policy, probe, settings, first)
    return {**{key: value / steps for key, value in totals.items()}, "policy/update_kl": update_kl(before, after, probe.loss_mask, ranks)}


UPDATE_PROBE = 16  # sequences of the batch whose log-probs are compared before and after the update


def update_kl(before: torch.Tensor, after: torch.Tensor, mask: torch.Tensor, ranks: Ranks = ONE_PROCESS) -> float:
    """How far this step's update moved the policy: KL(before || after) on the tokens it trained on, by
    cleanrl's approx_kl estimator ``(r - 1) - log r`` with ``r = p_after / p_before`` (unbiased for samples
    from the policy before, and never negative). Averaged over every rank's tokens."""
    log_ratio = (after - before).float()
    per_token = (torch.exp(log_ratio) - 1.0) - log_ratio
    mask_f = mask.to(per_token.dtype)
    total, count = sum_across([float((per_token * mask_f).sum()), float(mask_f.sum())], ranks).tolist()
    return total / count if count else 0.0


def update_norm(optimizer: torch.optim.Optimizer, ranks: Ranks = ONE_PROCESS) -> float:
    """``|Δθ| / |θ|`` of the step an AdamW just took, over the parameters it trains (a LoRA's adapter, when
    only that trains), rebuilt from the optimizer's own state so the weights need no copy:
    ``Δ = lr · m̂ / (sqrt(v̂) + eps) + lr · wd · θ``. Summed over every rank's shards."""
    delta_sq, weight_sq = 0.0, 0.0
    for group in optimizer.param_groups:
        lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            if "exp_avg" not in state:
                continue
            t = float(state["step"])
            m, v, w = (_local(x).float() for x in (state["exp_avg"], state["exp_avg_sq"], param.detach()))
            delta = lr * (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + eps) + lr * decay * w
            delta_sq += float((delta**2).sum())
            weight_sq += float((w**2).sum())
    delta_sq, weight_sq = sum_across([delta_sq, weight_sq], ranks).tolist()
    return (delta_sq / weight_sq) ** 0.5 if weight_sq else 0.0


def _deterministic_in_training(model) -> bool:
    """No dropout anywhere (a LoRA adapter's, or the attention's): a training forward gives the evaluation log-probs."""
    dropout = any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())
    return not dropout and not any(getattr(getattr(m, "config", None), "attention_dropout", 0) for m in model.modules())


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def first_target(loss_mask: torch.Tensor) -> int:
    """The first target position any sequence trains on (earlier logits are never needed)."""
    trained = loss_mask.sum(0) > 0
    return int(trained.float().argmax()) if bool(trained.any()) else 0


def micro_slices(n: int, size: int | None) -> list[slice]:
    size = size or n
    return [slice(s, min(s + size, n)) for s in range(0, n, size)]


def length_groups(lengths: list[int], size: int | None, tokens: int) -> list[list[int]]:
    """Row numbers in micro-batches: longest first, each micro-batch as many rows as fit ``tokens`` padded to
    its first (longest) row, at most ``size`` rows, at least one."""
    groups: list[list[int]] = []
    for row in sorted(range(len(lengths)), key=lambda r: -lengths[r]):
        current = groups[-1] if groups else None
        if current is None or (len(current) + 1) * lengths[current[0]] > tokens or (size is not None and len(current) == size):
            groups.append([row])
        else:
            current.append(row)
    return groups


def micro_batches(batch: TrainBatch, settings: UpdateSettings, first: int) -> list[tuple[torch.Tensor, int]]:
    """Each micro-batch's rows and width. By count (``micro_batch_size``): consecutive rows at the batch's
    width. By tokens (``micro_batch_tokens``): rows grouped by length, each group narrowed to its longest row
    (never below ``first`` + 2: the logits of at least one target are kept)."""
    n, width = batch.input_ids.shape
    on = batch.input_ids.device
    if settings.micro_batch_tokens is None:
        return [(torch.arange(s.start, s.stop, device=on), width) for s in micro_slices(n, settings.micro_batch_size)]
    lengths = [min(width, max(int(length), first + 2)) for length in batch.attention_mask.sum(1).tolist()]
    groups = length_groups(lengths, settings.micro_batch_size, settings.micro_batch_tokens)
    return [(torch.tensor(rows, device=on), lengths[rows[0]]) for rows in groups]


def scored(model, batch: TrainBatch, settings: UpdateSettings, first: int) -> torch.Tensor:
    """The model's log-probs of the batch's tokens, micro-batch by micro-batch (0 past a narrowed one's width)."""
    out = torch.zeros(batch.loss_mask.shape, device=batch.input_ids.device)
    for rows, width in micro_batches(batch, settings, first):
        part = batch.select(rows).narrowed(width)
        out[rows, : width - 1] = token_logprobs(model, part.input_ids, part.attention_mask, settings.temperature, first)[0]
    return out


STAT_NAMES = (
    "loss", "kl", "clip_frac_low", "clip_frac_high", "entropy", "ratio_mean", "logprob_gap",
    "tis_weight_mean", "tis_truncated_frac", "tis_seq_masked_frac",
)


def _step(policy, optimizer, part: TrainBatch, old, ref, settings: UpdateSettings, ranks: Ranks, first: int) -> tuple[dict[str, float], torch.Tensor]:
    """One optimizer step on a mini-batch, its gradients accumulated over micro-batches; with its metrics, the
    policy's log-probs of the mini-batch before the step (detached), as the step's own forward computed them."""
    weigh = AGGREGATION_WEIGHTS[settings.loss_agg]
    gap_mask = part.loss_mask * torch.isfinite(part.sampler_logprobs)
    global_weight, global_tokens, global_gap_tokens = sum_across(
        [float(weigh(part.loss_mask)), float(part.loss_mask.sum()), float(gap_mask.sum())], ranks
    ).tolist()
    optimizer.zero_grad()
    shares = torch.zeros(len(STAT_NAMES), dtype=torch.float64, device=part.input_ids.device)
    own = torch.zeros(part.loss_mask.shape, device=part.input_ids.device)
    for rows, width in micro_batches(part, settings, first):
        micro = part.select(rows).narrowed(width)
        totals = (global_weight, global_tokens, global_gap_tokens)
        old_part, ref_part = (None if x is None else x[rows, : width - 1] for x in (old, ref))
        loss, stats, logprobs = _micro_loss(policy, micro, old_part, ref_part, settings, ranks, first, totals)
        (loss * ranks.world).backward()  # FSDP2 averages gradients over ranks; the shares already sum to the mean
        shares += stats
        own[rows, : width - 1] = logprobs
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.max_grad_norm)
    optimizer.step()
    norm = update_norm(optimizer, ranks)
    values = dict(zip(STAT_NAMES, sum_across(shares, ranks).tolist()))
    metrics = {
        "policy/loss": values["loss"],
        "policy/clip_frac": values["clip_frac_low"] + values["clip_frac_high"],
        "policy/clip_frac_low": values["clip_frac_low"],
        "policy/clip_frac_high": values["clip_frac_high"],
        "policy/kl": values["kl"],
        "policy/entropy": values["entropy"],
        "policy/grad_norm": _full(grad_norm),
        "policy/update_norm": norm,
        "policy/ratio_mean": values["ratio_mean"],
        "rollout/logprob_gap": values["logprob_gap"],
        "policy/tis_weight_mean": values["tis_weight_mean"],
        "policy/tis_truncated_frac": values["tis_truncated_frac"],
        "policy/tis_seq_masked_frac": values["tis_seq_masked_frac"],
    }
    return metrics, own


def _micro_loss(policy, part: TrainBatch, old, ref, settings: UpdateSettings, ranks: Ranks, first: int, totals) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This micro-batch's share of the mini-batch loss (over every rank's tokens) and of each statistic, and its
    log-probs (detached)."""
    global_weight, global_tokens, global_gap_tokens = totals
    logprobs, entropy = token_logprobs(policy, part.input_ids, part.attention_mask, settings.temperature, first)
    old = logprobs.detach() if old is None else old
    mask = part.loss_mask
    clipped = policy_loss(settings.policy_loss)(logprobs, old, part.advantages, mask, settings.clip_low, settings.clip_high)
    tis = truncated_importance_weights(old, part.sampler_logprobs, settings.tis_cap)  # measured also when off (no cap)
    kept = sequence_importance_mask(old, part.sampler_logprobs, mask, settings.tis_seq_mask_cap).unsqueeze(-1)
    agg = loss_aggregation(settings.loss_agg)
    local_weight = float(AGGREGATION_WEIGHTS[settings.loss_agg](mask))

    def aggregate(values: torch.Tensor) -> torch.Tensor:
        return rescale_to_global(agg(values, mask, settings.norm_length), local_weight, global_weight)

    def token_share(values: torch.Tensor, where: torch.Tensor = mask, total: float = global_tokens) -> torch.Tensor:
        return rescale_to_global(masked_mean(values.detach().float(), where), float(where.sum()), total)

    loss = aggregate((clipped.loss * tis.weight if settings.tis_cap is not None else clipped.loss) * kept)
    kl = aggregate(kl_estimator(settings.kl_estimator)(logprobs, ref)) if ref is not None else torch.zeros((), device=logprobs.device)
    if ref is not None and settings.kl_coef > 0:
        loss = loss + settings.kl_coef * kl
    if settings.entropy_coef > 0:
        loss = loss - settings.entropy_coef * aggregate(entropy)
    gap_mask = mask * torch.isfinite(part.sampler_logprobs)
    gap = torch.nan_to_num(old - part.sampler_logprobs).abs()
    stats = torch.stack(
        [
            loss.detach(),
            kl.detach(),
            token_share(clipped.clipped_low),
            token_share(clipped.clipped_high),
            token_share(entropy),
            token_share(torch.exp(logprobs.detach() - old)),
            token_share(gap, gap_mask, global_gap_tokens),
            token_share(tis.weight, gap_mask, global_gap_tokens),
            token_share(tis.truncated, gap_mask, global_gap_tokens),
            token_share(~kept.expand_as(mask), gap_mask, global_gap_tokens),
        ]
    ).to(torch.float64)
    return loss, stats, logprobs.detach()


def _full(value) -> float:
    """A float from a plain tensor or a DTensor (the global norm over the shards)."""
    return float(value.full_tensor() if hasattr(value, "full_tensor") else value)
