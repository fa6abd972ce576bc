"""Dynamic sampling and zero-variance groups: which groups carry signal, which train, on which rank, and
what a group without signal still contributes to the update (``algorithm.zero_variance_groups``)."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.algorithm import signal_by_group
from grpo.batching import training_batch
from grpo.config import TrainerConfig
from grpo.dynamic import dynamic_metrics, groups_with_signal, kept_groups, rank_share
from grpo.episodes import Trajectory
from grpo.policy import load_policy
from grpo.update import UpdateSettings, policy_update
from grpo.warmstart import reference_conversation, supervised_example


def _signal_loop(rewards: list[float], groups: list[int], valid: list[bool]) -> list[bool]:
    by_group: dict[int, list[float]] = {}
    for r, g, v in zip(rewards, groups, valid):
        if v:
            by_group.setdefault(g, []).append(r)
    return [len(set(by_group.get(g, []))) > 1 for g in groups]


def test_signal_by_group_by_hand():
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.3, 0.3])
    groups = torch.tensor([3, 3, 5, 5, 7, 7, 7, 2, 2])
    valid = torch.tensor([True, True, True, True, True, True, False, True, True])
    # group 3 mixed; 5 all passed; 7 all failed once its env error is left out; 2 equal partial rewards
    assert signal_by_group(rewards, groups, valid).tolist() == [True, True, False, False, False, False, False, False, False]
    assert signal_by_group(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), torch.tensor([True, False])).tolist() == [False, False]


@pytest.mark.parametrize("seed", range(20))
def test_signal_by_group_matches_a_loop(seed):
    g = torch.Generator().manual_seed(seed)
    size = int(torch.randint(1, 40, (1,), generator=g))
    rewards = torch.randint(0, 2, (size,), generator=g).float()
    groups = torch.randint(0, 6, (size,), generator=g) * 3
    valid = torch.rand(size, generator=g) > 0.2
    want = _signal_loop(rewards.tolist(), groups.tolist(), valid.tolist())
    assert signal_by_group(rewards, groups, valid).tolist() == want


def _episodes(rewards_by_group: dict[int, list[float]], tokens: list[int] | None = None, mask: list[int] | None = None) -> list[Trajectory]:
    tokens = tokens or [5, 6, 7]
    mask = mask or [0, 1, 1]
    return [
        Trajectory(task_key=f"t{g}", env_key="hotel", group_id=g, token_ids=list(tokens), loss_mask=list(mask),
                   sampler_logprobs=[math.nan] * len(tokens), reward=r)
        for g, rewards in rewards_by_group.items() for r in rewards
    ]


def test_kept_groups_take_the_first_with_signal_else_the_first_round():
    assert kept_groups([1, 4, 6, 7], range(4), 2) == [1, 4]
    assert kept_groups([5], range(4), 4) == [5]  # the round limit hit: train on what there is
    assert kept_groups([], range(4), 4) == [0, 1, 2, 3]  # none has signal: the first round, as without dynamic sampling
    episodes = _episodes({0: [1, 1], 1: [0, 1], 4: [0, 0], 6: [1, 0]})
    assert groups_with_signal(episodes) == [1, 6]


def test_rank_share_deals_groups_in_turn_and_pads_to_the_largest_share():
    episodes = _episodes({0: [1, 0], 2: [0, 1], 5: [1, 0], 9: [0, 0]})
    one = rank_share(episodes, [0, 2, 5], rank=0, world=1)
    assert [t.group_id for t in one] == [0, 0, 2, 2, 5, 5]
    first, second = (rank_share(episodes, [0, 2, 5], rank=r, world=2) for r in (0, 1))
    assert [t.group_id for t in first] == [0, 0, 5, 5]
    assert [t.group_id for t in second] == [2, 2, -1, -1] and all(t.env_error and not t.token_ids for t in second[2:])


def test_dynamic_metrics_by_hand():
    got = dynamic_metrics(rounds=3, groups=12, with_signal=5, trained=4, episodes=96, first_round_episodes=32)
    assert got == {"dynamic/rounds": 3.0, "dynamic/extra_episodes": 64.0, "dynamic/groups_filtered": 8.0, "dynamic/groups_trained": 4.0,
                   "dynamic/signal_share": 5 / 12, "dynamic/no_signal": 0.0}
    assert dynamic_metrics(2, 8, 0, 4, 64, 32)["dynamic/no_signal"] == 1.0


def _cfg(**algorithm) -> TrainerConfig:
    return TrainerConfig.model_validate({"algorithm": algorithm})


def test_mask_takes_zero_variance_groups_out_of_the_loss_and_keep_leaves_them_in():
    episodes = _episodes({0: [1.0, 1.0], 1: [1.0, 0.0]})
    keep = training_batch(episodes, _cfg(), pad_id=0)
    mask = training_batch(episodes, _cfg(zero_variance_groups="mask"), pad_id=0)
    assert keep.advantages[:2].tolist() == [0.0, 0.0] == mask.advantages[:2].tolist()
    assert keep.loss_mask.sum(-1).tolist() == [2, 2, 2, 2]
    assert mask.loss_mask.sum(-1).tolist() == [0, 0, 2, 2]
    assert torch.equal(keep.advantages, mask.advantages)


def test_a_zero_variance_group_still_pulls_towards_the_reference_under_keep_and_not_under_mask(tiny_base, chat, tasks):
    """The decision in docs/decisions.md: with kl_coef > 0, keep (the default) trains a group without signal on
    its KL term alone; mask gives it no gradient at all."""
    ids, loss_mask = supervised_example(chat, reference_conversation(tasks[0]))
    episodes = _episodes({0: [1.0, 1.0, 1.0]}, ids, loss_mask)  # all passed: advantages 0

    def grad_norm(choice: str) -> float:
        torch.manual_seed(0)
        reference = load_policy(tiny_base, trainable=False)
        policy = load_policy(tiny_base)
        with torch.no_grad():
            for p in policy.parameters():  # a policy that has moved from the reference, so KL has a gradient
                p.add_(0.05 * torch.randn_like(p))
        optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
        batch = training_batch(episodes, _cfg(zero_variance_groups=choice, kl_coef=0.1), chat.pad_id)
        settings = UpdateSettings(clip_low=0.2, clip_high=0.2, kl_coef=0.1, mini_batches=1, max_grad_norm=1.0, temperature=1.0)
        return policy_update(policy, reference, optimizer, batch, settings, torch.Generator().manual_seed(0))["policy/grad_norm"]

    assert grad_norm("keep") > 1e-3
    assert grad_norm("mask") == 0.0


def test_several_workers_refuse_dynamic_sampling_with_the_sum_norm_aggregation():
    from grpo.distributed import Ranks
    from grpo.trainer import check_world

    sum_norm = _cfg(dynamic_sampling={"enabled": True}, loss_agg="seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match=r"trainer.algorithm.dynamic_sampling.enabled = true with 2 workers \(resources.workers_per_trial\) and algorithm.loss_agg seq-mean-token-sum-norm.*token-mean"):
        check_world(sum_norm, Ranks(0, 2))
    check_world(sum_norm, Ranks(0, 1))  # one worker pads nothing
    check_world(_cfg(dynamic_sampling={"enabled": True}), Ranks(0, 2))  # token-mean ignores empty rows
