"""Fixtures for the differential instruction tests (see differential.py) and for the
tests of the on-disk caches (vmrt.vm.code_cache, vmrt.vm.module_cache)."""

from __future__ import annotations

import pytest

from differential import Builder

#: The environment variables that choose the cache (vmrt.vm.code_cache).
CACHE_ENV = ("VMRT_CACHE", "VMRT_CACHE_DIR", "VMRT_CACHE_MAX_BYTES", "XDG_CACHE_HOME")


@pytest.fixture
def private_cache_dir(tmp_path, monkeypatch):
    """A cache directory of one test's own (never the user's), and fresh per-process
    cache state."""
    from vmrt.vm import code_cache

    for name in CACHE_ENV:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "vmrt-cache"
    monkeypatch.setenv("VMRT_CACHE_DIR", str(path))
    monkeypatch.setattr(code_cache, "_CACHES", {})
    monkeypatch.setattr(code_cache, "STATS", code_cache.CacheStats())
    return path


@pytest.fixture(scope="session")
def builder(tmp_path_factory):
    """Builds VM assembly (text or a tests/vm/vmasm file) once per session."""
    return Builder(tmp_path_factory.mktemp("vmasm"))
