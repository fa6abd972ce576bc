"""``resources.trials_per_worker``: a space that packs LoRA trials loads; one that would pack what cannot share a
base (no LoRA, a swept model or env key, several workers, vLLM, a GPU, PBT) fails at load, naming the key."""

from __future__ import annotations

from tests.sweep.test_config import _fails, _load

LORA = """
name: t
trainer: {total_steps: 3, model: {lora: {rank: 4}}}
space:
  optim.lr: {loguniform: [1.0e-4, 1.0e-2]}
  algorithm.kl_coef: {choice: [0.0, 0.01]}
  model.lora.rank: {choice: [4, 8]}
  rollout.n_samples_per_prompt: {choice: [2, 4]}
resources: {trials_per_worker: 4}
"""


def test_a_lora_space_packs_with_per_trial_keys(tmp_path):
    assert _load(tmp_path, LORA).resources.trials_per_worker == 4


def test_what_cannot_share_a_base_is_refused_by_name(tmp_path):
    _fails(tmp_path, LORA.replace(", model: {lora: {rank: 4}}", "").replace("  model.lora.rank: {choice: [4, 8]}\n", ""),
           "'trainer.model.lora' = None: packed trials share one frozen base", "set it (e.g. {rank: 16})")
    _fails(tmp_path, LORA.replace("space:\n", "space:\n  model.hidden_size: {choice: [64, 128]}\n"),
           "'space.model.hidden_size' changes the base the packed trials share", "trials_per_worker: 1")
    _fails(tmp_path, LORA.replace("space:\n", "space:\n  model.dtype: {choice: [float32, bfloat16]}\n"), "'space.model.dtype' changes the base")
    _fails(tmp_path, LORA.replace("space:\n", "space:\n  eval.split_seed: {choice: [0, 1]}\n"), "'space.eval.split_seed' changes the base")
    _fails(tmp_path, LORA.replace("{trials_per_worker: 4}", "{trials_per_worker: 4, workers_per_trial: 2}"), "'resources.workers_per_trial' = 2 with packed trials")
    _fails(tmp_path, LORA.replace("{trials_per_worker: 4}", "{trials_per_worker: 4, gpus_per_trial: 1}"), "'resources.gpus_per_trial' > 0 with packed trials")
    _fails(tmp_path, LORA.replace("model: {lora: {rank: 4}}", "model: {lora: {rank: 4}}, rollout: {turns: per_episode}"),
           "'trainer.rollout.turns' = 'per_episode': a pack's members sample with plain batched turns")
    _fails(tmp_path, LORA + "scheduler: {type: pbt, mutations: {optim.lr: {loguniform: [1.0e-4, 1.0e-2]}}}\nsearch: {searcher: random}\n",
           "with scheduler.type 'pbt'")


def test_a_gpu_holds_as_many_pack_hosts_as_its_trials_fill():
    """A trial of a K-pack asks gpus_per_trial / K of a GPU: K / gpus_per_trial trials fit on one, K to a host."""
    from sweep.trials.packing import hosts_per_gpu

    assert [hosts_per_gpu(g) for g in (1.0, 0.5, 0.3, 0.25)] == [1, 2, 3, 4]


def test_a_pack_member_is_lost_only_when_the_host_went_on_without_it():
    """Silent past STALE_S (900 s) is not enough: a live member's call may wait that long for the others' turns. Lost when
    the others took twice the capacity's steps since (4 at K=2) or the host stepped no one as long."""
    from sweep.trials.packing import STALE_S, lost

    assert STALE_S == 900.0
    assert not lost(899.0, 100, 10_000.0, 2)  # heard from within STALE_S
    assert not lost(1_000.0, 3, 10.0, 2)  # a long wait behind 3 steps of the others: its call is queued
    assert lost(1_000.0, 4, 10.0, 2)  # the others went round twice without it
    assert lost(1_000.0, 0, 901.0, 2)  # no one stepped for 901 s: every member silent
    assert not lost(1_000.0, 0, 900.0, 2)
