"""Multi-turn episodes, token-in/token-out: each episode is a coroutine; their model turns are batched
(``GenerationBatcher``: one batch per turn of every live episode, sorted by episode, so sampling does not
depend on timing, except under an instance cap: an episode waiting for one of Fleet's slots leaves the batches, so
which episodes share one then depends on when slots free up) or streamed (``StreamedTurns``, for a generator that ``streams``: each episode's next turn
is sent as soon as its tool result is back, no barrier per turn, each request with a seed of its own made
from the rollout's seed, the episode's number and the turn, so a transcript does not depend on timing either).

An episode opens an MCP session for its task, renders the prompt once, then alternates: the model's
sampled ids (loss mask 1) and the tool turn's ids (loss mask 0). It ends on ``<done>``, after
``max_turns`` model turns, when a turn hits ``max_generate_length`` without finishing, or when the
context has grown past ``max_input_length``. An episode longer than ``max_sequence_length`` is truncated
and trains on none of its tokens (DAPO overlong filter). A malformed answer gets an error message as its
tool result. A failure of the environment marks the episode ``env_error`` (left out of the advantage).
"""

from __future__ import annotations

import asyncio
import json
import math
import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

from grpo.chat import ChatFormat, opening_messages
from grpo.config import RolloutConfig
from grpo.rollout import Completion, Generator, SamplingParams, StreamingGenerator
from toolenvs.errors import EnvError
from toolenvs.outcomes import Failure, Stop
from toolenvs.protocol import Done, Malformed, ToolCall, parse_action, tool_signature
from toolenvs.seam import EnvBackend, EpisodeClient
from toolenvs.task import Task

FAILURE_TEXT = 200  # characters of a failed turn's text kept in its trajectory


@dataclass(frozen=True)
class EpisodeLimits:
    max_turns: int
    max_generate_length: int
    max_sequence_length: int
    temperature: float
    max_input_length: int | None = None

    @classmethod
    def of(cls, rollout: RolloutConfig) -> EpisodeLimits:
        """The limits a trial's ``rollout`` section sets (the same names)."""
        return cls(rollout.max_turns, rollout.max_generate_length, rollout.max_sequence_length, rollout.temperature, rollout.max_input_length)


@dataclass(frozen=True)
class TurnFailure:
    """A turn that failed, named where it failed (``toolenvs.outcomes.Failure``), with what the agent was shown."""

    kind: str
    turn: int
    text: str


@dataclass
class Trajectory:
    """One finished episode."""

    task_key: str
    env_key: str
    group_id: int
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    sampler_logprobs: list[float] = field(default_factory=list)  # per token: the sampler's log-prob of its own tokens, NaN elsewhere
    prompt_length: int = 0
    reward: float = 0.0
    num_turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    stop_reason: str = Stop.MAX_TURNS
    env_error: bool = False
    overlong: bool = False
    error: str = ""
    failures: list[TurnFailure] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # each tool call as canonical JSON, in order

    def append(self, ids: Sequence[int], own: bool, logprobs: Sequence[float] | None = None) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([1 if own else 0] * len(ids))
        self.sampler_logprobs.extend(logprobs if logprobs is not None else [math.nan] * len(ids))

    def filter_overlong(self, max_sequence_length: int) -> None:
        """DAPO overlong filter: a sequence past the limit is truncated and trains on none of its tokens
        (its reward still counts in its group); ``overlong`` records it."""
        if len(self.token_ids) > max_sequence_length:
            self.token_ids = self.token_ids[:max_sequence_length]
            self.sampler_logprobs = self.sampler_logprobs[:max_sequence_length]
            self.loss_mask = [0] * max_sequence_length
            self.overlong = True


class GenerationBatcher:
    """Collects one generation request per live episode, then runs them as one batch."""

    def __init__(self, generator: Generator, sampling: SamplingParams, live: int):
        self.generator = generator
        self.sampling = sampling
        self.live = live
        self.pending: list[tuple[int, list[int], asyncio.Future[Completion]]] = []

    async def generate(self, prompt: list[int], order: int) -> Completion:
        """The next turn of the episode numbered ``order``; batches are sorted by it, so sampling does not
        depend on which tool call happened to return first (nor, but under an instance cap, on which are in it)."""
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self.pending.append((order, prompt, future))
        self._maybe_flush()
        return await future

    def finished(self) -> None:
        self.live -= 1
        self._maybe_flush()

    @asynccontextmanager
    async def queued(self) -> AsyncIterator[None]:
        """While an episode waits for capacity to open its environment (Fleet's instance cap), the batch
        does not wait for it: the episodes holding the capacity must be able to finish and free it."""
        self.live -= 1
        self._maybe_flush()
        try:
            yield
        finally:
            self.live += 1

    def _maybe_flush(self) -> None:
        if not self.pending or len(self.pending) < self.live:
            return
        batch = sorted((item for item in self.pending if not item[2].done()), key=lambda item: item[0])  # cancelled ones dropped
        self.pending = []
        if not batch:
            return
        try:
            completions = self.generator.generate([prompt for _, prompt, _ in batch], self.sampling)
        except Exception as exc:  # every waiting episode fails with it, none waits forever
            for _, _, future in batch:
                future.set_exception(exc)
            return
        for (_, _, future), completion in zip(batch, completions):
            future.set_result(completion)


def request_seed(seed: int, order: int, turn: int) -> int:
    """One request's seed: a stable hash of the rollout's seed, the episode's number and its turn (the same in
    every process and run, whatever else was in flight)."""
    return zlib.crc32(f"{seed}:{order}:{turn}".encode()) & 0x7FFFFFFF


class StreamedTurns:
    """Each episode's turn goes to the generator alone, as soon as the episode asks (``StreamingGenerator.agenerate``),
    with its own seed (``request_seed``). The same interface as ``GenerationBatcher``; with no batch to fill,
    an episode that ends or waits for room holds up nothing."""

    def __init__(self, generator: StreamingGenerator, sampling: SamplingParams, seed: int):
        self.generator = generator
        self.sampling = sampling
        self.seed = seed
        self.turns: dict[int, int] = {}

    async def generate(self, prompt: list[int], order: int) -> Completion:
        turn = self.turns.get(order, 0)
        self.turns[order] = turn + 1
        return await self.generator.agenerate(prompt, replace(self.sampling, seed=request_seed(self.seed, order, turn)))

    def finished(self) -> None:
        pass

    @asynccontextmanager
    async def queued(self) -> AsyncIterator[None]:
        yield


def turn_source(generator: Generator, sampling: SamplingParams, live: int) -> GenerationBatcher | StreamedTurns:
    """Streamed turns for a generator that streams, else one batch per turn."""
    if generator.streams:
        return StreamedTurns(generator, sampling, generator.rollout_seed())  # type: ignore[arg-type]  # streams: a StreamingGenerator
    return GenerationBatcher(generator, sampling, live)


async def _run_episode(
    task: Task, group_id: int, order: int, client: EpisodeClient, batcher: GenerationBatcher | StreamedTurns, chat: ChatFormat,
    limits: EpisodeLimits,
) -> Trajectory:
    traj = Trajectory(task.task_key, task.env_key, group_id)
    released = False

    def release() -> None:  # exactly once per episode, or the other episodes' batch never fills
        nonlocal released
        if not released:
            released = True
            batcher.finished()

    try:
        async with client.episode(task, batcher.queued) as session:
            signatures = [tool_signature(t.name, t.input_schema) for t in session.tools]
            conversation = opening_messages(task.prompt, signatures, task.env_variables)
            traj.append(chat.prompt_ids(conversation), own=False)
            traj.prompt_length = len(traj.token_ids)
            await _turns(traj, order, session, batcher, chat, limits, conversation)
            release()
            traj.reward = await session.score(conversation=conversation)  # a judge-style verifier reads it (Fleet)
            traj.filter_overlong(limits.max_sequence_length)
    except EnvError as exc:
        traj.env_error, traj.stop_reason, traj.error = True, getattr(exc, "outcome", Stop.ENV_ERROR), str(exc)  # env_error or verifier_error
    finally:
        release()
    return traj


async def _turns(
    traj: Trajectory, order: int, session, batcher: GenerationBatcher | StreamedTurns, chat: ChatFormat, limits: EpisodeLimits,
    conversation: list[dict[str, str]],
) -> None:
    """The agent's turns, appended to ``traj`` as tokens and to ``conversation`` as messages."""
    for turn in range(limits.max_turns):
        if limits.max_input_length is not None and len(traj.token_ids) > limits.max_input_length:
            traj.stop_reason = Stop.MAX_INPUT_LENGTH
            return
        completion = await batcher.generate(traj.token_ids, order)
        traj.append(completion.token_ids, own=True, logprobs=completion.logprobs)
        traj.num_turns += 1
        said = chat.decode(completion.token_ids if completion.finish_reason == "length" else completion.token_ids[:-1])
        conversation.append({"role": "assistant", "content": said})
        if completion.finish_reason == "length":
            traj.stop_reason = Stop.MAX_GENERATE_LENGTH
            return
        action = parse_action(said)
        if isinstance(action, Done):
            traj.stop_reason = Stop.DONE
            return
        text = await _act(traj, session, action, turn)
        conversation.append({"role": "tool", "content": text})
        if turn + 1 < limits.max_turns:  # after the last turn the call still acts, but no model reads its result
            traj.append(chat.tool_turn_ids(text), own=False)
    traj.stop_reason = Stop.MAX_TURNS


async def _act(traj: Trajectory, session, action: ToolCall | Malformed, turn: int) -> str:
    """Run a tool call (or explain a malformed answer); returns the text the agent is shown. A failed turn
    is recorded with its kind, and so is a call this episode already made."""
    if isinstance(action, ToolCall):
        traj.tool_calls += 1
        call = json.dumps({"name": action.name, "arguments": action.arguments}, sort_keys=True)
        if call in traj.calls:
            shown = json.dumps({"name": action.name, "arguments": action.arguments})
            traj.failures.append(TurnFailure(Failure.REPEATED_CALL, turn, shown[:FAILURE_TEXT]))
        traj.calls.append(call)
        result = await session.call_tool(action.name, action.arguments)
        text, failed, kind = result.text, result.is_error, getattr(result, "failure", None) or Failure.TOOL_ERROR
    else:
        text, failed, kind = action.error, True, Failure.MALFORMED_CALL
    traj.tool_errors += int(failed)
    if failed:
        traj.failures.append(TurnFailure(kind, turn, text[:FAILURE_TEXT]))
    return text


async def run_episodes(
    tasks: Sequence[Task], n_samples: int, clients: Mapping[str, EpisodeClient], generator: Generator, chat: ChatFormat, limits: EpisodeLimits,
    group_ids: Sequence[int] | None = None, on_done: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """``n_samples`` episodes of each task, each on its env_key's client, model turns batched across all of
    them (or streamed, ``turn_source``). Task i's episodes form group ``group_ids[i]`` (default i): a group's
    one identity, which the advantages and the metrics both group by. ``on_done`` hears each episode as it
    ends (progress); it changes no sample: the order of the list and every request's seed stay as they are."""
    groups = list(group_ids) if group_ids is not None else list(range(len(tasks)))
    if len(set(groups)) != len(tasks):
        raise ValueError(f"{len(tasks)} tasks need as many distinct group ids, got {groups}")
    sampling = SamplingParams(limits.max_generate_length, limits.temperature)
    batcher = turn_source(generator, sampling, live=len(tasks) * n_samples)
    jobs = [(task, group) for group, task in zip(groups, tasks) for _ in range(n_samples)]

    async def episode(i: int, task: Task, group: int) -> Trajectory:
        traj = await _run_episode(task, group, i, clients[task.env_key], batcher, chat, limits)
        if on_done is not None:
            on_done(traj)
        return traj

    return list(await asyncio.gather(*[episode(i, task, group) for i, (task, group) in enumerate(jobs)]))


def collect(tasks: Sequence[Task], n_samples: int, backend: EnvBackend, generator: Generator, chat: ChatFormat, limits: EpisodeLimits,
            group_ids: Sequence[int] | None = None, on_done: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
    """``run_episodes`` in an event loop of its own, on the backend's clients for that loop."""

    async def run() -> list[Trajectory]:
        return await run_episodes(tasks, n_samples, backend.clients(), generator, chat, limits, group_ids, on_done)

    return asyncio.run(run())
