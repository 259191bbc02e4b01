"""Untrusted modules under limits: generated programs and mutated real modules are
loaded, verified and run with fuel, a deadline, a depth and a memory limit. Each
outcome is a result or a VmrtError; nothing hangs (the limits bound every run)
and nothing else escapes. `pytest -s` prints how many modules loaded and ran.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vmrt
from vmrt.asm import assemble
from vmrt.errors import StatusCode, VmrtError
from vmrt.vm.limits import Limits

ROOT = Path(__file__).resolve().parents[2]
SEED_FILES = sorted((ROOT / "tests/corpus/vmasm").glob("*.vmasm")) + \
    sorted((ROOT / "tests/vm/vmasm").glob("*.vmasm")) + [ROOT / "benchmarks/vm_bench.vmasm"]
LIMITS = Limits(fuel=20_000, max_depth=200, max_memory=1 << 20, timeout=2.0)
#: Seconds past its deadline no call comes near unless it hangs.
HANG = 30
ARGUMENTS = {"i": (0, 1, 7, -1), "I": (0, 3, -1), "f": (0.0, 1.5), "F": (0.0, -2.0), "r": (None,)}

STATS = collections.Counter()
LEAKED: list[str] = []  # Python exceptions the runtime let through (as INTERNAL)
vmrt.Instance()  # raises the recursion limit once, before hypothesis watches it


_EXHAUSTED = (("fuel", "out of fuel"), ("depth", "depth"), ("memory", "over the limit"))


class Host(vmrt.NativeModule, name="host", version=0):
    """The only native module the untrusted code may import (a few names)."""

    @vmrt.export("0ii_i")
    def add(self, a, b):
        return (a + b) & 0x7FFFFFFF

    @vmrt.export("0i_i")
    def tick(self, x):
        return x + 1


def _seeds() -> list[bytes]:
    seeds = []
    for path in SEED_FILES:
        try:
            seeds.append(assemble(path.read_text()))
        except VmrtError:
            continue
    return seeds


SEEDS = _seeds()


def run_untrusted(data: bytes, choice: int = 0) -> str:
    """Loads and runs every export of `data`; returns the last outcome's label."""
    try:
        module = vmrt.load_module(data)
    except VmrtError as error:
        STATS[f"load: {error.code.name}"] += 1
        return "rejected"
    STATS["loaded"] += 1
    try:
        context = vmrt.Context(vmrt.Instance(), modules=[Host()], limits=LIMITS)
        context.register(module)
    except VmrtError as error:
        STATS[f"register: {error.code.name}"] += 1
        return "unregistered"
    STATS["registered"] += 1
    label = "no exports"
    for name in module.export_names():
        try:
            fn = context.function(f"{module.name}.{name}")
        except VmrtError as error:
            STATS[f"lookup: {error.code.name}"] += 1
            continue
        args = []
        for position, kind in enumerate(c for c in fn.arguments if c != "v"):
            options = ARGUMENTS.get(kind, (None,))
            args.append(options[(choice + position) % len(options)])
        if "C" in fn.arguments:
            STATS["skipped: span arguments"] += 1
            continue
        STATS["calls"] += 1
        try:
            fn(*args)
            label = "result"
        except VmrtError as error:
            label = error.code.name
            if error.code == StatusCode.RESOURCE_EXHAUSTED:
                label += next((f" ({why})" for why, text in _EXHAUSTED if text in error.message),
                              "")
            if "internal error:" in error.message:
                LEAKED.append(str(error))
        STATS[f"call: {label}"] += 1
        if context.fuel_remaining < 1000:
            context.refuel(20_000)
    try:
        context.close()
    except VmrtError as error:
        STATS[f"close: {error.code.name}"] += 1
    return label


# -- mutated real modules --------------------------------------------------------------------------
@st.composite
def mutated_modules(draw):
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, len(data) - 1))
        data[position] = draw(st.integers(0, 255))
    if draw(st.booleans()) and draw(st.integers(0, 9)) == 0:
        del data[draw(st.integers(0, len(data) - 1)):]
    return bytes(data), draw(st.integers(0, 3))


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_modules())
def test_mutated_modules_fail_only_with_vmrt_errors(case):
    data, choice = case
    STATS["mutated modules"] += 1
    run_untrusted(data, choice)
    assert not LEAKED


# -- generated programs ------------------------------------------------------------------------------
_OPS = [
    "%i{a} = vm.add.i32 %i{b}, %i{c}",
    "%i{a} = vm.sub.i32 %i{b}, %i{c}",
    "%i{a} = vm.mul.i32 %i{b}, %i{c}",
    "%i{a} = vm.div.i32.s %i{b}, %i{c}",
    "%i{a} = vm.rem.i32.u %i{b}, %i{c}",
    "%i{a} = vm.shl.i32 %i{b}, %i{c}",
    "%i{a} = vm.cmp.lt.i32.s %i{b}, %i{c}",
    "%i{a} = vm.const.i32 {k}",
    "%i{a} = vm.call @host.add(%i{b}, %i{c})",
    "%i{a} = vm.call @f(%i{b})",
    "%i{a} = vm.call @g(%i{b}, %i{c})",
    "%i{a} = vm.global.load.i32 @cell",
    "vm.global.store.i32 %i{b}, @cell",
    "%i8:9 = vm.ext.i32.i64.s %i{b}\n  %r0 = vm.buffer.alloc %i8:9, %i{c}",
    "%i8:9 = vm.ext.i32.i64.s %i{b}\n  %i{a} = vm.buffer.load.i32 %r0, %i8:9",
    "%r1 = vm.list.alloc %i{b} : !vm.list<i32>\n  vm.list.resize %r1, %i{c}",
    "%i{a} = vm.list.size %r1",
]


@st.composite
def generated_programs(draw):
    """Two functions (f: one argument, g: two) of random blocks: arithmetic, calls
    (recursion included), globals, buffers, lists, branches anywhere."""
    functions = []
    for name, arity in (("f", 1), ("g", 2)):
        block_count = draw(st.integers(1, 4))
        blocks = []
        for index in range(block_count):
            lines = []
            for _ in range(draw(st.integers(0, 5))):
                template = draw(st.sampled_from(_OPS))
                lines.append(template.format(a=draw(st.integers(0, 5)), b=draw(st.integers(0, 5)),
                                             c=draw(st.integers(0, 5)),
                                             k=draw(st.integers(-3, 1 << 20))))
            kind = draw(st.sampled_from(["return", "br", "cond_br", "fail"]))
            target = draw(st.integers(0, block_count - 1))
            other = draw(st.integers(0, block_count - 1))
            cond = draw(st.integers(0, 5))
            if kind == "return":
                lines.append(f"vm.return %i{cond}")
            elif kind == "br":
                lines.append(f"vm.br ^bb{target}()")
            elif kind == "cond_br":
                lines.append(f"vm.cond_br %i{cond}, ^bb{target}(), ^bb{other}()")
            else:
                lines.append(f'vm.fail %i{cond}, "generated"')
            blocks.append(f"^bb{index}:\n  " + "\n  ".join(lines))
        params = ", ".join(f"%i{i}: i32" for i in range(arity))
        functions.append(f"vm.export @{name}\nvm.func @{name}({params}) -> (i32) {{\n"
                         + "\n".join(blocks) + "\n}")
    return ("vm.module @gen version 0\nvm.type i32\nvm.type !vm.buffer\n"
            "vm.type !vm.list<i32>\nvm.import @host.add cconv \"0ii_i\"\n"
            "vm.global.i32 private mutable @cell\n" + "\n".join(functions) + "\n")


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(generated_programs(), st.integers(0, 3))
def test_generated_programs_fail_only_with_vmrt_errors(source, choice):
    STATS["generated programs"] += 1
    try:
        data = assemble(source)
    except VmrtError as error:
        STATS[f"assemble: {error.code.name}"] += 1
        return
    STATS["assembled"] += 1
    run_untrusted(data, choice)
    assert not LEAKED


# -- hostile modules using the hal module -----------------------------------------------------------
@pytest.mark.parametrize("device, cases", [("local-sync", 1000), ("local-task", 200)])
def test_hostile_hal_calls_stay_within_their_limits(device, cases):
    """Queue allocations, huge grids, recorded commands and byte-mutated VMVX
    executables (tests/vm/hostile_hal.py; scripts/fuzz_limits.py runs more and holds
    each call to its deadline + 100 ms): each call ends (within HANG seconds of its
    deadline: a shared machine's delays are not the sandbox overrunning), fails only
    with a vmrt error that is not INTERNAL, and leaves memory_in_use at 0."""
    import random

    from tests.vm.hostile_hal import Fuzzer
    from tests.vm.hostile_hal import close
    fuzzer = Fuzzer(device, deadline_slack=HANG)
    rng = random.Random(15)
    try:
        for _ in range(cases):
            fuzzer.case(rng)
    finally:
        close(fuzzer.context)
    for key, count in fuzzer.outcomes.items():
        STATS[f"hal {device} {key}"] += count
    STATS["hostile hal calls"] += cases
    assert not fuzzer.problems, fuzzer.problems[:10]


# -- imports -------------------------------------------------------------------------------------------
IMPORTS_ELSEWHERE = """
vm.module @reach version 0
vm.type i32
vm.import @os.system cconv "0i_i"
vm.export @run
vm.func @run(%i0: i32) -> (i32) {
^bb0:
  %i0 = vm.call @os.system(%i0)
  vm.return %i0
}
"""


def test_a_module_reaches_only_registered_imports():
    module = vmrt.load_module(assemble(IMPORTS_ELSEWHERE))
    context = vmrt.Context(vmrt.Instance(), modules=[Host()], limits=LIMITS)
    with pytest.raises(VmrtError) as info:
        context.register(module)
    assert info.value.code == StatusCode.NOT_FOUND
    assert "'os'" in str(info.value)
    # An optional import of it registers, and fails as unresolved when called.
    optional = vmrt.load_module(assemble(IMPORTS_ELSEWHERE.replace(
        "vm.import @os.system", "vm.import optional @os.system")))
    context.register(optional)
    with pytest.raises(VmrtError) as info:
        context.function("reach.run")(1)
    assert info.value.code == StatusCode.NOT_FOUND


def test_report_untrusted_outcomes():
    """Runs last in this file: prints the outcome histogram (`pytest -s`)."""
    assert STATS["mutated modules"] + STATS["generated programs"] + STATS["hostile hal calls"] > 0
    print("\nuntrusted-input suite:")
    for key, count in sorted(STATS.items()):
        print(f"  {key:40} {count}")
