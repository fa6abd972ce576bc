"""Which bases, splits and base evals a sweep needs, found before any trial starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from configkit.base import ConfigError
from sweep.spec.bases import base_notes, base_variants, changes_base, changes_base_eval, eval_key
from sweep.spec.loader import load_space

LEARNING = Path(__file__).resolve().parents[2] / "sweep" / "search_spaces" / "learning_cpu.yaml"


def _space(tmp_path: Path, space: dict, **trainer) -> Path:
    import yaml

    data = yaml.safe_load(LEARNING.read_text())
    data["trainer"] = {**data["trainer"], **trainer}
    data.update(space=space, search={"searcher": "grid", "num_samples": 1, "metric": "eval/score", "mode": "max"})
    data["trainer"]["env"] = {"tasks_path": str(Path(LEARNING).resolve().parents[2] / "toolenvs" / "data" / "hotel.jsonl")}
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_keys_that_make_a_base_a_split_or_a_base_eval():
    assert changes_base("model.warmstart_steps") and changes_base("eval.split_seed") and changes_base("env.max_tasks")
    assert changes_base_eval("rollout.temperature") and changes_base_eval("eval.n_samples") and changes_base_eval("env.backend.type")
    for training_only in ("seed", "optim.lr", "algorithm.kl_coef", "rollout.n_samples_per_prompt", "rollout.prompts_per_step", "eval.interval"):
        assert not changes_base_eval(training_only), training_only


def test_a_sweep_over_seed_and_training_keys_needs_one_base_and_one_base_eval(tmp_path):
    cfg = load_space(_space(tmp_path, {"seed": {"grid": [0, 1, 2]}, "optim.lr": {"grid": [1e-5, 1e-4]}}))
    [variant] = base_variants(cfg)
    assert variant is cfg.trainer  # nothing swept touches the base: the base trainer itself, not parsed again
    keys = {eval_key(cfg.trainer.model_copy(update={"seed": s})) for s in (0, 1, 2)}
    assert keys == {eval_key(cfg.trainer)}
    assert base_notes(cfg) == ["1 base eval(s), made once before the trials; every trial's curve starts from its own base's"]


def test_swept_base_keys_give_one_base_eval_per_value(tmp_path):
    cfg = load_space(_space(tmp_path, {"model.warmstart_seed": {"grid": [0, 1]}, "eval.n_samples": {"grid": [8, 16]}, "optim.lr": {"grid": [1e-4]}}))
    variants = base_variants(cfg)
    assert sorted((v.model.warmstart_seed, v.eval.n_samples) for v in variants) == [(0, 8), (0, 16), (1, 8), (1, 16)]
    assert len({eval_key(v) for v in variants}) == 4
    notes = base_notes(cfg)
    assert "model.warmstart_seed changes the base policy or the held-out split: 2 values" in notes
    assert "eval.n_samples changes the base eval: 2 values" in notes


def test_a_continuous_base_key_is_refused_before_anything_starts(tmp_path):
    path = _space(tmp_path, {"model.warmstart_lr": {"loguniform": [1e-4, 1e-2]}})
    data = path.read_text().replace("searcher: grid", "searcher: random")
    path.write_text(data)
    with pytest.raises(ConfigError, match="space.model.warmstart_lr' changes the base policy or the held-out split.*use choice or grid"):
        load_space(path)
    path.write_text(data.replace("model.warmstart_lr:", "rollout.temperature:").replace("[0.0001, 0.01]", "[0.5, 1.0]"))
    cfg = load_space(path)  # sampling at eval time: each trial then evaluates the base itself
    assert "rollout.temperature is swept continuously and changes the base eval: each trial evaluates the base itself" in base_notes(cfg)


def test_a_base_eval_line_is_shared_as_step_zero(tmp_path):
    from grpo.config import TrainerConfig
    from grpo.evaluation import share_base_eval

    line = {"global_step": 0, "eval/avg_pass_at_1": 0.25, "eval/hotel/pass_at_1": 0.25, "tasks": {"hotel-1": [1, 4]}, "base_eval": "k"}
    metrics = share_base_eval(TrainerConfig(output_dir=str(tmp_path)), line)
    assert metrics == {"eval/avg_pass_at_1": 0.25, "eval/hotel/pass_at_1": 0.25}
    written = json.loads((tmp_path / "aggregated_results.jsonl").read_text())
    assert written == {**line, "shared": True}


@pytest.mark.parametrize("share", [0.03, 0.21])
def test_a_base_eval_with_too_many_environment_errors_stops_the_start(tmp_path, share, capsys):
    """A base eval left by an earlier start (a loaded machine: 21% of its episodes timed out) is refused
    above eval.max_base_env_errors and deleted, so the next start makes a new one; below it, kept."""
    from sweep.store.storage import open_storage
    from sweep.trials.base_evals import BASE_EVAL_FILE, evaluate_base

    cfg = load_space(_space(tmp_path, {"optim.lr": {"grid": [1e-4]}}), {"storage": str(tmp_path / "results")})
    store = open_storage(cfg.storage)
    key = eval_key(cfg.trainer)
    store.write_text(json.dumps({"global_step": 0, "eval/avg_pass_at_1": 0.196, "eval/env_error_frac": share}) + "\n",
                     cfg.name, "base_evals", key, BASE_EVAL_FILE)
    if share < cfg.trainer.eval.max_base_env_errors:
        evaluate_base(cfg, store, cfg.trainer)
        assert store.exists(cfg.name, "base_evals", key, BASE_EVAL_FILE)
        return
    with pytest.raises(ConfigError, match=r"21\.0% of the base eval's held-out episodes failed in the environment, above eval.max_base_env_errors=0.05"):
        evaluate_base(cfg, store, cfg.trainer)
    assert not store.exists(cfg.name, "base_evals", key)
    raised = load_space(_space(tmp_path, {"optim.lr": {"grid": [1e-4]}}, eval={**cfg.trainer.eval.model_dump(), "max_base_env_errors": 0.25}),
                        {"storage": str(tmp_path / "results")})
    store.write_text(json.dumps({"eval/env_error_frac": share}) + "\n", cfg.name, "base_evals", key, BASE_EVAL_FILE)
    evaluate_base(raised, store, raised.trainer)  # an environment that fails this often by nature: the user says so
    assert eval_key(raised.trainer) == key  # the limit is not part of what the base eval depends on


@pytest.mark.parametrize("record", ["", '{"global_step": 0, "eval/avg_pass', "[1, 2]\n"], ids=["empty", "cut", "no record"])
def test_a_base_eval_record_cut_or_emptied_is_made_anew_not_kept(tmp_path, record, monkeypatch, capsys):
    """A base eval whose file was cut by a kill mid-write: `resume` failed on it with a JSONDecodeError traceback (its
    trials read it too), and an emptied one was "made before: kept", every trial then evaluating the base itself."""
    import sweep.trials.base_evals
    from sweep.store.storage import open_storage
    from sweep.trials.base_evals import BASE_EVAL_FILE, evaluate_base, shared_base_eval

    cfg = load_space(_space(tmp_path, {"optim.lr": {"grid": [1e-4]}}), {"storage": str(tmp_path / "results")})
    store, key = open_storage(cfg.storage), eval_key(cfg.trainer)
    store.write_text(record, cfg.name, "base_evals", key, BASE_EVAL_FILE)
    store.write_text("stale", cfg.name, "base_evals", key, "global_step_0", "hotel.jsonl")
    assert shared_base_eval(store, cfg.name, cfg.trainer) is None
    made = []

    def make(cfg, store, trainer, which):  # the child process's eval (tests/sweep/test_e2e.py runs it for real)
        made.append(store.entries(cfg.name, "base_evals"))
        store.write_text(json.dumps({"global_step": 0, "eval/avg_pass_at_1": 0.3}) + "\n", cfg.name, "base_evals", key, BASE_EVAL_FILE)

    monkeypatch.setattr(sweep.trials.base_evals, "_make_base_eval", make)
    evaluate_base(cfg, store, cfg.trainer)
    assert made == [[]] and "is missing, empty or damaged: made anew" in capsys.readouterr().out  # the old folder gone first, dumps and all
    assert shared_base_eval(store, cfg.name, cfg.trainer) == {"global_step": 0, "eval/avg_pass_at_1": 0.3, "base_eval": key}

