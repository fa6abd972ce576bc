"""A packed sweep (``bench/sweep_archive.py``): the report reads the same trials back from it, and it holds no
weights, eval dumps or pages."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sweep_archive import kept, pack, unpack  # noqa: E402
from sweep.report.load import load_sweep  # noqa: E402
from sweep.report.store import SweepStore  # noqa: E402


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def a_sweep(root: Path) -> Path:
    """One seed's sweep laid out as Tune and the trainer leave it, weights and dumps included."""
    sweep = root / "s3" / "demo_cpu"
    trial = sweep / "run_trial_abcde_00000_0_2026-11-28"
    write(trial / "result.json", "".join(json.dumps({"trial_id": "abcde_00000", "training_iteration": s, "reward/avg_pass_at_1": 0.1 * s,
                                                    "policy/update_kl": 1e-4, "time_total_s": 3.0 * s}) + "\n" for s in (1, 2)))
    write(trial / "params.json", json.dumps({"optim.lr": 1e-4}))
    write(trial / "attempts" / "attempt_000.json", json.dumps({"number": 0, "run": "run", "pid": 1, "started": 1.0}))
    write(trial / "checkpoint_000002" / "model.safetensors", b"\0" * 4096)
    write(trial / "events.out.tfevents.1.host", b"tb")
    traj = sweep / "trajectories" / "abcde_00000"
    lines = [{"global_step": s, "eval/avg_pass_at_1": p, "tasks": {"t1": [k, 8], "t2": [0, 8]}, "task_envs": {"t1": "hotel", "t2": "hotel"}}
             for s, p, k in ((0, 0.25, 4), (2, 0.375, 6))]
    write(traj / "aggregated_results.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    write(traj / "trainer_config.json", json.dumps({"algorithm": {"mini_batches": 2}}))
    write(traj / "global_step_2" / "hotel.jsonl", json.dumps({"input_prompt": "long text", "score": 1.0}) + "\n")
    write(traj / "global_step_2" / "dcp" / "__0_0.distcp", b"\0" * 4096)
    write(sweep / "leaderboard.json", json.dumps([{"trial": "abcde_00000", "config": {"optim.lr": 1e-4}, "status": "terminated"}]))
    write(sweep / "sweep_config.json", json.dumps({"scheduler": {"type": "asha"}}))
    write(sweep / "report" / "index.html", "<html></html>")
    write(sweep / "report" / "summary.md", "# summary")
    write(root / "verdict_bench.yaml", "name: demo_cpu\n")
    return sweep


def test_what_the_report_reads_is_kept_and_weights_dumps_and_pages_are_not():
    assert kept(Path("s3/demo_cpu/run_trial_x/result.json")) and kept(Path("s3/demo_cpu/trajectories/x/aggregated_results.jsonl"))
    assert kept(Path("s3/demo_cpu/run_trial_x/attempts/attempt_000.json")) and kept(Path("verdict_bench.yaml"))
    assert not kept(Path("s3/demo_cpu/run_trial_x/checkpoint_000002/model.safetensors"))
    assert not kept(Path("s3/demo_cpu/trajectories/x/global_step_2/hotel.jsonl"))  # every episode's text
    assert not kept(Path("s3/demo_cpu/report/summary.md")) and not kept(Path("s3/demo_cpu/run_trial_x/events.out.tfevents.1.host"))


def test_a_packed_sweep_loads_as_the_sweep_did(tmp_path):
    sweep = a_sweep(tmp_path / "keep")
    tarball = pack(tmp_path / "keep", ["verdict_bench.yaml", "s3/demo_cpu"], tmp_path / "out" / "hotel_s3.tar.gz")
    with tarfile.open(tarball) as tar:
        names = sorted(tar.getnames())
    assert names == ["s3/demo_cpu/leaderboard.json", "s3/demo_cpu/run_trial_abcde_00000_0_2026-11-28/attempts/attempt_000.json",
                     "s3/demo_cpu/run_trial_abcde_00000_0_2026-11-28/params.json", "s3/demo_cpu/run_trial_abcde_00000_0_2026-11-28/result.json",
                     "s3/demo_cpu/sweep_config.json", "s3/demo_cpu/trajectories/abcde_00000/aggregated_results.jsonl",
                     "s3/demo_cpu/trajectories/abcde_00000/trainer_config.json", "verdict_bench.yaml"]
    folder = unpack(tarball, tmp_path / "unpacked")
    before, after = load_sweep(SweepStore(str(sweep))), load_sweep(SweepStore(str(folder / "s3" / "demo_cpu")))
    (a,), (b,) = before.trials, after.trials
    assert (b.trial_id, b.config, b.rows, b.evals, b.trainer_config, b.restarts) == (a.trial_id, a.config, a.rows, a.evals, a.trainer_config, a.restarts)
    assert (after.leaderboard, after.saved, after.swept_keys) == (before.leaderboard, before.saved, before.swept_keys)
    assert (folder / "verdict_bench.yaml").read_text() == "name: demo_cpu\n"
    again = pack(tmp_path / "keep", ["verdict_bench.yaml", "s3/demo_cpu"], tmp_path / "again.tar.gz")
    assert again.read_bytes() == tarball.read_bytes()  # the same sweep packs to the same bytes: a re-run that changed nothing diffs to nothing


def test_packing_what_is_not_there_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="s9/demo_cpu"):
        pack(tmp_path, ["s9/demo_cpu"], tmp_path / "x.tar.gz")


def test_a_packed_grid_part_is_found_under_its_grid_name(tmp_path):
    from bench.truth_grid import grid_data, grid_part, truth_folders
    from bench.worlds import WORLDS

    for world in WORLDS.values():
        grid = grid_part(grid_data(world), None, [0])
        write(tmp_path / world.name / grid["name"] / "leaderboard.json", "[]")  # the part's sweep, stored under the grid's name
        tarball = pack(tmp_path / world.name, [grid["name"]], tmp_path / f"{world.name}.tar.gz")
        with truth_folders(grid, [tarball]) as (folder,):
            assert (folder / "leaderboard.json").is_file() and folder.name == grid["name"]
        assert not folder.exists()  # the unpacked part is removed on leaving


def test_packs_and_folders_open_alike_and_a_packs_folder_goes_on_leaving(tmp_path):
    from bench.sweep_archive import opened

    write(tmp_path / "keep" / "s1" / "leaderboard.json", "[1]")
    tarball = pack(tmp_path / "keep", ["s1"], tmp_path / "s1.tar.gz")
    with opened([tarball, tmp_path / "keep"]) as (from_pack, folder):
        assert folder == tmp_path / "keep" and from_pack != folder
        assert (from_pack / "s1" / "leaderboard.json").read_text() == (folder / "s1" / "leaderboard.json").read_text() == "[1]"
    assert not from_pack.exists() and folder.is_dir()  # the unpacked copy is gone, the folder given is left as it was
