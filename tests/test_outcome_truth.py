"""The verdict bench's ground truth is made from outcomes only (``bench/outcome_truth.py``): hand-worked gains and
labels, no import of the code it judges, and no verdict threshold can move it."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from bench.outcome_truth import MIN_GAIN, gain_and_noise, outcome_truth, run_outcomes, setting_label, task_gains
from bench.worlds import WORLDS, lr_text, read_json, world_of

ROOT = Path(__file__).resolve().parents[1]


def test_a_gain_is_the_mean_over_tasks_of_the_window_minus_the_base():
    base = {"a": [2, 4], "b": [0, 4]}  # 0.5 and 0.0
    evals = [{"a": [3, 4], "b": [1, 4]}, {"a": [4, 4], "b": [0, 4]}]  # a: 0.75, 1.0 -> 0.875; b: 0.25, 0.0 -> 0.125
    assert task_gains(base, evals) == [0.375, 0.125]
    gain, noise, low, high = gain_and_noise(base, evals)
    assert gain == pytest.approx(0.25) and 0.125 <= low <= gain <= high <= 0.375 and noise == pytest.approx((high - low) / 2)
    same = gain_and_noise(base, [base])  # a policy that did not move: no gain, no noise
    assert same == (0.0, 0.0, 0.0, 0.0)


def test_a_task_whose_episodes_were_all_lost_to_the_environment_counts_in_the_evals_that_scored_it():
    base = {"a": [2, 4], "b": [0, 4], "c": [1, 4]}
    evals = [{"a": [0, 0], "b": [1, 4], "c": [0, 0]}, {"a": [4, 4], "b": [0, 0], "c": [0, 0]}]  # a: 1.0 only; b: 0.25 only; c: never
    assert task_gains(base, evals) == [0.5, 0.25]  # c left out, not a division by zero or a failure


def test_a_small_sure_gain_is_up_above_the_worlds_floor_and_level_below_it():
    """Every one of 100 tasks up by one episode in 100: a gain of 0.01 with no spread. The mix's floor (0.005) calls it
    up, the hotel's (0.03) level; the same loss is down and level. The floors are the frozen ones."""
    assert (WORLDS["hotel"].min_gain, WORLDS["mix"].min_gain) == (0.03, 0.005) and MIN_GAIN == WORLDS["hotel"].min_gain
    base = {f"t{i:03d}": [10, 100] for i in range(100)}
    run = {"evals": [{"step": s, "tasks": {t: [11, 100] for t in base}} for s in (5, 10)]}
    for world, state in (("mix", "up"), ("hotel", "level")):
        at = run_outcomes(base, run, WORLDS[world].min_gain)[10]
        assert at["gain"] == pytest.approx(0.01) and at["low"] == pytest.approx(0.01) and at["state"] == state, (world, at)
    worse = {"evals": [{"step": s, "tasks": {t: [9, 100] for t in base}} for s in (5, 10)]}
    assert [run_outcomes(base, worse, WORLDS[w].min_gain)[10]["state"] for w in ("mix", "hotel")] == ["down", "level"]


def _seed(state: str, fallen: bool = False) -> dict:
    return {"state": state, "fallen": fallen}


def test_a_settings_label_follows_its_seeds():
    assert setting_label([_seed("up")] * 3) == "learns"
    assert setting_label([_seed("up"), _seed("up"), _seed("level")]) == "mixed"  # not every seed above its noise
    assert setting_label([_seed("down", True), _seed("level", True), _seed("up")]) == "too high"  # most fell
    assert setting_label([_seed("level")] * 3) == "level"
    assert setting_label([_seed("up"), _seed("up"), _seed("up", True)]) == "mixed"  # a learner that fell back is no learner


def test_the_truth_reads_nothing_of_the_verdict_and_no_threshold_moves_it(monkeypatch):
    """Every default of ``sweep.verdict.thresholds.Thresholds`` pushed far off, and the verdict's own functions
    broken: each world's outcome truth is the same, and the same as its frozen file's."""
    source = ast.parse((ROOT / "bench" / "outcome_truth.py").read_text())
    imported = {getattr(n, "module", None) or a.name for n in ast.walk(source) if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
    assert not any(name and name.startswith("sweep") for name in imported), imported
    worlds = [WORLDS["hotel"], WORLDS["mix"], WORLDS["hotel"].fine(), WORLDS["mix"].fine()]
    before = [outcome_truth(read_json(w.runs), w.min_gain) for w in worlds]
    import sweep.verdict.labels as labels
    import sweep.verdict.score as score
    from sweep.verdict.thresholds import Thresholds

    for f in dataclasses.fields(Thresholds):
        monkeypatch.setattr(Thresholds, f.name, (f.default or 1.0) * 100, raising=False)
    monkeypatch.setattr(labels, "verdict", lambda *a, **k: (_ for _ in ()).throw(AssertionError("the truth called the verdict")))
    monkeypatch.setattr(score, "score_trials", lambda *a, **k: (_ for _ in ()).throw(AssertionError("the truth called the score")))
    for world, was in zip(worlds, before):
        after = outcome_truth(read_json(world.runs), world.min_gain)
        assert after == was, world.key
        frozen = json.loads(world.outcomes.read_text())["truth"]
        assert {h: ([s["label"] for s in t["settings"]], t["top"]) for h, t in after.items()} == \
               {h: ([s["label"] for s in t["settings"]], t["top"]) for h, t in frozen.items()}, world.key


FROZEN_30 = {  # world: (labels at 30 steps, top set, learning band, the world's floor), as README reports them
    "hotel": ({"1e-06": "too low", "3e-06": "mixed", "1e-05": "learns", "3e-05": "learns", "1e-04": "learns", "3e-04": "mixed",
               "1e-03": "too high", "3e-03": "too high"}, [3e-05, 1e-04], [1e-05, 3e-05, 1e-04], 0.03),
    # 24 runs, frozen 2026-11-29 before any of its judging seeds ran
    "mix": ({"1e-06": "too low", "3e-06": "too low", "1e-05": "mixed", "3e-05": "learns", "1e-04": "learns", "3e-04": "learns",
             "1e-03": "mixed", "3e-03": "too high"}, [3e-05, 1e-04, 3e-04], [3e-05, 1e-04, 3e-04], 0.005),
    # the mix's finer grid (refined_lrs): 36 runs, frozen 2026-11-30 before any judging seed run after it
    "mix_fine": ({"1e-06": "too low", "3e-06": "too low", "5.5e-06": "mixed", "1e-05": "mixed", "1.7e-05": "learns", "3e-05": "learns",
                  "1e-04": "learns", "3e-04": "learns", "5.5e-04": "learns", "1e-03": "mixed", "1.7e-03": "too high", "3e-03": "too high"},
                 [3e-05, 1e-04, 3e-04, 5.5e-04], [1.7e-05, 3e-05, 1e-04, 3e-04, 5.5e-04], 0.005),
    # the hotel's finer grid: 36 runs (its 12 new on d1b24be, their base eval the frozen grid's), frozen 2026-11-30
    # before any judging seed was judged against it
    "hotel_fine": ({"1e-06": "too low", "1.7e-06": "too low", "3e-06": "mixed", "5.5e-06": "mixed", "1e-05": "learns",
                    "3e-05": "learns", "1e-04": "learns", "1.7e-04": "mixed", "3e-04": "mixed", "5.5e-04": "flat",
                    "1e-03": "too high", "3e-03": "too high"}, [3e-05, 1e-04], [1e-05, 3e-05, 1e-04], 0.03),
}


@pytest.mark.parametrize("world", sorted(FROZEN_30))
def test_the_frozen_truth_at_30_steps(world):
    """What each world's frozen file says (a change of the rules or the runs shows here), every setting on three seeds."""
    labels, top, band, floor = FROZEN_30[world]
    frozen = json.loads(world_of(world).outcomes.read_text())
    truth = frozen["truth"]["30"]
    assert {lr_text(s["lr"]): s["label"] for s in truth["settings"]} == labels
    assert truth["top"] == top and truth["band"] == band and world_of(world).min_gain == frozen.get("min_gain", floor) == floor
    assert all(len(s["gains"]) == 3 for s in truth["settings"])


@pytest.mark.parametrize("world", sorted(FROZEN_30))
def test_every_frozen_truth_is_what_its_runs_give(world):
    """Made again from its committed runs, each frozen truth is the same to every gain, noise, label and top set."""
    from bench.outcome_truth import same_truth

    w = world_of(world)
    assert same_truth(read_json(w.outcomes), w.min_gain, outcome_truth(read_json(w.runs), w.min_gain))


def test_a_frozen_truth_is_never_rewritten(tmp_path, monkeypatch, capsys):
    """Running the script over a frozen truth that its runs reproduce leaves the file as it is (not re-dated); over one
    they do not, it refuses, naming the file and what would move, and writes nothing."""
    import sys

    import bench.outcome_truth as script

    hotel = world_of("hotel")
    frozen = tmp_path / "outcomes.json"
    frozen.write_bytes(hotel.outcomes.read_bytes())
    monkeypatch.setattr(script, "world_of", lambda name, fine=False: dataclasses.replace(hotel, outcomes=frozen))
    monkeypatch.setattr(sys, "argv", ["outcome_truth.py"])
    assert script.main() == 0 and frozen.read_bytes() == hotel.outcomes.read_bytes()
    assert "is what these runs give; left as it is" in capsys.readouterr().out
    moved = json.loads(frozen.read_text())
    moved["truth"]["30"]["settings"][5]["label"] = "learns"  # 3e-04 at 30 steps
    moved["truth"]["30"]["top"] = [3e-05, 1e-04, 3e-04]
    frozen.write_text(json.dumps(moved))
    before = frozen.read_bytes()
    with pytest.raises(SystemExit) as refused:
        script.main()
    message = str(refused.value)
    assert str(frozen) in message and "is a frozen truth (made 2026-11-27 at ee7b048)" in message
    assert "3e-04 at 30 steps learns -> mixed" in message and "the top set at 30 steps [3e-05, 0.0001, 0.0003] -> [3e-05, 0.0001]" in message
    assert frozen.read_bytes() == before
