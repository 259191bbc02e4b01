"""vmrt's pictures use colours every SVG renderer draws: `#rrggbb` (and a few named
colours), never `hsl(...)`, which some renderers (cairosvg) paint black (issue 39,
item 7)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from vmrt.svg import color_for, hsl_color, palette

REPO = Path(__file__).resolve().parents[1]
COLOUR = re.compile(r'(?:fill|stroke)="([^"]*)"')
DRAWN = re.compile(r"#[0-9a-f]{6}|#[0-9a-f]{3}|none|white|black|[a-z]+")


def test_hsl_colours_are_written_as_hex():
    assert hsl_color(0, 100, 50) == "#ff0000"
    assert hsl_color(120, 100, 25) == "#008000"
    assert hsl_color(240, 55, 60) == "#6161d1"  # (C = 0.44, m = 0.38)
    assert re.fullmatch(r"#[0-9a-f]{6}", color_for("matmul"))
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in palette(["a", "b", "c"]).values())


def _colours(svg_text: str) -> set[str]:
    return set(COLOUR.findall(svg_text))


def test_a_drawn_schedule_has_only_hex_or_named_colours(tmp_path):
    out = tmp_path / "schedule.svg"
    subprocess.run([sys.executable, "-m", "vmrt", "stream", "schedule",
                    str(REPO / "examples" / "mlp_train_step.stream"), "--function=train_step",
                    f"--svg={out}"], check=True, capture_output=True, cwd=REPO)
    colours = _colours(out.read_text())
    assert colours and all(DRAWN.fullmatch(c) for c in colours), colours


@pytest.mark.parametrize("picture", sorted((REPO / "docs").glob("*.svg")), ids=lambda p: p.name)
def test_the_readme_pictures_have_no_hsl(picture):
    text = picture.read_text()
    assert "hsl(" not in text
    assert all(DRAWN.fullmatch(c) for c in _colours(text))
