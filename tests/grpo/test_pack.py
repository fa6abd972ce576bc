"""Packed LoRA trials (``grpo.pack``): K trials over one base in one process report what they would alone,
step for step; a member's checkpoint is its adapter and optimizer and resumes alone; members join and
leave; keys that change the base are refused by name."""

from __future__ import annotations

import functools
import math

import pytest

from grpo.config import TrainerConfig
from grpo.pack import Pack, PackError, check_packable, train_packed
from grpo.reporting import ListReporter
from grpo.trainer import train
from tests.conftest import TEST_MODEL

# the learning space's shipped base (grpo/bases: no warm-start to wait for), which passes some tasks, so the
# updates carry reward signal; its recipe includes the eval split, hence eval.interval 5 (evals at steps 0 and 3)
LEARNING_BASE = {"warmstart_steps": 2400, "warmstart_augment": 20, "warmstart_give_up": 0.4}
BASE = {
    "model": {**LEARNING_BASE, "lora": {"rank": 2, "alpha": 4.0}},
    "total_steps": 3,
    "torch_threads": 1,
    "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 4, "max_turns": 4, "max_generate_length": 64},
    "optim": {"lr": 1e-2},
    "algorithm": {"kl_coef": 0.05},
    "eval": {"interval": 5, "n_samples": 1},
}
# what a sweep varies inside a pack: learning rate, KL, group size, the loss, the adapter's rank, the seed
TRIALS = [
    {},
    {"optim": {"lr": 3e-2}, "algorithm": {"kl_coef": 0.0}, "seed": 1},
    {"rollout": {**BASE["rollout"], "n_samples_per_prompt": 3}, "algorithm": {"kl_coef": 0.1, "policy_loss": "gspo"}, "seed": 2},
    {"model": {**BASE["model"], "lora": {"rank": 4, "alpha": 8.0}}, "algorithm": {"kl_coef": 0.05, "loss_agg": "seq-mean-token-mean"}, "seed": 3},
]
UNEQUAL = ("timing/", "perf/")  # wall clock and resident memory


def _cfg(trial: dict, **extra) -> TrainerConfig:
    return TrainerConfig.model_validate({**BASE, **trial, **extra})


@functools.cache
def _alone(i: int) -> ListReporter:
    """``TRIALS[i]`` trained alone, once for the module (the tests compare packs against the same lone runs)."""
    reporter = ListReporter()
    train(_cfg(TRIALS[i]), reporter)
    return reporter


def _assert_same_reports(packed: ListReporter, alone: ListReporter, what: str, unequal: tuple[str, ...] = UNEQUAL) -> None:
    assert [s for s, _ in packed.reports] == [s for s, _ in alone.reports], what
    for (step, got), (_, want) in zip(packed.reports, alone.reports):
        keys = {k for k in want if not k.startswith(unequal)}
        assert keys == {k for k in got if not k.startswith(unequal)}, f"{what} step {step}"
        for key in sorted(keys):
            assert math.isclose(got[key], want[key], rel_tol=1e-5, abs_tol=1e-5) or (math.isnan(got[key]) and math.isnan(want[key])), (
                f"{what} step {step} {key}: packed {got[key]} alone {want[key]}")


@pytest.mark.slow
def test_four_packed_trials_report_what_each_reports_alone():
    cfgs = [_cfg(t) for t in TRIALS]
    alone = [_alone(i) for i in range(len(TRIALS))]
    packed = [ListReporter() for _ in cfgs]
    train_packed(cfgs, packed)
    for i, (p, a) in enumerate(zip(packed, alone)):
        _assert_same_reports(p, a, f"trial {i}")
    curves = [tuple(m["policy/grad_norm"] for _, m in r.reports) for r in alone]
    assert len(set(curves)) == len(curves) and all(any(c) for c in curves)  # each trial moved, each its own way
    assert any(0 < m["reward/frac_mixed"] for r in alone for _, m in r.reports)  # rewards that differ within a group: real signal


@pytest.mark.slow
def test_a_members_checkpoint_is_its_adapter_and_resumes_alone(tmp_path):
    """Two members checkpoint every step; the second one's step-1 checkpoint, resumed as a lone trial
    (another process layout, adapter named peft's default), reports the pack's steps 2 and 3."""
    import torch.distributed.checkpoint as dcp

    cfgs = [_cfg(t, checkpoint={"interval": 1, "keep_last": 3, "dir": str(tmp_path / f"m{i}")}) for i, t in enumerate(TRIALS[:2])]
    packed = [ListReporter(), ListReporter()]
    train_packed(cfgs, packed)
    path = tmp_path / "m1" / "global_step_1"
    saved = dcp.FileSystemReader(str(path / "dcp")).read_metadata().state_dict_metadata
    model_keys = [k for k in saved if k.startswith("model.")]
    assert model_keys and all(".lora_A.default." in k or ".lora_B.default." in k for k in model_keys)  # its adapter alone, named as a lone one
    assert any(k.startswith("optim.state.") and ".default." in k for k in saved)

    resumed = ListReporter()
    train(_cfg(TRIALS[1], resume_from=str(path), checkpoint={"dir": str(tmp_path / "alone")}), resumed)
    # a resumed trial evaluates where it starts (step 1) as well, so eval/* differ until the last step's eval and
    # eval/score (the mean of its evals) to the end: as for any resumed trial, packed or not
    _assert_same_reports(resumed, _tail(packed[1], 2), "resumed alone", (*UNEQUAL, "eval/"))
    _assert_same_reports(_tail(resumed, 3), _tail(packed[1], 3), "resumed alone, last eval", (*UNEQUAL, "eval/score"))


def _tail(reporter: ListReporter, first_step: int) -> ListReporter:
    out = ListReporter()
    out.reports = [(s, m) for s, m in reporter.reports if s >= first_step]
    return out


@pytest.mark.slow
def test_a_member_that_joins_after_another_left_runs_as_it_would_alone():
    """A stopped trial leaves mid-run and a new one takes its place: the newcomer's adapter is drawn from
    its own seed and its reports match its lone run; the one that stayed is unmoved by the churn."""
    stays, leaves, joins = _cfg(TRIALS[0]), _cfg(TRIALS[1]), _cfg(TRIALS[2])
    alone = {"stays": _alone(0), "joins": _alone(2)}
    got = {"stays": ListReporter(), "joins": ListReporter()}
    with Pack(stays) as pack:
        a, b = pack.join(stays), pack.join(leaves)
        got["stays"].report(*pack.step(a))
        pack.step(b)
        pack.leave(b)
        c = pack.join(joins)
        assert set(pack.members) == {a.name, c.name} and b.name not in pack.policy.peft_config
        while not (a.done and c.done):
            for member, name in ((a, "stays"), (c, "joins")):
                if not member.done:
                    got[name].report(*pack.step(member))
    for name in got:
        _assert_same_reports(got[name], alone[name], name)


def test_keys_that_change_the_base_are_refused_by_name():
    pack = _cfg({})
    check_packable(pack, _cfg(TRIALS[3]))  # per-trial keys, the adapter's rank included
    with pytest.raises(PackError, match=r"'model.hidden_size' \(128 vs 64\).*trials_per_worker: 1"):
        check_packable(pack, _cfg({"model": {**BASE["model"], "hidden_size": 64}}))
    with pytest.raises(PackError, match=r"'model.dtype'"):
        check_packable(pack, _cfg({"model": {**BASE["model"], "dtype": "bfloat16"}}))
    with pytest.raises(PackError, match=r"'model.name_or_path'"):
        check_packable(pack, _cfg({"model": {**BASE["model"], "name_or_path": "Qwen/Qwen3-0.6B"}}))
    with pytest.raises(PackError, match=r"trainer.model.lora = None: packed trials share one frozen base"):
        check_packable(pack, _cfg({"model": TEST_MODEL}))
    with pytest.raises(PackError, match=r"trainer.model.lora = None.*set it \(e.g. \{rank: 16\}\)"):
        Pack(_cfg({"model": TEST_MODEL}))


@pytest.mark.slow
def test_a_member_that_fails_leaves_and_the_others_go_on_as_alone():
    """A member whose step raises (its guard on the sampler's log-prob gap set below any float noise) takes
    only its own trial down: it leaves, and the other member reports what it reports alone."""
    stays, fails = _cfg(TRIALS[0]), _cfg(TRIALS[1], rollout={**BASE["rollout"], "logprob_gap_max": 1e-30})
    alone = _alone(0)
    got = ListReporter()
    with Pack(stays) as pack:
        a, b = pack.join(stays), pack.join(fails)
        got.report(*pack.step(a))
        with pytest.raises(RuntimeError, match="logprob_gap"):
            pack.step(b)
        pack.leave(b)
        while not a.done:
            got.report(*pack.step(a))
    _assert_same_reports(got, alone, "the member that stayed")
