"""From a source to a kept build: the cache first; else import, compile the candidate
flag sets, check them against the default build (and time them when tuning),
keep the choice with the record of how it was made.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from vmrt.compiler import cache as compile_cache_module
from vmrt.compiler.flags import Candidate, candidates, target_flags
from vmrt.compiler.session import compile_mlir
from vmrt.compiler.sources import PARAMETER_SCOPE, ImportedSource, import_source, \
    is_source_path
from vmrt.compiler.tune import Trial, choose, example_inputs, warn_not_used
from vmrt.errors import StatusCode, VmrtError, file_error
from vmrt.vm.declaration import ValueInfo, parse_declaration

__all__ = ["Build", "build", "save"]

PARAMETER_MODES = (None, "inline", "external")
#: Constants of at least this many bytes go to the .irpa with parameters="external"
#: (MLIR sources: the compiler's export; ONNX: EXTERNAL_MINIMUM_ELEMENTS).
EXTERNAL_MINIMUM_BYTES = 4096


@dataclass
class Build:
    """A compiled model: its module (`vmfb`: bytes, or the path of a cached file), its
    parameter archive (a path, or None), and the record of how it was made."""

    vmfb: Any
    irpa: Optional[str]
    record: dict

    @property
    def function(self) -> str:
        return self.record["function"]

    @property
    def inputs(self) -> list[ValueInfo]:
        return [ValueInfo(*fields) for fields in self.record["inputs"]]

    @property
    def outputs(self) -> list[ValueInfo]:
        return [ValueInfo(*fields) for fields in self.record["outputs"]]

    def module_bytes(self) -> bytes:
        if isinstance(self.vmfb, (bytes, bytearray)):
            return bytes(self.vmfb)
        try:
            return Path(self.vmfb).read_bytes()
        except OSError as error:
            raise file_error(error, f"cannot read '{self.vmfb}'") from None

    def describe(self) -> str:
        """The record as JSON (what `vmrt compile` writes beside its output)."""
        shown = {k: v for k, v in self.record.items() if k not in ("vmfb", "vmfb_size")}
        return json.dumps(shown, indent=1, default=list)


def build(source: Any, *, example_args: Optional[Sequence] = None, target: str = "host",
          tune: bool = False, parameters: Optional[str] = None, flags: Sequence[str] = (),
          load: Optional[Callable] = None,
          progress: Callable[[str], None] = lambda step: None) -> Build:
    """The build of `source` for `target` (vmrt.compile's options); `load(bytes)` loads
    a module to check and time candidates with (vmrt.load on local-task)."""
    target_flags(target)  # (an unknown target fails before any work)
    if parameters not in PARAMETER_MODES:
        raise VmrtError(f"parameters must be 'inline' or 'external', not {parameters!r}",
                        StatusCode.INVALID_ARGUMENT)
    options = (target, bool(tune), parameters or "inline", tuple(flags))
    cache = compile_cache_module.compile_cache()
    imported: Optional[ImportedSource] = None
    if is_source_path(source):
        path = Path(source)
        key = compile_cache_module.source_key(cache, path, lambda: _read(path), options)
    else:
        progress("importing")
        imported = import_source(source, example_args)
        key = compile_cache_module.source_key(cache, None, lambda: imported.content, options)
    found = cache.lookup(key) if cache is not None else None
    if found is not None:
        return Build(found.vmfb, found.irpa, found.record)
    if imported is None:
        progress("importing")
        imported = import_source(source, example_args)
    return _build_new(source, imported, key, cache, options, example_args, load, progress)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise file_error(error, f"cannot read '{path}'") from None


def _build_new(source: Any, imported: ImportedSource, key: bytes, cache, options: tuple,
               example_args, load, progress) -> Build:
    target, tune, parameters, extra = options
    base = target_flags(target) + [f"--iree-input-type={imported.input_type}"]
    trials = _compile_trials(imported.mlir, base, candidates(target, tune, extra), tune,
                             progress)
    function, inputs, outputs = _signature(trials[0].vmfb, imported)
    chosen = trials[0]
    if len(trials) > 1:
        if load is None:
            raise VmrtError("checking candidate builds needs a loader",
                            StatusCode.FAILED_PRECONDITION)
        arrays = example_inputs(example_args, inputs)
        chosen = choose(trials, load, function, arrays, tune, progress)
    record = {
        "function": function, "target": target, "tuned": tune, "source": imported.kind,
        "flags": base + list(chosen.candidate.flags), "chosen": chosen.candidate.name,
        "candidates": [trial.summary() for trial in trials],
        "inputs": [_fields(value) for value in inputs],
        "outputs": [_fields(value) for value in outputs],
        "parameters": parameters,
    }
    vmfb, irpa = chosen.vmfb, None
    if parameters == "external":
        vmfb, irpa = _with_external_parameters(source, example_args, imported,
                                               record["flags"], cache, progress)
        record["parameter_scope"] = PARAMETER_SCOPE
    kept = cache.store(key, vmfb, record, irpa) if cache is not None else None
    if kept is not None:
        return Build(kept.vmfb, kept.irpa, kept.record)
    return Build(vmfb, str(irpa) if irpa is not None else None, record)


def _compile_trials(mlir: bytes, base: list[str], wanted: list[Candidate], tune: bool,
                    progress) -> list[Trial]:
    """A trial of each wanted candidate; without tuning, one failing to compile is
    followed by its fallback (a warning says so). The default must compile."""
    trials = []
    for candidate in wanted:
        while candidate is not None:
            trial = Trial(candidate)
            trials.append(trial)
            progress(f"compiling ({candidate.name})")
            try:
                trial.vmfb = compile_mlir(mlir, base + list(candidate.flags))
                break
            except VmrtError as error:
                if candidate.is_default:
                    raise
                trial.rejected = f"failed to compile: {error}"
                warn_not_used(trial)
                candidate = None if tune else candidate.fallback
    return trials


def _with_external_parameters(source: Any, example_args, imported: ImportedSource,
                              flags: list[str], cache, progress):
    """The chosen build again with its large constants in an .irpa (a path in the
    cache folder, else a private temporary one): an ONNX model's initializers are
    imported as parameters; MLIR's constants go through the compiler's export."""
    if cache is not None:
        irpa = cache.temporary_path(".irpa")
    else:
        irpa = Path(tempfile.mkdtemp(prefix="vmrt-compile-")) / "model.irpa"
    progress("compiling (parameters to an .irpa)")
    if imported.kind == "onnx":
        parameterized = import_source(source, example_args, parameters_to=irpa)
        vmfb = compile_mlir(parameterized.mlir, flags)
    else:
        vmfb = compile_mlir(imported.mlir, flags + [
            f"--iree-parameter-export={PARAMETER_SCOPE}={irpa}",
            f"--iree-parameter-export-minimum-size={EXTERNAL_MINIMUM_BYTES}"])
    if not irpa.exists():  # (no constant was large enough)
        return vmfb, None
    return vmfb, irpa


def _signature(vmfb: bytes, imported: ImportedSource):
    """(entry function, inputs, outputs): the module's one synchronous export, and what
    the source named of its values, else what its declaration says."""
    from vmrt.vm.module import load_module
    module = load_module(vmfb)
    names = [n for n in module.export_names()
             if not n.startswith("__") and not n.endswith("$async")]
    if not names:
        raise VmrtError("the compiled module exports no function", StatusCode.NOT_FOUND)
    function = "main" if "main" in names else names[0]
    inputs, outputs = imported.inputs, imported.outputs
    if not inputs:
        declared = parse_declaration(module.export_attrs(function).get(
            "iree.abi.declaration", ""))
        if declared is not None:
            inputs, outputs = declared
            if len(imported.input_names) == len(inputs):
                inputs = [dataclasses.replace(value, name=name)
                          for value, name in zip(inputs, imported.input_names)]
    return function, inputs, outputs


def _fields(value: ValueInfo) -> tuple:
    return (value.name, value.type, value.shape, value.element_type)


def save(build: Build, path: os.PathLike | str) -> list[str]:
    """Writes the module to `path`, its .irpa beside it (same stem) and the record as
    `path`.json; returns the paths written."""
    path = Path(path)
    written = [str(path)]
    try:
        path.write_bytes(build.module_bytes()) if isinstance(build.vmfb, (bytes, bytearray)) \
            else shutil.copyfile(build.vmfb, path)
        if build.irpa is not None:
            shutil.copyfile(build.irpa, path.with_suffix(".irpa"))
            written.append(str(path.with_suffix(".irpa")))
        sidecar = path.with_name(path.name + ".json")
        sidecar.write_text(build.describe() + "\n")
        written.append(str(sidecar))
    except OSError as error:
        raise file_error(error, f"cannot write '{path}'") from None
    return written

