"""Fixtures of the native-module tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    """A session directory for assembled modules and compiled C."""
    return tmp_path_factory.mktemp("native")
