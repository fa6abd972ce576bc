"""The shipped multi-environment base (``sweep/search_spaces/fleet_mix_cpu.yaml``): the users' classes at step 0,
and GRPO learning there.

One trainer run from the shipped base (nothing built), as a sweep's trial runs it, with held-out evals at step 0
and at the end (20 tasks per env, ``SAMPLES`` samples each). At step 0 every env sits in its band: outlook
saturated (≥ 0.9: the base has seen its tasks, ``model.warmstart_envs.outlook.held_out``), github and
ticketmaster failing (≤ 0.05: never in the warm-start), hotel and zillow learnable (0.15 to 0.7); the classes are
the report's (``sweep.report.envs.level_status``), so ``sweep report`` and ``sweep forecast`` name the same envs.
Then issue 34's measure, on a run shortened for CI (``STEPS`` steps at ``LR``, ``PROMPTS`` prompts a step, one
eval at the end): the learnable envs' held-out tasks, pooled, rise above the base by at least 0.10 with the
verdict's interval above zero (``bench.mix_learns.pooled``, the bench's own measure), while outlook holds (the report's status, not REGRESSED). The
full-length run's per-env table is README's (``bench/mix_learns.py``). Measured on the 2-core machine
(2026-11-27): +0.119 [+0.038, +0.206] (hotel 0.55 -> 0.80, zillow 0.31 -> 0.30), 6-7 minutes on one core. The
bar has little room, as the 30-step run's +0.122 has: zillow does not move (its tasks are solved always or
never), so the pooled gain is half of hotel's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.mix_learns import as_trial, pooled
from grpo import warmstart
from grpo.data import base_tasks
from sweep.report.envs import env_table, level_status
from sweep.spec.loader import load_trainer
from sweep.verdict.thresholds import Thresholds

ROOT = Path(__file__).resolve().parents[2]
SPACE = ROOT / "sweep" / "search_spaces" / "fleet_mix_cpu.yaml"
BANDS = {"outlook": "SATURATED", "github": "FAILING", "ticketmaster": "FAILING", "hotel": "LEARNABLE", "zillow": "LEARNABLE"}
STEPS, LR, PROMPTS, SAMPLES = 10, 2.0e-4, 8, 4


@pytest.mark.slow
def test_the_shipped_mix_base_holds_its_classes_and_grpo_learns_there(tmp_path):
    from grpo.reporting import ListReporter
    from grpo.trainer import train

    cfg, _ = load_trainer(SPACE, {"model.cache_dir": str(tmp_path / "cache"), "output_dir": str(tmp_path / "run"), "total_steps": STEPS,
                                  "optim.lr": LR, "rollout.prompts_per_step": PROMPTS, "eval.interval": STEPS, "eval.n_samples": SAMPLES})
    assert warmstart.shipped_base(cfg.model, base_tasks(cfg)) is not None  # shipped, not built here
    train(cfg, ListReporter())
    evals = sorted((json.loads(line) for line in (tmp_path / "run" / "aggregated_results.jsonl").read_text().splitlines()),
                   key=lambda e: e["global_step"])
    assert [e["global_step"] for e in evals] == [0, STEPS]
    base = evals[0]
    per_env = {env: sum(1 for e in base["task_envs"].values() if e == env) for env in BANDS}
    assert all(n >= 15 for n in per_env.values()), per_env  # enough held-out tasks per env for an interval
    rates = {env: base[f"eval/{env}/pass_at_1"] for env in BANDS}
    assert {env: level_status(p, Thresholds()) for env, p in rates.items()} == BANDS, rates
    assert all(0.15 <= rates[env] <= 0.7 for env, band in BANDS.items() if band == "LEARNABLE"), rates  # the learnable band
    assert base["eval/env_error_frac"] == 0.0

    rows = {r.env: r for r in env_table(as_trial(evals), True, 1, Thresholds())}
    assert rows["outlook"].status == "SATURATED", rows["outlook"]  # held: a fall beyond noise would read REGRESSED
    gain = pooled(evals, 1, [env for env, band in BANDS.items() if band == "LEARNABLE"])  # the bench's own measure
    assert gain["delta"] >= 0.10 and gain["low"] > 0, (gain, {env: (r.base, r.last) for env, r in rows.items()})
