"""The verdict bench's worlds (``bench/worlds.py``): the mix's truth grid and bench sweeps are made from the mix's
own space, over the hotel grid's settings, and load as spaces from any folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.truth_grid import HORIZONS, grid_data, grid_file, grid_part, make_truth, part_name  # noqa: E402
from bench.verdict import bench_space  # noqa: E402
from bench.worlds import WORLDS, read_json, write_json  # noqa: E402
from sweep.spec.loader import load_space  # noqa: E402


def test_the_mix_grid_is_the_mix_trainer_over_the_hotel_grid_settings(tmp_path):
    hotel, mix = WORLDS["hotel"], WORLDS["mix"]
    grid = load_space(grid_file(mix, tmp_path))
    own = load_space(mix.trainer_space).trainer
    assert grid.trainer.model == own.model and grid.trainer.rollout == own.rollout  # the mix's recipe, so its shipped base
    assert sorted(map(Path, grid.trainer.env.tasks_path)) == sorted(Path(p).resolve() for p in own.env.tasks_path)
    assert (grid.trainer.total_steps, grid.trainer.eval.interval) == (HORIZONS[-1], HORIZONS[0])
    assert grid_data(mix)["space"] == yaml.safe_load(hotel.grid_space.read_text())["space"]  # eight LRs x three seeds, one list
    assert grid_file(hotel, tmp_path) == hotel.grid_space  # the hotel's committed grid, as run on 2026-11-26


def test_a_bench_sweep_is_the_demo_search_over_the_world_trainer(tmp_path):
    demo = load_space(WORLDS["hotel"].trainer_space)
    for world in WORLDS.values():
        (tmp_path / world.name).mkdir()
        space = load_space(bench_space(world, tmp_path / world.name, 10))
        assert space.name == world.bench_name and space.trainer.total_steps == 10
        assert space.search == demo.search and space.scheduler == demo.scheduler and list(space.space) == ["optim.lr"]
        assert space.trainer.eval.interval == demo.trainer.eval.interval
    assert load_space(tmp_path / "mix" / "verdict_bench.yaml").trainer.model == load_space(WORLDS["mix"].trainer_space).trainer.model
    fewer = load_space(bench_space(WORLDS["mix"], tmp_path / "mix", 10, eval_samples=4)).trainer.eval
    assert fewer.n_samples == 4 and fewer.max_tasks_per_env == load_space(WORLDS["mix"].trainer_space).trainer.eval.max_tasks_per_env


def test_gzipped_data_round_trips(tmp_path):
    data = {"runs": [{"lr": 1e-4, "evals": [{"step": 0, "tasks": {"a": [1, 8]}}]}]}
    for name in ("x.json", "x.json.gz"):
        write_json(tmp_path / name, data)
        assert read_json(tmp_path / name) == data
    assert (tmp_path / "x.json.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_a_grid_part_is_some_of_the_grid_own_settings_and_names_them():
    grid = grid_data(WORLDS["mix"])
    part = grid_part(grid, [3e-3, 1.0e-6], [1])
    assert part["space"]["optim.lr"]["grid"] == [1.0e-6, 3.0e-3] and part["space"]["seed"]["grid"] == [1]
    assert part["trainer"] == grid["trainer"] and grid["space"]["seed"]["grid"] == [0, 1, 2]  # the grid itself untouched
    assert part_name(part).startswith("lr1e-06-3e-03_s1_")
    with pytest.raises(SystemExit, match=r"optim.lr \[2e-05\] is not in its grid"):
        grid_part(grid, [2e-5], None)


def test_running_a_part_and_reading_parts_at_once_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="give one or the other"):
        make_truth(WORLDS["mix"], [tmp_path / "part.tar.gz"], tmp_path, lrs=[1e-6])


def test_the_bench_judges_the_way_each_trial_s_advice_moves_the_lr():
    """Hand-made: a truth with its learning band at 1e-4 (too low at 1e-6, too high at 1e-2, at both horizons), and a
    sweep whose flat trials' advice goes each way. Labels are judged as before; the advice's way counts on its own."""
    from bench.verdict import judge_seed

    settings = [{"lr": 1e-6, "label": "too low"}, {"lr": 1e-4, "label": "learns"}, {"lr": 1e-2, "label": "too high"}]
    truth = {h: {"settings": settings, "top": [1e-4]} for h in ("10", "30")}

    def row(lr: float, verdict: str, advice: str) -> dict:
        return {"config": {"optim.lr": lr}, "gain": 0.0, "steps": 10, "verdict": verdict, "lr_advice": advice}

    rows = [row(1.1e-4, "learns", ""), row(1.2e-6, "flat", "raise"), row(0.9e-2, "flat", "raise"), row(1.1e-2, "too high", "lower"),
            row(0.8e-6, "flat", "lower")]
    judged = judge_seed(rows, truth)
    assert judged["agree"] == [True, False, False, True, False] and judged["wrong_direction"] == 0  # no label points the wrong way
    assert judged["advice_wrong_direction"] == 2  # "raise" at 9e-3, above the band; "lower" at 8e-7, below it
    assert judged["advice_agree"] == [True, False, True, False]  # the four off-band trials: 1.2e-6 up, 9e-3 up, 1.1e-2 down, 8e-7 down


def test_a_finer_grid_adds_the_midpoints_where_the_frozen_truth_changes_label():
    """Hand-made: labels too low, too low, learns, learns, too high -> the geometric midpoints of the two changes;
    the mix's finer grid is its frozen 30-step truth's, in files of its own, the same grid name for its parts."""
    from bench.worlds import refined_lrs

    labels = ["too low", "too low", "learns", "learns", "too high"]
    settings = [{"lr": lr, "label": label} for lr, label in zip([1e-6, 1e-5, 1e-4, 1e-3, 1e-2], labels)]
    assert refined_lrs(settings[::-1]) == (3.2e-5, 3.2e-3)  # sqrt(1e-5 * 1e-4), sqrt(1e-3 * 1e-2), two figures
    mix = WORLDS["mix"]
    fine = mix.fine()
    assert fine.added_lrs == (5.5e-6, 1.7e-5, 5.5e-4, 1.7e-3)  # 3e-6|1e-5, 1e-5|3e-5, 3e-4|1e-3, 1e-3|3e-3 (FROZEN_30)
    assert (fine.key, fine.runs.name, fine.outcomes.name) == ("mix_fine", "verdict_truth_mix_fine.json.gz", "verdict_truth_mix_fine_outcomes.json")
    assert (mix.key, mix.added_lrs) == ("mix", ())  # the frozen grid as it was
    grid, coarse = grid_data(fine), grid_data(mix)
    assert grid["name"] == coarse["name"] and grid["trainer"] == coarse["trainer"]
    assert grid["space"]["optim.lr"]["grid"] == sorted(coarse["space"]["optim.lr"]["grid"] + list(fine.added_lrs))
    assert part_name(grid_part(grid, [1.7e-3, 5.5e-4], [0])).startswith("lr5.5e-04-1.7e-03_s0_")
    with pytest.raises(SystemExit, match="is not in its grid"):
        grid_part(coarse, [5.5e-4], None)  # the frozen grid takes none of them


def test_a_frozen_grid_s_runs_file_fills_a_finer_grid_and_a_different_base_is_refused(tmp_path):
    """The hotel's grid sweeps are gone, its runs kept in a data file: a finer grid reads them beside its new parts,
    the file's run first for a setting both hold; runs on another base eval are not judged together."""
    from bench.truth_grid import merged_runs

    base = {"step": 0, "pass_at_1": 0.5, "tasks": {"t1": [1, 2]}}

    def run(lr: float, seed: int, trial: str) -> dict:
        return {"trial": trial, "lr": lr, "seed": seed, "evals": []}

    write_json(tmp_path / "frozen.json", {"base": base, "runs": [run(1e-4, 0, "a"), run(1e-3, 0, "b")], "truth": {}})
    write_json(tmp_path / "new.json.gz", {"base": base, "runs": [run(5.5e-4, 0, "c"), run(1e-3, 0, "d")]})
    merged = merged_runs([], 30, [tmp_path / "frozen.json", tmp_path / "new.json.gz"])
    assert [(r["lr"], r["trial"]) for r in merged["runs"]] == [(1e-4, "a"), (5.5e-4, "c"), (1e-3, "b")] and merged["base"] == base
    write_json(tmp_path / "other.json", {"base": {**base, "tasks": {"t1": [2, 2]}}, "runs": []})
    with pytest.raises(SystemExit, match="base evals differ"):
        merged_runs([], 30, [tmp_path / "frozen.json", tmp_path / "other.json"])


def test_the_hotel_s_finer_grid_is_a_copy_of_its_committed_grid_with_the_added_lrs(tmp_path):
    """The hotel's grid is a committed file: its finer grid is written beside the run, never over it; each finer
    world names its own files, record and command."""
    from bench.verdict import bench_record

    hotel = WORLDS["hotel"]
    fine = hotel.fine()
    assert fine.added_lrs == (1.7e-6, 5.5e-6, 1.7e-4, 5.5e-4) and hotel.committed_grid and not fine.committed_grid
    assert (fine.runs.name, fine.outcomes.name) == ("verdict_truth_fine.json", "verdict_truth_fine_outcomes.json")
    copy = grid_file(fine, tmp_path)
    assert copy != hotel.grid_space and copy.parent == tmp_path
    space, frozen = load_space(copy), load_space(hotel.grid_space)
    assert space.trainer == frozen.trainer and space.name == frozen.name  # the same runs, so its parts and the frozen runs judge together
    assert len(yaml.safe_load(copy.read_text())["space"]["optim.lr"]["grid"]) == 12
    assert [bench_record(w, "outcome") for w in (hotel, fine, WORLDS["mix"].fine())] == \
           ["verdict_bench_outcome", "verdict_bench_hotel_fine_outcome", "verdict_bench_mix_fine_outcome"]
    assert (hotel.cli, WORLDS["mix"].fine().cli) == ("--world hotel", "--world mix --fine")


def test_a_finer_truth_waits_for_its_added_runs():
    """The frozen grid's runs file given as --results reads as runs (not a sweep folder), and the finer grid's
    truth is refused until its added settings have all their seeds, naming them."""
    fine = WORLDS["mix"].fine()
    with pytest.raises(SystemExit, match=r"lacks 12 of its runs \(lr, seed\): \[\(5.5e-06, 0\)"):
        make_truth(fine, [WORLDS["mix"].runs])


def test_no_judge_is_refused_outside_the_bench_s_runs():
    """``--no-judge`` runs and packs sweeps without judging them; asked of ``judge`` or ``truth`` it is refused
    before anything is read or run, naming the mode."""
    import subprocess

    cli = [sys.executable, str(Path(__file__).resolve().parents[1] / "bench" / "verdict.py")]
    done = subprocess.run([*cli, "judge", "--world", "mix", "--no-judge", "--results", "nowhere.tar.gz"], capture_output=True, text=True)
    assert done.returncode == 2 and "--no-judge is for the bench's runs, not 'judge'" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([*cli, "--no-judge", "--truth", "rules"], capture_output=True, text=True)
    assert done.returncode == 2 and "--truth rules has nothing to do" in done.stderr
    from bench.verdict import bench_record

    assert bench_record(WORLDS["mix"], "unjudged") == "verdict_bench_mix_unjudged"  # its runs' file, apart from any judged one
