"""Shared pytest fixtures for the vmrt test suite."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


# ---------------------------------------------------------------------------
# Test corpus (tests/corpus): compiled .vmfb modules built with the IREE tools.
# ---------------------------------------------------------------------------

CORPUS_BUILD_DIR = REPO_ROOT / "build" / "corpus"
_CORPUS_TOOLS = ("iree-compile", "iree-as-module")


@pytest.fixture(scope="session")
def corpus():
    """Builds tests/corpus into build/corpus (incrementally) and returns the
    list of tests.corpus.build.CorpusModule. Skips when the IREE tools are
    not installed."""
    missing = [t for t in _CORPUS_TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"corpus needs the IREE tools {', '.join(missing)} (pip install iree-base-compiler iree-base-runtime)")
    from tests.corpus.build import build_corpus

    return build_corpus(CORPUS_BUILD_DIR)
