"""The one door for configs: overrides, the checks on every path (resume included), and one parse each."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pytest

from configkit.base import ConfigError
from grpo.config import TrainerConfig
from sweep.__main__ import main
from sweep.spec.loader import load_space, load_trainer, parse_sets

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "sweep" / "search_spaces" / "demo_cpu.yaml"
PBT = """
name: pbt
trainer: {total_steps: 4, checkpoint: {interval: 2}}
space:
  optim.lr: {loguniform: [1.0e-4, 1.0e-2]}
search: {searcher: random, num_samples: 4}
scheduler:
  type: pbt
  perturbation_interval: 2
  mutations:
    optim.lr: {loguniform: [1.0e-4, 1.0e-2]}
"""


@contextlib.contextmanager
def trainer_parses():
    """Count TrainerConfig parses (its after-validator runs once per parse, nested in a SweepConfig too),
    split into the checks' own (each distribution's extremes: their job) and every other one."""
    code = TrainerConfig._context_fits_rope_scaling.__code__
    counts = {"checks": 0, "other": 0}

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is code:
            caller = frame.f_back
            while caller is not None and not caller.f_code.co_filename.endswith("sweep/spec/checks.py"):
                caller = caller.f_back
            counts["checks" if caller is not None else "other"] += 1

    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)


def test_sets_go_to_the_trainer_or_the_sweep_by_their_first_key(tmp_path):
    cfg = load_space(DEMO, parse_sets(["total_steps=6", "trainer.eval.interval=1", "search.num_samples=2", "storage=elsewhere"]))
    assert (cfg.trainer.total_steps, cfg.trainer.eval.interval, cfg.search.num_samples, cfg.storage) == (6, 1, 2, "elsewhere")
    with pytest.raises(ConfigError, match=r"unknown key 'optimm' \(did you mean 'optim'\? trainer keys: model, optim"):
        load_space(DEMO, parse_sets(["optimm.lr=1"]))
    with pytest.raises(ConfigError, match=r"--set trainer: give one trainer key at a time, as --set trainer.KEY=VALUE"):
        load_space(DEMO, parse_sets(["trainer={seed: 1}"]))
    with pytest.raises(ConfigError, match="dotted.key=value"):
        parse_sets(["optim.lr"])
    pasted = "[" + ",".join(["1"] * 2000)  # a value pasted whole, its bracket unclosed: the message quotes 300 characters of it
    with pytest.raises(ConfigError, match=r"\(4000 characters\)") as caught:
        parse_sets([f"seed={pasted}"])
    assert len(str(caught.value)) < 1200


def test_a_set_of_a_swept_key_is_refused_for_a_sweep_but_pins_one_trial():
    with pytest.raises(ConfigError, match=r"demo_cpu.yaml \(--set optim.lr=0.001\): --set optim.lr: the space sweeps this key"):
        load_space(DEMO, {"optim.lr": 1e-3})
    trainer, space = load_trainer(DEMO, {"optim.lr": 1e-3})
    assert trainer.optim.lr == 1e-3 and "optim.lr" in space.space
    with pytest.raises(ConfigError, match="a sweep key; one trial takes trainer keys only"):
        load_trainer(DEMO, {"search.num_samples": 2})


def test_a_swept_keys_range_is_set_or_unswept_from_the_command_line():
    """`--set space.optim.lr=...` is the swept key optim.lr (dots and all), checked as the file's would be; null unsweeps it,
    and the trainer's value is then the base's (or a --set's)."""
    cfg = load_space(DEMO, parse_sets(["space.optim.lr={loguniform: [1.0e-6, 1.0e-4]}"]))
    assert (cfg.space["optim.lr"].low, cfg.space["optim.lr"].high) == (1e-6, 1e-4) and set(cfg.space) >= {"algorithm.kl_coef"}
    cfg = load_space(DEMO, parse_sets(["space.algorithm.kl_coef=null", "algorithm.kl_coef=0.05"]))
    assert "algorithm.kl_coef" not in cfg.space and cfg.trainer.algorithm.kl_coef == 0.05 and "optim.lr" in cfg.space
    with pytest.raises(ConfigError, match=r"key 'space.optim.lr' = .*low \(0.001\) must be below high"):
        load_space(DEMO, parse_sets(["space.optim.lr={loguniform: [1.0e-3, 1.0e-6]}"]))


def test_a_sweeps_trainer_has_no_output_dir_of_its_own(tmp_path):
    """Every trial writes to its own folder under storage; one output_dir for all would mix their evals. `sweep train` keeps it."""
    with pytest.raises(ConfigError, match="key 'trainer.output_dir' = 'out': each trial of a sweep writes"):
        load_space(DEMO, {"trainer.output_dir": "out"})
    trainer, _ = load_trainer(DEMO, {"output_dir": str(tmp_path)})
    assert trainer.output_dir == str(tmp_path)


def test_a_set_path_is_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer, _ = load_trainer(DEMO, {"model.cache_dir": "here"})
    assert trainer.model.cache_dir == str(tmp_path / "here")


def test_run_with_num_samples_1_cannot_escape_the_population_check(tmp_path, capsys):
    space = tmp_path / "pbt.yaml"
    space.write_text(PBT + f"storage: {tmp_path / 'results'}\n")
    assert main(["validate", str(space)]) == 0
    assert main(["run", str(space), "--num-samples", "1"]) == 2
    assert "pbt.yaml (--set search.num_samples=1)" in capsys.readouterr().err
    assert main(["run", str(space), "--set", "search.num_samples=1"]) == 2
    assert "needs a population" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # refused before anything was written


def test_resume_runs_every_check_on_the_saved_config(tmp_path, capsys):
    """A saved config that no longer passes a check (edited, or saved by an older version) is refused by name."""
    from sweep.resume import CONFIG_FILE, STATE_FILE

    sweep_dir = tmp_path / "results" / "pbt"
    sweep_dir.mkdir(parents=True)
    saved = json.loads(load_space(_write(tmp_path, PBT)).model_dump_json())
    saved["search"]["num_samples"] = 1
    (sweep_dir / CONFIG_FILE).write_text(json.dumps(saved))
    (sweep_dir / STATE_FILE).write_text("")
    assert main(["resume", str(sweep_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{sweep_dir}/{CONFIG_FILE}" in err and "needs a population" in err


def test_the_trainer_config_is_parsed_once_in_the_driver(tmp_path, monkeypatch):
    """``sweep run`` up to the fit: the file once, nothing downstream again (the checks' extremes aside)."""
    import sweep.run as run

    built = []

    def fit_nothing(cfg, store, make_tuner, watch):
        built.append(make_tuner())  # the Tuner as the sweep builds it: searcher, scheduler, trainable and its base
        return 0

    monkeypatch.setattr(run, "_fit_and_report", fit_nothing)
    with trainer_parses() as counts:
        assert main(["run", str(DEMO), "--storage", str(tmp_path)]) == 0
    assert built and counts == {"checks": counts["checks"], "other": 1}, counts
    assert counts["checks"] > 0  # the extremes of optim.lr, kl_coef and n were tried


def test_a_trial_parses_its_config_once_and_training_never(tmp_path, tiny_base):
    from grpo.reporting import ListReporter
    from grpo.trainer import train
    from sweep.trials.trial import trial_config
    from sweep.tuner import base_trainer_dict
    from tests.sweep.tiny_sweep import tiny_trainer

    cfg = load_space(_write(tmp_path, json.dumps({"name": "t", "trainer": tiny_trainer(1), "scheduler": {"type": "fifo"}, "space": {"optim.lr": {"choice": [1e-3]}}})))
    with trainer_parses() as counts:
        trial = trial_config(base_trainer_dict(cfg), {"optim.lr": 1e-3})
        train(trial, ListReporter())
    assert counts == {"checks": 0, "other": 1}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


SAMPLE = ROOT.parent / "shared" / "upstream" / "skyrl-1d3b19e" / "skyrl-train" / "data" / "fleet_booking_sample.json"


def test_a_fleet_space_names_what_it_lacks_before_anything_starts(tmp_path, capsys, monkeypatch):
    """Fleet tasks on the local backend, local tasks on Fleet, a missing key, SDK or OpenEnv, a swept cap:
    each named, nothing written."""
    if not SAMPLE.is_file():
        pytest.skip(f"Fleet's task sample is not here ({SAMPLE}): ../shared is absent")
    monkeypatch.delenv("FLEET_API_KEY", raising=False)
    monkeypatch.delenv("OPENENV_PATH", raising=False)
    results = tmp_path / "results"
    base = f"name: f\nstorage: {results}\nspace:\n  optim.lr: {{choice: [1.0e-5]}}\nsearch: {{searcher: random, num_samples: 1}}\n"
    on_local = _write(tmp_path, base + f"trainer: {{total_steps: 2, env: {{tasks_path: {SAMPLE}}}}}\n")
    assert main(["validate", str(on_local)]) == 2
    err = capsys.readouterr().err
    assert "key 'trainer.env.backend' = {type: local}: env_key(s) booking are not local apps" in err and "Traceback" not in err
    assert "key 'trainer.model.name_or_path' = None: the tiny model is warm-started" in err and "booking are not local apps" in err
    on_fleet = _write(tmp_path, base + "trainer: {total_steps: 2, env: {backend: {type: fleet}}}\n")
    assert main(["run", str(on_fleet)]) == 2
    err = capsys.readouterr().err
    assert "{type: fleet}: " in err and "have no verifier_func" in err and "needs FLEET_API_KEY in the environment" in err
    assert "OpenEnv's Fleet code was not found" in err and "Traceback" not in err
    swept = _write(tmp_path, base.replace("optim.lr: {choice: [1.0e-5]}", "env.backend.max_instances: {choice: [2, 4]}")
                   + f"trainer: {{total_steps: 2, env: {{backend: {{type: fleet}}, tasks_path: {SAMPLE}}}}}\n")
    assert main(["validate", str(swept)]) == 2
    assert "key 'space.env.backend.max_instances' cannot be swept: the environment backend and its shared parts are the sweep's" in capsys.readouterr().err
    assert not results.exists()
