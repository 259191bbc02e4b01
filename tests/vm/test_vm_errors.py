"""Failures: vm.fail status codes and messages, vm.check.* as iree-compile expands
them, traps (division by zero, out-of-range buffer/list access, null refs,
runaway recursion), bad input through the Python API, the VM stack of an error,
and the context staying usable after every failure. Also the trace/print hooks.

Programs: tests/vm/vmasm/errors.vmasm and checks.mlir. Differential where the
reference survives the input; vm.fail with status 17 (DEFERRED) hangs the
reference and integer division by zero kills it, so those are vmrt only.
"""

from __future__ import annotations

import math
import re

import pytest

import vmrt
from differential import I32_MAX, I32_MIN, I64_MAX, Pair
from vmrt.errors import StatusCode, VMError
from vmrt.isa.decoder import decode_at


@pytest.fixture(scope="module")
def err(builder):
    return Pair(builder.build_file("errors.vmasm"))


@pytest.fixture(scope="module")
def checks(builder):
    return Pair(builder.build_file("checks.mlir"))


def still_works(pair):
    assert pair.check("ok", 41).values == (42,)


# -- vm.fail --------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [1, 2, 3, 5, 8, 9, 11, 13, 16, 18, 37, 0x105])
def test_fail_status_codes_and_message(err, status):
    out = err.check("fail_with", status, messages=True)
    assert not out.ok and out.message == "failed on purpose"
    assert out.code == StatusCode(status & 0x1F).name
    still_works(err)


@pytest.mark.parametrize("status", [19, 31, -1, 32])
def test_fail_with_codes_outside_the_enum(err, status):
    # The reference masks the status to 5 bits too: 19..31 print with no name and
    # 32 becomes an "OK" failure. vmrt reports UNKNOWN resp. OK.
    out = err.ours("fail_with", status)
    assert not out.ok and out.message == "failed on purpose"
    theirs = err.theirs("fail_with", status)
    assert not theirs.ok and theirs.message == "failed on purpose"
    if status == 32:
        assert out.code == theirs.code == "OK"
    else:
        assert out.code == "UNKNOWN"


def test_fail_deferred_status(err):
    # Status 17 (DEFERRED) makes the reference wait forever; vmrt fails.
    out = err.ours("fail_with", 17)
    assert not out.ok and out.code == "DEFERRED"
    still_works(err)


def test_fail_with_zero_status_continues(err):
    assert err.check("fail_zero", 21).values == (42,)


def test_fail_with_empty_message(err):
    out = err.check("fail_empty_message", messages=True)
    assert out.code == "INTERNAL" and out.message == ""


def test_fail_error_carries_the_vm_stack(err):
    with pytest.raises(VMError) as info:
        err.context.function("errors.fail_with")(9)
    e = info.value
    assert e.code == StatusCode.FAILED_PRECONDITION
    assert e.stack and re.fullmatch(r"errors\.fail_with\+[0-9A-F]{8}", e.stack[0])
    assert "errors.fail_with+" in str(e)


# -- vm.check.* -----------------------------------------------------------------------------
def test_check_eq_and_ne(checks):
    assert checks.check("check_eq_i32", 3, 3).values == (3,)
    out = checks.check("check_eq_i32", 3, 4, messages=True)
    assert out.code == "FAILED_PRECONDITION" and out.message == "a == b"
    assert checks.check("check_ne_i64", 1 << 40, 0).values == (1 << 40,)
    out = checks.check("check_ne_i64", I64_MAX, I64_MAX, messages=True)
    assert out.code == "FAILED_PRECONDITION" and out.message == "a != b"


def test_check_nz(checks):
    assert checks.check("check_nz_i32", I32_MIN).values == (I32_MIN,)
    assert checks.check("check_nz_i32", 0, messages=True).message == "a is nonzero"
    assert checks.check("check_nz_ref", 4).values == (4,)
    assert checks.check("check_nz_ref", 0, messages=True).message == "ref is not null"
    assert checks.check("check_eq_ref", 1).values == (1,)
    assert checks.check("check_eq_ref", 0, messages=True).message == "same buffer"


def test_check_float(checks):
    assert checks.check("check_eq_f32", 1.5, 1.5).values == (1.5,)
    assert checks.check("check_eq_f32", 0.0, -0.0).ok
    assert not checks.check("check_eq_f32", math.nan, math.nan).ok   # NaN != NaN
    for a, b in ((1.0, 1.0 + 2 ** -20), (1.0, 1.1), (-1.0, 1.0), (0.0, -0.0),
                 (1e-45, -1e-45), (math.inf, math.inf), (3.0, 3.0000002)):
        checks.check("check_nearly_eq_f32", a, b, messages=True)


# -- traps ----------------------------------------------------------------------------------
@pytest.mark.parametrize("a", [0, 7, I32_MIN])
def test_division_by_zero_is_a_vm_error(err, a):
    with pytest.raises(VMError) as info:
        err.context.function("errors.nested_divide")(a, 0)
    e = info.value
    assert e.code == StatusCode.INVALID_ARGUMENT and "division by zero" in e.message
    assert not isinstance(e, ZeroDivisionError)
    # Innermost first: the division in the private callee, then the export.
    assert len(e.stack) == 2 and e.stack[1].startswith("errors.nested_divide+")
    assert err.check("nested_divide", 10, 3).values == (103,)


def test_out_of_range_buffer_and_list_access(err):
    assert err.check("buffer_read", 8, 1).values == (0,)
    for length, index in ((8, 2), (0, 0), (7, 1), (8, 1 << 40), (8, 1 << 60)):
        assert err.check("buffer_read", length, index).code == "OUT_OF_RANGE"
        still_works(err)
    # vmrt only: upstream multiplies the element offset by the element size and
    # checks `offset + length > buffer length` in 64 bits without overflow, so
    # offset -1 passes and reads the 4 bytes before the buffer.
    for index in (-1, -2, -(1 << 62), 1 << 62):
        assert err.ours("buffer_read", 8, index).code == "OUT_OF_RANGE"
    assert err.check("list_read", 3, 2).values == (0,)
    for size, index in ((3, 3), (0, 0), (3, -1), (3, I32_MAX)):
        assert err.check("list_read", size, index).code == "OUT_OF_RANGE"
        still_works(err)


def test_null_ref_operand(err):
    out = err.check("null_buffer")
    assert out.code == "INVALID_ARGUMENT" and "null" in out.message
    still_works(err)


def test_infinite_recursion_is_resource_exhausted(err):
    out = err.check("forever", 0)
    assert out.code == "RESOURCE_EXHAUSTED"
    still_works(err)
    # Deep but finite recursion still works afterwards.
    assert err.check("depth", 600).values == (600,)


def test_recursion_to_the_documented_depth(err):
    assert err.check("depth", 1500).values == (1500,)


def test_recursion_limit_follows_the_instance(builder):
    vmfb = builder.build_file("errors.vmasm")
    ctx = vmrt.Context(vmrt.Instance(max_depth=50), modules=[vmrt.load_module(vmfb)])
    assert ctx.function("errors.depth")(40) == 40
    with pytest.raises(VMError) as info:
        ctx.function("errors.depth")(60)
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert ctx.function("errors.depth")(45) == 45


# -- the VM stack against the reference ------------------------------------------------------------
def _instruction_at(pair, function_name, pc):
    module = pair.module
    ordinal = _ordinal(pair, function_name)
    descriptor = module.definition.function_descriptors[ordinal]
    start = descriptor.bytecode_offset
    body = memoryview(module.definition.bytecode_data)[start:start + descriptor.bytecode_length]
    return decode_at(body, pc, len(body))


def _ordinal(pair, function_name):
    local = function_name.split(".", 1)[1]
    for ordinal in range(pair.module.function_count):
        if pair.module.function_name(ordinal) == local:
            return ordinal
    raise KeyError(function_name)


@pytest.mark.parametrize("name, args, symbol", [
    ("nested_read", (8, 2), "BufferLoadI32"),
    ("buffer_read", (4, 1), "BufferLoadI32"),
    ("list_read", (1, 1), "ListGetI32"),
    ("null_buffer", (), "BufferLoadI32"),
    ("fail_with", (3,), "Fail"),
])
def test_stack_offsets_match_the_reference(err, name, args, symbol):
    ours, theirs = err.ours(name, *args), err.theirs(name, *args)
    assert ours.code == theirs.code
    # vmrt: innermost first, each frame at the instruction that failed or called.
    innermost, *callers = ours.stack
    assert _instruction_at(err, *innermost).instruction.symbol == symbol
    # The reference lists only the calling frames, each at its return address
    # (the pc after the call instruction).
    expected = tuple(("errors", _ordinal(err, fn), _instruction_at(err, fn, pc).next_pc)
                     for fn, pc in callers)
    assert expected == theirs.stack


def test_stack_of_a_nested_failure(err):
    with pytest.raises(VMError) as info:
        err.context.function("errors.nested_read")(8, 2)
    stack = info.value.stack
    assert [label.split("+")[0] for label in stack] == [
        "errors.buffer_read", "errors.function#13", "errors.nested_read"]
    assert all(re.fullmatch(r"[\w.#]+\+[0-9A-F]{8}( \(.*\))?", label) for label in stack)


# -- the Python API ----------------------------------------------------------------------------
def code_of(fn, *args):
    with pytest.raises(VMError) as info:
        fn(*args)
    return info.value.code


def test_wrong_argument_count(err):
    fn = err.context.function("errors.ok")
    assert code_of(fn) == StatusCode.INVALID_ARGUMENT
    assert code_of(fn, 1, 2) == StatusCode.INVALID_ARGUMENT
    assert code_of(err.context.function("errors.nested_read"), 8) == StatusCode.INVALID_ARGUMENT
    still_works(err)


@pytest.mark.parametrize("bad", [None, object(), [1], 1 << 32, -(1 << 31) - 1, math.nan,
                                 math.inf, "twelve"])
def test_wrong_argument_types_for_i32(err, bad):
    assert code_of(err.context.function("errors.ok"), bad) == StatusCode.INVALID_ARGUMENT
    still_works(err)


@pytest.mark.parametrize("bad", [1 << 64, -(1 << 63) - 1, "x", None])
def test_wrong_argument_types_for_i64(err, bad):
    fn = err.context.function("errors.buffer_read")
    assert code_of(fn, bad, 0) == StatusCode.INVALID_ARGUMENT
    assert code_of(fn, 8, bad) == StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("bad", ["one", None, [1.0], object()])
def test_wrong_argument_types_for_floats(err, bad):
    fn = err.context.function("errors.traced")
    assert code_of(fn, 0, bad, 0, 0.0) == StatusCode.INVALID_ARGUMENT
    assert code_of(fn, 0, 0.0, 0, bad) == StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("bad", [5, 1.5, "buffer", object()])
def test_wrong_argument_types_for_refs(err, bad):
    fn = err.context.function("errors.buffer_arg")
    assert code_of(fn, bad) == StatusCode.INVALID_ARGUMENT
    assert fn(b"12345") == 5
    assert code_of(fn, None) == StatusCode.INVALID_ARGUMENT   # null ref operand


@pytest.mark.parametrize("kind, bad", [("i", 1.5), ("i", "12"), ("I", 2.5), ("f", "1.0")])
def test_lenient_numeric_conversions(err, kind, bad):
    if kind == "i":
        assert code_of(err.context.function("errors.ok"), bad) == StatusCode.INVALID_ARGUMENT
    elif kind == "I":
        fn = err.context.function("errors.buffer_read")
        assert code_of(fn, bad, 0) == StatusCode.INVALID_ARGUMENT
    else:
        fn = err.context.function("errors.traced")
        assert code_of(fn, 0, 0.0, 0, bad) == StatusCode.INVALID_ARGUMENT


def test_missing_functions(err):
    ctx = err.context
    assert code_of(ctx.function, "errors.nope") == StatusCode.NOT_FOUND
    assert code_of(ctx.function, "nomodule.ok") == StatusCode.NOT_FOUND
    assert code_of(ctx.function, "ok") == StatusCode.INVALID_ARGUMENT
    assert code_of(ctx.function, "errors.function#6") == StatusCode.NOT_FOUND  # not exported
    still_works(err)


def test_context_survives_a_sequence_of_failures(err):
    for name, args in (("fail_with", (3,)), ("forever", (0,)), ("buffer_read", (1, 5)),
                       ("list_read", (0, 0)), ("null_buffer", ())):
        assert not err.ours(name, *args).ok
        still_works(err)
        assert err.check("depth", 10).values == (10,)
    for a in (1, 0, 2):
        try:
            err.context.function("errors.nested_divide")(5, a)
        except VMError:
            pass
    still_works(err)


# -- trace and print hooks -----------------------------------------------------------------------
def test_trace_and_print_hooks(builder):
    traced, printed = [], []
    ctx = vmrt.Context(vmrt.Instance(), modules=[vmrt.load_module(builder.build_file(
        "errors.vmasm"))], trace_hook=lambda name, values: traced.append((name, values)),
        print_hook=lambda name, values: printed.append((name, values)))
    assert ctx.function("errors.traced")(1 << 40, -2.5, 7, 0.5) == 8
    assert traced == [("traced.enter", (7, 1 << 40, 0.5, -2.5)), ("traced.ref", (None,)),
                      ("traced.none", ())]
    assert printed == [("traced.print", (7,))]


def test_default_hooks_are_quiet_for_trace(builder, capsys):
    ctx = vmrt.Context(vmrt.Instance(), modules=[vmrt.load_module(builder.build_file(
        "errors.vmasm"))])
    assert ctx.function("errors.traced")(1, 1.0, 1, 1.0) == 2
    captured = capsys.readouterr()
    assert "traced.print" in captured.err and "traced.enter" not in captured.err


def test_a_failing_hook_fails_the_call(builder):
    def boom(name, values):
        raise RuntimeError("hook failed")
    ctx = vmrt.Context(vmrt.Instance(), modules=[vmrt.load_module(builder.build_file(
        "errors.vmasm"))], trace_hook=boom)
    with pytest.raises(VMError) as info:
        ctx.function("errors.traced")(1, 1.0, 1, 1.0)
    assert info.value.stack and info.value.stack[0].startswith("errors.traced+")
    assert ctx.function("errors.ok")(1) == 2


def test_reference_agrees_the_traced_function_computes(err):
    # The reference ignores vm.trace/vm.print (release build): same result.
    assert err.check("traced", 1 << 40, -2.5, 7, 0.5).values == (8,)
