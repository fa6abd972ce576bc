"""Curriculum task sampling: draw tasks by their learning potential, from a running estimate of each
task's pass rate.

Each task keeps Beta-like counts (passes ``a``, fails ``b``; its estimate ``p = a / (a + b)``), starting at
``prior_counts`` of each (one by default), plus the base policy's probe when ``sweep forecast --save-probe``
wrote one. Whenever a task
is rolled out its counts are multiplied by ``decay`` and its new results added, so the estimate follows
the policy. A task's learning potential is ``1 - p^n - (1 - p)^n`` (the chance that a group of n has a
pass and a fail: the group has signal) or ``p (1 - p)``; draws follow the potentials mixed with a uniform
``floor`` share, so a task the policy always or never solves fades but is still drawn now and then, and
comes back when its estimate moves. Without replacement inside a batch, with replacement across steps.

``level`` says what the potential weights. ``task``: each task alone (an env's share is the sum of its
tasks'). ``env``: each environment also keeps counts of its own (``prior_counts`` passes and fails plus its
tasks' probe counts, decayed each time any of its tasks is rolled out); envs are drawn by their potential mixed with a
``floor`` share spread evenly over envs, and a task evenly within its env. ``both``: envs as in ``env``,
and within an env its tasks by their task-level probabilities, renormalised within the env. An env's
potential (``env_potential``) is the potential of its own pass rate (``pooled``), or the mean of its tasks'
potentials (``tasks``: the share of its groups expected to carry signal; for an env whose tasks are solved
always or never, a pooled rate near 0.5 overstates it: both potentials are concave in p, so the potential of
a mean rate is at least the mean of the potentials). Every level
reports ``curriculum/{env_key}/weight`` (the env's share of the next draw); env and both also
``curriculum/{env_key}/pass_rate`` (the env's estimate).

The math is pure functions (tested by hand); ``CurriculumSampler`` holds the counts and a seeded RNG and
is checkpointed like the plain sampler (``state``/``restore``, JSON; the env counts too at env and both
level, and a checkpoint of the other kind is refused by name). The probe file's format is defined here,
the lower floor, and written by ``sweep.forecast``. Left out: an env estimate that weighs its tasks
equally (an env's counts pool every rollout of its tasks, so the tasks drawn more often weigh more in it),
and any use of eval tasks.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from configkit.base import ConfigError
from grpo.config import CurriculumLevel, EnvPotential, TrainerConfig
from toolenvs.outcomes import passed
from toolenvs.task import Task

PROBE_FORMAT = "grpo-sweep/probe"
PROBE_VERSION = 1


def signal_probability(p: float, n: int) -> float:
    """P(a group of n binary rewards has both a pass and a fail) at pass rate p: ``1 - p^n - (1-p)^n``."""
    return 1.0 - p**n - (1.0 - p) ** n


def learnability(p: float, n: int) -> float:
    """``p (1 - p)``: the variance of one binary reward (n is not used)."""
    return p * (1.0 - p)


LEARNING_POTENTIALS: dict[str, Callable[[float, int], float]] = {"signal": signal_probability, "learnability": learnability}


def learning_potential(name: str) -> Callable[[float, int], float]:
    """``(p, n) -> potential`` by name; an unknown name lists the valid ones."""
    if name not in LEARNING_POTENTIALS:
        raise ValueError(f"unknown learning potential {name!r} (valid: {', '.join(LEARNING_POTENTIALS)})")
    return LEARNING_POTENTIALS[name]


def draw_probabilities(potentials: Sequence[float], floor: float) -> list[float]:
    """Each task's chance per draw: ``(1 - floor) * w_i / sum(w) + floor / N``; uniform when every
    potential is 0. Sums to 1; every task gets at least ``floor / N``."""
    count, total = len(potentials), sum(potentials)
    if total <= 0:
        return [1.0 / count] * count
    return [(1.0 - floor) * w / total + floor / count for w in potentials]


def updated_counts(passes: float, fails: float, new_passes: int, new_fails: int, decay: float) -> tuple[float, float]:
    """The counts after one observation: the old ones times ``decay`` plus the new results."""
    return passes * decay + new_passes, fails * decay + new_fails


def weighted_sample(rng: random.Random, probabilities: Sequence[float], size: int) -> list[int]:
    """``size`` indices drawn by ``probabilities``, without replacement within each run through the tasks
    (when ``size`` exceeds them, the next run starts over). Efraimidis–Spirakis keys ``log(u) / w_i``, largest
    first: one uniform draw per task and run, so the result depends only on the RNG's state. A task of
    probability 0 comes last."""
    chosen: list[int] = []
    while len(chosen) < size:
        keys = [math.log(1.0 - rng.random()) / w if w > 0 else -math.inf for w in probabilities]
        order = sorted(range(len(keys)), key=lambda i: keys[i], reverse=True)
        chosen += order[: size - len(chosen)]
    return chosen


def task_results(episodes: Iterable[Any]) -> dict[str, tuple[int, int]]:
    """(passes, fails) of each task over episodes with ``task_key``, ``reward`` and ``env_error``; episodes
    that failed in the environment count neither way."""
    results: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in episodes:
        if not e.env_error:
            results[e.task_key][0 if passed(e.reward) else 1] += 1
    return {key: (p, f) for key, (p, f) in results.items()}


def env_results(results: Mapping[str, tuple[int, int]], env_of: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """(passes, fails) of each env: its tasks' ``task_results`` summed (``env_of``: task_key -> env_key); a task
    not in ``env_of`` counts for none."""
    summed: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key, (passes, fails) in results.items():
        if key in env_of:
            summed[env_of[key]][0] += passes
            summed[env_of[key]][1] += fails
    return {env: (p, f) for env, (p, f) in summed.items()}


def starting_env_counts(env_of: Mapping[str, str], prior: Mapping[str, tuple[int, int]], pseudo: float) -> dict[str, list[float]]:
    """Each env's first counts ``[passes, fails]``: ``pseudo`` of each plus the probe's counts of its tasks, summed
    (``env_of``: task_key -> env_key; envs in order of their first task)."""
    counts = {env: [pseudo, pseudo] for env in env_of.values()}
    for key, env in env_of.items():
        passes, fails = prior.get(key, (0, 0))
        counts[env][0] += passes
        counts[env][1] += fails
    return counts


def spread_over_envs(env_keys: Sequence[str], env_shares: Mapping[str, float], weights: Sequence[float]) -> list[float]:
    """Each task's chance per draw when its env gets ``env_shares[env]`` of the draws, split within the env by
    ``weights``: ``share(env_i) * w_i / (sum of w over env_i's tasks)``; evenly within an env whose weights sum
    to 0. ``env_keys[i]`` is task i's env. Sums to the shares' sum over the envs that have tasks."""
    within: dict[str, float] = defaultdict(float)
    sizes: dict[str, int] = defaultdict(int)
    for env, w in zip(env_keys, weights):
        within[env] += w
        sizes[env] += 1
    return [env_shares[env] * (w / within[env] if within[env] > 0 else 1.0 / sizes[env]) for env, w in zip(env_keys, weights)]


def mean_by_env(env_keys: Sequence[str], values: Sequence[float]) -> dict[str, float]:
    """The mean of ``values`` over each env's tasks (``env_keys[i]`` is task i's env), envs in order of first task."""
    summed: dict[str, list[float]] = {}
    for env, value in zip(env_keys, values):
        summed.setdefault(env, []).append(value)
    return {env: sum(v) / len(v) for env, v in summed.items()}


CURRICULUM_LEVELS = get_args(CurriculumLevel)  # data.curriculum.level; env and both keep env counts
ENV_POTENTIALS = get_args(EnvPotential)  # data.curriculum.env_potential


@dataclass(frozen=True)
class CurriculumSettings:
    potential: str  # a name in LEARNING_POTENTIALS
    floor: float
    decay: float
    group_size: int  # rollout.n_samples_per_prompt: the n of the signal probability
    level: str = "task"  # a name in CURRICULUM_LEVELS
    env_potential: str = "pooled"  # a name in ENV_POTENTIALS
    prior_counts: float = 1.0  # pseudo-passes and pseudo-fails each task (and env) starts with, before the probe's

    @classmethod
    def of(cls, cfg: TrainerConfig) -> CurriculumSettings:
        c = cfg.data.curriculum
        return cls(c.weight, c.floor, c.decay, cfg.rollout.n_samples_per_prompt, c.level, c.env_potential, c.prior_counts)

    def __post_init__(self) -> None:
        if self.level not in CURRICULUM_LEVELS:
            raise ValueError(f"unknown curriculum level {self.level!r} (valid: {', '.join(CURRICULUM_LEVELS)})")
        if self.env_potential not in ENV_POTENTIALS:
            raise ValueError(f"unknown env potential {self.env_potential!r} (valid: {', '.join(ENV_POTENTIALS)})")

    @property
    def per_env(self) -> bool:
        """Whether envs keep counts of their own (level env or both)."""
        return self.level != "task"


class CurriculumSampler:
    """Draws tasks by learning potential; ``observe`` updates the estimates from a step's episodes. The
    same interface as ``grpo.data.TaskSampler`` (``next_batch``, ``observe``, ``metrics``, ``state``,
    ``restore``), so the loop does not know which it has. At level env and both, ``env_counts`` holds each
    env's counts (None at level task)."""

    def __init__(self, tasks: list[Task], seed: int, settings: CurriculumSettings, prior: Mapping[str, tuple[int, int]] | None = None):
        self.tasks = tasks
        self.settings = settings
        self.rng = random.Random(seed)
        prior = prior or {}
        pseudo = settings.prior_counts
        self.counts = {t.task_key: [pseudo + passes, pseudo + fails] for t in tasks for passes, fails in [prior.get(t.task_key, (0, 0))]}
        self.env_of = {t.task_key: t.env_key for t in tasks}
        self.envs = list(dict.fromkeys(t.env_key for t in tasks))  # in order of their first task, whatever a checkpoint's order
        self.env_counts = starting_env_counts(self.env_of, prior, pseudo) if settings.per_env else None

    def pass_rates(self) -> list[float]:
        return [a / (a + b) for a, b in (self.counts[t.task_key] for t in self.tasks)]

    def env_pass_rates(self) -> dict[str, float]:
        """Each env's estimate (level env and both)."""
        counts = self.env_counts
        assert counts is not None
        return {env: counts[env][0] / (counts[env][0] + counts[env][1]) for env in self.envs}

    def env_potentials(self) -> dict[str, float]:
        """Each env's learning potential (level env and both): of its pass rate (``pooled``) or its tasks' mean (``tasks``)."""
        potential, n = learning_potential(self.settings.potential), self.settings.group_size
        if self.settings.env_potential == "tasks":
            return mean_by_env([t.env_key for t in self.tasks], [potential(p, n) for p in self.pass_rates()])
        rates = self.env_pass_rates()
        return {env: potential(rates[env], n) for env in self.envs}

    def env_shares(self) -> dict[str, float]:
        """Each env's share of the draws by its potential, mixed with the floor over envs (level env and both)."""
        potentials = self.env_potentials()
        shares = draw_probabilities([potentials[env] for env in self.envs], self.settings.floor)
        return dict(zip(self.envs, shares))

    def task_probabilities(self) -> list[float]:
        """Each task's chance by its own potential, mixed with the floor over tasks (level task's draw)."""
        potential = learning_potential(self.settings.potential)
        return draw_probabilities([potential(p, self.settings.group_size) for p in self.pass_rates()], self.settings.floor)

    def probabilities(self) -> list[float]:
        """Each task's chance per draw at the configured level."""
        if not self.settings.per_env:
            return self.task_probabilities()
        within = self.task_probabilities() if self.settings.level == "both" else [1.0] * len(self.tasks)
        return spread_over_envs([t.env_key for t in self.tasks], self.env_shares(), within)

    def next_batch(self, size: int) -> list[Task]:
        return [self.tasks[i] for i in weighted_sample(self.rng, self.probabilities(), size)]

    def observe(self, episodes: Iterable[Any]) -> None:
        results = task_results(episodes)
        for key, (passes, fails) in sorted(results.items()):
            if key in self.counts:
                self.counts[key] = list(updated_counts(*self.counts[key], passes, fails, self.settings.decay))
        if self.env_counts is not None:
            for env, (passes, fails) in sorted(env_results(results, self.env_of).items()):
                self.env_counts[env] = list(updated_counts(*self.env_counts[env], passes, fails, self.settings.decay))

    def metrics(self) -> dict[str, float]:
        """``curriculum/{env_key}/weight`` (the env's share of the next draw; at level env and both also
        ``curriculum/{env_key}/pass_rate``, the env's estimate), the expected share of groups with signal under
        these weights, and the mean estimated pass rate of the tasks."""
        probabilities, rates = self.probabilities(), self.pass_rates()
        by_env: dict[str, float] = defaultdict(float)
        for task, prob in zip(self.tasks, probabilities):
            by_env[task.env_key] += prob
        env_rates = self.env_pass_rates() if self.env_counts is not None else {}
        n = self.settings.group_size
        return {
            **{f"curriculum/{env}/weight": share for env, share in sorted(by_env.items())},
            **{f"curriculum/{env}/pass_rate": rate for env, rate in sorted(env_rates.items())},
            "curriculum/expected_signal": sum(prob * signal_probability(p, n) for prob, p in zip(probabilities, rates)),
            "curriculum/mean_pass_rate": sum(rates) / len(rates),
        }

    def state(self) -> dict:
        """The counts (and at level env and both the env counts) and the RNG, JSON-able."""
        version, internal, gauss = self.rng.getstate()
        state = {"counts": {key: list(value) for key, value in self.counts.items()}, "rng": [version, list(internal), gauss]}
        if self.env_counts is not None:
            state["env_counts"] = {env: list(value) for env, value in self.env_counts.items()}
        return state

    def restore(self, state: dict) -> None:
        check_restorable(state, self.settings.level, self.envs)
        self.counts = {key: list(value) for key, value in state["counts"].items()}
        if self.env_counts is not None:
            self.env_counts = {env: list(value) for env, value in state["env_counts"].items()}
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))


def check_restorable(state: dict, level: str, envs: Sequence[str]) -> None:
    """A ValueError unless ``state`` is a curriculum sampler's of the same kind as ``level`` (task, or env/both)
    over the same envs."""
    resume = "resume with the config it was saved with"
    if "counts" not in state:
        raise ValueError(f"the checkpoint's task sampler is the plain one, and this config asks for data.curriculum: {resume}")
    saved_env_level = "env_counts" in state
    if saved_env_level and level == "task":
        raise ValueError("the checkpoint's curriculum keeps env counts (data.curriculum.level env or both), and this config asks for "
                         f"level task: set data.curriculum.level to the saved one, or {resume}")
    if not saved_env_level and level != "task":
        raise ValueError(f"the checkpoint's curriculum has no env counts (data.curriculum.level task), and this config asks for level "
                         f"{level}: set data.curriculum.level: task, or {resume}")
    if saved_env_level and sorted(state["env_counts"]) != sorted(envs):
        raise ValueError(f"the checkpoint's curriculum counts envs {sorted(state['env_counts'])}, and this config trains on {sorted(envs)}: "
                         f"{resume}")


def write_probe(path: str | Path, results: Iterable[Any], samples: int) -> Path:
    """Save a probe's per-task success counts (records with ``task_key``, ``env_key``, ``successes``,
    ``samples``) as JSON, for ``data.curriculum.prior_path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tasks = [{"task_key": r.task_key, "env_key": r.env_key, "successes": r.successes, "samples": r.samples} for r in results]
    path.write_text(json.dumps({"format": PROBE_FORMAT, "version": PROBE_VERSION, "k": samples, "tasks": tasks}, indent=1) + "\n")
    return path


def read_probe(path: str | Path) -> dict[str, tuple[int, int]]:
    """A probe file as ``{task_key: (successes, failures)}``; anything else is a ConfigError naming the key."""
    where = f"key 'data.curriculum.prior_path' = {str(path)!r}"
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{where}: cannot read it as JSON ({exc}); write one with `python -m sweep forecast --save-probe`") from None
    if not isinstance(data, dict) or data.get("format") != PROBE_FORMAT or data.get("version") != PROBE_VERSION:
        raise ConfigError(f"{where}: not a probe file (format {PROBE_FORMAT!r} version {PROBE_VERSION}); write one with `python -m sweep forecast --save-probe`")
    try:
        counts = {t["task_key"]: (t["successes"], t["samples"]) for t in data["tasks"]}
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{where}: a task record lacks task_key, successes or samples ({exc})") from None
    bad = next((key for key, (wins, n) in counts.items()
                if not all(isinstance(x, int) and not isinstance(x, bool) for x in (wins, n)) or not 0 <= wins <= n), None)
    if bad is not None:
        raise ConfigError(f"{where}: task {bad!r} has successes {counts[bad][0]!r} of samples {counts[bad][1]!r}; "
                          "each must be a whole number, successes from 0 to samples; write the file anew with `python -m sweep forecast --save-probe`")
    return {key: (wins, n - wins) for key, (wins, n) in counts.items()}


def curriculum_sampler(cfg: TrainerConfig, tasks: list[Task]) -> CurriculumSampler:
    """The trial's curriculum sampler; a probe that names none of the training tasks is refused (another
    task set's, or another split's)."""
    prior = read_probe(cfg.data.curriculum.prior_path) if cfg.data.curriculum.prior_path else None
    if prior is not None and not any(t.task_key in prior for t in tasks):
        raise ConfigError(
            f"key 'data.curriculum.prior_path' = {cfg.data.curriculum.prior_path!r}: none of its {len(prior)} tasks is a training task "
            "of this config; probe this config with `python -m sweep forecast --save-probe`"
        )
    return CurriculumSampler(tasks, cfg.seed, CurriculumSettings.of(cfg), prior)
