"""bench/mix_learns.py's reading of a run's evals, on hand-made eval lines (the bench itself is not a CI test)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.mix_learns import env_rows, pooled  # noqa: E402
from sweep.verdict.thresholds import Thresholds  # noqa: E402

ENVS = {"h1": "hotel", "h2": "hotel", "o1": "outlook", "o2": "outlook", "g1": "github"}


def _line(step: int, tasks: dict[str, tuple[int, int]]) -> dict:
    """An eval line as the trainer writes it: per-env pass@1 (the mean of its tasks' rates), per-task counts, each task's env."""
    per_env = {env: [p / n for k, (p, n) in tasks.items() if ENVS[k] == env] for env in set(ENVS.values())}
    return {"global_step": step, **{f"eval/{env}/pass_at_1": sum(r) / len(r) for env, r in per_env.items()},
            "tasks": {k: list(v) for k, v in tasks.items()}, "task_envs": ENVS}


EVALS = [
    _line(0, {"h1": (2, 8), "h2": (2, 8), "o1": (8, 8), "o2": (8, 8), "g1": (0, 8)}),
    _line(5, {"h1": (4, 8), "h2": (2, 8), "o1": (8, 8), "o2": (7, 8), "g1": (0, 8)}),
    _line(10, {"h1": (6, 8), "h2": (6, 8), "o1": (8, 8), "o2": (8, 8), "g1": (0, 8)}),
]


def test_per_env_base_last_and_status():
    rows = {r["env"]: r for r in env_rows(EVALS, 2, Thresholds())}
    # hotel: base (2/8 + 2/8) / 2 = 0.25; last (10/16 + 8/16) / 2 = 0.5625
    assert (rows["hotel"]["base"], rows["hotel"]["last"], rows["hotel"]["delta"]) == (0.25, 0.5625, 0.3125)
    assert rows["hotel"]["base_class"] == "LEARNABLE"
    assert rows["outlook"]["base"] == 1.0 and rows["outlook"]["last"] == 0.9688 and rows["outlook"]["status"] == "SATURATED"
    assert rows["github"]["status"] == "FAILING" and rows["github"]["delta"] == 0.0


def test_pooled_learnable_envs():
    hotel = pooled(EVALS, 2, ["hotel"])
    assert hotel["tasks"] == 2 and hotel["delta"] == 0.3125 and hotel["low"] <= hotel["delta"] <= hotel["high"]
    assert pooled(EVALS, 2, []) == {"envs": [], "tasks": 0}


def test_the_signal_bench_kept_plain_runs_read_as_the_trainer_wrote_them(tmp_path, capsys):
    import json

    from bench.mix_learns import signal_runs

    steps = [str(e["global_step"]) for e in EVALS]
    run = {"arm": "plain", "seed": 3, "minutes": 2.0, "evals": {s: 0.5 for s in steps}, "tasks": {str(e["global_step"]): e["tasks"] for e in EVALS},
           "env_evals": {str(e["global_step"]): {k.split("/")[1]: v for k, v in e.items() if k.endswith("/pass_at_1")} for e in EVALS},
           "base_eval": EVALS[0]}
    (tmp_path / "plain_s3.json").write_text(json.dumps(run))
    (tmp_path / "plain_s4.json").write_text(json.dumps({**run, "seed": 4, "base_eval": None}))  # kept before runs carried their base eval
    (tmp_path / "dynamic_s3.json").write_text(json.dumps(run))
    ((name, lr, seed, evals, seconds),) = signal_runs(tmp_path, "plain", 1e-4)
    assert (name, lr, seed, seconds) == ("plain_s3", 1e-4, 3, 120.0)
    assert env_rows(evals, 2, Thresholds()) == env_rows(EVALS, 2, Thresholds())  # the same rows as from the trainer's own lines
    assert "plain_s4.json: no base eval" in capsys.readouterr().err
