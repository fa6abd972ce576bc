"""The Tune wiring pieces that are ours: the honest Optuna searcher and the stop rules."""

from __future__ import annotations

import optuna
import pytest
from ray import tune

from sweep.tuner import HonestOptunaSearch


def test_trials_ended_early_are_pruned_not_complete():
    search = HonestOptunaSearch(total_steps=3, sampler=optuna.samplers.RandomSampler(seed=0))
    search.set_search_properties("reward/avg_pass_at_1", "max", {"optim.lr": tune.loguniform(1e-5, 1e-2)})
    for trial_id, steps in (("stopped", 1), ("finished", 3)):
        assert search.suggest(trial_id) is not None
        search.on_trial_complete(trial_id, {"training_iteration": steps, "reward/avg_pass_at_1": 0.25})
    stopped, finished = search._ot_study.trials
    assert stopped.state.name == "PRUNED" and stopped.intermediate_values == {1: 0.25}
    assert finished.state.name == "COMPLETE" and finished.value == 0.25


@pytest.mark.parametrize(("name", "kind"), [("tpe", optuna.samplers.TPESampler), ("gp", optuna.samplers.GPSampler), ("cmaes", optuna.samplers.CmaEsSampler)])
def test_the_sampler_is_the_one_named(tmp_path, name, kind):
    from sweep.config import SweepConfig
    from sweep.tuner import build_searcher

    cfg = SweepConfig.model_validate({"name": name, "storage": str(tmp_path), "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}},
                                      "search": {"sampler": name, "seed": 7, "n_startup_trials": 3}})
    search = build_searcher(cfg)
    assert type(search._sampler) is kind and search._sampler._n_startup_trials == 3
    assert (tmp_path / name / "optuna.db").is_file()
    if name == "tpe":
        assert search._sampler._constant_liar
