"""What the agent did in the eval dumps (``trajectories/{trial}/global_step_{N}/{env}.jsonl``): turns, tool
calls, and failures grouped by kind, each group with a count and one example.

Failures are read, not guessed: each dumped episode carries its failed turns with the kind named where
the failure happened (``env_extras.failures``: ``toolenvs.outcomes.Failure``), and its stop reason, score and
env error say the rest (a ``<done>`` that failed, a context that overflowed, a turn cut at its length,
an environment that failed). Dumps written before failure kinds existed still load: their episodes count
everywhere but in the per-turn groups, and the analysis says how many there were. An episode can fall in
several groups. Leaves out training rollouts (not dumped).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from sweep.report.store import SweepStore
from toolenvs.outcomes import Failure, Stop, passed

_STEP = re.compile(r"^global_step_(\d+)$")
TURN_GROUPS = {  # a failed turn's kind -> the group's name
    Failure.MALFORMED_CALL: "malformed tool call",
    Failure.INVALID_ARGUMENT: "tool argument error",
    Failure.PERMISSION_DENIED: "permission denied",
    Failure.NOT_FOUND: "not found",
    Failure.CONFLICT: "refused by the record's state",
    Failure.UNKNOWN_TOOL: "unknown tool",
    Failure.TOOL_ERROR: "tool error (no kind given)",
    Failure.REPEATED_CALL: "repeated identical call",
}


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
    failures: tuple[tuple[str, str], ...] | None = None  # (kind, text) per failed turn; None: a dump without kinds
    overlong: bool = False


def _tail(text: str, chars: int = 160) -> str:
    """The end of an episode, where it stopped (an example for stop-reason groups)."""
    return ("…" + text[-chars:]) if len(text) > chars else text


def false_completion(e: Episode) -> str | None:
    return _tail(e.response) if e.stop_reason == Stop.DONE and not passed(e.score) else None


def context_overflow(e: Episode) -> str | None:
    return _tail(e.response) if e.stop_reason == Stop.MAX_INPUT_LENGTH or e.overlong else None


def turn_too_long(e: Episode) -> str | None:
    return _tail(e.response) if e.stop_reason == Stop.MAX_GENERATE_LENGTH else None


def env_error(e: Episode) -> str | None:
    return e.env_error or (e.stop_reason if e.stop_reason in Stop.ERRORS else None)


EPISODE_GROUPS: dict[str, Callable[[Episode], str | None]] = {
    "false completion (<done> with score 0)": false_completion,
    "context overflow": context_overflow,
    "turn cut at max_generate_length": turn_too_long,
    "environment error": env_error,
}


def parse_episode(record: dict, trial: str, step: int) -> Episode:
    extras = record.get("env_extras") or {}
    failures = extras.get("failures")
    return Episode(
        trial=trial, step=step, env=str(extras.get("env_key", "?")), task_key=str(extras.get("task_key", "?")),
        score=float(record.get("score") or 0.0), stop_reason=str(record.get("stop_reason", "")),
        turns=int(extras.get("turns", 0)), tool_calls=int(extras.get("tool_calls", 0)),
        response=str(record.get("output_response", "")), env_error=str(extras.get("env_error") or ""),
        failures=None if failures is None else tuple((str(f.get("kind", Failure.TOOL_ERROR)), str(f.get("text", ""))) for f in failures),
        overlong=bool(extras.get("overlong", False)),
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
    failed: int = 0  # of those, episodes that did not pass
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
    without_kinds: int = 0  # episodes from dumps written before failure kinds: in no per-turn group


def _hits(e: Episode) -> dict[str, str]:
    """Group name -> this episode's example for it (its first failed turn of a kind; the stop for the others)."""
    hits: dict[str, str] = {}
    for kind, text in e.failures or ():
        hits.setdefault(TURN_GROUPS.get(kind, TURN_GROUPS[Failure.TOOL_ERROR]), text)
    for name, rule in EPISODE_GROUPS.items():
        if (hit := rule(e)) is not None:
            hits[name] = hit
    return hits


def analyze(episodes: Iterable[Episode], example_chars: int = 240) -> TrajectoryAnalysis:
    """Per-env activity and the failure groups, most frequent first, each with its first example.

    One pass with running sums, so a sweep's dumps need not fit in memory at once.
    """
    groups = {name: FailureGroup(name) for name in [*TURN_GROUPS.values(), *EPISODE_GROUPS]}
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # episodes, passes, turns, tool calls
    without_kinds = 0
    for e in episodes:
        total = sums[e.env]
        total[0] += 1
        total[1] += passed(e.score)
        total[2] += e.turns
        total[3] += e.tool_calls
        without_kinds += e.failures is None
        for name, hit in _hits(e).items():
            g = groups[name]
            g.episodes += 1
            g.failed += not passed(e.score)
            if not g.example:
                g.example, g.where = hit[:example_chars], f"trial {e.trial}, step {e.step}, {e.task_key}"
    envs = [EnvActivity(env, int(n), passes / n, turns / n, calls / n) for env, (n, passes, turns, calls) in sorted(sums.items())]
    found = sorted((g for g in groups.values() if g.episodes), key=lambda g: -g.episodes)
    return TrajectoryAnalysis(sum(e.episodes for e in envs), envs, found, without_kinds)
