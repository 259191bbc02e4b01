"""The public API at first contact: `vmrt.load` of an iree-compile'd model supplies the
hal module (and io_parameters over `parameters=`) as iree.runtime does, numpy arrays
go in and come out, the names the README uses are at the top level, and a function's
repr shows its reflection signature as iree.runtime's does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import vmrt

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
INPUT = np.array([[1, 0.5, -0.5, 2]], np.float32)


def reference_predict(vmfb: Path) -> tuple[np.ndarray, str]:
    """(predict(INPUT), repr(predict)) through iree.runtime."""
    rt = pytest.importorskip("iree.runtime")
    module = rt.load_vm_flatbuffer_file(str(vmfb), driver="local-sync")
    return module.predict(INPUT).to_host(), repr(module.predict)


# -- item 1: hal (and io_parameters) supplied --------------------------------------------------
@pytest.mark.parametrize("name", ["mlp.vmfb", "mlp_cpu.vmfb"])
@pytest.mark.parametrize("device", ["local-sync", "local-task"])
def test_load_supplies_the_hal_module_and_numpy_goes_in_and_out(name, device):
    expected, _ = reference_predict(EXAMPLES / name)
    with vmrt.load(EXAMPLES / name, device=device) as m:
        result = m.predict(INPUT)
        assert isinstance(result, np.ndarray) and result.dtype == np.float32
        np.testing.assert_array_equal(result, expected)
        assert m.context.module("hal").module.devices[0].identifier == device


def test_a_hal_module_the_caller_passes_is_the_one_used():
    hal = vmrt.HalModule()
    with vmrt.load(EXAMPLES / "mlp.vmfb", modules=[hal]) as m:
        assert m.context.module("hal").module is hal
        assert m.predict(INPUT).shape == (1, 3)


def test_devices_load_creates_are_closed_with_it_and_given_ones_are_not(monkeypatch):
    from vmrt.hal.device import TaskDevice, create_device
    closed = []
    monkeypatch.setattr(TaskDevice, "close", lambda self: closed.append(self))
    with vmrt.load(EXAMPLES / "mlp.vmfb", device="local-task") as m:
        made = m.context.module("hal").module.devices[0]
    assert closed == [made]
    given = create_device("local-task")
    with vmrt.load(EXAMPLES / "mlp.vmfb", device=given) as m:
        assert m.context.module("hal").module.devices == [given]
    assert closed == [made]


def test_an_unknown_device_is_not_found():
    with pytest.raises(vmrt.VmrtError) as info:
        vmrt.load(EXAMPLES / "mlp.vmfb", device="cuda")
    assert info.value.code == vmrt.StatusCode.NOT_FOUND






def test_parameters_feed_a_supplied_io_parameters_module(parameter_model):
    from vmrt.io import IndexProvider, ParameterIndex, ParameterScopes
    vmfb, irpa, weights = parameter_model
    x = np.ones(4, np.float32)
    scopes = ParameterScopes()
    scopes.add_file(irpa, "model")
    for parameters in ({"model": irpa}, {"model": [str(irpa)]}, scopes,
                       IndexProvider("model", ParameterIndex.load(irpa))):
        with vmrt.load(vmfb, parameters=parameters) as m:
            np.testing.assert_array_equal(m.scale(x), weights)
            assert isinstance(m.context.module("io_parameters").module, vmrt.IoParametersModule)


def test_missing_parameter_archives_fail_at_load(parameter_model, tmp_path):
    vmfb, _, _ = parameter_model
    with pytest.raises(FileNotFoundError) as info:
        vmrt.load(vmfb, parameters={"model": tmp_path / "missing.irpa"})
    assert info.value.code == vmrt.StatusCode.NOT_FOUND
    assert "scope 'model'" in str(info.value)


# -- item 2: top-level names --------------------------------------------------------------------
def test_readme_names_are_at_the_top_level():
    from vmrt.modules.hal import HalModule
    from vmrt.modules.io_parameters import IoParametersModule
    from vmrt.vm.limits import Limits
    assert vmrt.Limits is Limits and vmrt.HalModule is HalModule
    assert vmrt.IoParametersModule is IoParametersModule
    assert vmrt.io.IndexProvider is not None
    for name in vmrt.__all__:
        assert getattr(vmrt, name) is not None, name
    assert set(vmrt.__all__) <= set(dir(vmrt))


def test_importing_vmrt_loads_neither_the_hal_nor_the_io_package():
    code = ("import sys, vmrt; vmrt.Limits; vmrt.load; "
            "assert not [m for m in sys.modules if m.startswith(('vmrt.hal', 'vmrt.io', "
            "'vmrt.modules', 'numpy'))], sorted(sys.modules)")
    import sys
    subprocess.run([sys.executable, "-c", code], check=True)


# -- item 3: a function's repr shows its reflection --------------------------------------------
def test_function_repr_shows_the_reflection_declaration():
    _, reference = reference_predict(EXAMPLES / "mlp.vmfb")
    declaration = ("sync func @predict(%input0: tensor<1x4xf32>) -> "
                   "(%output0: tensor<1x3xf32>)")
    assert declaration in reference
    with vmrt.load(EXAMPLES / "mlp.vmfb") as m:
        assert m.predict.reflection == {"iree.abi.declaration": declaration}
        assert repr(m.predict) == ("<vmrt function module.predict(0r_r), reflection = "
                                   f"{{'iree.abi.declaration': '{declaration}'}}>")
        # iree.runtime's form after its type name: `predict(0r_r), reflection = {...}>`
        assert repr(m.predict).endswith(" module." + reference.split(" ", 1)[1])


def test_function_repr_without_reflection_shows_the_cconv():
    text = ("vm.module @plain version 1\nvm.type i32\nvm.export @neg\n"
            "vm.func @neg(%i0: i32) -> (i32) {\n^bb0:\n  vm.return %i0\n}\n")
    with vmrt.load(text) as m:
        assert m.neg.reflection == {}
        assert repr(m.neg) == "<vmrt function plain.neg(0i_i)>"


def test_a_missing_parameter_archive_fails_even_when_the_module_takes_none(tmp_path):
    # As iree-run-module opens --parameters files before it looks at the module.
    with pytest.raises(FileNotFoundError):
        vmrt.load(EXAMPLES / "mlp.vmfb", parameters=tmp_path / "missing.irpa")


# -- issue 39, item 2: tensor arguments take what numpy.asarray takes, with the declared dtype --
@pytest.mark.parametrize("value", [[[1, 0.5, -0.5, 2]], ((1, 0.5, -0.5, 2),), [[1, 0, 0, 2]]])
def test_nested_lists_become_tensors_of_the_declared_dtype(value):
    with vmrt.load(EXAMPLES / "mlp.vmfb") as m:
        # (ints too: the declaration says tensor<1x4xf32>, so they become float32)
        np.testing.assert_array_equal(m.predict(value),
                                      m.predict(np.asarray(value, np.float32)))


def test_a_flat_list_for_a_2d_tensor_fails_on_its_shape_not_as_a_vm_list():
    with vmrt.load(EXAMPLES / "mlp.vmfb") as m, pytest.raises(vmrt.VmrtError) as error:
        m.predict([1, 0.5, -0.5, 2])
    assert "shape" in str(error.value) and "vm.list" not in str(error.value)


def test_dynamic_integer_tensors_from_lists(corpus):
    dynamic = next(module for module in corpus if module.name == "tensor_dynamic")
    with vmrt.load(dynamic.vmfb) as m:
        result = m.concat_dyn([1, 2], [3])
        assert result.dtype == np.int32 and result.tolist() == [1, 2, 3]
        assert m.scale_dyn([1, 2, 3], 2) .tolist() == [2, 4, 6]


def test_values_numpy_cannot_convert_name_the_argument():
    with vmrt.load(EXAMPLES / "mlp.vmfb") as m, pytest.raises(vmrt.VmrtError) as error:
        m.predict([["a", 1, 2, 3]])
    assert error.value.code == vmrt.StatusCode.INVALID_ARGUMENT
    assert "argument 0 (%input0: tensor<1x4xf32>)" in str(error.value)


# -- issue 39, item 14: a function's inputs and outputs; exports without internals ------------
def test_function_inputs_and_outputs_from_the_declaration(corpus):
    with vmrt.load(EXAMPLES / "mlp.vmfb") as m:
        (x,), (y,) = m.predict.inputs, m.predict.outputs
        assert (x.name, x.type, x.shape, x.dtype) == ("input0", "tensor<1x4xf32>", (1, 4),
                                                      "float32")
        assert (y.name, y.shape, y.element_type) == ("output0", (1, 3), "f32")
    dynamic = next(module for module in corpus if module.name == "tensor_dynamic")
    with vmrt.load(dynamic.vmfb) as m:
        tensor, scalar = m.scale_dyn.inputs
        assert (tensor.shape, tensor.dtype, tensor.is_tensor) == ((None,), "float32", True)
        assert (scalar.type, scalar.shape, scalar.dtype, scalar.is_tensor) == (
            "f32", None, "float32", False)


def test_exports_leave_out_internal_functions():
    with vmrt.load(EXAMPLES / "mlp.vmfb") as m:
        assert "__init" in m.module.export_names()
        assert m.exports == ["predict"]


# -- issue 39, item 13: iree.runtime's driver= keyword; load's keywords are its own -----------
def test_driver_is_iree_runtimes_name_for_device():
    with vmrt.load(EXAMPLES / "mlp.vmfb", driver="local-task") as m:
        assert m.context.module("hal").module.devices[0].identifier == "local-task"
        np.testing.assert_array_equal(m.predict(INPUT), reference_predict_or_own(m))
    with pytest.raises(TypeError, match="driver is iree.runtime's name for device"):
        vmrt.load(EXAMPLES / "mlp.vmfb", driver="local-task", device="local-sync")


def reference_predict_or_own(m) -> np.ndarray:
    with vmrt.load(EXAMPLES / "mlp.vmfb") as sync:
        return sync.predict(INPUT)


def test_an_unknown_keyword_names_load_not_context():
    with pytest.raises(TypeError, match=r"^load\(\) got an unexpected keyword argument 'drivr'"):
        vmrt.load(EXAMPLES / "mlp.vmfb", drivr="local-task")
