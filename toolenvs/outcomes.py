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


class Failure:
    """Why a turn of an episode failed, named where it happened; trajectories carry these and the report
    counts them (nobody re-parses a message). A tool error's kind crosses MCP in the result's ``_meta``."""

    MALFORMED_CALL = "malformed_call"  # the answer was neither a tool call nor <done> (toolenvs.protocol)
    UNKNOWN_TOOL = "unknown_tool"  # a tool the environment does not have
    INVALID_ARGUMENT = "invalid_argument"  # the tool refused an argument's value (a bad date, an empty title, ...)
    NOT_FOUND = "not_found"  # the record the call names does not exist (for this user)
    PERMISSION_DENIED = "permission_denied"  # it exists, and belongs to somebody else
    CONFLICT = "conflict"  # the record's state does not allow it (already cancelled, sold out, ...)
    TOOL_ERROR = "tool_error"  # a tool error that came without a kind (another server, a hosted env)
    REPEATED_CALL = "repeated_call"  # the same call (name and arguments) again in one episode

    ALL = (MALFORMED_CALL, UNKNOWN_TOOL, INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, CONFLICT, TOOL_ERROR, REPEATED_CALL)


class Stop:
    """Why an episode ended (a trajectory's ``stop_reason``), named where it ends (``grpo.episodes``) and read
    by the report's trajectory pages and ``sweep forecast``."""

    DONE = "done"  # the policy answered <done>
    MAX_TURNS = "max_turns"  # it used every turn
    MAX_INPUT_LENGTH = "max_input_length"  # the conversation outgrew rollout.max_input_length
    MAX_GENERATE_LENGTH = "max_generate_length"  # a turn hit rollout.max_generate_length without a call or <done>
    ENV_ERROR = "env_error"  # the environment failed (not the policy)
    VERIFIER_ERROR = "verifier_error"  # the verifier failed

    ERRORS = (ENV_ERROR, VERIFIER_ERROR)


FAILURE_META = "grpo-sweep/failure"  # the key of a tool error's kind in an MCP CallToolResult's _meta
