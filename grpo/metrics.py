"""Reward metrics as pure functions over per-sample records, named as the users' dashboards name them.

``variance_per_prompt`` is the mean over prompt groups of the population variance of the group's
rewards (binary rewards, 4 samples: at most 0.25). Samples with an environment error are left out of
their group. Eval metrics use the unbiased pass@k estimator over each task's samples.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import comb, isnan
from numbers import Real
from statistics import fmean, pvariance

from toolenvs.outcomes import passed


@dataclass(frozen=True)
class SampleOutcome:
    """What the metrics need to know about one episode."""

    env_key: str
    group_id: int
    reward: float
    env_error: bool = False


def group_rewards(outcomes: Iterable[SampleOutcome]) -> dict[int, list[float]]:
    """Rewards of the valid samples of each group, keyed by group id; groups left empty are dropped."""
    groups: dict[int, list[float]] = defaultdict(list)
    for o in outcomes:
        if not o.env_error:
            groups[o.group_id].append(o.reward)
    return {g: r for g, r in groups.items() if r}


def variance_per_prompt(groups: Sequence[Sequence[float]]) -> float:
    """Mean over groups of the population variance of each group's rewards; 0 for no groups."""
    if not groups:
        return 0.0
    return fmean(pvariance(g) if len(g) > 1 else 0.0 for g in groups)


def frac_zero_variance(groups: Sequence[Sequence[float]]) -> float:
    """Share of groups whose rewards are all equal (no learning signal)."""
    if not groups:
        return 0.0
    return sum(1 for g in groups if max(g) == min(g)) / len(groups)


def group_outcome_shares(groups: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """Shares of groups whose samples all passed, all failed, or were mixed (``passed``'s threshold): only
    mixed groups carry a pass/fail signal; (0, 0, 0) for no groups."""
    if not groups:
        return 0.0, 0.0, 0.0
    passes = [sum(passed(r) for r in g) for g in groups]
    good = sum(p == len(g) for p, g in zip(passes, groups))
    bad = sum(p == 0 for p in passes)
    return good / len(groups), bad / len(groups), (len(groups) - good - bad) / len(groups)


def _reward_block(outcomes: list[SampleOutcome], prefix: str) -> dict[str, float]:
    valid = [o for o in outcomes if not o.env_error]
    groups = list(group_rewards(outcomes).values())
    rewards = [o.reward for o in valid]
    all_good, all_bad, mixed = group_outcome_shares(groups)
    return {
        f"{prefix}pass_at_1": fmean(passed(r) for r in rewards) if rewards else 0.0,
        f"{prefix}raw_reward": fmean(rewards) if rewards else 0.0,
        f"{prefix}variance_per_prompt": variance_per_prompt(groups),
        f"{prefix}frac_zero_variance": frac_zero_variance(groups),
        f"{prefix}frac_all_good": all_good,
        f"{prefix}frac_all_bad": all_bad,
        f"{prefix}frac_mixed": mixed,
        f"{prefix}env_error_frac": (len(outcomes) - len(valid)) / len(outcomes) if outcomes else 0.0,
    }


def reward_metrics(outcomes: Sequence[SampleOutcome]) -> dict[str, float]:
    """Overall and per-env reward metrics: ``reward/avg_pass_at_1``, ``reward/{env}/pass_at_1``, ...

    Overall pass@1 and raw reward are averaged over samples (not over envs).
    """
    overall = _reward_block(list(outcomes), "reward/")
    metrics = {
        "reward/avg_pass_at_1": overall.pop("reward/pass_at_1"),
        "reward/avg_raw_reward": overall.pop("reward/raw_reward"),
        **overall,
    }
    by_env: dict[str, list[SampleOutcome]] = defaultdict(list)
    for o in outcomes:
        by_env[o.env_key].append(o)
    for env_key, env_outcomes in sorted(by_env.items()):
        metrics.update(_reward_block(env_outcomes, f"reward/{env_key}/"))
    return metrics


def rollout_metrics(trajectories: Sequence) -> dict[str, float]:
    """``rollout/*``: mean turns, tool calls, tool error rate, response tokens, and stop-reason shares.

    ``trajectories`` are records with ``num_turns``, ``tool_calls``, ``tool_errors``, ``loss_mask``,
    ``overlong`` and ``stop_reason`` attributes.
    """
    if not trajectories:
        return {}
    calls = sum(t.tool_calls for t in trajectories)
    turns = sum(t.num_turns for t in trajectories)
    metrics = {
        "rollout/episodes": float(len(trajectories)),
        "rollout/num_turns": turns / len(trajectories),
        "rollout/tool_calls": calls / len(trajectories),
        "rollout/tool_error_rate": sum(t.tool_errors for t in trajectories) / max(turns, 1),
        "rollout/response_tokens": fmean(sum(t.loss_mask) for t in trajectories),
        "rollout/overlong_frac": sum(t.overlong for t in trajectories) / len(trajectories),
    }
    reasons = defaultdict(int)
    for t in trajectories:
        reasons[t.stop_reason] += 1
    for reason, count in sorted(reasons.items()):
        metrics[f"rollout/stop_{reason}_frac"] = count / len(trajectories)
    return metrics


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c passes: ``1 - C(n - c, k) / C(n, k)`` (Chen et al., 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def eval_metrics(outcomes: Sequence[SampleOutcome], k: int) -> dict[str, float]:
    """``eval/avg_pass_at_1``, ``eval/{env}/pass_at_1`` and ``eval/{env}/pass_at_{k}``, averaged over tasks.

    Each group is one task's samples; environment errors are left out of n.
    """
    by_env: dict[str, list[tuple[int, int]]] = defaultdict(list)
    env_of = {o.group_id: o.env_key for o in outcomes}
    for group, rewards in group_rewards(outcomes).items():
        by_env[env_of[group]].append((len(rewards), sum(passed(r) for r in rewards)))
    metrics: dict[str, float] = {}
    all_p1: list[float] = []
    for env_key, groups in sorted(by_env.items()):
        p1 = [pass_at_k(n, c, 1) for n, c in groups]
        all_p1 += p1
        metrics[f"eval/{env_key}/pass_at_1"] = fmean(p1)
        metrics[f"eval/{env_key}/pass_at_{k}"] = fmean(pass_at_k(n, c, min(k, n)) for n, c in groups)
    metrics["eval/avg_pass_at_1"] = fmean(all_p1) if all_p1 else 0.0
    metrics["eval/env_error_frac"] = sum(o.env_error for o in outcomes) / len(outcomes) if outcomes else 0.0
    return metrics


OVERALL_METRICS = (
    "reward/avg_pass_at_1", "reward/avg_raw_reward", "reward/variance_per_prompt", "reward/frac_zero_variance", "reward/env_error_frac",
    "reward/frac_all_good", "reward/frac_all_bad", "reward/frac_mixed",
    "policy/loss", "policy/clip_frac", "policy/clip_frac_low", "policy/clip_frac_high", "policy/kl", "policy/entropy",
    "policy/grad_norm", "policy/ratio_mean", "policy/lr", "policy/update_kl", "policy/update_norm",
    "policy/tis_weight_mean", "policy/tis_truncated_frac", "policy/tis_seq_masked_frac",
    "rollout/num_turns", "rollout/tool_calls", "rollout/tool_error_rate", "rollout/response_tokens", "rollout/overlong_frac",
    "timing/rollout_s", "timing/step_s", "perf/tokens_per_s", "perf/rss_gib",
)
PER_ENV_METRICS = ("pass_at_1", "raw_reward", "variance_per_prompt", "frac_zero_variance", "env_error_frac", "frac_all_good",
                   "frac_all_bad", "frac_mixed")


def eval_gain(trained: Sequence[float], base: float, window: int) -> float:
    """How far training moved held-out pass@1 from the base: the mean of the last ``window`` evals after
    training began, minus the base's (0 before the first one). A mean of evals, not a maximum: one lucky
    eval does not make a winner, and the base's own point is never counted as a trained one."""
    last = list(trained)[-window:]
    return fmean(last) - base if last else 0.0


SCORE = "eval/score"


def shown(result: Mapping[str, object], metric: str) -> float | None:
    """A reported metric as people should read it: ``eval/score`` is None (not 0) while the newest eval is
    still the base policy's (``eval/global_step`` 0): Tune needs a number on every report, but a gain of 0
    before any trained eval is no result. Anything else as reported (None when absent, NaN or not a number)."""
    value, step = result.get(metric), result.get("eval/global_step")
    if not isinstance(value, Real) or isinstance(value, bool) or isnan(value):
        return None
    if metric == SCORE and not (isinstance(step, Real) and step > 0):  # NaN too: a table's gap
        return None
    return float(value)


def shown_values(results: Iterable[Mapping[str, object]], metric: str) -> list[float]:
    """``shown`` of each result, in order, the ones without a value left out (a trial's curve, as a table or a rule reads it)."""
    return [v for v in (shown(r, metric) for r in results) if v is not None]


def metric_names(env_keys: Iterable[str], eval_samples: int | None) -> set[str]:
    """Every metric a trial reports on every step (a sweep may only optimise one of these)."""
    env_keys = sorted(env_keys)
    names = set(OVERALL_METRICS) | {f"reward/{e}/{m}" for e in env_keys for m in PER_ENV_METRICS}
    if eval_samples:
        names |= {"eval/avg_pass_at_1", SCORE, "eval/env_error_frac", "eval/global_step", "timing/eval_s"}
        names |= {f"eval/{e}/pass_at_{k}" for e in env_keys for k in {1, eval_samples}}
    return names
