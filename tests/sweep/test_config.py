"""Space files: good ones load; bad ones fail before any trial, naming file, key and allowed values."""

from __future__ import annotations

from pathlib import Path

import pytest

from configkit.base import ConfigError
from sweep.spec.config import Choice, LogUniform
from sweep.spec.loader import load_space
from sweep.spec.space import sampled_trial_count

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
    return load_space(path)


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
        load_space(path)


def test_good_space(tmp_path):
    cfg = _load(tmp_path, GOOD)
    assert isinstance(cfg.space["optim.lr"], LogUniform) and isinstance(cfg.space["algorithm.kl_coef"], Choice)
    assert cfg.space["rollout.n_samples_per_prompt"].value == 4
    assert sampled_trial_count(cfg) == 4


def test_unknown_trainer_key_suggests_the_near_one_and_lists_its_section(tmp_path):
    said = _fails(tmp_path, GOOD.replace("optim.lr:", "optim.lrr:"), "unknown trainer key 'space.optim.lrr' (did you mean 'optim.lr'? "
                  "optim's keys: optim.lr, optim.weight_decay, optim.max_grad_norm, optim.warmup_steps, optim.lr_schedule, optim.min_lr_ratio)")
    assert "algorithm.kl_coef" not in said.split("lrr")[1].split("\n")[0]  # not all hundred keys
    _fails(tmp_path, GOOD.replace("optim.lr:", "optimizer.lr:"),
           "unknown trainer key 'space.optimizer.lr' (did you mean 'optim.lr'? the trainer's top-level keys: model, optim, algorithm,")
    _fails(tmp_path, GOOD.replace("optim.lr:", "model.lroa.rank:"), "(did you mean 'model.lora.rank'? model's keys: model.type,")
    _fails(tmp_path, GOOD.replace("optim.lr:", "optim:"),
           "key 'space.optim' is a section of the trainer; sweep its keys one by one: optim.lr, optim.weight_decay,")


def test_low_above_high(tmp_path):
    _fails(tmp_path, GOOD.replace("[1.0e-4, 1.0e-2]", "[1.0e-2, 1.0e-4]"), "space.optim.lr", "must be below high")


def test_unknown_distribution_lists_known(tmp_path):
    _fails(tmp_path, GOOD.replace("loguniform:", "lognormal:"), "space.optim.lr", "uniform, loguniform, quniform, randint, choice, grid")


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
        load_space(tmp_path / "nope.yaml")


def test_asha_grace_period_beyond_the_run(tmp_path):
    _fails(tmp_path, GOOD + "scheduler: {type: asha, grace_period: 5}\n", "scheduler.grace_period", "total_steps = 3")


def test_optuna_needs_something_to_search(tmp_path):
    text = "trainer: {total_steps: 3}\nspace:\n  optim.lr: 0.001\n"
    _fails(tmp_path, text, "nothing to search")


def test_total_steps_cannot_be_swept(tmp_path):
    _fails(tmp_path, GOOD + "  total_steps: {choice: [2, 4]}\n", "space.total_steps", "cannot be swept")


def test_uniform_on_an_integer_key(tmp_path):
    _fails(tmp_path, GOOD.replace("rollout.n_samples_per_prompt: 4", "rollout.n_samples_per_prompt: {uniform: [2, 8]}"),
           "space.rollout.n_samples_per_prompt", "must be a whole number")


def test_eval_metric_needs_eval_on(tmp_path):
    _fails(tmp_path, GOOD + "search: {metric: eval/avg_pass_at_1}\n", "eval.interval > 0")
    cfg = _load(tmp_path, GOOD.replace("{total_steps: 3}", "{total_steps: 4, eval: {interval: 2}}") +
                "search: {metric: eval/hotel/pass_at_4}\nscheduler: {grace_period: 2}\n")
    assert cfg.search.metric == "eval/hotel/pass_at_4"
    _fails(tmp_path, GOOD.replace("{total_steps: 3}", "{total_steps: 4, eval: {interval: 2}}") +
           "search: {metric: eval/avg_pass_at_1}\nscheduler: {grace_period: 3}\n", "not a multiple", "stale eval")


def test_relative_paths_are_relative_to_the_space_file(tmp_path):
    cfg = _load(tmp_path, GOOD.replace("{total_steps: 3}", "{total_steps: 3, model: {cache_dir: cache}}"))
    assert cfg.trainer.model.cache_dir == str((tmp_path / "cache").resolve())


def test_points_to_evaluate(tmp_path):
    ok = GOOD + "search:\n  points_to_evaluate:\n    - {optim.lr: 1.0e-3, algorithm.kl_coef: 0.01}\n"
    assert _load(tmp_path, ok).search.points_to_evaluate == [{"optim.lr": 1e-3, "algorithm.kl_coef": 0.01}]
    _fails(tmp_path, ok.replace("algorithm.kl_coef: 0.01}", "algorithm.kl_coef: 0.5}"), "points_to_evaluate[0]", "kl_coef = 0.5 is outside")
    _fails(tmp_path, ok.replace("optim.lr: 1.0e-3,", "optim.weight_decay: 0.1,"), "points_to_evaluate[0]", "does not sweep")


COND = GOOD.replace("  rollout.n_samples_per_prompt: 4\n", "  algorithm.kl_estimator: {choice: [k1, k3], when: {algorithm.kl_coef: {gt: 0}}}\n")


def test_quniform(tmp_path):
    cfg = _load(tmp_path, GOOD.replace("[1.0e-4, 1.0e-2]}", "[1.0e-4, 1.0e-2]}\n  algorithm.clip_eps_high: {quniform: [0.2, 0.3, 0.02]}"))
    dist = cfg.space["algorithm.clip_eps_high"]
    assert (dist.low, dist.high, dist.q) == (0.2, 0.3, 0.02) and dist.contains(0.24) and not dist.contains(0.25)
    _fails(tmp_path, GOOD + "  algorithm.clip_eps_high: {quniform: [0.2, 0.3, 0.03]}\n", "space.algorithm.clip_eps_high", "whole number of steps")
    _fails(tmp_path, GOOD + "  algorithm.clip_eps_high: {quniform: [0.2, 0.3]}\n", "quniform takes [low, high, q]")


def test_conditional_key(tmp_path):
    cfg = _load(tmp_path, COND)
    dist = cfg.space["algorithm.kl_estimator"]
    assert dist.active({"algorithm.kl_coef": 0.01}) and not dist.active({"algorithm.kl_coef": 0.0})
    assert _load(tmp_path, COND.replace("{gt: 0}", "{in: [0.01]}")).space["algorithm.kl_estimator"].active({"algorithm.kl_coef": 0.01})
    assert _load(tmp_path, COND.replace("{gt: 0}", "0.01")).space["algorithm.kl_estimator"].when["algorithm.kl_coef"].eq == 0.01


def test_conditional_key_mistakes(tmp_path):
    _fails(tmp_path, COND.replace("{gt: 0}", "{greater: 0}"), "space.algorithm.kl_estimator.when.algorithm.kl_coef.greater")
    _fails(tmp_path, COND.replace("when: {algorithm.kl_coef:", "when: {optim.weight_decay:"), "when.optim.weight_decay", "does not sweep", "swept: optim.lr")
    _fails(tmp_path, COND.replace("{gt: 0}", "{gt: 1}"), "holds for none of algorithm.kl_coef's values [0.0, 0.01]")
    chained = COND + "  algorithm.entropy_coef: {choice: [0.0, 0.01], when: {algorithm.kl_estimator: k1}}\n"
    _fails(tmp_path, chained, "when.algorithm.kl_estimator", "itself conditional")


def test_every_problem_is_reported_at_once(tmp_path):
    text = (
        "trainer: {total_steps: 3}\n"
        "space:\n"
        "  optim.lr: {loguniform: [1.0e-2, 1.0e-4]}\n"        # bad bounds (shape)
        "  optim.lrr: {choice: [1, 2]}\n"                      # unknown key (meaning)
        "  algorithm.kl_coef: {lognormal: [0, 1]}\n"           # unknown distribution
        "  algorithm.kl_estimator: {choice: [k1], when: {algorithm.nope: 1}}\n"
        "search: {metric: accuracy, sampler: cmaes}\n"
        "scheduler: {type: median, grace_period: 9}\n"
        "resources: {cpus_per_trial: 64}\n"
        "logging: {wandb: {enabled: true, mode: online}}\n"
    )
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_space(path, cluster={"CPU": 2.0, "GPU": 0.0})
    message = str(info.value)
    for fragment in ("space.optim.lr' = ", "must be below high", "unknown trainer key 'space.optim.lrr'", "space.algorithm.kl_coef", "lognormal",
                     "when.algorithm.nope", "search.metric", "cmaes", "scheduler.grace_period' = 9 exceeds", "resources.cpus_per_trial' = 64",
                     "WANDB_API_KEY"):
        assert fragment in message, (fragment, message)
    assert message.startswith(f"{path}: ") and "problems" in message.splitlines()[0]


def test_unknown_scheduler_lists_allowed(tmp_path):
    _fails(tmp_path, GOOD + "scheduler: {type: hyperband}\n", "scheduler.type' = 'hyperband'", "allowed: asha, fifo, median, pbt")


def test_sampler_checks(tmp_path):
    assert _load(tmp_path, GOOD + "search: {sampler: gp}\n").search.sampler == "gp"
    _fails(tmp_path, GOOD + "search: {sampler: bayes}\n", "search.sampler", "'tpe', 'gp' or 'cmaes'")
    _fails(tmp_path, GOOD + "search: {searcher: random, sampler: gp}\n", "search.sampler' applies to the optuna searcher only")
    _fails(tmp_path, GOOD.replace("{loguniform: [1.0e-4, 1.0e-2]}", "0.001") + "search: {sampler: cmaes}\n", "cmaes", "numeric keys")
    _fails(tmp_path, COND + "search: {sampler: cmaes}\n", "cmaes", "conditional keys algorithm.kl_estimator")
    _fails(tmp_path, GOOD + "search: {sampler: gp, constant_liar: false}\n", "constant_liar' applies to the tpe sampler only")
    assert _load(tmp_path, GOOD + "search: {startup: spread}\n").search.startup == "spread"
    _fails(tmp_path, GOOD + "search: {startup: even}\n", "search.startup", "'random' or 'spread'")
    _fails(tmp_path, GOOD + "search: {searcher: random, startup: spread}\n", "search.startup' applies to the optuna searcher only")


PBT = GOOD.replace("{total_steps: 3}", "{total_steps: 4, checkpoint: {interval: 1}}") + (
    "search: {searcher: random}\n"
    "scheduler:\n  type: pbt\n  perturbation_interval: 2\n  mutations:\n    optim.lr: {loguniform: [1.0e-5, 1.0e-2]}\n    algorithm.kl_coef: {choice: [0.0, 0.01]}\n"
)


def test_pbt(tmp_path):
    cfg = _load(tmp_path, PBT)
    assert cfg.scheduler.type == "pbt" and isinstance(cfg.scheduler.mutations["optim.lr"], LogUniform)
    _fails(tmp_path, PBT.replace("searcher: random", "searcher: optuna"), "Tune refuses a search algorithm")
    _fails(tmp_path, PBT.replace("interval: 1}", "interval: 0}"), "trainer.checkpoint.interval (now 0) must be > 0 and divide it")
    _fails(tmp_path, PBT.replace("perturbation_interval: 2", "perturbation_interval: 3").replace("interval: 1}", "interval: 2}"), "divide it")
    _fails(tmp_path, PBT.replace("optim.lr: {loguniform", "optim.lrr: {loguniform"), "unknown trainer key 'scheduler.mutations.optim.lrr'")
    _fails(tmp_path, PBT.replace("optim.lr: {loguniform: [1.0e-5, 1.0e-2]}", "optim.lr: {loguniform: [1.0e-5, 1.0e-2], when: {optim.weight_decay: 0}}"), "without when")
    _fails(tmp_path, PBT + "max_concurrent_trials: 1\n", "needs a population")


def test_median(tmp_path):
    assert _load(tmp_path, GOOD + "scheduler: {type: median, grace_period: 2, min_samples_required: 2}\n").scheduler.min_samples_required == 2
    _fails(tmp_path, GOOD + "scheduler: {type: median, reduction_factor: 2}\n", "unknown key 'scheduler.reduction_factor'")


def test_resources_beyond_the_cluster(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(GOOD + "resources: {cpus_per_trial: 4, gpus_per_trial: 1}\n")
    load_space(path)  # without a cluster to compare with, nothing to check
    with pytest.raises(ConfigError) as info:
        load_space(path, cluster={"CPU": 2.0, "GPU": 0.0})
    assert "resources.cpus_per_trial' = 4" in str(info.value) and "resources.gpus_per_trial' = 1" in str(info.value)


def test_trial_placement_on_gpus(tmp_path):
    vllm = GOOD.replace("trainer: {total_steps: 3}", "trainer: {total_steps: 3, rollout: {backend: vllm}}")
    eight = vllm.replace("backend: vllm}", "backend: vllm, prompts_per_step: 8}")
    assert _load(tmp_path, eight + "resources: {gpus_per_trial: 1, workers_per_trial: 8}\n").resources.workers_per_trial == 8
    _fails(tmp_path, vllm + "resources: {gpus_per_trial: 1, workers_per_trial: 8}\n",  # 4 tasks a step cannot be dealt to 8 workers
           "'trainer.rollout.prompts_per_step' = 4 with 8 workers", "use a multiple of 8")
    _fails(tmp_path, vllm, "'trainer.rollout.backend' = 'vllm' needs a GPU", "set it to 1")
    _fails(tmp_path, GOOD + "  rollout.backend: {choice: [hf, vllm]}\n", "'trainer.rollout.backend' = 'vllm' needs a GPU")
    _fails(tmp_path, GOOD + "resources: {gpus_per_trial: 8}\n", "set workers_per_trial: 8 and gpus_per_trial: 1")
    _fails(tmp_path, vllm + "resources: {gpus_per_trial: 0.25}\n", "gpu_memory_utilization' = 0.3 is not below resources.gpus_per_trial = 0.25")
    assert _load(tmp_path, vllm + "resources: {gpus_per_trial: 0.5}\n").resources.gpus_per_trial == 0.5  # two trials per GPU, 0.3 each
    _fails(tmp_path, GOOD + "resources: {gpus_per_trial: 0.5, workers_per_trial: 2}\n", "which NCCL refuses")
    offload = GOOD.replace("trainer: {total_steps: 3}", "trainer: {total_steps: 3, model: {cpu_offload: true}}")
    _fails(tmp_path, offload + "resources: {gpus_per_trial: 1, workers_per_trial: 2}\n", "'trainer.model.cpu_offload' = true with 2 workers (resources.workers_per_trial)")
    lora = GOOD.replace("trainer: {total_steps: 3}", "trainer: {total_steps: 3, model: {lora: {rank: 4}}}")
    _fails(tmp_path, lora + "resources: {workers_per_trial: 2}\n", "'trainer.model.lora' with 2 workers", "workers_per_trial: 1")
    _fails(tmp_path, GOOD + "  model.lora.rank: {choice: [4, 8]}\nresources: {workers_per_trial: 2}\n",  # swept on: named with the value
           "'trainer.model.lora' with 2 workers", "(where space.model.lora.rank = 4)")
    assert _load(tmp_path, lora).trainer.model.lora.rank == 4


def test_a_saved_config_reloads_to_the_same(tmp_path):
    from sweep.spec.config import SweepConfig

    cfg = _load(tmp_path, COND.replace("name: t", "name: t\nlogging: {wandb: {enabled: true}}"))
    assert SweepConfig.model_validate_json(cfg.model_dump_json()) == cfg
    pbt = _load(tmp_path, PBT)
    assert SweepConfig.model_validate_json(pbt.model_dump_json()) == pbt


def test_a_trials_own_backend_keys_can_be_swept_and_the_shared_ones_cannot(tmp_path):
    cfg = _load(tmp_path, GOOD + "  env.backend.call_timeout_s: {choice: [5.0, 20.0]}\n")
    assert cfg.space["env.backend.call_timeout_s"].values == [5.0, 20.0]
    _fails(tmp_path, GOOD + "  env.backend.type: {choice: [local, fleet]}\n", "'space.env.backend.type' cannot be swept",
           "its trials' own: env.backend.max_concurrent, env.backend.call_timeout_s")
    _fails(tmp_path, GOOD + "  env.max_concurrent: {choice: [8, 16]}\n", "'space.env.max_concurrent' moved under the backend: sweep env.backend.max_concurrent")


def test_a_choice_gives_each_value_once():
    """0 and 0.0 are one number to a float key (and to Optuna); true is no number; a section's keys have no order."""
    from datetime import date

    from pydantic import ValidationError

    from sweep.spec.distributions import Choice, Grid

    for values in ([0, 0.0, 0.1], [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [[1], [1]], [None, None], ["k1", "k1"]):
        for kind in (Choice, Grid):
            with pytest.raises(ValidationError, match="items 1 and 2 are the same value; give each value once"):
                kind(values=values)
    assert Choice(values=[True, 1, "1", 1.5]).values == [True, 1, "1", 1.5]
    for values in ([0.0, -0.0], [[1], [1.0]], [float("nan"), float("nan")]):
        with pytest.raises(ValidationError, match="items 1 and 2 are the same value"):
            Choice(values=values)
    for values in ([10**400, 1], [2**53, 2**53 + 1], [{1: "x"}, {"1": "x"}], [{1: {}, "a": {}}, {}], [{date(2026, 1, 5): {}}, {}]):
        assert Choice(values=values).values == values  # apart, and nothing a set or json cannot order makes a traceback
