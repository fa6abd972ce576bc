"""The space grammar turned into what each searcher reads: Optuna's define-by-run, Tune's domains, the grid, PBT."""

from __future__ import annotations

import random

import optuna
import pytest

from sweep.spec.config import SweepConfig
from sweep.spec.space import (
    ConditionalSample,
    OptunaSpace,
    base_value,
    grid_points,
    grid_search_points,
    inactive_values,
    sample,
    tune_param_space,
)
from sweep.trials.schedulers import KeepInBounds

KL = {"algorithm.kl_coef": {"choice": [0.0, 0.1]}, "algorithm.kl_estimator": {"choice": ["k1", "k2"], "when": {"algorithm.kl_coef": {"gt": 0}}}}


def _cfg(space, **search) -> SweepConfig:
    return SweepConfig.model_validate({"trainer": {"total_steps": 3}, "space": space, "search": search})


def test_optuna_never_sees_an_inactive_key():
    cfg = _cfg({**KL, "optim.lr": {"loguniform": [1e-4, 1e-2]}, "algorithm.clip_eps_high": {"quniform": [0.2, 0.3, 0.02]}, "rollout.temperature": 0.9})
    define = OptunaSpace(cfg.space, inactive_values(cfg))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(20):
        trial = study.ask()
        constants = define(trial)
        kl = trial.params["algorithm.kl_coef"]
        seen.add(kl)
        assert ("algorithm.kl_estimator" in trial.params) == (kl > 0)
        assert constants["rollout.temperature"] == 0.9
        if kl == 0:
            assert constants["algorithm.kl_estimator"] == "k3"  # the base trainer's value, recorded in the trial's config
        step = (trial.params["algorithm.clip_eps_high"] - 0.2) / 0.02
        assert abs(step - round(step)) < 1e-9 and 1e-4 <= trial.params["optim.lr"] <= 1e-2
        study.tell(trial, 0.5)
    assert seen == {0.0, 0.1}


def test_grid_multiplies_a_conditional_key_only_where_active():
    cfg = _cfg({**KL, "optim.lr": {"grid": [1e-3, 2e-3]}}, searcher="grid", num_samples=2,
               points_to_evaluate=[{"optim.lr": 1e-3}])
    points = grid_points(cfg)
    assert len(points) == 6  # kl 0: 2 lrs; kl 0.1: 2 estimators x 2 lrs
    assert sorted((p["algorithm.kl_coef"], p["algorithm.kl_estimator"]) for p in points if p["optim.lr"] == 1e-3) == [(0.0, "k3"), (0.1, "k1"), (0.1, "k2")]
    listed = grid_search_points(cfg)
    assert len(listed) == 1 + 6 * 2
    assert listed[0] == {"optim.lr": 1e-3, "algorithm.kl_coef": 0.01, "algorithm.kl_estimator": "k3"}  # unset keys: the base trainer's
    assert set(tune_param_space(cfg)) == {"optim.lr", "algorithm.kl_coef", "algorithm.kl_estimator"}


def test_random_searcher_samples_a_conditional_key_from_the_trial_config():
    from ray.tune.search.sample import Function
    from ray.tune.search.variant_generator import generate_variants

    cfg = _cfg(KL, searcher="random")
    space = tune_param_space(cfg)
    assert isinstance(space["algorithm.kl_estimator"], Function)
    pairs = set()
    for _ in range(20):
        for _, config in generate_variants({"config": space}):
            pairs.add((config["config"]["algorithm.kl_coef"], config["config"]["algorithm.kl_estimator"]))
    assert pairs == {(0.0, "k3"), (0.1, "k1"), (0.1, "k2")}
    sampler = ConditionalSample(cfg.space["algorithm.kl_estimator"], "k3", seed=0)
    assert sampler({"config": {"algorithm.kl_coef": 0.0}}) == "k3"


@pytest.mark.parametrize("raw", [{"uniform": [0.1, 0.2]}, {"loguniform": [1e-5, 1e-2]}, {"quniform": [2, 8, 2]}, {"randint": [2, 5]}, {"choice": ["a", 1]}])
def test_random_draws_stay_inside(raw):
    dist = _cfg({"optim.lr": 1e-3}).model_validate({"space": {"x": raw}}).space["x"]
    rng = random.Random(0)
    assert all(dist.contains(sample(dist, rng)) for _ in range(200))


def test_pbt_explore_keeps_values_inside_their_distributions():
    cfg = SweepConfig.model_validate({
        "trainer": {"total_steps": 4, "checkpoint": {"interval": 1}},
        "search": {"searcher": "random"},
        "scheduler": {"type": "pbt", "mutations": {"optim.lr": {"loguniform": [1e-4, 1e-2]}, "algorithm.clip_eps_high": {"quniform": [0.2, 0.3, 0.02]},
                                                   "rollout.n_samples_per_prompt": {"randint": [2, 5]}, "algorithm.kl_coef": {"choice": [0.0, 0.1]}}},
    })
    clamp = KeepInBounds(cfg.scheduler.mutations)
    out = clamp({"optim.lr": 1.2e-2, "algorithm.clip_eps_high": 0.2 * 1.2 + 1e-9, "rollout.n_samples_per_prompt": 6, "algorithm.kl_coef": 0.1})
    assert out == {"optim.lr": 1e-2, "algorithm.clip_eps_high": pytest.approx(0.24), "rollout.n_samples_per_prompt": 4, "algorithm.kl_coef": 0.1}


def test_base_value_reads_the_trainer_default_or_override():
    cfg = SweepConfig.model_validate({"trainer": {"algorithm": {"kl_estimator": "k1"}}})
    assert base_value(cfg, "algorithm.kl_estimator") == "k1" and base_value(cfg, "optim.lr") == 1e-3


def test_a_quniform_of_whole_numbers_samples_integers_for_a_whole_number_key():
    """``{quniform: [4, 16, 4]}`` on ``rollout.n_samples_per_prompt``: every searcher draws ints (configs are strict,
    and Tune's quniform and Optuna's float step would give 8.0); a fractional one stays float."""
    import optuna

    from sweep.spec.distributions import QUniform
    from sweep.spec.space import finite_values, sample, suggest, tune_domain

    whole, frac = QUniform(low=4, high=16, q=4), QUniform(low=0.2, high=0.3, q=0.02)
    assert whole.whole and not frac.whole and whole.extremes() == [4, 16, 8] and frac.extremes()[:2] == [0.2, 0.3]
    rng = random.Random(0)
    draws = [sample(whole, rng) for _ in range(20)] + [tune_domain(whole).sample() for _ in range(20)] + finite_values(whole)
    trial = optuna.create_study().ask()
    draws.append(suggest(trial, "n", whole))
    assert all(type(v) is int and v in (4, 8, 12, 16) for v in draws), draws
    assert all(isinstance(v, float) for v in [sample(frac, rng), tune_domain(frac).sample(), suggest(trial, "c", frac)])
