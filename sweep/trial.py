"""The Tune trainable: one trial = the base trainer config plus the sampled dotted overrides.

``run_trial`` validates the trial's config, then runs the GRPO trainer with a reporter that hands each
step's metrics to Tune (exactly once per step, so ASHA rungs count GRPO steps).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from grpo.config import TrainerConfig
from grpo.configbase import apply_overrides, validate


class TuneReporter:
    """Hands each step's metrics, and its checkpoint when there is one, to Tune (which keeps its own copy)."""

    def report(self, step: int, metrics: dict[str, float], checkpoint: str | None = None) -> None:
        from ray import tune

        if checkpoint is None:
            tune.report({**metrics, "step": step})
            return
        tune.report({**metrics, "step": step}, checkpoint=tune.Checkpoint.from_directory(checkpoint))
        shutil.rmtree(checkpoint, ignore_errors=True)  # Tune has persisted it to the sweep's storage


def trial_config(base: dict[str, Any], overrides: dict[str, Any]) -> TrainerConfig:
    return validate(TrainerConfig, apply_overrides(base, overrides), "trial config")


def run_trial(config: dict[str, Any], base: dict[str, Any]) -> None:
    """The Tune function trainable. Eval trajectories go to ``{experiment}/trajectories/{trial_id}``."""
    from ray import tune

    from grpo.trainer import train

    context = tune.get_context()
    trajectories = Path(context.get_trial_dir()).parent / "trajectories" / context.get_trial_id()
    overrides = {**config, "output_dir": str(trajectories)} if "output_dir" not in base else dict(config)
    overrides["checkpoint.dir"] = tempfile.mkdtemp(prefix="grpo-checkpoints-")
    restored = tune.get_checkpoint()
    if restored is not None:  # Tune restarted this trial (failure or sweep resume): continue where it stopped
        overrides["resume_from"] = restored.to_directory(tempfile.mkdtemp(prefix="grpo-resume-"))
    train(trial_config(base, overrides), TuneReporter())
