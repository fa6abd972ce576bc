"""The verdict bench's worlds: where each one's sweeps come from and where its truth lives.

``hotel``: the learning space's one environment, the demo's sweep (the truth grid ``bench/verdict_truth.yaml``,
run 2026-11-26). ``mix``: the five apps of ``sweep/search_spaces/fleet_mix_cpu.yaml`` (issue 34's world, some envs
saturated or failing from step 0), its truth grid made from that space's trainer by ``bench/verdict.py truth
--world mix``. Paths only: ``bench/outcome_truth.py`` reads this and must import nothing of ``sweep``.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"


@dataclass(frozen=True)
class World:
    name: str
    trainer_space: Path  # the space whose trainer (recipe, base, tasks, split) every run of this world uses
    runs: Path  # the truth grid's runs: per run its evals (per task) and curves
    outcomes: Path  # the outcome truth made from them (bench/outcome_truth.py), frozen before the judging seeds
    bench_name: str  # the bench sweep's name (its folder under each seed's storage)
    min_gain: float  # the outcome truth's floor: a smaller gain is level however narrow its interval (bench/outcome_truth.py)
    grid_space: Path | None = None  # a committed truth grid file, or None: made from trainer_space (bench/verdict.py)


WORLDS = {
    "hotel": World("hotel", ROOT / "sweep" / "search_spaces" / "demo_cpu.yaml", DATA / "verdict_truth.json",
                   DATA / "verdict_truth_outcomes.json", "demo_cpu", 0.03, ROOT / "bench" / "verdict_truth.yaml"),
    "mix": World("mix", ROOT / "sweep" / "search_spaces" / "fleet_mix_cpu.yaml", DATA / "verdict_truth_mix.json.gz",
                 DATA / "verdict_truth_mix_outcomes.json", "verdict_mix", 0.005),
}


def read_json(path: Path) -> Any:
    """A data file, gzipped when its name ends in ``.gz`` (the mix's per-task evals are large)."""
    return json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())


def write_json(path: Path, data: Any) -> None:
    text = json.dumps(data, indent=1).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text, mtime=0) if path.suffix == ".gz" else text)
