"""Token-level chat format for token-in/token-out episodes.

The prompt goes through the chat template once; after that an episode only appends: the model's sampled
ids (ending in ``<|im_end|>``) and, for each tool result, the template's text for a tool turn followed
by the next assistant header. Nothing already in the episode is re-tokenized. ``tests/grpo/test_chat.py``
checks that these pieces concatenate to exactly what the template gives for the whole conversation.
"""

from __future__ import annotations

from toolenvs.protocol import system_prompt


def opening_messages(prompt: str, tool_signatures: list[str], env_variables: dict[str, str]) -> list[dict[str, str]]:
    """The system message (tools, who, when) and the task's prompt."""
    return [
        {"role": "system", "content": system_prompt(tool_signatures, env_variables)},
        {"role": "user", "content": prompt},
    ]


class ChatFormat:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.end_id: int = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.pad_id: int = tokenizer.pad_token_id

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The conversation so far plus the assistant header, through the chat template."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.encode(text)

    def tool_turn_ids(self, result_text: str) -> list[int]:
        """What follows a model turn's ``<|im_end|>``: the tool turn and the next assistant header."""
        return self.encode(f"\n<|im_start|>tool\n{result_text}<|im_end|>\n<|im_start|>assistant\n")

    def assistant_ids(self, text: str) -> list[int]:
        """A model turn as the model would emit it (text then ``<|im_end|>``), for supervised examples."""
        return [*self.encode(text), self.end_id]
