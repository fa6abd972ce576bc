"""A process gives freed memory back before it runs the next trial (CPU trials reuse their process)."""

from __future__ import annotations

import ctypes
import os
import sys

import pytest

from grpo.process import release_memory, resident_gib


def _glibc_heap() -> bool:
    """glibc's malloc serves ``bytes`` objects: not another libc, not a preloaded jemalloc or tcmalloc."""
    if not sys.platform.startswith("linux") or "malloc" in os.environ.get("LD_PRELOAD", ""):
        return False
    libc = ctypes.CDLL(None)
    return hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "malloc_trim")


@pytest.mark.skipif(not _glibc_heap(), reason="malloc_trim is glibc's, for glibc's heap")
def test_freed_heap_goes_back_to_the_os():
    blocks = [bytes(1024) for _ in range(300_000)]  # ~300 MiB of malloc'd (not pymalloc) blocks
    stride = max(64, 8 * os.sysconf("SC_PAGE_SIZE") // 1024)  # gaps of several whole pages between survivors
    kept = blocks[::stride]  # a few survivors pin the heap, so glibc does not trim it by itself
    del blocks
    held = resident_gib() * 1024
    release_memory()
    assert resident_gib() * 1024 < held - 150, (held, resident_gib() * 1024)
    del kept  # alive until the measurement is done
