"""Every searcher through real Ray Tune and real Optuna on the tiny policy (FIFO, 2 steps per trial).

ASHA with Optuna TPE and a starting point is covered by test_e2e.py; here each searcher in turn.
"""

from __future__ import annotations

import math

import pytest
from optuna.distributions import FloatDistribution

from sweep.trials.spread import at, fraction
from tests.sweep.tiny_sweep import fit, load_space, ray_session, study, tiny_trainer  # noqa: F401 (ray_session is a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.usefixtures("ray_session")]

KL = {"algorithm.kl_coef": {"choice": [0.0, 0.05]}, "algorithm.kl_estimator": {"choice": ["k1", "k2"], "when": {"algorithm.kl_coef": {"gt": 0}}}}


def test_optuna_tpe_with_a_conditional_key(tmp_path):
    cfg = load_space(tmp_path, {
        "name": "tpe",
        "trainer": tiny_trainer(total_steps=1),
        "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}, **KL},
        "search": {"searcher": "optuna", "sampler": "tpe", "num_samples": 3, "n_startup_trials": 2, "seed": 3, "startup": "spread",
                   "points_to_evaluate": [{"optim.lr": 1e-3, "algorithm.kl_coef": 0.0}]},
        "scheduler": {"type": "fifo"},
    })
    results = fit(cfg)
    assert len(results) == 3
    trials = study(cfg).trials
    assert len(trials) == 3 and all(t.state.name == "COMPLETE" for t in trials)
    assert trials[0].params == {"optim.lr": 1e-3, "algorithm.kl_coef": 0.0}  # the starting point, and no estimator: it did not matter
    # trial 1 is the spread start's (sweep/trials/spread.py): its LR where the key's order and offset put it
    assert trials[1].params["optim.lr"] == pytest.approx(at(fraction(3, "optim.lr", 1, 2), FloatDistribution(1e-4, 1e-2, log=True)))
    for t in trials:
        assert ("algorithm.kl_estimator" in t.params) == (t.params["algorithm.kl_coef"] > 0)
    for r in results:  # every trial's config says what ran, the inactive estimator as the base trainer's
        assert r.config["algorithm.kl_estimator"] in (("k1", "k2") if r.config["algorithm.kl_coef"] > 0 else ("k3",))
        assert r.metrics["training_iteration"] == 1


@pytest.mark.parametrize("sampler", ["gp", "cmaes"])
def test_optuna_gp_and_cmaes(tmp_path, sampler):
    """One startup trial, then the sampler's model proposes the next from the study so far (in the driver, with torch for GP)."""
    cfg = load_space(tmp_path, {
        "name": sampler,
        "trainer": tiny_trainer(total_steps=1),
        "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}, "algorithm.clip_eps_high": {"quniform": [0.2, 0.3, 0.02]}},
        "search": {"searcher": "optuna", "sampler": sampler, "num_samples": 2, "n_startup_trials": 1, "seed": 0},
        "scheduler": {"type": "fifo"},
        "max_concurrent_trials": 1,
    })
    fit(cfg)
    trials = study(cfg).trials
    assert [t.state.name for t in trials] == ["COMPLETE"] * 2
    for t in trials:
        assert 1e-4 <= t.params["optim.lr"] <= 1e-2
        step = (t.params["algorithm.clip_eps_high"] - 0.2) / 0.02
        assert abs(step - round(step)) < 1e-6


def test_random_and_grid(tmp_path):
    """random: a conditional key drawn per trial; grid: every combination, the estimator only where KL is on."""
    random = load_space(tmp_path, {
        "name": "random",
        "trainer": tiny_trainer(total_steps=1),
        "space": {"optim.lr": {"quniform": [0.001, 0.005, 0.001]}, **KL},
        "search": {"searcher": "random", "num_samples": 2, "seed": 1},
        "scheduler": {"type": "fifo"},
    })
    configs = [r.config for r in fit(random)]
    assert len(configs) == 2
    for c in configs:
        assert c["optim.lr"] in (0.001, 0.002, 0.003, 0.004, 0.005) or abs(c["optim.lr"] * 1000 - round(c["optim.lr"] * 1000)) < 1e-9
        assert c["algorithm.kl_estimator"] in (("k1", "k2") if c["algorithm.kl_coef"] > 0 else ("k3",))

    grid = load_space(tmp_path, {
        "name": "grid",
        "trainer": tiny_trainer(total_steps=1),
        "space": {"optim.lr": 0.001, **KL},
        "search": {"searcher": "grid", "num_samples": 1},
        "scheduler": {"type": "fifo"},
    })
    ran = sorted((r.config["algorithm.kl_coef"], r.config["algorithm.kl_estimator"]) for r in fit(grid))
    assert ran == [(0.0, "k3"), (0.05, "k1"), (0.05, "k2")]


def test_a_sweep_over_the_policy_loss_runs_each_loss(tmp_path):
    """``algorithm.policy_loss`` as a grid axis (as ``sweep/search_spaces/policy_loss_cpu.yaml``): each trial
    trains with its own loss, two optimizer steps per batch so the second is off-policy and can clip."""
    cfg = load_space(tmp_path, {
        "name": "losses",
        "trainer": tiny_trainer(total_steps=1, algorithm={"mini_batches": 2}),
        "space": {"algorithm.policy_loss": {"grid": ["ppo_clip", "gspo", "cispo"]}},
        "search": {"searcher": "grid", "num_samples": 1},
        "scheduler": {"type": "fifo"},
    })
    results = fit(cfg)
    assert sorted(r.config["algorithm.policy_loss"] for r in results) == ["cispo", "gspo", "ppo_clip"]
    for r in results:
        assert r.metrics["training_iteration"] == 1 and math.isfinite(r.metrics["policy/loss"]), r.metrics
