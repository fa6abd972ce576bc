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


def test_a_trial_stopped_before_its_first_trained_eval_tells_optuna_no_score():
    """eval/score is 0 on every report until a trained eval (Tune needs a number): that 0 is no gain to learn from."""
    search = HonestOptunaSearch(total_steps=8, sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=2))
    search.set_search_properties("eval/score", "max", {"optim.lr": tune.loguniform(1e-5, 1e-2)})
    reports = {"early": {"training_iteration": 3, "eval/score": 0.0, "eval/global_step": 0.0},
               "late": {"training_iteration": 5, "eval/score": -0.05, "eval/global_step": 4.0}}
    for trial_id, result in reports.items():
        assert search.suggest(trial_id) is not None
        for step in range(1, result["training_iteration"] + 1):  # as Tune does: every result, then the last again at the end
            evaluated = step >= 4 and result["eval/global_step"] > 0
            search.on_trial_result(trial_id, {"training_iteration": step, "eval/score": result["eval/score"] if evaluated else 0.0,
                                              "eval/global_step": 4.0 if evaluated else 0.0})
        search.on_trial_complete(trial_id, result)
    early, late = search._ot_study.trials
    assert (early.state.name, early.intermediate_values) == ("PRUNED", {})
    assert (late.state.name, late.intermediate_values) == ("PRUNED", {4: -0.05, 5: -0.05})  # from its first trained eval on
    assert search.suggest("next") is not None  # TPE goes on past its start-up trials with a pruned trial that has no value


@pytest.mark.parametrize(("name", "kind"), [("tpe", optuna.samplers.TPESampler), ("gp", optuna.samplers.GPSampler), ("cmaes", optuna.samplers.CmaEsSampler)])
def test_the_sampler_is_the_one_named(tmp_path, name, kind):
    from sweep.spec.config import SweepConfig
    from sweep.tuner import build_searcher

    cfg = SweepConfig.model_validate({"name": name, "storage": str(tmp_path), "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}},
                                      "search": {"sampler": name, "seed": 7, "n_startup_trials": 3}})
    search = build_searcher(cfg)
    assert type(search._sampler) is kind and search._sampler._n_startup_trials == 3
    assert (tmp_path / name / "optuna.db").is_file()
    if name == "tpe":
        assert search._sampler._constant_liar


def _cfg(tmp_path, space: dict, **search):
    from sweep.spec.config import SweepConfig

    return SweepConfig.model_validate({"name": "s", "storage": str(tmp_path), "space": space, "search": {"seed": 0, **search}})


def test_finite_points_are_the_configs_optuna_can_draw(tmp_path):
    from sweep.spec.space import finite_points

    lr = {"choice": [1e-5, 1e-4, 1e-3]}
    assert len(finite_points(_cfg(tmp_path, {"optim.lr": lr, "algorithm.kl_coef": {"choice": [0.0, 0.1]}}))) == 6
    conditional = {"algorithm.kl_coef": {"choice": [0.0, 0.1, 0.2]}, "algorithm.kl_estimator": {"choice": ["k1", "k3"], "when": {"algorithm.kl_coef": {"gt": 0}}}}
    points = finite_points(_cfg(tmp_path, conditional))
    assert len(points) == 1 + 2 * 2 and {"algorithm.kl_coef": 0.0} in points  # the inactive key is not a param, as in Optuna
    points = finite_points(_cfg(tmp_path, {"rollout.n_samples_per_prompt": {"randint": [2, 5]}, "algorithm.clip_eps_low": {"quniform": [0.1, 0.3, 0.1]}}))
    assert len(points) == 9 and {p["rollout.n_samples_per_prompt"] for p in points} == {2, 3, 4}  # randint's high is exclusive
    assert finite_points(_cfg(tmp_path, {"optim.lr": {"loguniform": [1e-5, 1e-3]}, "algorithm.kl_coef": {"choice": [0.0, 0.1]}})) is None
    assert finite_points(_cfg(tmp_path, {"seed": {"randint": [0, 10**9]}})) is None  # counted, not listed


def test_optuna_does_not_repeat_a_config_while_one_is_untried(tmp_path):
    from sweep.tuner import build_searcher

    space = {"optim.lr": {"choice": [1e-5, 1e-4]}, "algorithm.kl_coef": {"choice": [0.0, 0.1]}}
    search = build_searcher(_cfg(tmp_path, space, n_startup_trials=10))  # TPE's random start: 4 draws from 4 repeat at p = 0.91
    search.set_search_properties("reward/avg_pass_at_1", "max", {})
    configs = []
    for i in range(5):
        configs.append(search.suggest(f"t{i}"))
        search.on_trial_complete(f"t{i}", {"training_iteration": 3, "reward/avg_pass_at_1": 0.1 * i})
    first_four = {(c["optim.lr"], c["algorithm.kl_coef"]) for c in configs[:4]}
    assert len(first_four) == 4  # every config once before any twice
    assert (configs[4]["optim.lr"], configs[4]["algorithm.kl_coef"]) in first_four  # then repeats are allowed
    skipped = [t for t in search._ot_study.trials if t.state.name == "FAIL"]
    assert skipped and all(t.user_attrs["skipped"] == "repeats a config already tried" for t in skipped)
    assert sum(t.state.name != "FAIL" for t in search._ot_study.trials) == 5  # the five trials Tune ran


def test_a_sampler_that_keeps_repeating_gets_an_untried_config_queued(tmp_path):
    from sweep.tuner import build_searcher

    space = {"optim.lr": {"choice": [1e-5, 1e-4]}, "algorithm.kl_coef": {"choice": [0.0, 0.1]}}
    search = build_searcher(_cfg(tmp_path, space, n_startup_trials=10))
    search.REDRAWS = 0  # every repeat goes straight to the queue, as after a GP sampler's repeated proposals
    search.set_search_properties("reward/avg_pass_at_1", "max", {})
    configs = [search.suggest(f"t{i}") for i in range(4)]
    assert len({(c["optim.lr"], c["algorithm.kl_coef"]) for c in configs}) == 4
    assert any(t.user_attrs.get("queued") for t in search._ot_study.trials)


@pytest.mark.parametrize("searcher", ["grid", "random", "optuna"])
def test_every_searcher_keeps_max_concurrent_trials(tmp_path, searcher):
    """Tune applies max_concurrent_trials to a Searcher only: a grid or random sweep ran twice the trials at
    once that its file allowed (seen: the verdict bench's grid with 1 ran 2)."""
    from ray.tune.search import ConcurrencyLimiter, SearchGenerator

    from sweep.tuner import build_tuner

    dist = {"grid": [1e-4, 1e-3]} if searcher == "grid" else {"choice": [1e-4, 1e-3]}
    cfg = _cfg(tmp_path, {"optim.lr": dist}, searcher=searcher).model_copy(update={"max_concurrent_trials": 1})
    tuner = build_tuner(cfg)
    search = tuner._local_tuner._tune_config.search_alg
    if searcher == "optuna":  # a Searcher: Tune wraps it in a ConcurrencyLimiter with the sweep's cap
        assert tuner._local_tuner._tune_config.max_concurrent_trials == 1 and not isinstance(search, ConcurrencyLimiter | SearchGenerator)
    else:
        assert search.max_concurrent == 1 and tuner._local_tuner._tune_config.max_concurrent_trials is None


def test_the_median_rule_judges_a_trial_by_its_gains_not_the_scores_placeholder():
    """Both trials lost (eval/score < 0 after their first trained eval, step 2); the worse is stopped at step 2. Tune's
    own best would count step 1's placeholder 0, a best no median of losses could beat, and let it run on."""
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import TrialScheduler

    from sweep.trials.schedulers import NeverYieldingMedian

    rule = NeverYieldingMedian(time_attr="training_iteration", grace_period=2, min_samples_required=1, hard_stop=True,
                               metric="eval/score", mode="max")
    less, worse = (Trial("run_trial", config={}, trial_id=i, stub=True) for i in ("less", "worse"))
    for trial in (less, worse):
        rule.on_trial_add(None, trial)

    def report(trial, step: int, gain: float, evaluated: int) -> str:
        return rule.on_trial_result(None, trial, {"training_iteration": step, "eval/score": gain, "eval/global_step": float(evaluated)})

    for step, evaluated in ((1, 0), (2, 2), (3, 2)):
        assert report(less, step, 0.0 if step == 1 else -0.05, evaluated) == TrialScheduler.CONTINUE
    assert report(worse, 1, 0.0, 0) == TrialScheduler.CONTINUE
    assert report(worse, 2, -0.2, 2) == TrialScheduler.STOP  # its best is -0.2, below the other's mean gain, -0.05


@pytest.mark.parametrize(("workers", "zero_signal", "kinds"), [
    (1, False, ["StepLimit"]), (1, True, ["StepLimit", "TuneZeroSignalStopper"]),
    (2, False, []), (2, True, ["TuneZeroSignalStopper"]),  # a multi-worker trial ends by returning at its last step
])
def test_the_stoppers_a_sweep_gets(tmp_path, workers, zero_signal, kinds):
    from ray.tune.stopper import CombinedStopper

    from sweep.spec.config import SweepConfig
    from sweep.tuner import build_stopper

    cfg = SweepConfig.model_validate({"name": "s", "storage": str(tmp_path), "space": {"optim.lr": {"loguniform": [1e-4, 1e-2]}},
                                      "resources": {"workers_per_trial": workers}, "stopping": {"zero_signal": {"enabled": zero_signal}}})
    stopper = build_stopper(cfg)
    parts = stopper._stoppers if isinstance(stopper, CombinedStopper) else [stopper] if stopper else []
    assert [type(part).__name__ for part in parts] == kinds
