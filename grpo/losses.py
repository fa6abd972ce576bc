"""The policy losses a trial can choose (``algorithm.policy_loss``), and what the rest of the code reads about each.

One entry per loss: the algorithm keys it reads as its (eps_low, eps_high), and whether its clip fraction says
how far an update went (the verdict's evidence for "too high" and "too low"). The tensor math lives in
``grpo.algorithm.POLICY_LOSSES`` under the same names (a test holds the two equal); the config's choice is
``PolicyLossName``, made from these names. Adding a loss: its function there, its entry here, its epsilon keys
in ``grpo.config.AlgorithmConfig``, a line in README. Imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class PolicyLossSpec:
    eps_keys: tuple[str, str]  # the AlgorithmConfig keys read as (eps_low, eps_high)
    clip_measures_update: bool  # policy/clip_frac is PPO's token clip, so it says how far the update went


POLICY_LOSS_SPECS: dict[str, PolicyLossSpec] = {
    "ppo_clip": PolicyLossSpec(("clip_eps_low", "clip_eps_high"), clip_measures_update=True),
    # GSPO clips whole sequences at a ratio band ~1,000 times narrower than PPO's; CISPO's clipped tokens keep their
    # gradient: for both the clip fraction measures something else than the update's size
    "gspo": PolicyLossSpec(("gspo_eps_low", "gspo_eps_high"), clip_measures_update=False),
    "cispo": PolicyLossSpec(("cispo_eps_low", "cispo_eps_high"), clip_measures_update=False),
}

PolicyLossName = Literal[tuple(POLICY_LOSS_SPECS)]  # type: ignore[valid-type]  # the names above, as pydantic checks them
