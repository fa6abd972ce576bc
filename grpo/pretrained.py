"""A pretrained Hugging Face policy named by ``model.name_or_path`` (e.g. Qwen/Qwen3-8B), in place of the tiny one.

Applies ``model.dtype`` and ``model.rope_scaling`` (YaRN) to the model's own config before loading, so a
65K context needs no edited ``config.json``. A name the hub cannot serve here (no network, no cache) is a
``PretrainedLoadError`` that says how to fix it. Leaves out: sharding (FSDP2) and vLLM, which wrap the
model this returns; the warm-start, which only the tiny model gets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo.config import ModelConfig


class PretrainedLoadError(RuntimeError):
    """The model or tokenizer named by model.name_or_path could not be loaded."""


def apply_rope_scaling(config: Any, cfg: ModelConfig) -> None:
    """YaRN on a loaded HF config: merged into its ``rope_parameters`` (keeping rope_theta), positions raised to match."""
    if cfg.rope_scaling is None:
        return
    scaling = cfg.rope_scaling
    rope = dict(getattr(config, "rope_parameters", None) or {})
    rope.update(rope_type=scaling.rope_type, factor=scaling.factor, original_max_position_embeddings=scaling.original_max_position_embeddings)
    config.rope_parameters = rope
    config.max_position_embeddings = scaling.max_positions()


WEIGHTS = ("model*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json", "*.bin.index.json")  # not training_args.bin
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model", "tekken.json")


def model_folder_problem(folder: Path) -> str | None:
    """Why a local folder named by ``model.name_or_path`` is no Hugging Face model that loads, or None; read from its
    files alone (no transformers import), so that ``validate`` says it before a sweep's trials each fail on it."""
    config = folder / "config.json"
    if not config.is_file():
        return "no config.json in it: not a Hugging Face model folder (`hf download <id> --local-dir DIR` makes one)"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"its config.json cannot be read as JSON ({type(exc).__name__}: {exc})"
    if not isinstance(data, dict) or not data.get("model_type"):
        return "its config.json names no model_type (transformers cannot tell which model it is)"
    if not any(next(folder.glob(pattern), None) for pattern in WEIGHTS):
        return "no weights in it (no model*.safetensors or pytorch_model*.bin): a download cut short, or a config alone"
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        return f"no tokenizer in it (none of {', '.join(TOKENIZER_FILES)})"
    return None


def _fail(cfg: ModelConfig, what: str, exc: Exception) -> PretrainedLoadError:
    return PretrainedLoadError(
        f"model.name_or_path = {cfg.name_or_path!r}: could not load the {what} ({type(exc).__name__}: {exc}). "
        "Where the Hugging Face hub is unreachable, download it first (`hf download <id> --local-dir DIR`) and set "
        "model.name_or_path to DIR, or point HF_HOME at a cache that holds it."
    )


def load_pretrained_tokenizer(cfg: ModelConfig):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(cfg.name_or_path, padding_side="left")
    except (OSError, ValueError) as exc:
        raise _fail(cfg, "tokenizer", exc) from None


def vllm_hf_overrides(cfg: ModelConfig, model_dir: str) -> dict[str, Any]:
    """What vLLM must override in the model's config for ``model.rope_scaling`` (vLLM refuses a direct
    ``rope_scaling`` argument; ``hf_overrides`` is its route): the merged ``rope_parameters`` and positions."""
    if cfg.rope_scaling is None:
        return {}
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    apply_rope_scaling(config, cfg)
    return {"rope_parameters": dict(config.rope_parameters), "max_position_embeddings": config.max_position_embeddings}


def load_model(cfg: ModelConfig, trainable: bool = True):
    """The causal LM with rope scaling; frozen (eval mode, no grads) unless trainable. A frozen model is
    loaded in ``model.dtype``; a trainable one in float32 (its master weights: with bfloat16 on a GPU,
    FSDP2 computes in bf16 and the optimizer updates float32)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(cfg.name_or_path)
        apply_rope_scaling(config, cfg)
        model = AutoModelForCausalLM.from_pretrained(cfg.name_or_path, config=config, dtype=torch.float32 if trainable else getattr(torch, cfg.dtype))
    except (OSError, ValueError) as exc:
        raise _fail(cfg, "model", exc) from None
    model.train(trainable)
    if not trainable:
        model.requires_grad_(False)
    return model
