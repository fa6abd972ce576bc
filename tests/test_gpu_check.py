"""``scripts/gpu_check.sh`` fails, never skips, where the GPU path cannot run: without vLLM, without CUDA, or asked
for a part it does not have (exit 2 before any step, saying why). Its steps run on the GPU machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _check(*args: str, env_file: Path | None = None, path: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "VLLM_ENV": str(env_file or "/nonexistent/vllm_env.sh"),
           "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": path}  # no GPU, even where the tests run on a GPU machine
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_without_vllm_it_fails_and_says_how_to_get_it():
    done = _check()
    assert done.returncode == 2 and "vLLM does not import (pip install -e '.[gpu]'" in done.stderr, done.stderr
    assert "/nonexistent/vllm_env.sh was not found" in done.stderr


def test_without_cuda_it_fails_before_any_step(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")  # a vLLM that imports, on a machine with no CUDA
    env_file = tmp_path / "vllm_env.sh"
    env_file.write_text("export VLLM_NO_USAGE_STATS=1\n")
    done = _check("tests", env_file=env_file, path=str(tmp_path))
    assert done.returncode == 2 and "no CUDA device seen by torch" in done.stderr, done.stderr
    assert "FAILED before any step" in done.stderr and "passed" not in done.stdout


def test_an_unknown_part_is_named():
    done = _check("everything")
    assert done.returncode == 2 and "unknown part 'everything' (tests, benches or all)" in done.stderr, done.stderr
