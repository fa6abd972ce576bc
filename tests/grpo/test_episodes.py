"""The episode loop against the live MCP server, driven by a scripted generator (the seam's test double)."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest

from grpo.episodes import EpisodeLimits, request_seed, run_episodes
from grpo.rollout import Completion, SamplingParams
from grpo.warmstart import reference_conversation, supervised_example
from toolenvs.client import EnvClient


class ScriptedGenerator:
    """Answers each episode's turns from a script keyed by the prompt's first ids; records batch sizes."""

    streams = False

    def __init__(self, chat, scripts: dict[tuple[int, ...], list[str]]):
        self.chat = chat
        self.scripts = scripts
        self.batches: list[int] = []

    def generate(self, prompts, sampling: SamplingParams):
        self.batches.append(len(prompts))
        out = []
        for prompt in prompts:
            script = next(v for k, v in self.scripts.items() if tuple(prompt[: len(k)]) == k)
            turn = (sum(1 for t in prompt if t == self.chat.end_id) - 2) // 2  # each turn adds the model's and the tool's im_end
            ids = self.chat.assistant_ids(script[turn])
            if len(ids) > sampling.max_new_tokens:
                out.append(Completion(ids[: sampling.max_new_tokens], [0.0] * sampling.max_new_tokens, "length"))
            else:
                out.append(Completion(ids, [0.0] * len(ids), "stop"))
        return out


def _key(chat, task):
    return tuple(chat.prompt_ids(reference_conversation(task).messages))


LIMITS = EpisodeLimits(max_turns=4, max_generate_length=64, max_sequence_length=1024, temperature=1.0)


def test_reference_answers_score_and_match_the_supervised_tokens(hotel_server, chat, tasks):
    picked = [tasks[0], tasks[-1]]
    scripts = [[text for text, _ in reference_conversation(t).turns] for t in picked]
    gen = ScriptedGenerator(chat, {})
    for t, s in zip(picked, scripts):
        gen.scripts[_key(chat, t)] = s
    trajs = asyncio.run(run_episodes(picked, 2, {"hotel": EnvClient(hotel_server.base_url)}, gen, chat, LIMITS))
    assert [t.group_id for t in trajs] == [0, 0, 1, 1]
    assert gen.batches[0] == 4  # the first model turn of all four episodes ran as one batch
    for traj, task in zip(trajs, [picked[0], picked[0], picked[1], picked[1]]):
        ids, mask = supervised_example(chat, reference_conversation(task))
        assert (traj.token_ids, traj.loss_mask) == (ids, mask)  # token-in/token-out, masks on own tokens only
        assert (traj.reward, traj.stop_reason, traj.env_error) == (1.0, "done", False)
        assert traj.tool_calls == len(task.solution) and traj.tool_errors == 0


def test_malformed_answers_and_limits(hotel_server, chat, tasks):
    task = tasks[0]
    key = _key(chat, task)
    gen = ScriptedGenerator(chat, {key: ["I think so.", "<tool_call>{bad json}</tool_call>", "<done>"]})
    [traj] = asyncio.run(run_episodes([task], 1, {"hotel": EnvClient(hotel_server.base_url)}, gen, chat, LIMITS))
    assert (traj.num_turns, traj.tool_calls, traj.tool_errors, traj.stop_reason, traj.reward) == (3, 0, 2, "done", 0.0)
    assert "no action found" in chat.decode(traj.token_ids)

    short = EpisodeLimits(max_turns=2, max_generate_length=64, max_sequence_length=1024, temperature=1.0)
    gen = ScriptedGenerator(chat, {key: ["hm", "hm", "hm"]})
    [traj] = asyncio.run(run_episodes([task], 1, {"hotel": EnvClient(hotel_server.base_url)}, gen, chat, short))
    assert (traj.num_turns, traj.stop_reason) == (2, "max_turns")

    tight = EpisodeLimits(max_turns=4, max_generate_length=3, max_sequence_length=1024, temperature=1.0)
    gen = ScriptedGenerator(chat, {key: [reference_conversation(task).turns[0][0]]})
    [traj] = asyncio.run(run_episodes([task], 1, {"hotel": EnvClient(hotel_server.base_url)}, gen, chat, tight))
    assert (traj.num_turns, traj.stop_reason, sum(traj.loss_mask)) == (1, "max_generate_length", 3)


def test_environment_failure_marks_env_error(chat, tasks):
    gen = ScriptedGenerator(chat, {(): ["<done>"]})
    trajs = asyncio.run(run_episodes(tasks[:1], 2, {"hotel": EnvClient("http://127.0.0.1:9", call_timeout_s=2)}, gen, chat, LIMITS))
    assert all(t.env_error and t.stop_reason == "env_error" for t in trajs)


def test_a_failing_generator_fails_every_episode_instead_of_hanging(hotel_server, chat, tasks):
    class Broken:
        streams = False

        def generate(self, prompts, sampling):
            raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        asyncio.run(asyncio.wait_for(run_episodes(tasks[:2], 2, {"hotel": EnvClient(hotel_server.base_url)}, Broken(), chat, LIMITS), 60))


def test_input_limit_overlong_filter_and_the_last_turns_tool_call(hotel_server, chat, tasks):
    task = tasks[0]  # one booking call solves it
    call = reference_conversation(task).turns[0][0]
    client = {"hotel": EnvClient(hotel_server.base_url)}

    # the only turn is the last: the call still books (reward 1) but its result is not appended
    one = EpisodeLimits(max_turns=1, max_generate_length=64, max_sequence_length=1024, temperature=1.0)
    [traj] = asyncio.run(run_episodes([task], 1, client, ScriptedGenerator(chat, {_key(chat, task): [call]}), chat, one))
    assert (traj.reward, traj.stop_reason, traj.tool_calls) == (1.0, "max_turns", 1)
    assert traj.token_ids[-1] == chat.end_id and len(traj.token_ids) == traj.prompt_length + len(chat.assistant_ids(call))

    # the context after a turn is past max_input_length: the episode ends before the next model turn
    prompt_len = len(_key(chat, task))
    tight = EpisodeLimits(max_turns=4, max_generate_length=64, max_sequence_length=1024, temperature=1.0, max_input_length=prompt_len + 5)
    [traj] = asyncio.run(run_episodes([task], 1, client, ScriptedGenerator(chat, {_key(chat, task): ["hm", "hm"]}), chat, tight))
    assert (traj.num_turns, traj.stop_reason) == (1, "max_input_length")

    # longer than max_sequence_length: truncated, trains on none of its tokens, reward kept
    short = EpisodeLimits(max_turns=4, max_generate_length=64, max_sequence_length=prompt_len + 10, temperature=1.0)
    [traj] = asyncio.run(run_episodes([task], 1, client, ScriptedGenerator(chat, {_key(chat, task): [call, "<done>"]}), chat, short))
    assert traj.overlong and traj.reward == 1.0
    assert len(traj.token_ids) == prompt_len + 10 and sum(traj.loss_mask) == 0


@pytest.mark.parametrize("fast_calls", [True, False], ids=["one-post", "sdk-call"])
def test_failed_turns_carry_the_kind_named_where_they_failed(hotel_server, chat, tasks, fast_calls):
    """The app names its errors (not found, permission denied, a bad value), the protocol a malformed answer,
    the client an unknown tool and the episode a repeated call; the message the agent sees is unchanged."""
    task = next(t for t in tasks if t.task_key.startswith("hotel-cancel_id"))
    foreign = next(b["booking_id"] for b in task.initial_state["bookings"] if b["guest"] != task.env_variables["LOGGED_IN_USER"])
    script = [
        '<tool_call>{"name": "book_hotel", "arguments": {"hotel_id": "H99", "check_in": "2030-01-01", "nights": 1}}</tool_call>',
        "not an action",
        f'<tool_call>{{"name": "cancel_booking", "arguments": {{"booking_id": "{foreign}"}}}}</tool_call>',
        f'<tool_call>{{"name": "cancel_booking", "arguments": {{"booking_id": "{foreign}"}}}}</tool_call>',
        '<tool_call>{"name": "book_hotel", "arguments": {"hotel_id": "H01", "check_in": "2000-01-01", "nights": 1}}</tool_call>',
        '<tool_call>{"name": "fly", "arguments": {}}</tool_call>',
    ]
    limits = EpisodeLimits(max_turns=6, max_generate_length=64, max_sequence_length=4096, temperature=1.0)
    gen = ScriptedGenerator(chat, {_key(chat, task): script})
    client = EnvClient(hotel_server.base_url, fast_calls=fast_calls)
    [traj] = asyncio.run(run_episodes([task], 1, {"hotel": client}, gen, chat, limits))
    kinds = [(f.turn, f.kind) for f in traj.failures]
    assert kinds == [(0, "not_found"), (1, "malformed_call"), (2, "permission_denied"), (3, "repeated_call"), (3, "permission_denied"),
                     (4, "invalid_argument"), (5, "unknown_tool")], kinds
    assert traj.failures[0].text == "hotel H99 not found" and traj.failures[5].text == "check_in 2000-01-01 is in the past"
    assert traj.tool_errors == 6 and "permission denied: booking" in chat.decode(traj.token_ids)


class CappedClient:
    """An environment with room for ``size`` episodes at once (Fleet's instance cap, ``toolenvs.fleet.InstanceSlots``)
    in front of the live hotel server: an episode waits for room inside ``queued()``, as the fleet client does."""

    def __init__(self, client: EnvClient, size: int):
        from toolenvs.fleet import InstanceSlots

        self.client, self.slots, self.open, self.peak = client, InstanceSlots(size), 0, 0

    @asynccontextmanager
    async def episode(self, task, queued=None):
        async with queued():
            await self.slots.acquire()
        self.open += 1
        self.peak = max(self.peak, self.open)
        try:
            async with self.client.episode(task) as session:
                yield session
        finally:
            self.open -= 1
            await self.slots.release(None)


def test_episodes_waiting_for_room_do_not_hold_up_the_batch(hotel_server, chat, tasks):
    """Four episodes, room for one: the batch never waits for an episode that cannot start (a deadlock), and
    each episode's turns still come from the script."""
    picked = [tasks[0], tasks[-1]]
    gen = ScriptedGenerator(chat, {_key(chat, t): [text for text, _ in reference_conversation(t).turns] for t in picked})
    capped = CappedClient(EnvClient(hotel_server.base_url), size=1)

    async def run():
        return await asyncio.wait_for(run_episodes(picked, 2, {"hotel": capped}, gen, chat, LIMITS), timeout=60)

    trajs = asyncio.run(run())
    assert capped.peak == 1 and set(gen.batches) == {1}  # one episode at a time, each turn a batch of one
    assert [(t.reward, t.stop_reason) for t in trajs] == [(1.0, "done")] * 4
    assert sum(gen.batches) == sum(t.num_turns for t in trajs)


class SlowClient:
    """The live hotel server, with the tool calls of some tasks' episodes answered ``delay_s`` late."""

    def __init__(self, client: EnvClient, slow: set[str], delay_s: float):
        self.client, self.slow, self.delay_s = client, slow, delay_s

    @asynccontextmanager
    async def episode(self, task, queued=None):
        async with self.client.episode(task) as session:
            yield _SlowSession(session, self.delay_s if task.task_key in self.slow else 0.0)


class _SlowSession:
    def __init__(self, session, delay_s: float):
        self.session, self.delay_s, self.tools = session, delay_s, session.tools

    async def call_tool(self, name, arguments):
        await asyncio.sleep(self.delay_s)
        return await self.session.call_tool(name, arguments)

    async def score(self, **kwargs):
        return await self.session.score(**kwargs)


class StreamingScript(ScriptedGenerator):
    """The script's answers one request at a time (``agenerate``), each request and its seed recorded in the order sent."""

    streams = True

    def __init__(self, chat, scripts):
        super().__init__(chat, scripts)
        self.requests: list[tuple[tuple[int, ...], int, int | None]] = []  # (the episode's key, its turn, the request's seed)

    async def agenerate(self, prompt, sampling):
        (completion,) = self.generate([prompt], sampling)
        key = next(k for k in self.scripts if tuple(prompt[: len(k)]) == k)
        self.requests.append((key, sum(1 for r in self.requests if r[0] == key), sampling.seed))
        await asyncio.sleep(0)
        return completion

    def rollout_seed(self) -> int:
        return 7


def test_streamed_turns_send_each_episode_s_next_turn_without_waiting_for_the_others(hotel_server, chat, tasks):
    """An episode whose tool calls are slow holds up only itself: the fast one sends all its turns first (a
    batch per turn would make it wait for the slow one at every turn); each request carries its own seed."""
    fast, slow = next(t for t in tasks if len(t.solution) == 2), next(t for t in reversed(tasks) if len(t.solution) == 2)
    scripts = {_key(chat, t): [text for text, _ in reference_conversation(t).turns] for t in (fast, slow)}
    client = SlowClient(EnvClient(hotel_server.base_url), {slow.task_key}, delay_s=0.3)
    streamed = StreamingScript(chat, dict(scripts))
    trajs = asyncio.run(asyncio.wait_for(run_episodes([fast, slow], 1, {"hotel": client}, streamed, chat, LIMITS), timeout=60))
    assert [(t.reward, t.stop_reason) for t in trajs] == [(1.0, "done")] * 2  # every episode ended
    sent = [(key == _key(chat, fast), turn) for key, turn, _ in streamed.requests]
    assert sent.index((True, 2)) < sent.index((False, 1))  # the fast episode's last turn went before the slow one's second
    assert streamed.batches == [1] * 6
    assert {(turn, seed) for key, turn, seed in streamed.requests if key == _key(chat, slow)} == {(t, request_seed(7, 1, t)) for t in range(3)}
    batched = ScriptedGenerator(chat, dict(scripts))
    asyncio.run(asyncio.wait_for(run_episodes([fast, slow], 1, {"hotel": client}, batched, chat, LIMITS), timeout=60))
    assert batched.batches == [2, 2, 2]  # the barrier: every turn waited for the slow episode


def test_streamed_turns_hold_the_cap_and_never_wait_on_a_queued_episode(hotel_server, chat, tasks):
    """Room for one episode at a time (Fleet's instance cap): streamed, every episode still ends, one at a time."""
    picked = [tasks[0], tasks[-1]]
    gen = StreamingScript(chat, {_key(chat, t): [text for text, _ in reference_conversation(t).turns] for t in picked})
    capped = CappedClient(EnvClient(hotel_server.base_url), size=1)
    trajs = asyncio.run(asyncio.wait_for(run_episodes(picked, 2, {"hotel": capped}, gen, chat, LIMITS), timeout=60))
    assert capped.peak == 1 and [(t.reward, t.stop_reason) for t in trajs] == [(1.0, "done")] * 4
    assert len(gen.requests) == sum(t.num_turns for t in trajs)


def test_a_streamed_transcript_does_not_depend_on_timing(hotel_server, chat, tasks, tiny_base):
    """The real HF generator one request at a time: the same rollout seed gives the same transcripts whether
    one task's tool calls are slow or not (each request samples from its own seed, whatever ran before it),
    and a seed is what decides them (another gives others)."""
    import torch

    from grpo.policy import load_policy
    from grpo.rollout.hf import HFGenerator

    model = load_policy(tiny_base, trainable=False)
    gen = HFGenerator(model, stop_id=chat.end_id, pad_id=chat.pad_id, streams=True)
    picked = [tasks[0], tasks[-1]]

    def transcripts(slow: set[str], seed: int) -> list[list[int]]:
        torch.manual_seed(seed)  # the rollout's seed comes from the trial's RNG
        client = SlowClient(EnvClient(hotel_server.base_url), slow, delay_s=0.2)
        trajs = asyncio.run(asyncio.wait_for(run_episodes(picked, 2, {"hotel": client}, gen, chat, LIMITS), timeout=120))
        return [t.token_ids for t in trajs]

    first = transcripts(set(), seed=0)
    assert transcripts({picked[0].task_key}, seed=0) == first == transcripts({picked[1].task_key}, seed=0)
    assert transcripts(set(), seed=1) != first
