"""The `check` module's comparisons (upstream's module.cc semantics and messages) and
`vmrt check` on a module compiled by iree-compile for VMVX."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from tests.hal.conftest import Compiler
from vmrt.errors import StatusCode, VmrtError
from vmrt.elements import ElementType as E
from vmrt.modules import check
from vmrt.tools.cli import main

CHECKS_MLIR = """
func.func @scalars_hold() {
  %one = util.unfoldable_constant 1 : i32
  %zero = util.unfoldable_constant 0 : i32
  check.expect_true(%one) : i32
  check.expect_false(%zero) : i32
  return
}
func.func @tensors_hold() {
  %a = util.unfoldable_constant dense<[3, 1, 2]> : tensor<3xi32>
  check.expect_all_true(%a) : tensor<3xi32>
  check.expect_eq_const(%a, dense<[3, 1, 2]> : tensor<3xi32>) : tensor<3xi32>
  %f = util.unfoldable_constant dense<[1.0, -2.5]> : tensor<2xf32>
  check.expect_almost_eq_const(%f, dense<[1.00005, -2.5]> : tensor<2xf32>) : tensor<2xf32>
  return
}
func.func @true_of_zero() {
  %zero = util.unfoldable_constant 0 : i32
  check.expect_true(%zero) : i32
  return
}
func.func @eq_differs() {
  %a = util.unfoldable_constant dense<[1, 2]> : tensor<2xi32>
  check.expect_eq_const(%a, dense<[1, 5]> : tensor<2xi32>) : tensor<2xi32>
  %one = util.unfoldable_constant 1 : i32
  check.expect_false(%one) : i32
  return
}
func.func @almost_eq_differs() {
  %f = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  check.expect_almost_eq_const(%f, dense<[1.0, 2.5]> : tensor<2xf32>, atol 1.0e-2) : tensor<2xf32>
  return
}
func.func @all_true_of_bool() {
  %b = util.unfoldable_constant dense<[true, false]> : tensor<2xi1>
  check.expect_all_true(%b) : tensor<2xi1>
  return
}
"""


@pytest.fixture(scope="module")
def checks_vmfb(tmp_path_factory):
    return Compiler(tmp_path_factory.mktemp("check_mlir"))(CHECKS_MLIR)


def tensor(values, dtype, element_type, shape=None):
    array = np.asarray(values, dtype=dtype)
    return check.Tensor(tuple(shape if shape is not None else array.shape), int(element_type),
                        array.tobytes())


def test_scalar_checks():
    assert check.true_failure(7) is None and check.false_failure(0) is None
    assert check.true_failure(0) == "Expected 0 to be nonzero."
    assert check.false_failure(-3) == "Expected -3 to be zero."


def test_all_true_names_the_first_zero_and_rejects_other_types():
    assert check.all_true_failure(tensor([1, -1, 9], "i1", E.SINT_8)) is None
    assert check.all_true_failure(tensor([0.5, 2.0], "<f8", E.FLOAT_64)) is None
    message = check.all_true_failure(tensor([[4, 0], [0, 1]], "<u2", E.UINT_16))
    assert message.startswith("Expected all elements to be nonzero; element #1 is 0.")
    assert message.endswith("2x2xui16=[4 0][0 1]")
    for element_type in (E.BOOL_8, E.FLOAT_16, E.INT_4):
        with pytest.raises(VmrtError) as caught:
            check.all_true_failure(check.Tensor((1,), int(element_type), b"\x01"))
        assert caught.value.code == StatusCode.INVALID_ARGUMENT
        assert "unsupported element type" in caught.value.message


def test_eq_compares_type_shape_and_bytes():
    a = tensor([1, 2, 3, 4], "<i4", E.INT_32)
    assert check.eq_failure(a, tensor([1, 2, 3, 4], "<i4", E.INT_32)) is None
    message = check.eq_failure(a, tensor([1, 2, 3, 5], "<i4", E.INT_32))
    assert message == ("Expected equality of these values. Contents does not match.\n"
                       "  lhs:\n    4xi32=1 2 3 4\n  rhs:\n    4xi32=1 2 3 5")
    reshaped = check.eq_failure(a, tensor([1, 2, 3, 4], "<i4", E.INT_32, (2, 2)))
    assert reshaped.startswith("Expected equality of these values. Shapes do not match.\n")
    retyped = check.eq_failure(a, tensor([1, 2, 3, 4], "<u4", E.UINT_32))
    assert retyped.startswith("Expected equality of these values. Element types do not "
                              "match.\n")


def test_almost_eq_tolerance_is_relative_to_rhs():
    lhs = tensor([100.0], "<f4", E.FLOAT_32)
    rhs = tensor([111.0], "<f4", E.FLOAT_32)
    # |100 - 111| = 11 <= 0.1 * 111 but > 0.1 * 100: upstream scales rtol by the rhs.
    assert check.almost_eq_failure(lhs, rhs, 0.0, 0.1) is None
    assert check.almost_eq_failure(rhs, lhs, 0.0, 0.1) is not None
    message = check.almost_eq_failure(tensor([1.0, 2.0, 3.0], "<f4", E.FLOAT_32),
                                      tensor([1.0, 2.25, 3.5], "<f4", E.FLOAT_32), 1e-4, 0.0)
    assert message.splitlines()[0] == (
        "Expected near equality of these values. Contents does not match to tolerance "
        f"parameters atol={struct.unpack('<f', struct.pack('<f', 1e-4))[0]:g}, rtol=0. "
        "The first failure occurs at index 1 as the lhs value 2 differs from the rhs value "
        "2.25 by 2.500e-01.")


def test_almost_eq_special_values():
    def holds(a, b, dtype="<f8", element_type=E.FLOAT_64):
        return check.almost_eq_failure(tensor(a, dtype, element_type),
                                       tensor(b, dtype, element_type), 1e-3, 1e-3) is None
    assert holds([math.nan, math.inf, -math.inf], [math.nan, math.inf, -math.inf])
    assert not holds([1.0], [math.inf]) and not holds([math.inf], [1e308])
    assert not holds([math.nan], [0.0]) and not holds([math.inf], [-math.inf])


def test_almost_eq_widens_narrow_floats():
    f16 = tensor([0.0, 100.0], "<f2", E.FLOAT_16)
    assert check.almost_eq_failure(f16, tensor([0.01, 99.5], "<f2", E.FLOAT_16), 0.02, 0.01) \
        is None
    # bf16 is the top half of an f32: 1.5 = 0x3FC0, 1.0 = 0x3F80.
    bf16 = check.Tensor((2,), int(E.BFLOAT_16), struct.pack("<2H", 0x3FC0, 0x3F80))
    message = check.almost_eq_failure(
        bf16, check.Tensor((2,), int(E.BFLOAT_16), struct.pack("<2H", 0x3FC0, 0x4000)), 0.1, 0)
    assert "index 1 as the lhs value 1 differs from the rhs value 2 by 1.000e+00." in message
    # f8E4M3FN: 0x38 = 1.0, 0x40 = 2.0.
    f8 = check.Tensor((1,), int(E.FLOAT_8_E4M3_FN), b"\x38")
    assert check.almost_eq_failure(f8, check.Tensor((1,), int(E.FLOAT_8_E4M3_FN), b"\x40"),
                                   0.5, 0) is not None
    assert check.almost_eq_failure(f8, f8, 0, 0) is None
    with pytest.raises(VmrtError) as caught:
        check.almost_eq_failure(tensor([1], "<i4", E.INT_32), tensor([1], "<i4", E.INT_32), 0, 0)
    assert caught.value.code == StatusCode.INVALID_ARGUMENT


def test_vmrt_check_reports_each_test(checks_vmfb, capsys):
    assert main(["check", str(checks_vmfb)]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if not line.startswith(" ")]
    assert lines[:2] == ["PASSED module.scalars_hold", "PASSED module.tensors_hold"]
    assert lines[2] == "FAILED module.true_of_zero: check.expect_true: Expected 0 to be nonzero."
    assert lines[3].startswith("FAILED module.eq_differs: check.expect_")
    # Both failed checks are reported (the compiler may order them either way).
    assert "check.expect_eq: Expected equality of these values. Contents does not match." \
        in out and "check.expect_false: Expected 1 to be zero." in out
    assert "    2xi32=1 5" in out
    assert lines[4].startswith("FAILED module.almost_eq_differs: check.expect_almost_eq: "
                               "Expected near equality")
    assert lines[5].startswith("ERROR module.all_true_of_bool: INVALID_ARGUMENT:")
    assert "unsupported element type i1" in lines[5]
    assert lines[-1] == "2 passed, 4 failed"
    assert main(["check", str(checks_vmfb), "--expect_failure", "--device=local-task"]) == 0


def test_vmrt_check_rejects_functions_with_arguments(compile_mlir_tools, capsys):
    vmfb = compile_mlir_tools("func.func @takes(%a: i32) -> i32 { return %a : i32 }")
    assert main(["check", str(vmfb)]) == 1
    err = capsys.readouterr().err
    assert "expected function with no inputs or outputs, but export 'takes'" in err


@pytest.fixture(scope="module")
def compile_mlir_tools(tmp_path_factory):
    return Compiler(tmp_path_factory.mktemp("check_tools_mlir"))
