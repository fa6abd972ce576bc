"""bench/startup_draws.py: the random start it draws for a searcher seed is the one that seed's bench sweep ran."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.startup_draws import startup_lrs, widest_gap
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


def test_a_spread_start_through_the_sweeps_own_searcher(tmp_path):
    """search.startup: spread, as the sweep builds its searcher: one draw in each third of the bench's three decades."""
    space_file = bench_space(WORLDS["mix"], tmp_path, 10)
    for seed in (0, 4):
        logs = sorted(math.log10(lr) for lr in startup_lrs(space_file, seed, "spread"))
        assert [math.floor(x - math.log10(3e-6)) for x in logs] == [0, 1, 2]
        assert [b - a for a, b in zip(logs, logs[1:])] == pytest.approx([1.0, 1.0])
        assert widest_gap(startup_lrs(space_file, seed, "spread"), 3e-6, 3e-3) == pytest.approx(1.0)
    assert widest_gap([1e-5], 1e-6, 1e-2) == pytest.approx(3.0)  # by hand: 1e-5 to 1e-2
