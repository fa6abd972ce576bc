"""search.startup: spread: the startup trials cut each key's range into equal parts, one trial in each (real Optuna)."""

from __future__ import annotations

import math
import pickle

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from sweep.spec.config import SearchConfig
from sweep.trials.samplers import make_sampler
from sweep.trials.spread import SpreadStart, at, stratum

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_a_fraction_of_each_kind_of_range_by_hand():
    assert at(0.5, FloatDistribution(1e-6, 1e-2, log=True)) == pytest.approx(1e-4)  # half of four decades
    assert at(0.25, FloatDistribution(1e-6, 1e-2, log=True)) == pytest.approx(1e-5)
    assert at(0.3, FloatDistribution(0.0, 2.0)) == pytest.approx(0.6)
    assert at(0.5, FloatDistribution(0.2, 0.3, step=0.02)) == pytest.approx(0.26)  # six values: the fourth
    assert at(0.99, FloatDistribution(0.2, 0.3, step=0.02)) == pytest.approx(0.3)
    assert at(0.99, IntDistribution(1, 4)) == 4 and at(0.0, IntDistribution(1, 4)) == 1 and at(0.26, IntDistribution(1, 4)) == 2
    assert at(0.5, IntDistribution(1, 99, log=True)) == 10  # half of log [1, 100)
    assert at(0.49, CategoricalDistribution(["a", "b"])) == "a" and at(0.5, CategoricalDistribution(["a", "b"])) == "b"


def test_each_key_takes_every_part_once_in_its_own_order():
    for n in (1, 3, 5):
        assert sorted(stratum(7, "optim.lr", k, n) for k in range(n)) == list(range(n))
    orders = {tuple(stratum(seed, key, k, 6) for k in range(6)) for seed in (0, 1) for key in ("optim.lr", "algorithm.kl_coef")}
    assert len(orders) > 1  # keys and seeds are shuffled apart, not tied together


def _start(sampler, trials: int) -> list[dict]:
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for _ in range(trials):
        trial = study.ask()
        lr = trial.suggest_float("optim.lr", 1e-6, 1e-2, log=True)
        n = trial.suggest_categorical("rollout.n_samples_per_prompt", [4, 8])
        study.tell(trial, -abs(math.log10(lr) + 4) + n / 100)
    return [t.params for t in study.trials]


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_the_start_is_spread_and_the_sampler_takes_over_after_it(name):
    search = SearchConfig(sampler=name, n_startup_trials=4, seed=3, startup="spread")
    sampler = make_sampler(search)
    assert isinstance(sampler, SpreadStart)
    trials = _start(sampler, 6)
    logs = sorted(math.log10(p["optim.lr"]) for p in trials[:4])
    assert [math.floor(x) for x in logs] == [-6, -5, -4, -3]  # one startup trial in each decade of the range
    assert [b - a for a, b in zip(logs, logs[1:])] == pytest.approx([1.0, 1.0, 1.0])  # at one offset: no wider gap than a decade
    assert sorted(p["rollout.n_samples_per_prompt"] for p in trials[:4]) == [4, 4, 8, 8]
    assert trials[:4] == _start(make_sampler(search), 4)  # the same seed, the same start
    assert trials[:4] == _start(pickle.loads(pickle.dumps(make_sampler(search))), 4)  # Tune pickles the searcher
    assert trials[:4] != _start(make_sampler(search.model_copy(update={"seed": 4})), 4)
    assert all(1e-6 <= p["optim.lr"] <= 1e-2 for p in trials[4:])


def test_random_stays_the_samplers_own():
    search = SearchConfig(n_startup_trials=4, seed=3)
    assert isinstance(make_sampler(search), optuna.samplers.TPESampler)
    assert _start(make_sampler(search), 4) == _start(optuna.samplers.TPESampler(seed=3, n_startup_trials=4, constant_liar=True), 4)
