"""``sweep forecast``: before spending compute, what share of GRPO groups will carry no signal?

With binary rewards and per-task success probability p, a group of n samples has zero reward variance
(no learning signal) with probability ``p**n + (1 - p)**n``. A short probe of the base policy estimates
p per task (k samples each); this module turns the counts into the expected zero-variance fraction for
each candidate ``n_samples_per_prompt``, per env and overall, flags saturated or failing envs and
suggests an n range and the tasks to drop, naming apart those that fail by length, not skill (every probe
episode cut off at ``rollout.max_input_length``: no policy passes them at that limit). Plugging p = c/k
into the closed form overstates the share (it is convex in p: with k = 8 and p = 0.75, by about 0.09 at
n = 4), so for n ≤ k each task's share is
the unbiased estimate [C(c, n) + C(k − c, n)] / C(k, n), whose expectation is exactly the closed form; for
n > k the plug-in value is used and the table says so. The math is pure; only ``probe`` runs the policy
(and imports torch). ``--save-probe`` keeps the per-task counts (``grpo.curriculum.write_probe``'s format),
the curriculum's starting estimates (``data.curriculum.prior_path``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import comb
from statistics import fmean

from sweep.report.envs import level_status
from sweep.verdict.thresholds import Thresholds
from toolenvs.outcomes import Stop, passed


def zero_variance_probability(p: float, n: int) -> float:
    """P(all n binary rewards equal) for success probability p: ``p**n + (1 - p)**n``."""
    return p**n + (1.0 - p) ** n


def zero_variance_estimate(successes: int, samples: int, n: int) -> float:
    """Zero-variance probability of a group of n from c successes in k probe samples: unbiased for n ≤ k
    (the share of n-subsets of the k samples that all agree), the plug-in closed form for n > k."""
    if n > samples:
        return zero_variance_probability(successes / samples, n)
    return (comb(successes, n) + comb(samples - successes, n)) / comb(samples, n)


def expected_zero_variance(successes: Sequence[float], n: int) -> float:
    """Mean over tasks of the zero-variance probability of a group of n."""
    return fmean(zero_variance_probability(p, n) for p in successes) if successes else 0.0


def env_status(mean_success: float) -> str:
    """SATURATED, FAILING or LEARNABLE: the report's classes at its bars (``sweep.report.envs.level_status``)."""
    return level_status(mean_success, Thresholds())


@dataclass(frozen=True)
class ProbeResult:
    task_key: str
    env_key: str
    successes: int
    samples: int
    context_limited: int = 0  # episodes stopped at rollout.max_input_length

    @property
    def p(self) -> float:
        return self.successes / self.samples

    def zero_variance(self, n: int) -> float:
        return zero_variance_estimate(self.successes, self.samples, n)


def forecast_table(results: Sequence[ProbeResult], candidates: Sequence[int]) -> list[dict]:
    """One row per env and one overall: mean success, status, and expected zero-variance share per n."""
    by_env: dict[str, list[ProbeResult]] = defaultdict(list)
    for r in results:
        by_env[r.env_key].append(r)
    groups = sorted(by_env.items()) + [("all", list(results))]
    rows = []
    for env_key, members in groups:
        mean = fmean(r.p for r in members) if members else 0.0
        samples = sum(r.samples for r in members)
        row = {"env_key": env_key, "tasks": len(members), "mean_success": mean, "status": env_status(mean),
               "context_limited": sum(r.context_limited for r in members) / samples if samples else 0.0}
        row.update({f"zero_var@{n}": fmean(r.zero_variance(n) for r in members) if members else 0.0 for n in candidates})
        rows.append(row)
    return rows


def context_bound(results: Sequence[ProbeResult]) -> list[str]:
    """Tasks none of whose probe episodes fit ``rollout.max_input_length``: they fail at any LR, by structure."""
    return [r.task_key for r in results if r.samples and r.context_limited == r.samples]


def tasks_without_signal(results: Sequence[ProbeResult]) -> list[str]:
    """Tasks the probe always or never solved: every group of them would have no signal."""
    return [r.task_key for r in results if r.successes in (0, r.samples)]


@dataclass(frozen=True)
class Suggestion:
    """What to change before the sweep: the n range worth sweeping and the tasks to drop."""

    n_low: int
    n_high: int
    zero_var_low: float  # expected zero-variance share at n_low, over the tasks kept
    zero_var_high: float
    always_solved: list[str]
    never_solved: list[str]
    flagged_envs: list[tuple[str, str, float]]  # (env_key, SATURATED | FAILING, mean success)
    kept: int = 0  # tasks with some signal in the probe
    context_bound: list[str] = field(default_factory=list)  # never solved: every episode cut off at max_input_length


def suggest(results: Sequence[ProbeResult], candidates: Sequence[int], tolerance: float = 0.05) -> Suggestion:
    """The cheapest n whose expected zero-variance share (over the tasks that keep some signal) is within
    ``tolerance`` of the largest candidate's, up to the largest; the tasks the probe always or never
    solved (drop them: their groups never carry signal at any n); envs the base policy saturates or fails.

    With binary rewards ``p**n + (1 - p)**n`` falls as n grows, so larger n always helps; the range says
    where more samples stop paying for themselves.
    """
    kept = [r for r in results if 0 < r.successes < r.samples]
    ns = sorted(set(candidates))
    share = {n: fmean(r.zero_variance(n) for r in kept) if kept else 1.0 for n in ns}
    low = next(n for n in ns if share[n] <= share[ns[-1]] + tolerance)
    flagged = [(row["env_key"], row["status"], row["mean_success"]) for row in forecast_table(results, ns)[:-1] if row["status"] != "LEARNABLE"]
    return Suggestion(
        n_low=low, n_high=ns[-1], zero_var_low=share[low], zero_var_high=share[ns[-1]],
        always_solved=[r.task_key for r in results if r.successes == r.samples],
        never_solved=[r.task_key for r in results if r.successes == 0],
        flagged_envs=flagged,
        kept=len(kept),
        context_bound=context_bound(results),
    )


def _listing(keys: list[str], shown: int = 8) -> str:
    return ", ".join(keys[:shown]) + (f", … ({len(keys) - shown} more)" if len(keys) > shown else "") if keys else "none"


def suggestion_lines(s: Suggestion, k: int) -> list[str]:
    """The suggestion in words, one finding a line."""
    lines = [f"flag: env {env} is {status} for the base policy (mean success {mean:.3f})" for env, status, mean in s.flagged_envs]
    span = str(s.n_low) if s.n_low == s.n_high else f"{s.n_low}–{s.n_high}"
    if not s.kept:
        lines.append("suggested n_samples_per_prompt: none helps, every probed task was always or never solved: "
                     "change the tasks or the base policy first")
    else:
        lines.append(f"suggested n_samples_per_prompt: {span} (expected zero-variance share over the {s.kept} tasks kept: "
                     f"{s.zero_var_low:.3f} at n={s.n_low}, {s.zero_var_high:.3f} at n={s.n_high})")
    lines.append(f"tasks to drop (no signal at any n; from {k} samples each, so a rare success can hide): "
                 f"always solved {len(s.always_solved)}: {_listing(s.always_solved)}; never solved {len(s.never_solved)}: {_listing(s.never_solved)}")
    if s.context_bound:
        lines.append(f"of the never solved, {len(s.context_bound)} ran past rollout.max_input_length in every probe episode (they fail by "
                     f"length, not skill: raise the limit or drop them): {_listing(s.context_bound)}")
    return lines


def candidate_sizes(cfg, sweep_cfg=None) -> list[int]:
    """The group sizes to forecast: the space's choices for n_samples_per_prompt, else a standard ladder."""
    from sweep.spec.config import Choice, Fixed

    dist = sweep_cfg.space.get("rollout.n_samples_per_prompt") if sweep_cfg else None
    if isinstance(dist, Choice):
        return sorted(set(dist.values))
    if isinstance(dist, Fixed):
        return [dist.value]
    return sorted({2, 4, 8, 16, cfg.rollout.n_samples_per_prompt})


def render(results: Sequence[ProbeResult], candidates: Sequence[int], k: int) -> None:
    """Print the forecast table and the suggestion (the n with the least zero-variance, tasks to drop)."""
    from rich.console import Console
    from rich.table import Table

    rows = forecast_table(results, candidates)
    table = Table(title=f"Expected share of zero-variance groups (base policy, {k} samples per task)")
    plug_in = [n for n in candidates if n > k]
    for column in ["env_key", "tasks", "mean success", "status", "past max_input_length", *[f"n={n}" for n in candidates]]:
        table.add_column(column)
    for row in rows:
        table.add_row(row["env_key"], str(row["tasks"]), f"{row['mean_success']:.3f}", row["status"], f"{row['context_limited']:.3f}",
                      *[f"{row[f'zero_var@{n}']:.3f}" for n in candidates])
    Console(width=160).print(table)
    if plug_in:
        print(f"n={', '.join(map(str, plug_in))} > k={k}: plug-in estimates, biased upwards; probe with --k {max(plug_in)} for unbiased ones")
    overall = rows[-1]
    best = min(candidates, key=lambda n: overall[f"zero_var@{n}"])
    dead = tasks_without_signal(results)
    print(f"least zero-variance: n={best} ({overall[f'zero_var@{best}']:.3f}); "
          f"{len(dead)} of {len(results)} tasks were never or always solved in the probe (candidates to drop)")
    for line in suggestion_lines(suggest(results, candidates), k):
        print(line)


@dataclass
class ProbeProgress:
    """Hears each probe episode as it ends and says a line at every tenth of them: done of total, passed,
    env errors, seconds. A probe of an 8B policy on hundreds of tasks runs minutes with nothing else to show."""

    total: int
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    passes: int = 0
    env_errors: int = 0
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()  # made as the episodes start

    def __call__(self, traj) -> None:
        before = self.done * 10 // self.total
        self.done += 1
        self.passes += not traj.env_error and passed(traj.reward)
        self.env_errors += bool(traj.env_error)
        if self.done * 10 // self.total > before:
            errors = f", {self.env_errors} env error{'s' * (self.env_errors != 1)}" if self.env_errors else ""
            self.say(f"probe: {self.done}/{self.total} episodes ({100 * self.done // self.total}%), "
                     f"{self.passes} passed{errors}, {self.clock() - self.started:.0f} s")


def probe(cfg, k: int, say: Callable[[str], None] | None = None) -> list[ProbeResult]:
    """Run the base policy k times on each training task (no update) and count successes; ``say`` hears
    the probe's progress (``ProbeProgress``), a line at every tenth of its episodes.

    Seeded as the trainer seeds, after the models are built, so a probe samples the same way whether or
    not it had to build the cached base policy.
    """
    import torch

    from grpo.build import build_models, open_environments
    from grpo.data import trial_tasks
    from grpo.episodes import EpisodeLimits, collect

    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    tasks, _ = trial_tasks(cfg)
    models = build_models(cfg, tasks)
    torch.manual_seed(cfg.seed)
    with open_environments(cfg, tasks) as envs:
        heard = ProbeProgress(len(tasks) * k, say) if say is not None and tasks else None
        trajectories = collect(tasks, k, envs, models.generator, models.chat, EpisodeLimits.of(cfg.rollout), on_done=heard)
    counts: dict[int, list[float]] = defaultdict(list)
    limited: dict[int, int] = defaultdict(int)
    for t in trajectories:
        if not t.env_error:
            counts[t.group_id].append(t.reward)
            limited[t.group_id] += t.stop_reason == Stop.MAX_INPUT_LENGTH
    return [ProbeResult(task.task_key, task.env_key, sum(passed(r) for r in counts[i]), len(counts[i]), limited[i])
            for i, task in enumerate(tasks) if counts[i]]
