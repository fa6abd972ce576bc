"""``sweep forecast``: before spending compute, what share of GRPO groups will carry no signal?

With binary rewards and per-task success probability p, a group of n samples has zero reward variance
(no learning signal) with probability ``p**n + (1 - p)**n``. A short probe of the base policy estimates
p per task (k samples each); this module turns the estimates into the expected zero-variance fraction
for each candidate ``n_samples_per_prompt``, per env and overall, and flags saturated or failing envs.
The math is pure; only ``probe`` runs the policy (and imports torch).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

SATURATED = 0.9  # mean success above this: the base policy already solves the env
FAILING = 0.05  # mean success below this: almost never solved, almost no signal


def zero_variance_probability(p: float, n: int) -> float:
    """P(all n binary rewards equal) for success probability p: ``p**n + (1 - p)**n``."""
    return p**n + (1.0 - p) ** n


def expected_zero_variance(successes: Sequence[float], n: int) -> float:
    """Mean over tasks of the zero-variance probability of a group of n."""
    return fmean(zero_variance_probability(p, n) for p in successes) if successes else 0.0


def env_status(mean_success: float) -> str:
    if mean_success >= SATURATED:
        return "SATURATED"
    if mean_success <= FAILING:
        return "FAILING"
    return "OK"


@dataclass(frozen=True)
class ProbeResult:
    task_key: str
    env_key: str
    successes: int
    samples: int

    @property
    def p(self) -> float:
        return self.successes / self.samples


def forecast_table(results: Sequence[ProbeResult], candidates: Sequence[int]) -> list[dict]:
    """One row per env and one overall: mean success, status, and expected zero-variance share per n."""
    by_env: dict[str, list[float]] = defaultdict(list)
    for r in results:
        by_env[r.env_key].append(r.p)
    groups = sorted(by_env.items()) + [("all", [r.p for r in results])]
    rows = []
    for env_key, ps in groups:
        mean = fmean(ps) if ps else 0.0
        row = {"env_key": env_key, "tasks": len(ps), "mean_success": mean, "status": env_status(mean)}
        row.update({f"zero_var@{n}": expected_zero_variance(ps, n) for n in candidates})
        rows.append(row)
    return rows


def tasks_without_signal(results: Sequence[ProbeResult]) -> list[str]:
    """Tasks the probe always or never solved: every group of them would have no signal."""
    return [r.task_key for r in results if r.successes in (0, r.samples)]


def candidate_sizes(cfg, sweep_cfg=None) -> list[int]:
    """The group sizes to forecast: the space's choices for n_samples_per_prompt, else a standard ladder."""
    from sweep.config import Choice, Fixed

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
    for column in ["env_key", "tasks", "mean success", "status", *[f"n={n}" for n in candidates]]:
        table.add_column(column)
    for row in rows:
        table.add_row(row["env_key"], str(row["tasks"]), f"{row['mean_success']:.3f}", row["status"], *[f"{row[f'zero_var@{n}']:.3f}" for n in candidates])
    Console(width=160).print(table)
    overall = rows[-1]
    best = min(candidates, key=lambda n: overall[f"zero_var@{n}"])
    dead = tasks_without_signal(results)
    print(f"least zero-variance: n={best} ({overall[f'zero_var@{best}']:.3f}); "
          f"{len(dead)} of {len(results)} tasks were never or always solved in the probe (candidates to drop)")


def probe(cfg, k: int) -> list[ProbeResult]:
    """Run the base policy k times on each training task (no update) and count successes."""
    from contextlib import ExitStack

    import torch

    from envs.local.launch import LocalEnvServer
    from grpo.data import trial_tasks
    from grpo.trainer import build_models, collect, episode_limits

    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    torch.manual_seed(cfg.seed)
    tasks, _ = trial_tasks(cfg)
    models = build_models(cfg, tasks)
    with ExitStack() as stack:
        urls = {key: stack.enter_context(LocalEnvServer(key)).base_url for key in sorted({t.env_key for t in tasks})}
        trajectories = collect(tasks, cfg, urls, models.generator, models.chat, episode_limits(cfg), n_samples=k)
    counts: dict[int, list[float]] = defaultdict(list)
    for t in trajectories:
        if not t.env_error:
            counts[t.group_id].append(t.reward)
    return [ProbeResult(task.task_key, task.env_key, sum(r >= 0.5 for r in counts[i]), len(counts[i])) for i, task in enumerate(tasks) if counts[i]]
