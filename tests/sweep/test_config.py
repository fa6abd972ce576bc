"""Space files: good ones load; bad ones fail before any trial, naming file, key and allowed values."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.configbase import ConfigError
from sweep.config import Choice, LogUniform, load_sweep_config, sampled_trial_count

SPACES = Path(__file__).resolve().parents[2] / "sweep" / "search_spaces"
GOOD = """
name: t
trainer: {total_steps: 3}
space:
  optim.lr: {loguniform: [1.0e-4, 1.0e-2]}
  algorithm.kl_coef: {choice: [0.0, 0.01]}
  rollout.n_samples_per_prompt: 4
"""


def _load(tmp_path, text):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return load_sweep_config(path)


def _fails(tmp_path, text, *fragments):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    message = str(info.value)
    assert "space.yaml" in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_shipped_spaces_validate():
    for path in SPACES.glob("*.yaml"):
        load_sweep_config(path)


def test_good_space(tmp_path):
    cfg = _load(tmp_path, GOOD)
    assert isinstance(cfg.space["optim.lr"], LogUniform) and isinstance(cfg.space["algorithm.kl_coef"], Choice)
    assert cfg.space["rollout.n_samples_per_prompt"].value == 4
    assert sampled_trial_count(cfg) == 4


def test_unknown_trainer_key_lists_allowed(tmp_path):
    _fails(tmp_path, GOOD.replace("optim.lr:", "optim.lrr:"), "unknown trainer key 'space.optim.lrr'", "optim.lr", "algorithm.kl_coef")


def test_low_above_high(tmp_path):
    _fails(tmp_path, GOOD.replace("[1.0e-4, 1.0e-2]", "[1.0e-2, 1.0e-4]"), "space.optim.lr", "must be below high")


def test_unknown_distribution_lists_known(tmp_path):
    _fails(tmp_path, GOOD.replace("loguniform:", "lognormal:"), "space.optim.lr", "uniform, loguniform, randint, choice, grid")


def test_unknown_searcher_lists_allowed(tmp_path):
    _fails(tmp_path, GOOD + "search: {searcher: hyperband}\n", "search.searcher", "'optuna', 'random' or 'grid'")


def test_unknown_top_level_key(tmp_path):
    _fails(tmp_path, GOOD + "schedular: {type: asha}\n", "unknown key 'schedular'", "scheduler")


def test_value_the_trainer_refuses(tmp_path):
    _fails(tmp_path, GOOD.replace("rollout.n_samples_per_prompt: 4", "rollout.n_samples_per_prompt: {choice: [1, 4]}"),
           "space.rollout.n_samples_per_prompt", "can give 1", "greater than or equal to 2")


def test_bad_base_trainer_key(tmp_path):
    _fails(tmp_path, GOOD.replace("{total_steps: 3}", "{total_steps: 3, optim: {learning_rate: 1}}"), "trainer.optim.learning_rate", "lr")


def test_grid_needs_a_grid_capable_searcher(tmp_path):
    _fails(tmp_path, GOOD.replace("{choice: [0.0, 0.01]}", "{grid: [0.0, 0.01]}"), "grid", "optuna")
    cfg = _load(tmp_path, GOOD.replace("{choice: [0.0, 0.01]}", "{grid: [0.0, 0.01]}") + "search: {searcher: random, num_samples: 3}\n")
    assert sampled_trial_count(cfg) == 6


def test_unknown_metric(tmp_path):
    _fails(tmp_path, GOOD + "search: {metric: accuracy}\n", "search.metric", "reward/")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_sweep_config(tmp_path / "nope.yaml")


def test_asha_grace_period_beyond_the_run(tmp_path):
    _fails(tmp_path, GOOD + "scheduler: {type: asha, grace_period: 5}\n", "scheduler.grace_period", "total_steps = 3")


def test_optuna_needs_something_to_search(tmp_path):
    text = "trainer: {total_steps: 3}\nspace:\n  optim.lr: 0.001\n"
    _fails(tmp_path, text, "nothing to search")


def test_total_steps_cannot_be_swept(tmp_path):
    _fails(tmp_path, GOOD + "  total_steps: {choice: [2, 4]}\n", "space.total_steps", "cannot be swept")


def test_uniform_on_an_integer_key(tmp_path):
    _fails(tmp_path, GOOD.replace("rollout.n_samples_per_prompt: 4", "rollout.n_samples_per_prompt: {uniform: [2, 8]}"),
           "space.rollout.n_samples_per_prompt", "valid integer")


def test_eval_metric_needs_eval_on(tmp_path):
    _fails(tmp_path, GOOD + "search: {metric: eval/avg_pass_at_1}\n", "eval.interval > 0")
    cfg = _load(tmp_path, GOOD.replace("{total_steps: 3}", "{total_steps: 4, eval: {interval: 2}}") +
                "search: {metric: eval/hotel/pass_at_4}\nscheduler: {grace_period: 2}\n")
    assert cfg.search.metric == "eval/hotel/pass_at_4"
    _fails(tmp_path, GOOD.replace("{total_steps: 3}", "{total_steps: 4, eval: {interval: 2}}") +
           "search: {metric: eval/avg_pass_at_1}\nscheduler: {grace_period: 3}\n", "not a multiple", "stale eval")


def test_relative_paths_are_relative_to_the_space_file(tmp_path):
    cfg = _load(tmp_path, GOOD.replace("{total_steps: 3}", "{total_steps: 3, model: {cache_dir: cache}}"))
    assert cfg.trainer["model"]["cache_dir"] == str((tmp_path / "cache").resolve())


def test_points_to_evaluate(tmp_path):
    ok = GOOD + "search:\n  points_to_evaluate:\n    - {optim.lr: 1.0e-3, algorithm.kl_coef: 0.01}\n"
    assert _load(tmp_path, ok).search.points_to_evaluate == [{"optim.lr": 1e-3, "algorithm.kl_coef": 0.01}]
    _fails(tmp_path, ok.replace("algorithm.kl_coef: 0.01}", "algorithm.kl_coef: 0.5}"), "points_to_evaluate[0]", "kl_coef = 0.5 is outside")
    _fails(tmp_path, ok.replace("optim.lr: 1.0e-3,", "optim.weight_decay: 0.1,"), "points_to_evaluate[0]", "does not sweep")
