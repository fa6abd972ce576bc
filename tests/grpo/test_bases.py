"""The shipped base policies: the shipped spaces' recipes find theirs, and model.shipped_base: false builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo import warmstart
from grpo.config import ModelConfig
from grpo.data import base_tasks, trial_tasks
from sweep.spec.loader import load_space, load_trainer
from tests.conftest import TEST_MODEL

SPACES = Path(__file__).resolve().parents[2] / "sweep" / "search_spaces"


@pytest.mark.parametrize("space", ["demo_cpu.yaml", "learning_cpu.yaml", "fleet_mix_cpu.yaml"])
def test_each_shipped_space_finds_its_shipped_base(space, tmp_path):
    """A recipe change (config, tasks, tokenizer, BUILD_VERSION) that is not re-shipped fails here, rather
    than making the demo, the learning test and the mix build for 10, 17 and 94 minutes."""
    cfg, _ = load_trainer(SPACES / space, {"model.cache_dir": str(tmp_path)})
    path = warmstart.base_policy_path(cfg.model, base_tasks(cfg))
    assert path.parent == warmstart.SHIPPED and (path / "model.safetensors").is_file()
    assert not any(tmp_path.iterdir())  # nothing built, not even a lock


def test_a_shipped_base_is_used_only_for_its_recipe_and_only_when_asked(tasks, tmp_path, monkeypatch):
    monkeypatch.setattr(warmstart, "SHIPPED", tmp_path / "shipped")
    cfg = ModelConfig(**TEST_MODEL, cache_dir=str(tmp_path / "cache"))
    name = f"tiny-{warmstart.cache_key(cfg, tasks)}"
    (tmp_path / "shipped" / name).mkdir(parents=True)
    (tmp_path / "shipped" / name / "warmstart.json").write_text("{}")
    assert warmstart.base_policy_path(cfg, tasks) == tmp_path / "shipped" / name
    assert warmstart.base_policy_path(cfg.model_copy(update={"warmstart_seed": 1}), tasks).parent == tmp_path / "cache"  # another seed: another recipe, built
    built = warmstart.base_policy_path(cfg.model_copy(update={"shipped_base": False}), tasks)
    assert built == tmp_path / "cache" / name and (built / "model.safetensors").is_file()


def test_sweep_run_starts_no_build_process_for_a_shipped_base(monkeypatch, capsys):
    """``sweep run`` finds a shipped base in the driver (no torch there) instead of a ``grpo.warmstart`` process."""
    import subprocess

    from sweep.trials.base_evals import prepare_bases

    started: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: started.append(args))
    prepare_bases(load_space(SPACES / "learning_cpu.yaml"))
    assert started == [] and str(warmstart.SHIPPED) in capsys.readouterr().out
    prepare_bases(load_space(SPACES / "learning_cpu.yaml", {"model.shipped_base": False}))
    assert len(started) == 1 and started[0][1:3] == ["-m", "grpo.warmstart"]  # the build process, not started here


def test_the_rl_seed_changes_neither_the_base_nor_the_split(tmp_path):
    """Sweeping ``seed`` replicates a setting: one base policy and one held-out set for every seed; the base's
    own seed and the split's are ``model.warmstart_seed`` and ``eval.split_seed``."""
    runs = [load_trainer(SPACES / "learning_cpu.yaml", {"seed": seed, "model.cache_dir": str(tmp_path)})[0] for seed in (0, 1, 7)]
    splits = [tuple(t.task_key for t in trial_tasks(cfg)[1]) for cfg in runs]
    bases = [warmstart.base_policy_path(cfg.model, trial_tasks(cfg)[0]) for cfg in runs]
    assert len(set(splits)) == 1 and len(set(bases)) == 1 and bases[0].parent == warmstart.SHIPPED
    other, _ = load_trainer(SPACES / "learning_cpu.yaml", {"eval.split_seed": 1})
    assert tuple(t.task_key for t in trial_tasks(other)[1]) != splits[0]
    assert warmstart.shipped_base(runs[0].model.model_copy(update={"warmstart_seed": 1}), trial_tasks(runs[0])[0]) is None
