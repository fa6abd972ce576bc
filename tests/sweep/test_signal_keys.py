"""A space can sweep dynamic sampling, the zero-variance choice and the curriculum: it validates, the
curriculum's probe path is read relative to the space file, and bad values are named by key."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from configkit.base import ConfigError
from grpo.curriculum import write_probe
from grpo.data import trial_tasks
from sweep.__main__ import main
from sweep.spec.loader import load_space

SPACE = """
name: signal
trainer:
  total_steps: 4
  rollout: {prompts_per_step: 4, n_samples_per_prompt: 4}
  eval: {interval: 2}
  data: {curriculum: {prior_path: probe.json}}
space:
  algorithm.dynamic_sampling.enabled: {choice: [false, true]}
  algorithm.dynamic_sampling.max_rounds: {choice: [2, 4]}
  algorithm.zero_variance_groups: {choice: [keep, mask]}
  data.curriculum.enabled: {choice: [false, true]}
  data.curriculum.weight: {choice: [signal, learnability]}
  data.curriculum.floor: {uniform: [0.05, 0.5]}
search: {searcher: random, num_samples: 4, metric: eval/score, mode: max}
"""


def _space(tmp_path, text: str = SPACE):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


def test_a_space_sweeping_the_signal_keys_validates(tmp_path, capsys):
    path = _space(tmp_path)
    with pytest.raises(ConfigError, match="data.curriculum.prior_path.*cannot read it"):  # the probe is not there yet
        load_space(path)
    tasks, _ = trial_tasks(load_space(path, {"data.curriculum.prior_path": None}).trainer)
    write_probe(tmp_path / "probe.json", [SimpleNamespace(task_key=t.task_key, env_key=t.env_key, successes=i % 5, samples=4) for i, t in enumerate(tasks)], 4)
    cfg = load_space(path)
    assert cfg.trainer.data.curriculum.prior_path == str(tmp_path / "probe.json")  # relative to the space file
    assert main(["validate", str(path)]) == 0
    assert ": ok — 4 trials" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("line", "bad", "message"),
    [
        ("data.curriculum.floor: {uniform: [0.05, 0.5]}", "data.curriculum.floor: {uniform: [0.1, 1.5]}", "data.curriculum.floor"),
        ("algorithm.zero_variance_groups: {choice: [keep, mask]}", "algorithm.zero_variance_groups: {choice: [keep, drop]}", "zero_variance_groups"),
        ("algorithm.dynamic_sampling.max_rounds: {choice: [2, 4]}", "algorithm.dynamic_sampling.max_rounds: {choice: [0, 2]}", "max_rounds"),
    ],
)
def test_a_bad_value_of_a_signal_key_is_named(tmp_path, line, bad, message):
    text = SPACE.replace("  data: {curriculum: {prior_path: probe.json}}\n", "")
    assert line in text
    with pytest.raises(ConfigError, match=message):
        load_space(_space(tmp_path, text.replace(line, bad)))


def test_forecast_saves_its_probe_and_the_curriculum_starts_from_it(tmp_path, capsys):
    import json

    from grpo.config import TrainerConfig
    from grpo.curriculum import CurriculumSampler, read_probe
    from grpo.data import make_sampler
    from tests.conftest import TEST_MODEL

    trainer = {"model": TEST_MODEL, "torch_threads": 1, "env": {"max_tasks": 3}, "rollout": {"max_turns": 2}}
    config = tmp_path / "space.yaml"  # a space whose curriculum reads the probe this forecast is about to write
    config.write_text(json.dumps({"name": "f", "trainer": {**trainer, "data": {"curriculum": {"enabled": True, "prior_path": "out/probe.json"}}},
                                  "space": {"optim.lr": {"choice": [1e-3, 1e-4]}}, "search": {"searcher": "random", "num_samples": 2}}))
    with pytest.raises(ConfigError, match="prior_path"):
        load_space(config)
    assert main(["forecast", str(config), "--k", "2", "--save-probe", str(tmp_path / "out" / "probe.json")]) == 0
    assert "probe saved to" in capsys.readouterr().out
    assert load_space(config).trainer.data.curriculum.prior_path == str(tmp_path / "out" / "probe.json")
    probe = read_probe(tmp_path / "out" / "probe.json")
    cfg = TrainerConfig.model_validate({**trainer, "data": {"curriculum": {"enabled": True, "prior_path": str(tmp_path / "out" / "probe.json")}}})
    tasks, _ = trial_tasks(cfg)
    assert sorted(probe) == sorted(t.task_key for t in tasks) and all(p + f == 2 for p, f in probe.values())
    sampler = make_sampler(cfg, tasks)
    assert isinstance(sampler, CurriculumSampler)
    assert all(sampler.counts[key] == [1.0 + p, 1.0 + f] for key, (p, f) in probe.items())


def test_dynamic_sampling_on_several_workers_refuses_the_sum_norm_aggregation(tmp_path):
    text = SPACE.replace("  data: {curriculum: {prior_path: probe.json}}\n", "") + "resources: {workers_per_trial: 2}\n"
    text = text.replace("  rollout: {", "  algorithm: {dynamic_sampling: {enabled: true}, loss_agg: seq-mean-token-sum-norm}\n  rollout: {")
    with pytest.raises(ConfigError, match=r"trainer.algorithm.dynamic_sampling.enabled' = true with 2 workers \(resources.workers_per_trial\) and .*token-mean"):
        load_space(_space(tmp_path, text))
    load_space(_space(tmp_path, text.replace("loss_agg: seq-mean-token-sum-norm", "loss_agg: token-mean")))
