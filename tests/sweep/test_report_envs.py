"""Per-env tables on hand-made histories: base → last (the mean of the last evals), the interval over the
env's own tasks, the status, and the sweep-wide view the verdict's words come from."""

from __future__ import annotations

import pytest

from sweep.report.envs import EnvRow, env_advice, env_table, sweep_envs
from sweep.report.load import TrialData
from sweep.verdict.score import EvalPoint, score_trials
from sweep.verdict.thresholds import Thresholds

TH = Thresholds()
A_BASE, A_TRAINED = [0, 0, 1, 1], [2, 2, 3, 3]  # passes of 4 episodes, tasks a1..a4
B_ALL = [4, 4, 4, 4]  # b1..b4: always solved


def _line(step: int, a: list[int], b: list[int]) -> dict:
    tasks = {**{f"a{i}": [p, 4] for i, p in enumerate(a, 1)}, **{f"b{i}": [p, 4] for i, p in enumerate(b, 1)}}
    envs = {**{f"a{i}": "apps" for i in range(1, 5)}, **{f"b{i}": "mail" for i in range(1, 5)}}
    line = {"global_step": step, "eval/apps/pass_at_1": sum(a) / 16, "eval/mail/pass_at_1": sum(b) / 16, "tasks": tasks}
    return {**line, "task_envs": envs} if step == 0 else line  # the envs once (the shared base's line) is enough


def _trial() -> TrialData:
    evals = [_line(0, A_BASE, B_ALL), _line(1, [1, 1, 2, 2], B_ALL), _line(2, A_TRAINED, B_ALL), _line(3, A_TRAINED, B_ALL)]
    rows = [{"training_iteration": s, "reward/apps/variance_per_prompt": v, "reward/mail/variance_per_prompt": 0.0,
             "reward/apps/pass_at_1": p, "reward/mail/pass_at_1": 1.0} for s, v, p in [(1, 0.2, 0.1), (2, 0.0, 0.3), (3, 0.1, 0.5), (4, 0.2, 0.6)]]
    return TrialData("t1", "f", {}, rows, evals)


def test_a_trial_env_rows_base_to_last_with_the_env_s_own_interval():
    rows = {r.env: r for r in env_table(_trial(), use_eval=True, size=2, th=TH)}
    apps, mail = rows["apps"], rows["mail"]
    # apps: base 2/16 = 0.125; last = the mean of steps 2 and 3, 10/16 = 0.625 each; best shown beside it
    assert (apps.base, apps.last, apps.last_steps, apps.best, apps.best_step) == (0.125, 0.625, (2, 3), 0.625, 2)
    assert apps.delta == pytest.approx(0.5) and apps.status == "IMPROVED" and apps.signal_frac == 0.75
    assert apps.variance_mean == pytest.approx(0.125)
    # its interval is the verdict's bootstrap over apps' four tasks alone
    only_apps = {f"a{i}": (p, 4) for i, p in enumerate(A_BASE, 1)}
    trained = [EvalPoint(s, 0.625, {f"a{i}": (p, 4) for i, p in enumerate(A_TRAINED, 1)}) for s in (1, 2, 3)]
    trained[0] = EvalPoint(1, 0.375, {f"a{i}": (p, 4) for i, p in enumerate([1, 1, 2, 2], 1)})
    expected = score_trials(EvalPoint(0, 0.125, only_apps), {"t1": trained}, 2)["t1"]
    assert (apps.low, apps.high) == (expected.low, expected.high) and apps.low > 0
    # mail: solved every time, before and after: no change, no noise, SATURATED; never a step with signal
    assert (mail.base, mail.last, mail.low, mail.high, mail.status, mail.signal_frac) == (1.0, 1.0, 0.0, 0.0, "SATURATED", 0.0)


def test_without_eval_step_one_s_rollouts_are_the_base_and_there_is_no_interval():
    rows = {r.env: r for r in env_table(_trial(), use_eval=False, size=3, th=TH)}
    apps = rows["apps"]
    assert (apps.base, apps.base_step, apps.last_steps, apps.low) == (0.1, 1, (2, 3, 4), None)
    assert apps.last == pytest.approx((0.3 + 0.5 + 0.6) / 3) and apps.status == "IMPROVED"
    assert rows["mail"].status == "SATURATED"


def test_the_table_reads_where_the_score_does_at_the_sweeps_episode_budget():
    """With ``n`` swept, the verdict compares trials at equal episodes (the cheapest finished trial's): a trial's evals
    after that budget are not in its score, so not in its per-env table either (base → last, best, interval)."""
    trial = _trial()
    for row, spent in zip(trial.rows, (16, 16, 16, 16)):
        row["rollout/episodes"] = spent  # 16 episodes a step: 32 by step 2, 48 by step 3
    trial.evals[3] = _line(3, [4, 4, 4, 4], B_ALL)  # step 3, past the budget: apps solved
    whole = {r.env: r for r in env_table(trial, use_eval=True, size=2, th=TH)}["apps"]
    assert (whole.last_steps, whole.last, whole.best, whole.best_step) == ((2, 3), (0.625 + 1.0) / 2, 1.0, 3)
    cut = {r.env: r for r in env_table(trial, use_eval=True, size=2, th=TH, budget=32)}["apps"]
    assert (cut.last_steps, cut.last, cut.best, cut.best_step) == ((1, 2), (0.375 + 0.625) / 2, 0.625, 2)
    assert env_table(trial, use_eval=True, size=2, th=TH, budget=8) == []  # no eval within it: no row, as no score
    cut_training = {r.env: r for r in env_table(trial, use_eval=False, size=3, th=TH, budget=48)}["apps"]
    assert cut_training.last_steps == (2, 3)  # step 4's training reward (64 episodes) is past it


def _row(env: str, base: float, status: str, signal: float | None) -> EnvRow:
    return EnvRow(env, base, 0, base, (2,), base, 2, None, None, status, signal, 0.0)


def test_the_sweep_names_the_envs_no_trial_learned_from():
    tables = {"t1": [_row("apps", 0.3, "IMPROVED", 0.5), _row("mail", 0.95, "SATURATED", 0.1), _row("tickets", 0.0, "FAILING", 0.0)],
              "t2": [_row("apps", 0.3, "FLAT", 0.0), _row("mail", 0.95, "SATURATED", 0.0), _row("tickets", 0.0, "FAILING", 0.0)]}
    envs = {e.env: e for e in sweep_envs(tables, {"t1": 10, "t2": 30})}
    assert envs["apps"].signal_frac == pytest.approx((0.5 * 10 + 0 * 30) / 40) and not envs["apps"].no_signal
    assert envs["mail"].no_signal and envs["mail"].kind == "SATURATED"  # some signal, but saturated in every trial
    assert envs["tickets"].no_signal and envs["tickets"].kind == "FAILING" and envs["tickets"].statuses == {"FAILING": 2}
    words = env_advice(list(envs.values()))
    assert words.startswith("No trial learned from 2 of 3 environments: mail (saturated, base 0.95), tickets (failing, base 0.00); they give")
    assert "`env.env_keys` without them" in words and "level: env" in words
    assert env_advice([envs["apps"]]) == "" and env_advice([envs["tickets"]]) == ""  # one env: the verdicts say it
