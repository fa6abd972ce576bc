"""What an episode's outcome means, once, for everyone who reads one: the trainer's metrics, the forecast,
``sweep envs check`` and the report.

Rewards are binary in the users' world: an episode passes when its verifier's reward is at least
``PASS_THRESHOLD``.
"""

from __future__ import annotations

PASS_THRESHOLD = 0.5


def passed(reward: float) -> bool:
    """Binary rewards: an episode passes when its reward is at least ``PASS_THRESHOLD``."""
    return reward >= PASS_THRESHOLD
