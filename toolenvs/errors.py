"""The two ways an episode fails without the agent being at fault, as exceptions with an ``outcome`` name.

Both leave the episode out of its group's advantage; ``outcome`` is the name the trainer counts it under.
"""

from __future__ import annotations

from toolenvs.outcomes import Stop


class EnvError(Exception):
    """The environment failed (unreachable, timed out after retries): the episode is left out of its group's advantage."""

    outcome = Stop.ENV_ERROR


class VerifierError(EnvError):
    """A task's untrusted ``verifier_code`` hung, crashed, broke the sandbox's rules or returned no number.

    Never a success: the episode is left out of the advantage like an ``env_error`` and counted as
    ``verifier_error``.
    """

    outcome = Stop.VERIFIER_ERROR
