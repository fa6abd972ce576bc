"""Run a task's untrusted ``verifier_code`` in a separate, limited process; any failure is a ``VerifierError``.

The contract for ``verifier_code``: Python source (stdlib only: json, math, re, datetime, collections,
itertools, functools, statistics, string are importable) defining ``verify(final_state: dict) -> float``
that returns a reward in [0, 1]. It gets the episode's final state as JSON-decoded data and nothing else:
no files, no network, no processes, no new imports. The child (``envs/sandbox_child.py``) runs with a wall
timeout (enforced here: the process group is killed), a CPU-time and an address-space limit, a 1 MiB
output cap, an empty environment (no secrets), a private network namespace where the kernel allows one, root dropped to ``nobody``, and an
audit hook that denies file opens, imports, sockets, processes and ctypes. A hang, a crash, a denied
action, an exception or a result that is not a number in [0, 1] raises ``VerifierError`` — never a reward.
Leaves out: which verifier a task uses (``toolenvs.verify``).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolenvs.errors import VerifierError

CHILD = Path(__file__).with_name("sandbox_child.py")
TAIL_BYTES = 4096


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits: wall-clock seconds and address space in MiB (the interpreter itself needs ~30)."""

    timeout_s: float = 5.0
    memory_mb: int = 256


DEFAULT_LIMITS = SandboxLimits()


def _prepare(directory: str, code: str, final_state: dict[str, Any], limits: SandboxLimits) -> list[str]:
    """Write the job file; the command line that runs it (``-I -S``: no env vars, no site-packages)."""
    job = {"code": code, "final_state": final_state, "memory_mb": limits.memory_mb, "cpu_s": math.ceil(limits.timeout_s) + 1}
    path = os.path.join(directory, "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return [sys.executable, "-I", "-S", str(CHILD), path]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _result(returncode: int, output: str) -> float:
    """The reward from the child's last stdout line, or VerifierError saying what went wrong."""
    lines = [line for line in output.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1]) if lines and returncode == 0 else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict):
        how = f"killed by signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
        raise VerifierError(f"verifier_code crashed ({how}): {output[-300:].strip()}")
    if "error" in result or not isinstance(result.get("reward"), (int, float)):
        raise VerifierError(f"verifier_code failed: {result.get('error', result)}")
    return float(result["reward"])


def _tail(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - TAIL_BYTES))
        return f.read().decode("utf-8", "replace")


def run_verifier(code: str, final_state: dict[str, Any], limits: SandboxLimits = DEFAULT_LIMITS) -> float:
    """The reward ``verify(final_state)`` returns in the sandbox; VerifierError on any failure."""
    with tempfile.TemporaryDirectory(prefix="verifier-") as directory:
        command = _prepare(directory, code, final_state, limits)
        out_path = os.path.join(directory, "out")
        with open(out_path, "wb") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={})
        try:
            returncode = process.wait(limits.timeout_s)
        except BaseException as exc:  # timeout or interrupt: the group dies before we go on
            _kill_group(process.pid)
            process.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise VerifierError(f"verifier_code timed out after {limits.timeout_s:g}s") from None
            raise
        return _result(returncode, _tail(out_path))


async def run_verifier_async(code: str, final_state: dict[str, Any], limits: SandboxLimits = DEFAULT_LIMITS) -> float:
    """``run_verifier`` without blocking the event loop (episodes verify concurrently)."""
    with tempfile.TemporaryDirectory(prefix="verifier-") as directory:
        command = _prepare(directory, code, final_state, limits)
        out_path = os.path.join(directory, "out")
        with open(out_path, "wb") as out:
            process = await asyncio.create_subprocess_exec(
                *command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={}
            )
        try:
            returncode = await asyncio.wait_for(process.wait(), limits.timeout_s)
        except BaseException as exc:  # timeout or cancellation: no verifier outlives its episode
            _kill_group(process.pid)
            await asyncio.shield(process.wait())
            if isinstance(exc, TimeoutError):
                raise VerifierError(f"verifier_code timed out after {limits.timeout_s:g}s") from None
            raise
        return _result(returncode, _tail(out_path))
