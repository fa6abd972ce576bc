"""Environment diagnoses as explicit rules: small pure functions over an env's row of the winner's table
that each return a finding with the numbers that triggered it, or None.

One registry, one signature: ``ENV_RULES`` (``EnvRow, Thresholds``). A trial's own diagnosis is its
verdict (``sweep.verdict.labels``: one label per trial, mutually exclusive), not a set of rules that can
contradict each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sweep.report.envs import EnvRow
from sweep.verdict.thresholds import EPS, Thresholds


@dataclass(frozen=True)
class Diagnosis:
    rule: str
    subject: str  # "env hotel"
    finding: str
    evidence: str


EnvRule = Callable[[EnvRow, Thresholds], "tuple[str, str] | None"]


def env_saturated(row: EnvRow, th: Thresholds) -> tuple[str, str] | None:
    if row.status != "SATURATED":
        return None
    return ("env saturated at the base: no signal, nothing to learn",
            f"pass@1 {row.base:.3f} ≥ {th.saturated} at step {row.base_step}")


def env_failing(row: EnvRow, th: Thresholds) -> tuple[str, str] | None:
    if row.status != "FAILING":
        return None
    return ("env never solved: its groups are all zeros (easier tasks, more samples per prompt or a stronger base policy)",
            f"pass@1 {row.base:.3f} at the base and {row.last:.3f} at the end, both ≤ {th.failing}")


def env_errors(row: EnvRow, th: Thresholds) -> tuple[str, str] | None:
    if row.env_error_frac is None or row.env_error_frac <= th.env_errors + EPS:
        return None
    return ("env often failed its episodes itself (a server or a verification that could not run; on Fleet, a verifier or its "
            "LLM judge failing after OpenEnv's retries): those episodes are left out of their groups, never scored 0",
            f"mean reward/{row.env}/env_error_frac {row.env_error_frac:.3f} > {th.env_errors}")


ENV_RULES: dict[str, EnvRule] = {"env_saturated": env_saturated, "env_failing": env_failing, "env_errors": env_errors}


def diagnose(env_rows: list[EnvRow], th: Thresholds) -> list[Diagnosis]:
    """The env rules on the winner's env table."""
    return [Diagnosis(name, f"env {row.env}", *hit) for row in env_rows for name, rule in ENV_RULES.items() if (hit := rule(row, th))]
