"""What the agent did in the eval dumps (``trajectories/{trial}/global_step_{N}/{env}.jsonl``): turns, tool
calls, and failures grouped by kind, each group with a count and one example.

The groups are pattern rules over one episode's response text (tool calls ``<tool_call>…</tool_call>``,
tool results as ``<|im_start|>tool`` turns or ``<tool_response>`` blocks), its score and stop reason; an
episode can fall in several groups. Leaves out training rollouts (not dumped) and any model-specific
chat format beyond these two tool-result forms.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from sweep.report.store import SweepStore

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_RESULT = re.compile(r"<\|im_start\|>tool\n(.*?)(?:<\|im_end\|>|$)|<tool_response>(.*?)</tool_response>", re.S)
_MALFORMED = re.compile(r"^error: (no action found|missing </tool_call>|tool call is not valid JSON|tool call needs|\"arguments\" must be)")
_ARGUMENTS = re.compile(r"bad arguments|invalid |validation error|missing required|unexpected keyword|must be|is in the past", re.I)
_NOT_FOUND = re.compile(r"not found|no such|unknown tool|no hotels in|does not exist", re.I)
_STEP = re.compile(r"^global_step_(\d+)$")


@dataclass(frozen=True)
class Episode:
    trial: str
    step: int
    env: str
    task_key: str
    score: float
    stop_reason: str
    turns: int
    tool_calls: int
    response: str
    env_error: str = ""

    @property
    def calls(self) -> list[str]:
        """The model's own tool calls (tool results are cut first: their hints quote the call format)."""
        return [c.strip() for c in _CALL.findall(_RESULT.sub("", self.response))]

    @property
    def results(self) -> list[str]:
        return [(a or b).strip() for a, b in _RESULT.findall(self.response)]


def _first(items: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((s for s in items if pattern.search(s)), None)


def _tail(text: str, chars: int = 160) -> str:
    """The end of an episode, where it stopped (an example for stop-reason groups)."""
    return ("…" + text[-chars:]) if len(text) > chars else text


def malformed_call(e: Episode) -> str | None:
    return _first(e.results, _MALFORMED)


def argument_error(e: Episode) -> str | None:
    return next((s for s in e.results if not _MALFORMED.search(s) and _ARGUMENTS.search(s)), None)


def permission_denied(e: Episode) -> str | None:
    return _first(e.results, re.compile(r"permission denied", re.I))


def not_found(e: Episode) -> str | None:
    return _first(e.results, _NOT_FOUND)


def false_completion(e: Episode) -> str | None:
    return _tail(e.response) if e.stop_reason == "done" and e.score < 0.5 else None


def context_overflow(e: Episode) -> str | None:
    return _tail(e.response) if e.stop_reason in ("max_input_length", "overlong") else None


def turn_too_long(e: Episode) -> str | None:
    return _tail(e.response) if e.stop_reason == "max_generate_length" else None


def repeated_call(e: Episode) -> str | None:
    calls = e.calls
    return next((c for i, c in enumerate(calls) if c in calls[:i]), None)


def env_error(e: Episode) -> str | None:
    return e.env_error or None


FAILURES: dict[str, Callable[[Episode], str | None]] = {
    "malformed tool call": malformed_call,
    "tool argument error": argument_error,
    "permission denied": permission_denied,
    "not found": not_found,
    "false completion (<done> with score 0)": false_completion,
    "context overflow": context_overflow,
    "turn cut at max_generate_length": turn_too_long,
    "repeated identical call": repeated_call,
    "environment error": env_error,
}


def parse_episode(record: dict, trial: str, step: int) -> Episode:
    extras = record.get("env_extras") or {}
    return Episode(
        trial=trial, step=step, env=str(extras.get("env_key", "?")), task_key=str(extras.get("task_key", "?")),
        score=float(record.get("score") or 0.0), stop_reason=str(record.get("stop_reason", "")),
        turns=int(extras.get("turns", 0)), tool_calls=int(extras.get("tool_calls", 0)),
        response=str(record.get("output_response", "")), env_error=str(extras.get("env_error") or ""),
    )


def read_episodes(store: SweepStore, trial_ids: list[str]) -> Iterator[Episode]:
    """Every dumped eval episode of the given trials."""
    for trial in trial_ids:
        base = f"trajectories/{trial}"
        for folder in store.subdirs(base):
            if not (m := _STEP.match(folder)):
                continue
            for name in store.files(f"{base}/{folder}"):
                for line in (store.read_text(f"{base}/{folder}/{name}") or "").splitlines():
                    if line.strip():
                        yield parse_episode(json.loads(line), trial, int(m.group(1)))


@dataclass
class FailureGroup:
    name: str
    episodes: int = 0
    failed: int = 0  # of those, episodes that scored < 0.5
    example: str = ""
    where: str = ""


@dataclass
class EnvActivity:
    env: str
    episodes: int
    pass_rate: float
    avg_turns: float
    avg_tool_calls: float


@dataclass
class TrajectoryAnalysis:
    episodes: int = 0
    envs: list[EnvActivity] = field(default_factory=list)
    failures: list[FailureGroup] = field(default_factory=list)


def analyze(episodes: Iterable[Episode], example_chars: int = 240) -> TrajectoryAnalysis:
    """Per-env activity and the failure groups, most frequent first, each with its first example.

    One pass with running sums, so a sweep's dumps need not fit in memory at once.
    """
    groups = {name: FailureGroup(name) for name in FAILURES}
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # episodes, passes, turns, tool calls
    for e in episodes:
        total = sums[e.env]
        total[0] += 1
        total[1] += e.score >= 0.5
        total[2] += e.turns
        total[3] += e.tool_calls
        for name, rule in FAILURES.items():
            if (hit := rule(e)) is None:
                continue
            g = groups[name]
            g.episodes += 1
            g.failed += e.score < 0.5
            if not g.example:
                g.example, g.where = hit[:example_chars], f"trial {e.trial}, step {e.step}, {e.task_key}"
    envs = [EnvActivity(env, int(n), passes / n, turns / n, calls / n) for env, (n, passes, turns, calls) in sorted(sums.items())]
    found = sorted((g for g in groups.values() if g.episodes), key=lambda g: -g.episodes)
    return TrajectoryAnalysis(sum(e.episodes for e in envs), envs, found)
