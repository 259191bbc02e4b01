"""vmrt.hal.elf_check, the pure-Python twin of the header checks both native
loaders make (csrc/vmrt_elf_headers.c): the same verdict, status code and message
as C on real images, on each kind of refusal, and on thousands of mutated images."""

from __future__ import annotations

import random

import pytest

from tests.hal.test_elf_loader import mutate
from tests.hal.test_hostile_elf import (
    ADD, FORMATS, STRUCTURAL_EDITS, compile_module, edited, elf_of,
)
from vmrt.errors import HalError, StatusCode
from vmrt.hal import elf as elf_module
from vmrt.hal.elf_check import check_headers as python_check

needs_c = pytest.mark.skipif(not elf_module.AVAILABLE, reason="C extension not available")


def verdict(check, data, for_system: bool) -> tuple[int, str]:
    try:
        check(data, for_system=for_system)
    except HalError as error:
        return int(error.code), error.message
    return 0, ""


@pytest.fixture(scope="module")
def seeds(tmp_path_factory, build) -> list[bytes]:
    """The add model's images in both formats and the hand-written test library."""
    folder = tmp_path_factory.mktemp("twin")
    images = [build()]
    for name, (_, flags) in FORMATS.items():
        (folder / name).mkdir()
        images.append(elf_of(compile_module(folder / name, ADD, *flags)))
    return images


@needs_c
@pytest.mark.parametrize("for_system", [False, True])
def test_real_images_pass_both(seeds, for_system):
    for image in seeds:
        assert verdict(elf_module.check_headers, image, for_system) == (0, "")
        assert verdict(python_check, memoryview(image), for_system) == (0, "")


@needs_c
@pytest.mark.parametrize("case", ["moved code segment", "code segment without file bytes"])
def test_structural_refusals_match(seeds, case):
    for image in seeds:
        bad = edited(image, STRUCTURAL_EDITS[case])
        for for_system in (False, True):
            c_verdict = verdict(elf_module.check_headers, bad, for_system)
            assert c_verdict[0] == StatusCode.INVALID_ARGUMENT
            assert verdict(python_check, bad, for_system) == c_verdict


@needs_c
def test_mutated_images_get_the_same_verdict(seeds):
    rng = random.Random(0x7717)
    outcomes: dict[int, int] = {}
    for case in range(4000):
        data = mutate(seeds[case % len(seeds)], rng)
        for_system = bool(case & 1)
        c_verdict = verdict(elf_module.check_headers, data, for_system)
        assert verdict(python_check, data, for_system) == c_verdict, case
        outcomes[c_verdict[0]] = outcomes.get(c_verdict[0], 0) + 1
    # Mutations reach both verdicts: the comparison is not all passes or all refusals.
    assert outcomes.get(0, 0) > 400 and outcomes.get(3, 0) > 400, outcomes


def test_check_headers_without_the_extension_uses_the_twin(monkeypatch, seeds):
    monkeypatch.setattr(elf_module, "_lib", None)
    elf_module.check_headers(seeds[0])
    with pytest.raises(HalError) as info:
        elf_module.check_headers(seeds[0][:100])
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert "lie outside the 100-byte image" in info.value.message
