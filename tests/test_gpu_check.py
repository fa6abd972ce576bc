"""``scripts/gpu_check.sh`` fails, never skips, where the GPU path cannot run: without the carried vLLM, without
CUDA, or asked for a part it does not have (exit 2 before any step, saying why). Its steps run on the GPU machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _check(*args: str, env_file: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "VLLM_ENV": str(env_file or "/nonexistent/vllm_env.sh")}
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_without_the_carried_vllm_it_fails_and_says_how_to_carry_it():
    done = _check()
    assert done.returncode == 2 and "/nonexistent/vllm_env.sh is missing: carry vLLM first" in done.stderr, done.stderr


def test_without_cuda_it_fails_before_any_step(tmp_path):
    env_file = tmp_path / "vllm_env.sh"
    env_file.write_text("export VLLM_NO_USAGE_STATS=1\n")
    done = _check("tests", env_file=env_file)
    assert done.returncode == 2 and "no CUDA device seen by torch" in done.stderr, done.stderr
    assert "FAILED before any step" in done.stderr and "passed" not in done.stdout


def test_an_unknown_part_is_named():
    done = _check("everything")
    assert done.returncode == 2 and "unknown part 'everything' (tests, benches or all)" in done.stderr, done.stderr
