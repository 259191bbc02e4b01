"""Fixtures for the differential instruction tests (see differential.py)."""

from __future__ import annotations

import pytest

from differential import Builder


@pytest.fixture(scope="session")
def builder(tmp_path_factory):
    """Builds VM assembly (text or a tests/vm/vmasm file) once per session."""
    return Builder(tmp_path_factory.mktemp("vmasm"))
