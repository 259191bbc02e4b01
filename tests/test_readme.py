"""Every code block of README.md runs as written.

Python blocks run one by one, each in a fresh interpreter, from a scratch folder that
holds the repository's `examples/` (the paths the README uses) and the C files of the
README's C blocks (a C block names its file on its first line: `// mymod.c`). Shell
blocks may only run `make` targets that the Makefile defines (CI runs `make test`
itself; `make run` is run by tests/tools and by hand).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", README, re.S | re.M)
PYTHON_BLOCKS = [code for lang, code in BLOCKS if lang == "python"]


def _first_line(code: str) -> str:
    return code.strip().splitlines()[0]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("readme")
    (folder / "examples").symlink_to(ROOT / "examples")
    for lang, code in BLOCKS:
        if lang == "c":
            name = re.fullmatch(r"//\s*(\S+\.c)", _first_line(code))
            assert name, f"a README C block must name its file first: {_first_line(code)!r}"
            (folder / name.group(1)).write_text(code)
    return folder


def test_the_readme_has_python_blocks():
    assert len(PYTHON_BLOCKS) >= 4


@pytest.mark.parametrize("code", PYTHON_BLOCKS, ids=[_first_line(c)[:40] for c in PYTHON_BLOCKS])
def test_python_block_runs(code, scratch):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", code], cwd=scratch, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # A `print(...)  # value` line promises that value: it must be in the output.
    promised = re.findall(r"^\s*print\([^#\n]*\)\s*#\s*([^<{\n]+?)\s*$", code, re.M)
    for value in promised:
        assert value in result.stdout, (value, result.stdout)


def test_shell_blocks_name_makefile_targets():
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    for lang, code in BLOCKS:
        if lang != "sh":
            continue
        for line in code.splitlines():
            command = line.split("#")[0].strip()
            if command:
                words = command.split()
                assert words[0] == "make" and words[1] in targets, line
