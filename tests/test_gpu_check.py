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


def test_its_steps_keep_every_failure_with_its_reason_and_pack_the_results(tmp_path):
    """The steps, on CPU with CUDA stood in for (a torch that says it has a device, an ``nvidia-smi``, a vLLM that
    imports): a passing test file, one that fails and one that hangs past its watchdog. The check fails naming both,
    the failure's message and where the hung test was are in the packed log, and only the pack, device.txt and
    summary.txt are left in the folder (the device tool brings back 8 files at most)."""
    import tarfile

    site, tests, bin_dir, out = (tmp_path / d for d in ("site", "tests", "bin", "out"))
    for d in (site / "vllm", site / "torch", site / "transformers", tests, bin_dir):
        d.mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("__version__ = 'stand-in'\n")
    (site / "transformers" / "__init__.py").write_text("__version__ = 'stand-in'\n")
    (site / "torch" / "__init__.py").write_text("__version__ = 'stand-in'\nclass cuda:\n    is_available = staticmethod(lambda: True)\n")
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA Stand-in, 1 MiB, 1.0'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    (tests / "test_ok.py").write_text("def test_ok():\n    pass\n")
    (tests / "test_bad.py").write_text("def test_bad():\n    assert 1 == 2, 'one is not two'\n")
    (tests / "test_hangs.py").write_text("import time\n\ndef test_hangs():\n    time.sleep(60)\n")
    env_file = tmp_path / "vllm_env.sh"
    env_file.write_text(f"export PATH={bin_dir}:$PATH\n")
    files = " ".join(str(tests / f"test_{n}.py") for n in ("ok", "bad", "hangs"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "VLLM_ENV": str(env_file), "PYTHONPATH": str(site),
           "OUT": str(out), "COMMIT": "c0ffee", "GPU_TESTS": files, "TEST_WATCHDOG_S": "10"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "tests"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    (folder,) = (out / "gpu").glob("*_c0ffee")
    assert folder.name.endswith("_NVIDIA-Stand-in-1-MiB-1.0_c0ffee")
    summary = (folder / "summary.txt").read_text()
    assert "test_bad.py: pytest exit 1" in summary and "test_hangs.py: the watchdog stopped it after 10 s" in summary
    assert "test_ok.py" not in summary and "every step passed" not in summary
    assert sorted(p.name for p in folder.iterdir()) == ["device.txt", "summary.txt"]
    with tarfile.open(folder.parent / f"{folder.name}.tgz") as pack:
        log = pack.extractfile(f"{folder.name}/tests.log").read().decode()
    assert "AssertionError: one is not two" in log and "\nFAILED " in log  # the reason, and pytest's short summary of it
    hung = log.split("test_hangs.py (watchdog 10 s)", 1)[1]  # the hung step's part of the log
    # where it was when its watchdog stopped it: in the test, or (CI 2026-12-03, a loaded machine) still collecting it
    assert "test_hangs.py:4: KeyboardInterrupt" in hung or ('File "' in hung and hung.rstrip().endswith("KeyboardInterrupt")), hung
