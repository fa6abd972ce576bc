"""FSDP2 on a GPU: one NCCL rank, bf16 compute with float32 master weights and reduction, activation
checkpointing and micro-batches giving the same update as without them."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _batch(vocab: int, rows: int = 4, length: int = 96):
    from grpo.batching import collate

    g = torch.Generator().manual_seed(1)
    ids = [torch.randint(10, vocab, (length,), generator=g).tolist() for _ in range(rows)]
    masks = [[0] * 40 + [1] * (length - 40) for _ in range(rows)]
    return collate(ids, masks, [1.0, -1.0, 0.5, -0.5][:rows], pad_id=0)


def _update(model_dir: str, **shard) -> tuple[dict[str, float], torch.nn.Module]:
    from grpo.distributed import init_ranks, parallelize
    from grpo.policy import load_policy
    from grpo.update import UpdateSettings, policy_update

    ranks = init_ranks()
    micro = shard.pop("micro_batch_size", None)
    policy = parallelize(load_policy(model_dir), ranks, bf16=True, **shard)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-5)
    settings = UpdateSettings(0.2, 0.2, 0.0, mini_batches=2, max_grad_norm=1.0, temperature=1.0, ppo_epochs=2, micro_batch_size=micro)
    stats = policy_update(policy, None, optimizer, _batch(policy.config.vocab_size), settings, torch.Generator().manual_seed(0), ranks)
    return stats, policy


@pytest.mark.timeout(600)
def test_one_rank_fsdp2_bf16_update(model_05b):
    stats, policy = _update(model_05b)
    weight = policy.model.layers[0].mlp.up_proj.weight
    assert type(weight).__name__ == "DTensor" and weight.device.type == "cuda"
    assert weight.dtype == torch.float32  # master weights; compute is bf16 (MixedPrecisionPolicy)
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    assert stats["policy/grad_norm"] > 0
    assert stats["policy/clip_frac"] >= 0
    # activation checkpointing and micro-batches of one sequence: the same update (bf16 tolerance)
    checkpointed, _ = _update(model_05b, activation_checkpointing=True, micro_batch_size=1)
    assert checkpointed["policy/loss"] == pytest.approx(stats["policy/loss"], abs=2e-2)
    assert checkpointed["policy/grad_norm"] == pytest.approx(stats["policy/grad_norm"], rel=5e-2)
