"""What vmrt.compile takes, made into MLIR for iree-compile: an ONNX model (through the
compiler's own ONNX importer), MLIR text or bytecode, a torch.nn.Module (torch.export
through iree-turbine when installed, else the ONNX exporter) or a JAX function (its
StableHLO export). Each import also says what it knows of the inputs and outputs.
"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from vmrt.errors import StatusCode, VmrtError, file_error
from vmrt.vm.declaration import ValueInfo

__all__ = ["ImportedSource", "import_source", "is_source_path", "require"]

#: File suffixes vmrt.compile reads by path (vmrt.load hands these to it).
SOURCE_SUFFIXES = (".onnx", ".mlir", ".mlirbc")
#: With external parameters: the scope they are named in (io_parameters' scope), and the
#: size (elements) from which an ONNX initializer goes to the archive.
PARAMETER_SCOPE = "model"
EXTERNAL_MINIMUM_ELEMENTS = 1024
#: The MLIR bytecode magic ("ML\xefR").
MLIR_BYTECODE_MAGIC = b"ML\xefR"


@dataclass
class ImportedSource:
    """A source as MLIR: `mlir` (text or bytecode), the `input_type` iree-compile is
    told (`auto` lets it tell), what the inputs and outputs are where the source
    says (names, shapes, dtypes), and `content`: the bytes the compile cache keys."""

    mlir: bytes
    input_type: str = "auto"
    inputs: list[ValueInfo] = field(default_factory=list)
    outputs: list[ValueInfo] = field(default_factory=list)
    content: bytes = b""
    kind: str = "mlir"
    #: Names for the inputs the compiled module declares (a function's parameters).
    input_names: list[str] = field(default_factory=list)


def require(package: str, what: str) -> Any:
    """Imports `package` (the compiler, onnx, ...) or fails saying how to install it."""
    import importlib
    try:
        return importlib.import_module(package)
    except ImportError as error:
        extra = "pip install 'vmrt[compile]'" if package.startswith(("iree", "onnx")) \
            else f"pip install {package.split('.')[0]}"
        raise VmrtError(f"{what} needs the `{package}` package ({error}); install it with "
                        f"`{extra}`", StatusCode.UNAVAILABLE) from None


def is_source_path(source: Any) -> bool:
    """Whether `source` is a path vmrt.compile reads (an .onnx or .mlir file)."""
    return isinstance(source, (str, os.PathLike)) and \
        Path(source).suffix.lower() in SOURCE_SUFFIXES


def import_source(source: Any, example_args: Optional[tuple] = None,
                  parameters_to: Optional[Path] = None) -> ImportedSource:
    """MLIR for a path (.onnx, .mlir, .mlirbc), an onnx.ModelProto, a torch.nn.Module
    or a JAX function (these two with `example_args`); `parameters_to`: an .irpa for
    an ONNX model's large weights."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        data = _read(path)
        if path.suffix.lower() == ".onnx":
            return import_onnx(data, str(path), parameters_to)
        return _mlir(data)
    kind = type(source).__module__.split(".")[0]
    if kind == "onnx":
        return import_onnx(source.SerializeToString(), "<onnx model>", parameters_to)
    if _is_torch_module(source):
        return import_torch(source, _examples(example_args, "a torch.nn.Module"),
                            parameters_to)
    if callable(source):
        return import_jax(source, _examples(example_args, "a JAX function"))
    raise VmrtError(f"cannot compile a {type(source).__name__} (expected a path to an .onnx "
                    "or .mlir file, a torch.nn.Module or a JAX function)",
                    StatusCode.INVALID_ARGUMENT)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise file_error(error, f"cannot read '{path}'") from None


def _examples(example_args: Optional[tuple], what: str) -> tuple:
    if example_args is None:
        raise VmrtError(f"compiling {what} needs example_args (the inputs to trace it with)",
                        StatusCode.INVALID_ARGUMENT)
    return tuple(example_args) if isinstance(example_args, (tuple, list)) else (example_args,)


def _mlir(data: bytes) -> ImportedSource:
    if not data.startswith(MLIR_BYTECODE_MAGIC):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise VmrtError("not MLIR: neither text nor MLIR bytecode",
                            StatusCode.INVALID_ARGUMENT) from None
    return ImportedSource(data, "auto", content=data, kind="mlir")


# -- ONNX ---------------------------------------------------------------------------------------
def import_onnx(data: bytes, name: str, parameters_to: Optional[Path] = None) -> ImportedSource:
    """An ONNX model's bytes as torch-dialect MLIR bytecode (the compiler's importer, as
    iree-import-onnx runs it), with the graph's input and output names and types;
    with `parameters_to`, initializers of at least EXTERNAL_MINIMUM_ELEMENTS go to
    that .irpa (scope PARAMETER_SCOPE) and the module names them."""
    onnx = require("onnx", "compiling an ONNX model")
    try:
        model = onnx.load_from_string(data)
    except Exception as error:  # noqa: BLE001 - protobuf's DecodeError and kin
        raise VmrtError(f"{name} is not an ONNX model: {error}",
                        StatusCode.INVALID_ARGUMENT) from None
    if not model.graph.node and not model.graph.output:
        raise VmrtError(f"{name} is not an ONNX model: it has no graph",
                        StatusCode.INVALID_ARGUMENT)
    try:
        onnx.checker.check_model(model)
        model = onnx.shape_inference.infer_shapes(model)
    except ValueError:
        pass  # over protobuf's 2 GB: imported as it is
    except Exception as error:  # noqa: BLE001 - onnx's ValidationError, InferenceError
        raise VmrtError(f"{name} is not a valid ONNX model: {_first_line(error)}",
                        StatusCode.INVALID_ARGUMENT) from None
    module = _onnx_module(model, name, parameters_to)
    bytecode = io.BytesIO()
    module.write_bytecode(bytecode)
    initializers = {tensor.name for tensor in model.graph.initializer}
    inputs = [_onnx_value(onnx, v) for v in model.graph.input if v.name not in initializers]
    outputs = [_onnx_value(onnx, v) for v in model.graph.output]
    return ImportedSource(bytecode.getvalue(), "onnx", inputs, outputs, content=data,
                          kind="onnx")


def _onnx_module(model, name: str, parameters_to: Optional[Path]):
    require("iree.compiler", "compiling an ONNX model")
    importer = require("iree.compiler.extras.onnx_importer", "compiling an ONNX model")
    from iree.compiler.ir import Context
    try:
        info = importer.ModelInfo(model)
        module = info.create_module(context=Context()).operation
        if parameters_to is None:
            importer.NodeImporter.define_function(info.main_graph, module).import_all()
        else:
            _import_with_parameters(model, info, module, parameters_to)
        module.verify()
    except VmrtError:
        raise
    except Exception as error:  # noqa: BLE001 - the importer's OnnxImportError and MLIR's
        raise VmrtError(f"cannot import {name}: {_first_line(error)}",
                        StatusCode.UNIMPLEMENTED) from None
    return module


def _import_with_parameters(model, info, module, irpa: Path) -> None:
    """The import with large initializers as parameters (the importer's externalizing
    twin, as `iree-import-onnx --externalize-params` runs it); the archive is written
    by vmrt.io."""
    from iree.compiler.tools.import_onnx.importer_externalization_overrides import (
        IREENodeImporter, ParamData)
    import numpy as np
    from onnx import numpy_helper
    from vmrt.io import ParameterIndex
    from vmrt.io.formats import write_file
    settings = ParamData(param_bit_threshold=None,
                         num_elements_threshold=EXTERNAL_MINIMUM_ELEMENTS,
                         params_scope=PARAMETER_SCOPE, data_dir=str(irpa.parent),
                         param_path=str(irpa), input_index_threshold=None)
    imported = IREENodeImporter.define_function(info.main_graph, module, settings)
    imported.import_all()
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    index = ParameterIndex()
    for onnx_name, key in imported.globals:
        array = np.ascontiguousarray(numpy_helper.to_array(initializers[onnx_name]))
        index.add_buffer(key, memoryview(array).cast("B"))
    if len(index):
        write_file(index, irpa)


def _onnx_value(onnx, value) -> ValueInfo:
    tensor = value.type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else None
                 for d in tensor.shape.dim)
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        element = _ELEMENT_TYPES.get(str(dtype), str(dtype))
    except (KeyError, ValueError, TypeError):
        element = "unknown"
    shape = "x".join("?" if d is None else str(d) for d in dims)
    type_text = f"tensor<{shape}{'x' if dims else ''}{element}>"
    return ValueInfo(value.name, type_text, dims, element)


#: numpy dtype names -> MLIR element types (vmrt.vm.declaration maps them back).
_ELEMENT_TYPES = {"bool": "i1", "int8": "i8", "uint8": "ui8", "int16": "i16",
                  "uint16": "ui16", "int32": "i32", "uint32": "ui32", "int64": "i64",
                  "uint64": "ui64", "float16": "f16", "float32": "f32", "float64": "f64"}


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


# -- PyTorch and JAX ----------------------------------------------------------------------------
def _is_torch_module(source: Any) -> bool:
    torch = __import__("sys").modules.get("torch")
    return torch is not None and isinstance(source, torch.nn.Module)


def import_torch(module, example_args: tuple,
                 parameters_to: Optional[Path] = None) -> ImportedSource:
    """A torch.nn.Module traced on `example_args`: through iree-turbine's torch.export
    importer when it is installed, else exported to ONNX (torch.onnx) and imported."""
    import importlib.util
    if importlib.util.find_spec("iree.turbine") is not None:
        from iree.turbine import aot
        try:
            exported = aot.export(module, args=example_args)
        except Exception as error:  # noqa: BLE001 - torch.export's many errors
            raise VmrtError(f"torch.export failed: {_first_line(error)}",
                            StatusCode.INVALID_ARGUMENT) from None
        text = str(exported.mlir_module).encode()
        return ImportedSource(text, "torch", content=text, kind="torch",
                              input_names=_parameter_names(module.forward, len(example_args)))
    import torch
    with tempfile.TemporaryDirectory(prefix="vmrt-torch-") as folder:
        path = os.path.join(folder, "model.onnx")
        names = _parameter_names(module.forward, len(example_args))
        try:
            with torch.no_grad():
                torch.onnx.export(module, example_args, path, input_names=names,
                                  opset_version=17, dynamo=False)
        except Exception as error:  # noqa: BLE001 - the exporter's many errors
            raise VmrtError(f"torch.onnx.export failed: {_first_line(error)}",
                            StatusCode.INVALID_ARGUMENT) from None
        return import_onnx(Path(path).read_bytes(), type(module).__name__, parameters_to)


def import_jax(function, example_args: tuple) -> ImportedSource:
    """A JAX function lowered for `example_args` (jax.jit(...).lower) as StableHLO."""
    jax = require("jax", "compiling a JAX function")
    try:
        text = jax.jit(function).lower(*example_args).as_text().encode()
    except Exception as error:  # noqa: BLE001 - tracing errors of every kind
        raise VmrtError(f"cannot lower {getattr(function, '__name__', 'the function')} "
                        f"with JAX: {_first_line(error)}", StatusCode.INVALID_ARGUMENT) from None
    return ImportedSource(text, "stablehlo", content=text, kind="jax",
                          input_names=_parameter_names(function, len(example_args)))


def _parameter_names(function, count: int) -> list[str]:
    """The names of a function's first `count` parameters (`inputN` where it has no
    such plain parameters: *args, a builtin)."""
    import inspect
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    plain = [p.name for p in parameters
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:count]
    return plain if len(plain) == count else [f"input{i}" for i in range(count)]
