"""``bench/sweep_efficiency.py``'s time accounting, by hand: each eval counted once per trial, the sweep's one base eval
(step 0, run before the fit) in no trial; and its figures recomputed from a data file it wrote."""

from __future__ import annotations

import json

import pytest

from bench.sweep_efficiency import recompute, trainer_seconds


def _rows(*evals: tuple[int, float]) -> list[dict]:
    """A trial's reports: step, its step_s 1.0, the newest eval's step and seconds riding along (step 0: the base's)."""
    return [{"training_iteration": step, "timing/step_s": 1.0, "eval/global_step": float(at), "timing/eval_s": seconds}
            for step, (at, seconds) in enumerate(evals, start=1)]


def test_each_eval_counts_once_and_the_base_eval_in_no_trial():
    a = _rows((0, 3.0), (2, 0.5), (2, 0.5), (4, 0.7))  # the base's 3 s ride along until step 2's own eval
    b = _rows((0, 3.0), (0, 3.0))  # stopped before its first eval
    assert trainer_seconds([a, b]) == (6.0, pytest.approx(1.2))


def test_figures_are_recomputed_from_a_data_file(tmp_path, capsys):
    def arm(name: str, reached: float) -> dict:
        rows = [{**r, "timestamp": 100.0 + i, "time_total_s": 10.0, "eval/avg_pass_at_1": v}
                for i, (r, v) in enumerate(zip(_rows((0, 3.0), (2, 1.0)), (0.3, reached)))]
        return {"arm": name, "histories": [rows], "fit_s": 20.0, "slot_s": 20.0, "tail_idle_s": 0.0, "ray_init_s": 1.0, "base_policy_s": 2.0}

    data = tmp_path / "run.jsonl"
    data.write_text("\n".join(json.dumps(line) for line in (arm("grid", 0.5), arm("asha_tpe s0", 0.49), {"bench": "sweep_efficiency", "tolerance": 0.02, "commit": "abc"})))
    assert recompute(data) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert line["ratios_per_seed"] == [1.0] and line["target_eval_pass_at_1"] == 0.5
    assert line["overhead_share_grid"] == pytest.approx((20.0 - 2.0 - 1.0) / 20.0)  # step 0's 3 s are the sweep's, not the trial's
    (tmp_path / "other.txt").write_text("# a timing log\n")
    with pytest.raises(SystemExit, match="not a data file this bench wrote"):
        recompute(tmp_path / "other.txt")
