"""Pictures of partition schedules (vmrt.stream.picture, `vmrt stream schedule|stats
--svg`): the SVG parses as XML, has one labelled group per wave and per transient, and
the slab map's boxes never overlap for transients live at once (as the packer
promises), on the training-step example and on random programs."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, given, settings

from tests.stream.test_stream_example import EXAMPLE
from tests.stream.test_stream_properties import programs
from vmrt.stream import FAVORS, Favor, load_program, plan
from vmrt.stream.picture import favors_picture, schedule_picture
from vmrt.tools.cli import main

NS = "{http://www.w3.org/2000/svg}"


def groups(svg, cls: str) -> list:
    return [g for g in svg.iter(f"{NS}g") if g.get("class") == cls]


def parse(picture) -> ElementTree.Element:
    return ElementTree.fromstring(str(picture))


def check_slab_boxes_never_overlap(panel) -> int:
    """Transient boxes live in a common wave share no pixel row; returns how many
    pairs were live at once."""
    boxes = []
    for group in groups(panel, "transient"):
        rect = group.find(f"{NS}rect")
        x, y = float(rect.get("x")), float(rect.get("y"))
        boxes.append((int(group.get("data-start-wave")), int(group.get("data-end-wave")),
                      y, y + float(rect.get("height")), x, x + float(rect.get("width"))))
    together = 0
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if a[0] <= b[1] and b[0] <= a[1]:
                together += 1
                assert a[4] < b[5] and b[4] < a[5]  # live at once: their columns meet
                assert a[3] <= b[2] + 0.005 or b[3] <= a[2] + 0.005, (a, b)
            else:
                assert a[5] <= b[4] or b[5] <= a[4]  # not live at once: apart in time
    return together


@pytest.fixture(scope="module")
def program():
    return load_program(EXAMPLE)


def test_schedule_picture_has_a_labelled_group_per_wave_and_transient(program):
    svg = parse(schedule_picture(program, function="train_step"))
    expected = plan(program.func("train_step"), Favor.MAX_CONCURRENCY)
    panel, = groups(svg, "panel")
    assert panel.get("data-favor") == "max-concurrency"
    waves = groups(panel, "wave")
    assert [int(g.get("data-wave")) for g in waves] == list(range(len(expected.schedule.waves)))
    for group, wave in zip(waves, expected.schedule.waves):
        assert group.find(f"{NS}title").text.startswith(f"wave {group.get('data-wave')}:")
        assert len(groups(group, "op")) == len(wave)
    transients = groups(panel, "transient")
    assert sorted(g.get("data-name") for g in transients) == sorted(
        s.name for s in expected.layout.slices)
    for group in transients:
        assert group.find(f"{NS}title").text.startswith(f"%{group.get('data-name')}:")
    assert any(t.text == "gw2.mb0" for t in panel.iter(f"{NS}text"))  # big ones named inline
    assert check_slab_boxes_never_overlap(panel) > 0


def test_favors_picture_shows_all_three_favors_on_one_scale(program):
    svg = parse(favors_picture(program, "train_step"))
    panels = groups(svg, "panel")
    assert [p.get("data-favor") for p in panels] == [f.value for f in FAVORS]
    widths = []
    for panel, favor in zip(panels, FAVORS):
        result = plan(program.func("train_step"), favor)
        assert len(groups(panel, "wave")) == len(result.schedule.waves)
        assert len(groups(panel, "transient")) == len(result.layout.slices)
        check_slab_boxes_never_overlap(panel)
        slab = next(r for r in panel.iter(f"{NS}rect") if r.get("fill") == "#f3f3f3")
        widths.append((float(slab.get("width")), float(slab.get("height"))))
    # One scale: debug takes longest, max-concurrency's slab is the tallest.
    assert widths[0][0] > widths[1][0] > widths[2][0]
    assert widths[2][1] > widths[1][1] == pytest.approx(widths[0][1], abs=8)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_slab_boxes_never_overlap_on_random_programs(program):
    for panel in groups(parse(favors_picture(program)), "panel"):
        check_slab_boxes_never_overlap(panel)


def test_cli_writes_the_pictures(tmp_path, capsys):
    schedule, stats = tmp_path / "schedule.svg", tmp_path / "stats.svg"
    assert main(["stream", "schedule", str(EXAMPLE), "--function=train_step",
                 "--partitioning-favor=min-peak-memory", "--force", f"--svg={schedule}"]) == 0
    assert main(["stream", "stats", str(EXAMPLE), f"--svg={stats}"]) == 0
    out = capsys.readouterr().out
    assert "favor=min-peak-memory" in out and "@initialize" in out
    panel, = groups(ElementTree.parse(schedule).getroot(), "panel")
    assert panel.get("data-favor") == "min-peak-memory"
    panels = groups(ElementTree.parse(stats).getroot(), "panel")
    assert [(p.get("data-function"), p.get("data-favor")) for p in panels] == [
        (name, f.value) for name in ("initialize", "train_step") for f in FAVORS]


def test_cli_picture_to_a_bad_path_is_one_line(tmp_path, capsys):
    assert main(["stream", "stats", str(EXAMPLE), f"--svg={tmp_path / 'no' / 'x.svg'}"]) == 1
    err = capsys.readouterr().err
    assert "cannot write the picture" in err and len(err.strip().splitlines()) == 1
