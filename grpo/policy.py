"""The policy and its frozen reference: loading, and per-token log-probabilities of given sequences.

Log-probs are computed as gather minus logsumexp over temperature-scaled logits, the same
distribution the sampler draws from, without materialising the batch's float32 logits. Sharding and
mixed precision are ``grpo.distributed``'s.
"""

from __future__ import annotations

import inspect

import torch
import torch.utils.checkpoint


def quiet_transformers() -> None:
    """No per-load progress bars in trial logs."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def load_policy(path: str, trainable: bool = True):
    from transformers import Qwen2ForCausalLM

    quiet_transformers()
    model = Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.train(trainable)
    if not trainable:
        model.requires_grad_(False)
    return model


def token_logprobs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0, first_target: int = 0, chunk: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of each next token and the entropy of the distribution it was drawn from.

    input_ids, attention_mask: ``(B, L)``. Returns ``(logprobs (B, L-1), entropy (B, L-1))`` where
    position t scores ``input_ids[:, t + 1]``. Positions before ``first_target`` (the prompt, which no
    loss reads) are not computed (``logits_to_keep``) and come back as 0. The float32 log-softmax runs
    ``chunk`` positions at a time, recomputed in backward, so only the model's own (bf16 on a GPU) logits
    and one chunk's float32 copy exist at once, not a float32 copy of all of them. Leaves out: applying
    the head chunk by chunk (the logits of a micro-batch still exist whole: keep micro-batches small).
    """
    keep = input_ids.shape[1] - first_target
    logits = shared_prefix_logits(model, input_ids, attention_mask, first_target, keep)[:, :-1]
    targets = input_ids[:, first_target + 1 :]
    # split, not slicing in a loop: each sliced chunk's backward would allocate a zero tensor as big as all the logits
    pieces = [_scored(part, goal, temperature) for part, goal in zip(logits.split(chunk, dim=1), targets.split(chunk, dim=1))]
    logprobs = torch.cat([p[0] for p in pieces], dim=1)
    entropy = torch.cat([p[1] for p in pieces], dim=1)
    pad = (first_target, 0)
    return torch.nn.functional.pad(logprobs, pad), torch.nn.functional.pad(entropy, pad)


def shared_prefix_logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, prefix: int, keep: int) -> torch.Tensor:
    """The model's logits of the last ``keep`` positions, each distinct ``prefix``-token head run once.

    The samples of a group share their prompt, so the first ``prefix`` tokens (no loss reads their
    logits) are computed once per distinct head and their keys and values given to every row that starts
    with it; gradients flowing back through that selection sum over the rows, so the result and its
    gradients are those of the whole batch run row by row (to float rounding). Falls back to one plain
    forward when no two rows share a head, when the heads hold padding, under activation checkpointing
    (which turns the cache off), and for an FSDP2-sharded model (two forwards before one backward: the
    second's post-backward reshard frees parameters the first's backward still needs).
    """
    shareable = prefix > 0 and not _sharded(model) and not _checkpointed(model) and bool(attention_mask[:, :prefix].all())
    heads, rows = torch.unique(input_ids[:, :prefix], dim=0, return_inverse=True) if shareable else (input_ids, None)
    if len(heads) == len(input_ids):  # nothing shared (or not shareable): one plain forward
        return model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep).logits
    name = cache_argument(model)
    heads_out = model(input_ids=heads, use_cache=True, logits_to_keep=1)
    cache = heads_out.cache if name == "cache" else heads_out.past_key_values
    cache.batch_select_indices(rows)
    return model(input_ids=input_ids[:, prefix:], attention_mask=attention_mask, use_cache=True, logits_to_keep=keep, **{name: cache}).logits


def cache_argument(model) -> str:
    """The forward's name for the KV cache: transformers renamed ``past_key_values`` to ``cache`` within 5.x (5.24
    warns at the old name, which goes in 5.40; older 5.x know only it). Read from the first module, outermost
    first, whose forward names either (a peft model and a LoRA policy's reference pass it to their base)."""
    for module in model.modules():
        parameters = inspect.signature(module.forward).parameters
        if "cache" in parameters or "past_key_values" in parameters:
            return "cache" if "cache" in parameters else "past_key_values"
    return "past_key_values"


def _sharded(model) -> bool:
    """FSDP2 on the model or inside it (a peft LoRA policy wraps its sharded base)."""
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(m, FSDPModule) for m in model.modules())


def _checkpointed(model) -> bool:
    """Activation checkpointing on (HF's flag on the decoder; it turns the KV cache off in training)."""
    return any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())


def _scored(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    if torch.is_grad_enabled() and logits.requires_grad:
        return torch.utils.checkpoint.checkpoint(logprob_and_entropy, logits, targets, temperature, use_reentrant=False)
    return logprob_and_entropy(logits, targets, temperature)


def logprob_and_entropy(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather minus logsumexp in float32: ``(B, T, V), (B, T) -> (B, T), (B, T)``."""
    scaled = logits.float() / temperature
    log_norm = torch.logsumexp(scaled, dim=-1)
    chosen = torch.gather(scaled, -1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = log_norm - (torch.softmax(scaled, dim=-1) * scaled).sum(-1)
    return chosen - log_norm, entropy
