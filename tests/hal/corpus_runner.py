"""Runs recorded iree-run-module invocations of the MLIR corpus in vmrt and
prints what iree-run-module would print (the part after `EXEC @function`)."""

from __future__ import annotations

import math

import vmrt
from vmrt.errors import VmrtError
from vmrt.hal.buffer_view_io import (
    InputStreams, format_result, parse_scalar, parse_tensor_input,
)
from vmrt.modules.hal import HalModule
from vmrt.vm import cconv as cconv_mod


def _format_scalar(kind: str, value) -> str:
    if kind in "iI":
        return f"{'i32' if kind == 'i' else 'i64'}={value}"
    name = "f32" if kind == "f" else "f64"
    if math.isnan(value):
        return f"{name}={'-nan' if math.copysign(1, value) < 0 else 'nan'}"
    return f"{name}={'%g' % value}"


def parse_inputs(arguments: str, inputs: list[str], device, streams) -> list:
    values = []
    kinds = [c for c in arguments if c != "v"]
    for text in inputs:
        if len(values) >= len(kinds):
            raise VmrtError("function expected fewer input values", 3)
        kind = kinds[len(values)]
        text = text.strip()
        if kind == "r":
            values.extend(parse_tensor_input(text, device, streams))
        else:
            values.append(parse_scalar(text, kind))
    return values


def run(vmfb: str, function: str, flags: list[str], device: str = "local-sync",
        parameters=None) -> list[str]:
    """Output lines of one invocation; raises VmrtError on failure.

    `parameters` maps scopes to archives for an io_parameters module."""
    inputs = [f.split("=", 1)[1] for f in flags if f.startswith("--input=")]
    hal = HalModule(device=device, host_arrays=False)
    module = vmrt.load_module(vmfb)
    natives = [hal]
    if parameters:
        from vmrt.io import ParameterScopes
        from vmrt.modules.io_parameters import IoParametersModule
        scopes = ParameterScopes()
        for scope, path in parameters.items():
            scopes.add_file(str(path), scope)
        natives.append(IoParametersModule(scopes))
    try:
        with vmrt.Context(modules=[*natives, module]) as ctx:
            fn = ctx.function(f"{module.name}.{function}")
            arguments, results = cconv_mod.split_fragments(fn.cconv)
            with InputStreams() as streams:
                values = parse_inputs(arguments, inputs, hal.devices[0], streams)
            finish = None
            if module.export_attrs(function).get("iree.abi.model") == "coarse-fences":
                # Async-external: a null wait fence and a signal fence to wait on.
                finish = hal.devices[0].create_fence()
                values += [None, finish]
            result = fn(*values)
            if finish is not None:
                finish.wait()
            kinds = [c for c in results if c != "v"]
            if len(kinds) == 1:
                result = (result,)
            lines = []
            for index, (kind, value) in enumerate(zip(kinds, result or ())):
                if kind == "r":
                    lines.extend(format_result(index, value).split("\n"))
                else:
                    lines.append(f"result[{index}]: {_format_scalar(kind, value)}")
            return lines
    finally:
        for d in hal.devices:
            d.close()
