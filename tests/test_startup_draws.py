"""bench/startup_draws.py: the random start it draws for a searcher seed is the one that seed's bench sweep ran."""

from __future__ import annotations

import json
from pathlib import Path

from bench.startup_draws import startup_lrs
from bench.sweep_archive import opened
from bench.verdict import SWEEPS, bench_space
from bench.worlds import WORLDS


def test_the_start_drawn_is_among_the_trials_the_packed_sweep_ran(tmp_path):
    space_file = bench_space(WORLDS["mix"], tmp_path, 10)
    packs = [SWEEPS / "mix_s0_10steps_389910e.tar.gz", SWEEPS / "mix_s4_10steps_962a205.tar.gz"]
    with opened(packs) as folders:
        for seed, folder in zip((0, 4), folders):
            board = next(Path(folder).rglob("leaderboard.json"))
            ran = {float(r["config"]["optim.lr"]) for r in json.loads(board.read_text())}
            drawn = startup_lrs(space_file, seed)
            assert len(drawn) == 3 and set(drawn) <= ran
    assert startup_lrs(space_file, 0) != startup_lrs(space_file, 4)
