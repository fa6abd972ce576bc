"""The seeds' H100 space validates here (no GPU, no model loaded); the config keys it needs; per-env eval caps;
a pretrained model by name with YaRN scaling, and a clear error where the hub is unreachable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from configkit.base import ConfigError, validate
from grpo.config import ModelConfig, TrainerConfig
from grpo.data import held_out_split
from toolenvs.task import Task

ROOT = Path(__file__).resolve().parents[2]
H100_SPACE = ROOT / "sweep" / "search_spaces" / "qwen3_8b_h100.yaml"


def test_h100_space_validates_without_loading_a_model():
    """`sweep validate` on the H100 file passes on a CPU machine and imports no torch or transformers."""
    code = (
        "import sys; from sweep.__main__ import main; code = main(['validate', sys.argv[1]]); "
        "heavy = [m for m in ('torch', 'transformers', 'vllm') if m in sys.modules]; "
        "assert not heavy, heavy; sys.exit(code)"
    )
    run = subprocess.run([sys.executable, "-c", code, str(H100_SPACE)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok — 8 trials" in run.stdout and "eval/score" in run.stdout


def test_h100_space_is_the_seeds_setup():
    from sweep.spec.loader import load_space

    cfg = load_space(H100_SPACE)
    base = cfg.trainer
    assert base.model.name_or_path == "Qwen/Qwen3-8B" and base.model.dtype == "bfloat16"
    assert base.model.rope_scaling.max_positions() == 65536
    assert (base.rollout.max_input_length, base.rollout.max_generate_length) == (48 * 1024, 8 * 1024)
    assert base.rollout.n_samples_per_prompt == 4 and base.algorithm.kl_coef == 0.01 and base.rollout.backend == "vllm"
    assert base.eval.interval and base.eval.max_tasks_per_env
    assert set(cfg.space) == {"optim.lr", "algorithm.kl_coef", "rollout.n_samples_per_prompt"}
    assert [p["optim.lr"] for p in cfg.search.points_to_evaluate] == [1e-6, 5e-6]
    assert cfg.scheduler.type == "asha" and cfg.stopping.zero_signal.enabled
    assert (cfg.resources.workers_per_trial, cfg.resources.gpus_per_trial) == (8, 1)  # 8 ranks, one H100 and one engine each
    assert base.model.activation_checkpointing and base.model.micro_batch_size == 1


def test_defaults_are_unchanged():
    cfg = TrainerConfig()
    assert cfg.model.name_or_path is None and cfg.model.rope_scaling is None and cfg.model.dtype == "float32"
    assert cfg.rollout.backend == "hf" and cfg.eval.max_tasks_per_env is None


def test_rope_scaling_errors_name_the_key():
    yarn = {"factor": 2.0, "original_max_position_embeddings": 32768}
    with pytest.raises(ConfigError, match=r"model.*rope_scaling applies to a pretrained model"):
        validate(TrainerConfig, {"model": {"rope_scaling": yarn}}, "space.yaml")
    with pytest.raises(ConfigError, match=r"space.yaml: key 'model.rope_scaling.factor' = 0.5"):
        validate(TrainerConfig, {"model": {"name_or_path": "m", "rope_scaling": {**yarn, "factor": 0.5}}}, "space.yaml")
    with pytest.raises(ConfigError, match=r"max_sequence_length 70000 exceeds the 65536 positions"):
        validate(TrainerConfig, {"model": {"name_or_path": "m", "rope_scaling": yarn}, "rollout": {"max_sequence_length": 70000}}, "s.yaml")
    with pytest.raises(ConfigError, match=r"key 'rollout.backend' = 'sglang'.*'hf' or 'vllm'"):
        validate(TrainerConfig, {"rollout": {"backend": "sglang"}}, "space.yaml")


def _task(key: str, env_key: str) -> Task:
    return Task(task_key=key, prompt="p", env_key=env_key, verifier_code="def verify(s): return 1.0")


def test_eval_cap_per_env():
    tasks = [_task(f"big{i}", "big") for i in range(40)] + [_task(f"small{i}", "small") for i in range(8)]
    train, held = held_out_split(tasks, 0.5, seed=1, max_per_env=3)
    per_env = {env: sum(t.env_key == env for t in held) for env in ("big", "small")}
    assert per_env == {"big": 3, "small": 3}
    assert not {t.task_key for t in train} & {t.task_key for t in held} and len(train) + len(held) == len(tasks)
    assert [t.task_key for t in held_out_split(tasks, 0.5, seed=1, max_per_env=3)[1]] == [t.task_key for t in held]
    # without the cap nothing changes: the same split as before the key existed
    assert len(held_out_split(tasks, 0.25, seed=1)[1]) == 12


def test_trial_tasks_apply_the_per_env_cap(tasks):
    from grpo.data import trial_tasks

    cfg = TrainerConfig.model_validate({"eval": {"interval": 1, "ratio": 0.5, "max_tasks_per_env": 5}})
    train, held = trial_tasks(cfg)
    assert len(held) == 5 and len(train) == len(tasks) - 5


def _tiny_qwen3(path: Path) -> None:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                         intermediate_size=64, vocab_size=64, max_position_embeddings=128)
    Qwen3ForCausalLM(config).save_pretrained(path)


def test_pretrained_model_gets_dtype_and_yarn(tmp_path):
    import torch

    from grpo.pretrained import load_model, vllm_hf_overrides

    _tiny_qwen3(tmp_path / "m")
    cfg = ModelConfig(name_or_path=str(tmp_path / "m"), dtype="bfloat16",
                      rope_scaling={"factor": 4.0, "original_max_position_embeddings": 128})
    policy, reference = load_model(cfg), load_model(cfg, trainable=False)
    # the trained policy keeps float32 master weights (bf16 is FSDP2's compute dtype); the frozen reference is bf16
    assert policy.dtype == torch.float32 and reference.dtype == torch.bfloat16
    assert policy.training and not reference.training
    assert not any(p.requires_grad for p in reference.parameters())
    rope = policy.config.rope_parameters
    assert rope["rope_type"] == "yarn" and rope["factor"] == 4.0 and rope["original_max_position_embeddings"] == 128
    assert policy.config.max_position_embeddings == 512
    ids = torch.arange(300).remainder(64).unsqueeze(0)  # past the native 128 positions
    assert policy(input_ids=ids).logits.shape == (1, 300, 64)
    # vLLM gets the same scaling through hf_overrides, rope_theta kept
    overrides = vllm_hf_overrides(cfg, str(tmp_path / "m"))
    assert overrides["max_position_embeddings"] == 512
    assert overrides["rope_parameters"] == {**rope, "rope_theta": policy.config.rope_parameters["rope_theta"]}
    assert vllm_hf_overrides(ModelConfig(name_or_path=str(tmp_path / "m")), str(tmp_path / "m")) == {}


def test_a_model_folder_is_read_from_its_files_before_anything_loads(tmp_path):
    """What `validate` asks of a local model folder (``model_folder_problem``): a model transformers saved, with its
    tokenizer, passes; without the tokenizer, or with its weights gone, it is named."""
    from grpo.pretrained import model_folder_problem
    from grpo.shapes import filled_tokenizer

    _tiny_qwen3(tmp_path / "m")
    assert model_folder_problem(tmp_path / "m").startswith("no tokenizer in it")
    filled_tokenizer().save_pretrained(tmp_path / "m")
    assert model_folder_problem(tmp_path / "m") is None
    for weights in (tmp_path / "m").glob("*.safetensors"):
        weights.unlink()
    (tmp_path / "m" / "training_args.bin").write_bytes(b"")  # a Trainer's settings: no weights
    assert model_folder_problem(tmp_path / "m").startswith("no weights in it")
    (tmp_path / "m" / "pytorch_model-00001-of-00002.bin").write_bytes(b"")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json"):
        (tmp_path / "m" / name).unlink(missing_ok=True)
    (tmp_path / "m" / "spiece.model").write_bytes(b"")  # a sentencepiece tokenizer (T5's name)
    assert model_folder_problem(tmp_path / "m") is None


def test_unreachable_hub_is_a_clear_error():
    code = (
        "from grpo.config import ModelConfig; from grpo.pretrained import PretrainedLoadError, load_model\n"
        "try:\n    load_model(ModelConfig(name_or_path='Qwen/Qwen3-8B'))\n"
        "except PretrainedLoadError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": "/nonexistent-hf-home"}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert "model.name_or_path = 'Qwen/Qwen3-8B': could not load the model" in run.stdout, run.stdout + run.stderr
    assert "--local-dir" in run.stdout
