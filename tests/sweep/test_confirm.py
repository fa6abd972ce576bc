"""``sweep confirm``: the top settings again with fresh seeds, whether the ranking holds, the winner exported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from sweep.confirm import SettingResult, confirm_config, holds, machine_paths_note, summarize, top_settings
from sweep.spec.loader import load_space
from tests.conftest import TEST_MODEL

ROOT = Path(__file__).resolve().parents[2]
ROWS = [  # a judged leaderboard, best first
    {"trial": "a", "config": {"optim.lr": 1e-4, "algorithm.kl_coef": 0.1}, "gain": 0.2},
    {"trial": "b", "config": {"optim.lr": 1e-4, "algorithm.kl_coef": 0.1}, "gain": 0.15},  # the same setting again
    {"trial": "c", "config": {"optim.lr": 3e-5, "algorithm.kl_coef": 0.0}, "gain": 0.1},
    {"trial": "d", "config": {"optim.lr": 1e-2, "algorithm.kl_coef": 0.0}, "gain": None},  # no trained eval
]


def test_the_top_distinct_settings_and_whether_the_ranking_holds():
    top = top_settings(ROWS, 3)
    assert [(rank, s["optim.lr"]) for rank, s, _ in top] == [(1, 1e-4), (3, 3e-5)]
    confirmed = [{"config": {**s, "seed": seed}, "gain": g, "verdict": "learns"}
                 for (_, s, _), gains in zip(top, ([0.18, 0.22], [0.25, 0.05])) for seed, g in zip((1000, 1001), gains)]
    results = summarize(top, confirmed, [1000, 1001])
    assert [r.mean for r in results] == [pytest.approx(0.2), pytest.approx(0.15)] and holds(results)
    assert not holds([SettingResult({}, 1, 0.2, [0.1], ["flat"]), SettingResult({}, 2, 0.1, [0.3], ["learns"])])


def test_settings_are_compared_on_the_seeds_every_one_reached_a_trained_eval_on():
    """#2 lost a seed (its trial failed): its one surviving seed's +0.19 must not beat #1's mean over both seeds; on the
    seed both have, #1's +0.15 against +0.19 does not hold, and each mean is over that one seed. A setting with no gain
    at all is out of the comparison and narrows nothing."""
    from sweep.confirm import compared_seeds

    top = [(1, {"optim.lr": 1e-4}, 0.2), (2, {"optim.lr": 3e-5}, 0.15), (3, {"optim.lr": 1e-2}, 0.1)]
    gains = ([0.15, 0.16], [0.19, None], [None, None])
    confirmed = [{"config": {**s, "seed": seed}, "gain": g, "verdict": "learns"}
                 for (_, s, _), row in zip(top, gains) for seed, g in zip((1000, 1001), row)]
    results = summarize(top, confirmed, [1000, 1001])
    assert compared_seeds(results) == (0,) and all(r.compared == (0,) for r in results)
    assert [r.mean for r in results] == [pytest.approx(0.15), pytest.approx(0.19), None] and not holds(results)
    both = summarize(top[:1] + top[2:], [c for c in confirmed if c["config"]["optim.lr"] != 3e-5], [1000, 1001])
    assert [r.mean for r in both] == [pytest.approx(0.155), None] and holds(both)  # the all-None setting narrows nothing


def test_a_confirmation_counts_only_while_it_confirmed_the_sweeps_top_settings(tmp_path):
    """A sweep resumed after it confirmed (to retry errored trials) may rank others first: its confirm.json then
    confirmed other settings, and the resumed sweep's confirm stage runs again instead of keeping it."""
    from sweep.confirm import confirmation_is_current
    from sweep.store.storage import open_storage

    store = open_storage(str(tmp_path))
    store.write_text(json.dumps(ROWS), "s", "leaderboard.json")
    settings = [{"setting": s, "original_rank": r} for r, s, _ in top_settings(ROWS, 2)]
    store.write_text(json.dumps({"holds": True, "settings": settings}), "s", "confirm.json")
    assert confirmation_is_current(store, "s", 2)
    moved = [ROWS[2], ROWS[0], ROWS[1], ROWS[3]]  # the resumed trials put lr 3e-5 first
    store.write_text(json.dumps(moved), "s", "leaderboard.json")
    assert not confirmation_is_current(store, "s", 2)
    store.write_text("{", "s", "confirm.json")
    assert not confirmation_is_current(store, "s", 2)  # damaged: confirmed again


def test_the_confirming_sweep_runs_every_setting_with_every_fresh_seed(tmp_path):
    space = tmp_path / "s.yaml"
    space.write_text(yaml.safe_dump({
        "name": "s", "trainer": {"total_steps": 4, "eval": {"interval": 2}}, "storage": str(tmp_path),
        "space": {"optim.lr": {"loguniform": [1e-5, 1e-2]}, "algorithm.kl_coef": {"choice": [0.0, 0.1]}},
        "search": {"metric": "eval/score"}, "scheduler": {"type": "asha", "grace_period": 2},
    }))
    cfg = load_space(space)
    confirm = confirm_config(cfg, [s for _, s, _ in top_settings(ROWS, 2)], [1000, 1001], 8, "confirm")
    assert confirm.name == "s_confirm" and confirm.trainer.total_steps == 8 and confirm.scheduler.type == "fifo"
    assert confirm.search.num_samples == 4 and {p["seed"] for p in confirm.search.points_to_evaluate} == {1000, 1001}
    assert not confirm.stopping.zero_signal.enabled and confirm.confirm.top == 0  # a confirming sweep confirms nothing itself
    assert load_space(space, {"confirm.top": 2, "confirm.seeds": 3}).confirm.model_dump() == {"top": 2, "seeds": 3, "steps": None}


def test_the_exported_winner_replaces_an_earlier_export_whole(tmp_path):
    """A second export (a confirm run again, a resumed sweep confirming anew) replaces the first: another trial's
    checkpoint files never stay beside this one's (a full model's weights beside an adapter would load the wrong
    policy), and without a checkpoint now, the earlier one is not left to pass for the new winner's."""
    from sweep.confirm import export_winner
    from sweep.store.storage import open_storage

    space = tmp_path / "s.yaml"
    space.write_text(yaml.safe_dump({"name": "s", "trainer": {"total_steps": 4, "eval": {"interval": 2}}, "storage": str(tmp_path),
                                     "space": {"optim.lr": {"choice": [1e-4, 3e-5]}}}))
    confirm = confirm_config(load_space(space), [{"optim.lr": 1e-4}], [1000], 8, "confirm")
    store = open_storage(str(tmp_path))
    rows = [{"trial": "x_00000", "config": {"optim.lr": 1e-4, "seed": 1000}, "gain": 0.2}]
    winner = SettingResult({"optim.lr": 1e-4}, 1, 0.2, [0.2], ["learns"])
    for files in ({"checkpoint_000003/model.safetensors": "old", "checkpoint_000003/trainer_state.json": "{}"},
                  {"checkpoint_000007/adapter_model.safetensors": "new", "checkpoint_000007/trainer_state.json": "{\"step\": 8}"}):
        for rel, text in files.items():
            store.write_text(text, "s_confirm", "train_x_00000_0_lr=1e-4", rel)
    store.write_text("stale", "s", "winner", "checkpoint", "model.safetensors")  # an earlier export's full model
    export_winner(store, "s", confirm, rows, winner)
    exported = tmp_path / "s" / "winner" / "checkpoint"
    assert sorted(p.name for p in exported.iterdir()) == ["adapter_model.safetensors", "trainer_state.json"]
    assert "newest checkpoint is in checkpoint/" in (tmp_path / "s" / "winner" / "trainer.yaml").read_text()
    store.delete_dir("s_confirm", "train_x_00000_0_lr=1e-4")  # this time its trial kept none
    export_winner(store, "s", confirm, rows, winner)
    assert not exported.exists() and "kept no checkpoint" in (tmp_path / "s" / "winner" / "trainer.yaml").read_text()


def test_the_confirmation_in_words():
    from sweep.verdict.summary import confirmation_text

    settings = [{"setting": {"optim.lr": 1e-4}, "original_rank": 1, "original_gain": 0.2, "gains": [0.18, 0.22], "mean": 0.2},
                {"setting": {"optim.lr": 3e-5}, "original_rank": 3, "original_gain": 0.1, "gains": [0.1, 0.2], "mean": 0.15}]
    held = {"holds": True, "seeds": [1000, 1001], "steps": 24, "settings": settings}
    assert confirmation_text(held) == ("Confirm stage (2 settings again with 2 fresh seeds over 24 steps): #1 holds, mean gain +0.200 "
                                       "over its fresh seeds; the winner is exported to winner/.")
    overtaken = {**held, "holds": False, "settings": [settings[0], {**settings[1], "mean": 0.25}]}
    assert confirmation_text(overtaken) == ("Confirm stage (2 settings again with 2 fresh seeds over 24 steps): #1 does not hold (mean gain "
                                            "+0.200); lr=3e-05, #3 in the sweep, did best over fresh seeds (mean +0.250) and is the exported "
                                            "winner (winner/).")
    assert confirmation_text(None) == "" and "no confirming trial" in confirmation_text({**held, "settings": [{**settings[0], "mean": None}]})


def test_the_exported_winner_names_its_machine_paths():
    trainer = {"env": {"tasks_path": "/data/train.json"}, "eval": {"tasks_path": "/data/eval.json"}, "model": {"name": "x"},
               "data": {"curriculum": {"prior_path": "/data/probe.json"}}}
    assert machine_paths_note(trainer) == (
        "# Its paths (env.tasks_path, eval.tasks_path, data.curriculum.prior_path) are the sweep machine's; elsewhere, "
        "edit them here or give them as --set env.tasks_path=PATH (relative to the working directory).\n")
    assert machine_paths_note({"env": {"tasks_path": None}, "model": {"name": "x"}}) == ""


@pytest.mark.slow
@pytest.mark.e2e
def test_confirm_a_sweep_and_train_its_exported_winner(tmp_path, private_cache):
    space = {
        "name": "c", "storage": str(tmp_path / "results"),
        "trainer": {"total_steps": 2, "model": TEST_MODEL, "rollout": {"prompts_per_step": 2, "n_samples_per_prompt": 2, "max_turns": 2},
                    "algorithm": {"mini_batches": 1}, "eval": {"interval": 1, "max_tasks": 2, "n_samples": 2}, "checkpoint": {"interval": 1}},
        "space": {"optim.lr": {"grid": [1e-3, 1e-2]}},
        "search": {"searcher": "grid", "num_samples": 1, "metric": "eval/score", "mode": "max"},
        "scheduler": {"type": "fifo"}, "resources": {"cpus_per_trial": 1}, "logging": {"progress": False},
        "confirm": {"top": 2, "seeds": 1, "steps": 2},  # the confirm stage, run by `sweep run` itself
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(space))
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    env = {**os.environ, "GRPO_SWEEP_CACHE": str(private_cache), "RAY_TMPDIR": ray_tmp, "RAY_AUTH_MODE": "disabled"}

    def sweep(*args: str) -> subprocess.CompletedProcess:
        run = subprocess.run([sys.executable, "-m", "sweep", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        return run

    try:
        confirmed = sweep("run", str(path))
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert "report: " in confirmed.stdout and (tmp_path / "results" / "c" / "report" / "index.html").is_file()  # run ends with the report
    assert "confirm stage: the top 2 settings" in confirmed.stdout and "Confirmation" in confirmed.stdout and "winner: " in confirmed.stdout
    summary = json.loads((tmp_path / "results" / "c" / "confirm.json").read_text())
    report = (tmp_path / "results" / "c" / "report" / "summary.md").read_text()  # written again, with the confirmation
    assert "## Confirmation with fresh seeds" in report and "Confirm stage (2 settings again with 1 fresh seed over 2 steps)" in report
    assert len(summary["settings"]) == 2 and summary["seeds"] == [1000] and summary["steps"] == 2
    assert len(list((tmp_path / "results" / "c_confirm" / "base_evals").iterdir())) == 1  # the original's base eval, reused
    winner = tmp_path / "results" / "c" / "winner"
    assert (winner / "checkpoint" / "trainer_state.json").is_file()
    assert "# Its paths (env.tasks_path) are the sweep machine's" in (winner / "trainer.yaml").read_text()  # the shipped tasks, where this clone keeps them
    trained = subprocess.run([sys.executable, "-m", "sweep", "train", str(winner / "trainer.yaml"), "--set", "total_steps=1"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert trained.returncode == 0 and "step 1:" in trained.stdout, trained.stderr[-2000:]

    # a driver that died in the confirm stage (its sweep there, no confirm.json): resume continues it, never starts it over
    confirming = tmp_path / "results" / "c_confirm"
    trials = sorted(p.name for p in confirming.iterdir() if p.is_dir() and p.name.startswith("run_trial_"))
    (tmp_path / "results" / "c" / "confirm.json").unlink()
    refused = subprocess.run([sys.executable, "-m", "sweep", "confirm", str(tmp_path / "results" / "c")], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and f"`python -m sweep confirm {tmp_path / 'results' / 'c'} --fresh` (deletes it)" in refused.stderr, refused.stderr
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    env["RAY_TMPDIR"] = ray_tmp
    try:
        resumed = sweep("resume", str(tmp_path / "results" / "c"))
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert f"confirm stage: continuing {confirming}, which its driver left unfinished" in resumed.stdout
    assert sorted(p.name for p in confirming.iterdir() if p.is_dir() and p.name.startswith("run_trial_")) == trials and len(trials) == 2
    assert json.loads((tmp_path / "results" / "c" / "confirm.json").read_text())["settings"] == summary["settings"]
