"""The policy and its frozen reference: loading, and per-token log-probabilities of given sequences.

Log-probs are computed as gather minus logsumexp over temperature-scaled logits, the same
distribution the sampler draws from. Leaves out: FSDP2 sharding and bf16 (issues 4 and 9).
"""

from __future__ import annotations

import torch


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


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of each next token and the entropy of the distribution it was drawn from.

    input_ids, attention_mask: ``(B, L)``. Returns ``(logprobs (B, L-1), entropy (B, L-1))`` where
    position t scores ``input_ids[:, t + 1]``.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float() / temperature
    log_norm = torch.logsumexp(logits, dim=-1)
    chosen = torch.gather(logits, -1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    probs = torch.softmax(logits, dim=-1)
    entropy = log_norm - (probs * logits).sum(-1)
    return chosen - log_norm, entropy
