"""CI's rule on skips (tests/conftest.py): only a GPU test's, or a contract test's where ../shared/upstream is absent."""

from __future__ import annotations

from types import SimpleNamespace

import tests.conftest as rules


def _report(reason: str) -> SimpleNamespace:
    return SimpleNamespace(longrepr=("test_x.py", 1, f"Skipped: {reason}"))


def test_a_gpu_skip_is_allowed_and_an_unexplained_one_is_not():
    assert rules._skip_allowed(_report("needs a CUDA GPU: run on the GPU machine"))
    assert not rules._skip_allowed(_report("chromium is not installed"))


def test_naming_shared_excuses_a_skip_only_where_the_upstream_folder_is_absent(tmp_path, monkeypatch):
    reason = "OpenEnv's Fleet code is not here (../shared is absent)"
    monkeypatch.setattr(rules, "UPSTREAM", tmp_path)  # present
    assert not rules._skip_allowed(_report(reason))
    monkeypatch.setattr(rules, "UPSTREAM", tmp_path / "gone")
    assert rules._skip_allowed(_report(reason))
