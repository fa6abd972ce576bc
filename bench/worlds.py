"""The verdict bench's worlds: where each one's sweeps come from and where its truth lives.

``hotel``: the learning space's one environment, the demo's sweep (the truth grid ``bench/verdict_truth.yaml``,
run 2026-11-26). ``mix``: the five apps of ``sweep/search_spaces/fleet_mix_cpu.yaml`` (issue 34's world, some envs
saturated or failing from step 0), its truth grid made from that space's trainer by ``bench/verdict.py truth
--world mix``. Paths only: ``bench/outcome_truth.py`` reads this and must import nothing of ``sweep``.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, replace
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
    added_lrs: tuple[float, ...] = ()  # learning rates a finer grid adds to the grid (``fine()``); none: the grid as frozen

    @property
    def key(self) -> str:
        """The world as its data files name it (``mix``, or ``mix`` with ``--fine``: ``mix_fine``)."""
        return f"{self.name}_fine" if self.added_lrs else self.name

    @property
    def cli(self) -> str:
        """The world as the commands take it: ``--world mix``, or ``--world mix --fine``."""
        return f"--world {self.name}" + (" --fine" if self.added_lrs else "")

    @property
    def committed_grid(self) -> bool:
        """Whether its truth grid is the committed file as it is (the hotel's frozen grid), not one made here."""
        return self.grid_space is not None and not self.added_lrs

    def fine(self) -> World:
        """The world with its finer truth grid: the frozen grid plus ``refined_lrs`` of its frozen outcome truth, in
        data files of its own (the frozen grid's stay as they are, with what was judged against them)."""
        if not self.outcomes.is_file():
            raise SystemExit(f"world {self.name}: no frozen outcome truth at {self.outcomes} to refine")
        added = refined_lrs(read_json(self.outcomes)["truth"]["30"]["settings"])
        return replace(self, runs=_fine_path(self.runs), outcomes=_fine_path(self.outcomes), added_lrs=added)


WORLDS = {
    "hotel": World("hotel", ROOT / "sweep" / "search_spaces" / "demo_cpu.yaml", DATA / "verdict_truth.json",
                   DATA / "verdict_truth_outcomes.json", "demo_cpu", 0.03, ROOT / "bench" / "verdict_truth.yaml"),
    "mix": World("mix", ROOT / "sweep" / "search_spaces" / "fleet_mix_cpu.yaml", DATA / "verdict_truth_mix.json.gz",
                 DATA / "verdict_truth_mix_outcomes.json", "verdict_mix", 0.005),
}


def world_of(name: str, fine: bool = False) -> World:
    """A world as the commands name it (``--world NAME [--fine]``) or its data files do (``mix_fine``)."""
    if name.endswith("_fine"):
        name, fine = name.removesuffix("_fine"), True
    return WORLDS[name].fine() if fine else WORLDS[name]


def refined_lrs(settings: list[dict[str, Any]]) -> tuple[float, ...]:
    """Where a finer grid adds settings: between every two neighbouring learning rates whose 30-step outcome labels
    differ (where the truth changes, and a trial between them is judged by whichever is nearer), their geometric
    midpoint to two significant figures. A rule on the frozen truth's own labels: nothing of the verdict or of any
    bench sweep chooses them."""
    ordered = sorted(settings, key=lambda s: s["lr"])
    return tuple(float(f"{math.sqrt(a['lr'] * b['lr']):.1e}") for a, b in zip(ordered, ordered[1:]) if a["label"] != b["label"])


def _fine_path(path: Path) -> Path:
    """A finer grid's data file beside the frozen one's: ``verdict_truth_mix.json.gz`` -> ``verdict_truth_mix_fine.json.gz``,
    ``verdict_truth_outcomes.json`` -> ``verdict_truth_fine_outcomes.json``."""
    suffix = ".json.gz" if path.name.endswith(".json.gz") else ".json"
    stem = path.name.removesuffix(suffix)
    kind = "_outcomes" if stem.endswith("_outcomes") else ""
    return path.with_name(f"{stem.removesuffix(kind)}_fine{kind}{suffix}")


def lr_text(lr: float) -> str:
    """A learning rate as the bench's files and tables name it: ``1e-04``, ``5.5e-04``."""
    return f"{lr:.1e}".replace(".0e", "e")


def read_json(path: Path) -> Any:
    """A data file, gzipped when its name ends in ``.gz`` (the mix's per-task evals are large)."""
    return json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())


def write_json(path: Path, data: Any) -> None:
    text = json.dumps(data, indent=1).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text, mtime=0) if path.suffix == ".gz" else text)
