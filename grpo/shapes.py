"""Random-weight models of real shapes (Qwen2.5-0.5B, Qwen2.5-1.5B) with a locally built tokenizer.

No hub is reachable from the GPU machine or CI, so GPU tests and benches write one of these to a
directory and load it like any pretrained model (``model.name_or_path``; vLLM's ``LLM(model=dir)``).
The tokenizer is the word-level one of ``grpo.tiny`` over the hotel tasks' conversations, padded with
filler words to the shape's full vocabulary (151,936), so every id a random model samples decodes, and
the embedding and output head have their real size (they dominate a 0.5B model's memory and FLOPs).
Leaves out: trained weights (a random policy solves nothing: GPU runs check mechanics and speed). In ``grpo`` rather
than ``bench/``: besides the GPU benches and tests, README tells users to write one (below) to try the GPU path
where no hub is reachable.

    python -m grpo.shapes qwen2.5-0.5b DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

# The published configs' shapes (hidden, MLP, layers, heads, KV heads); both tie input and output embeddings.
SHAPES: dict[str, dict[str, int]] = {
    "qwen2.5-0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2},
    "qwen2.5-1.5b": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2},
}
VOCAB_SIZE = 151936
MAX_POSITIONS = 32768


def shape_config(shape: str, vocab_size: int = VOCAB_SIZE, pad_id: int = 0, eos_id: int = 0):
    """The ``Qwen2Config`` of a named shape."""
    from transformers import Qwen2Config

    if shape not in SHAPES:
        raise ValueError(f"unknown model shape {shape!r}; known: {', '.join(SHAPES)}")
    return Qwen2Config(
        vocab_size=vocab_size,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        eos_token_id=eos_id,
        bos_token_id=None,
        **SHAPES[shape],
    )


def _letter_words(n: int) -> list[str]:
    """``n`` distinct filler words of letters only ("zqa", "zqb", ...): the tokenizer splits digits off words."""
    words = []
    for i in range(n):
        word = ""
        while True:
            i, r = divmod(i, 26)
            word = chr(ord("a") + r) + word
            if i == 0:
                break
        words.append("zq" + word)
    return words


def filled_tokenizer(vocab_size: int = VOCAB_SIZE):
    """The tiny word-level tokenizer over the hotel conversations, padded with filler words to ``vocab_size`` ids."""
    from grpo.config import DEFAULT_TASKS
    from grpo.tiny import build_tokenizer
    from grpo.warmstart import conversation_texts, reference_conversation
    from toolenvs.task import load_tasks

    corpus = [text for task in load_tasks(DEFAULT_TASKS) for text in conversation_texts(reference_conversation(task))]
    base = len(build_tokenizer(corpus))
    if base > vocab_size:
        raise ValueError(f"the corpus alone needs {base} ids, more than vocab_size {vocab_size}")
    fillers = " ".join(_letter_words(vocab_size - base))
    tokenizer = build_tokenizer([*corpus, fillers])
    assert len(tokenizer) == vocab_size, (len(tokenizer), vocab_size)
    return tokenizer


def write_random_model(shape: str, out_dir: str | Path, seed: int = 0, dtype: str = "bfloat16") -> Path:
    """Save a randomly initialised model of ``shape`` and its tokenizer to ``out_dir`` (HF format); returns it."""
    import torch
    from transformers import Qwen2ForCausalLM

    out = Path(out_dir)
    tokenizer = filled_tokenizer()
    config = shape_config(shape, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    torch.manual_seed(seed)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def parameter_count(shape: str) -> int:
    """Parameters of a shape (tied head counted once), without building it."""
    s = SHAPES[shape]
    h, m, n, heads, kv = s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"], s["num_attention_heads"], s["num_key_value_heads"]
    head_dim = h // heads
    attention = h * h + h + 2 * (h * kv * head_dim + kv * head_dim) + h * h  # q (bias), k and v (bias), o
    layer = attention + 3 * h * m + 2 * h  # gate, up, down; two norms
    return VOCAB_SIZE * h + n * layer + h


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grpo.shapes", description=__doc__.split("\n")[0])
    parser.add_argument("shape", choices=sorted(SHAPES))
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(write_random_model(args.shape, args.out_dir, args.seed))


if __name__ == "__main__":
    main()
