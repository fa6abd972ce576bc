"""A trial's process gives freed memory back before it runs the next trial (CPU trials reuse their process)."""

from __future__ import annotations

import sys

import psutil
import pytest

from sweep.trial import release_memory


def _rss_mib() -> float:
    return psutil.Process().memory_info().rss / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_freed_heap_goes_back_to_the_os():
    blocks = [bytes(1024) for _ in range(300_000)]  # ~300 MiB of malloc'd (not pymalloc) blocks
    kept = blocks[::64]  # a few survivors pin the heap, so glibc does not trim it by itself
    del blocks
    held = _rss_mib()
    release_memory()
    assert _rss_mib() < held - 150, (held, _rss_mib())
    del kept  # alive until the measurement is done
