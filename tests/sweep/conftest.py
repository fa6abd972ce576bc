"""The sweep tests' one watched sweep (Ray's dashboard and the live page on), shared by the tests that read it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def watched_sweep(tmp_path_factory, private_cache):
    """A real CPU sweep run once per session with its dashboard and live page on, watched while it ran
    (``tests/sweep/live_watch.py``); the report's and the live page's end-to-end tests read it."""
    from tests.sweep.live_watch import run_watched

    return run_watched(tmp_path_factory.mktemp("watched_sweep"), private_cache)
