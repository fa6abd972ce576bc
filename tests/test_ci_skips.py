"""CI's rule on skips (tests/conftest.py): with CI=true only a test marked ``gpu`` may skip; any other skip,
a whole module's included (a Fleet contract test that finds no OpenEnv), fails. Run as a user runs pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFTEST = "from tests.conftest import pytest_collection_modifyitems, pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n"
TESTS = {
    "test_gpu.py": "import pytest\n\n@pytest.mark.gpu\ndef test_needs_cuda():\n    pass\n",
    "test_plain.py": "import pytest\n\ndef test_skips():\n    pytest.skip('chromium is not installed')\n",
    "test_module.py": "import pytest\n\npytest.skip('OpenEnv is not here (../shared is absent)', allow_module_level=True)\n\ndef test_x():\n    pass\n",
}


def _run(tmp_path: Path, ci: bool) -> str:
    for name, text in {"conftest.py": CONFTEST, **TESTS}.items():
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true" if ci else "false", "CUDA_VISIBLE_DEVICES": ""}  # the gpu test skips anywhere
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "--strict-markers", "--continue-on-collection-errors", "-m", "gpu or not gpu",
                           "-o", "markers=gpu: needs a CUDA GPU", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True)
    return done.stdout


def test_in_ci_only_a_gpu_test_may_skip(tmp_path):
    out = _run(tmp_path, ci=True)
    assert "SKIPPED" in out and "test_gpu.py" in out.split("SKIPPED", 1)[1].splitlines()[0], out  # no CUDA here: allowed
    assert "FAILED test_plain.py::test_skips" in out and "skipped in CI, where only GPU tests may skip" in out, out
    assert "ERROR test_module.py" in out or "FAILED test_module.py" in out, out  # text naming ../shared excuses nothing


def test_outside_ci_they_skip_with_their_reasons(tmp_path):
    out = _run(tmp_path, ci=False)
    assert "FAILED" not in out and "ERROR" not in out and "chromium is not installed" in out and "OpenEnv is not here" in out, out
