"""A tiny Qwen2-architecture policy and a word-level tokenizer with a chat template, built locally.

No hub is reachable, so CPU runs and tests build both from a config: the tokenizer's vocabulary comes
from a corpus of texts the policy will meet (prompts, tool calls, tool results); words outside it map
to ``[UNK]``. Whitespace is kept as tokens and decoding concatenates, so text round-trips exactly.
Leaves out: loading real checkpoints (the GPU path, issue 9).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

PAD, UNK, IM_START, IM_END = "<|endoftext|>", "[UNK]", "<|im_start|>", "<|im_end|>"
ACTION_TOKENS = ["<tool_call>", "</tool_call>", "<done>"]
# Digits come in pieces of at most two, apart from letters: 2026-06-24 is 20 26 - 06 - 24 and B72 is B 72, so
# every id and date of a held-out task is made of pieces the warm-start trained on (a whole date or id as
# one word would be a token the policy never learnt to emit, and it could not copy it).
_PIECES = re.compile(r"\d\d?|[^\W\d]+|\s+|[^\w\s]")
_ADDED = re.compile("|".join(re.escape(t) for t in [IM_START, IM_END, PAD, *ACTION_TOKENS]))

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


def corpus_vocabulary(texts: Iterable[str]) -> list[str]:
    """Word pieces of the corpus, most frequent first (ties by text), special and action tokens removed."""
    counts: Counter[str] = Counter()
    for text in texts:
        for chunk in _ADDED.split(text):
            counts.update(_PIECES.findall(chunk))
    return [piece for piece, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def build_tokenizer(texts: Iterable[str]):
    """A ``PreTrainedTokenizerFast`` over the corpus vocabulary with the chat template set."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, UNK, IM_START, IM_END]
    vocab = {tok: i for i, tok in enumerate([*specials, *corpus_vocabulary(texts)])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(_PIECES.pattern), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=IM_END,
        additional_special_tokens=[IM_START],
        padding_side="left",
    )
    tokenizer.add_tokens(ACTION_TOKENS)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def load_tiny_tokenizer(path: str):
    """Reload a tokenizer saved by ``build_tokenizer`` (not AutoTokenizer: it would pick Qwen2Tokenizer)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(path, padding_side="left")


def build_model(tokenizer, hidden_size: int, num_layers: int, num_heads: int, intermediate_size: int, seed: int):
    """A randomly initialised Qwen2ForCausalLM sized for the tokenizer."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)
