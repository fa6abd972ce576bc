"""Token-in/token-out: the episode's pieces are exactly the chat template of the whole conversation."""

from __future__ import annotations

from grpo.warmstart import reference_conversation, supervised_example


def test_text_round_trips_through_the_tokenizer(chat, tasks):
    for task in tasks[:10]:
        assert chat.decode(chat.encode(task.prompt)) == task.prompt


def test_pieces_equal_the_template_of_the_whole_conversation(chat, tasks):
    for task in [tasks[0], tasks[-1]]:  # one single-call task, one two-call task
        conv = reference_conversation(task)
        ids, mask = supervised_example(chat, conv)
        messages = list(conv.messages)
        for text, result in conv.turns:
            messages.append({"role": "assistant", "content": text})
            if result is not None:
                messages.append({"role": "tool", "content": result})
        full = chat.tokenizer.apply_chat_template(messages, tokenize=False)
        assert chat.encode(full) == ids + chat.encode("\n")  # the template closes the last turn with a newline
        own = [i for i, m in zip(ids, mask) if m]
        assert chat.decode(own) == "".join(text + "<|im_end|>" for text, _ in conv.turns)


def test_tiny_vocabulary_covers_the_reference_conversations(chat, tasks):
    unk = chat.tokenizer.unk_token_id
    for task in tasks:
        ids, _ = supervised_example(chat, reference_conversation(task))
        assert unk not in ids, task.task_key


def test_give_ups_replace_the_share_asked_for_chosen_by_seed(tasks):
    from grpo.warmstart import with_give_ups
    from toolenvs.protocol import DONE

    conversations = [reference_conversation(t) for t in tasks[:20]]
    mixed = with_give_ups(conversations, 0.4, seed=3)
    gave_up = [i for i, (before, after) in enumerate(zip(conversations, mixed)) if after != before]
    assert len(gave_up) == 8  # round(0.4 * 20), exactly
    assert all(mixed[i].turns == [(DONE, None)] and mixed[i].messages == conversations[i].messages for i in gave_up)
    assert with_give_ups(conversations, 0.4, seed=3) == mixed  # the seed decides
    assert [c != m for c, m in zip(conversations, with_give_ups(conversations, 0.4, seed=4))] != [i in gave_up for i in range(20)]
    assert with_give_ups(conversations, 0.0, seed=3) == conversations
