from __future__ import annotations

import pytest

from grpo.schedule import lr_multiplier


def test_warmup_then_constant():
    assert [lr_multiplier(s, 10, warmup_steps=4) for s in (1, 2, 4, 5, 10)] == [0.25, 0.5, 1.0, 1.0, 1.0]


def test_linear_and_cosine_decay_by_hand():
    # no warm-up, 5 steps: progress 0, .25, .5, .75, 1 -> linear 1, .75, .5, .25, 0; cosine 1, .853553, .5, .146447, 0
    assert [lr_multiplier(s, 5, schedule="linear") for s in range(1, 6)] == pytest.approx([1, 0.75, 0.5, 0.25, 0])
    assert [lr_multiplier(s, 5, schedule="cosine") for s in range(1, 6)] == pytest.approx([1, 0.853553, 0.5, 0.146447, 0], abs=1e-6)


def test_decay_floor_and_warmup_together():
    # warm-up 2 of 6 steps, then linear to 0.1 over steps 3..6: progress 0, 1/3, 2/3, 1
    got = [lr_multiplier(s, 6, warmup_steps=2, schedule="linear", min_ratio=0.1) for s in range(1, 7)]
    assert got == pytest.approx([0.5, 1.0, 1.0, 0.7, 0.4, 0.1])


def test_unknown_schedule():
    with pytest.raises(ValueError, match="constant, linear, cosine"):
        lr_multiplier(1, 5, schedule="step")


@pytest.mark.parametrize("steps", [20, 77, 600, 2400])
def test_the_warmstart_schedule_is_the_one_the_shipped_bases_were_built_with(steps):
    """Bit for bit the lambda the shipped bases' warm-start ran (a 5% warm-up, then 0.55 + 0.45 cos to a tenth):
    a float's difference in the LR can build another base (README: the base is fragile)."""
    import math

    from grpo.warmstart import warmstart_lr_multiplier

    warmup = max(1, steps // 20)
    built_with = [(i + 1) / warmup if i < warmup else 0.55 + 0.45 * math.cos(math.pi * (i - warmup) / max(1, steps - warmup)) for i in range(steps)]
    assert [warmstart_lr_multiplier(i, steps, warmup) for i in range(steps)] == built_with
