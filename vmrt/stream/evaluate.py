"""A plain numpy evaluation of a stream function: every op in program order on
byte arrays, no partitioning, no HAL. The reference a lowered module must match.

    results = evaluate(program, "train_step", inputs, kernels, parameters)

`inputs` are bytes-like, one per argument, of the declared sizes; results come
back as numpy uint8 arrays. Kernels are called exactly as the `vmrt-python-v0`
executables call them: `kernel(*operand ranges, *new results)` on uint8 arrays,
writing tied results in place. `parameters` maps a scope name to
{key: bytes-like} (or anything with a `gather(scope, target, spans)` method, such
as a vmrt.io provider).
"""

from __future__ import annotations

import struct

import numpy as np

from vmrt.errors import StatusCode
from vmrt.hal.python_loader import BUILTIN_KERNELS
from vmrt.stream.analysis import FuncAnalysis
from vmrt.stream.ir import Pattern, Program, StreamError


def pattern_bytes(pattern: Pattern) -> bytes:
    """The little-endian bytes of one pattern element.

    Integers wrap to their width (patterns may be written signed or unsigned);
    f16 rounds as numpy does, bf16 rounds the f32 value to nearest even.
    """
    kind, width = pattern.element_type, pattern.byte_width
    if kind.startswith("i"):
        return (int(pattern.value) & ((1 << 8 * width) - 1)).to_bytes(width, "little")
    value = float(pattern.value)
    if kind == "f16":
        return np.float16(value).tobytes()
    if kind == "f32":
        return struct.pack("<f", value)
    if kind == "f64":
        return struct.pack("<d", value)
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return (bits & 0xFFFF).to_bytes(2, "little")


def as_bytes_array(data) -> np.ndarray:
    """The bytes of a numpy array (any layout) or of a bytes-like object, as uint8."""
    if hasattr(data, "__array_interface__"):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return np.frombuffer(data, dtype=np.uint8)


def _parameter_reader(parameters):
    """(scope, key, length) -> bytes, from a {scope: {key: data}} mapping or a provider."""
    def read(scope: str, key: str, length: int) -> bytes:
        if hasattr(parameters, "gather"):
            target = bytearray(length)
            parameters.gather(scope, target, [(key, 0, 0, length)])
            return bytes(target)
        try:
            data = as_bytes_array(parameters[scope][key])
        except (KeyError, TypeError):
            raise StreamError(f"no parameter \"{scope}\"::\"{key}\"",
                              code=StatusCode.NOT_FOUND) from None
        if len(data) < length:
            raise StreamError(f"parameter \"{scope}\"::\"{key}\" has {len(data)} bytes; "
                              f"{length} are read", code=StatusCode.OUT_OF_RANGE)
        return data[:length].tobytes()
    return read


def evaluate(program: Program, function: str, inputs, kernels, parameters=None) -> list:
    """Runs @function on host arrays; `kernels` maps callee names ("ex::fn") to
    callables (a dict or a vmrt.hal.python_loader.KernelRegistry)."""
    func = program.func(function)
    if len(inputs) != len(func.args):
        raise StreamError(f"@{func.name} takes {len(func.args)} arguments, not {len(inputs)}")
    analysis = FuncAnalysis(func)
    storage: dict[int, np.ndarray] = {}
    for value, data in zip(func.args, inputs):
        array = as_bytes_array(data).copy()
        if array.size != value.type.size:
            raise StreamError(f"argument %{value.name} of @{func.name} must be "
                              f"{value.type.size} bytes, not {array.size}")
        storage[analysis.storage_of[value]] = array
    read_parameter = _parameter_reader(parameters if parameters is not None else {})

    def view(use):
        return storage[analysis.storage_of[use.value]][use.offset:use.end]

    def new(value):
        array = storage[analysis.storage_of[value]] = np.zeros(value.type.size, np.uint8)
        return array

    for op in func.ops:
        if op.kind == "splat":
            target = new(op.results[0])
            target.reshape(-1, op.pattern.byte_width)[:] = np.frombuffer(
                pattern_bytes(op.pattern), np.uint8)
        elif op.kind == "fill":
            view(op.operands[0]).reshape(-1, op.pattern.byte_width)[:] = np.frombuffer(
                pattern_bytes(op.pattern), np.uint8)
        elif op.kind == "copy":
            view(op.operands[1])[:] = view(op.operands[0]).copy()
        elif op.kind == "param.load":
            new(op.results[0])[:] = np.frombuffer(
                read_parameter(op.scope, op.keys[0], op.results[0].type.size), np.uint8)
        elif op.kind == "param.gather":
            for key, use in zip(op.keys, op.operands):
                view(use)[:] = np.frombuffer(read_parameter(op.scope, key, use.length),
                                             np.uint8)
        else:
            name = "::".join(op.callee)
            try:
                # A dict falls back on the builtins (vmrt.copy, ...) as a registry does.
                kernel = ((kernels.get(name) or BUILTIN_KERNELS[name])
                          if isinstance(kernels, dict) else kernels.lookup(name))
            except KeyError:
                raise StreamError(f"no kernel '{name}' for {op.describe()}",
                                  code=StatusCode.NOT_FOUND) from None
            arrays = [view(use) for use in op.operands]
            arrays += [new(result) for result, tie in zip(op.results, op.ties) if tie is None]
            kernel(*arrays)
    return [storage[analysis.storage_of[value]].copy() for value in func.returns]
