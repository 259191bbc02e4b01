"""From the model a user has to a module: ONNX files, MLIR, PyTorch modules and JAX
functions compiled in this process by IREE's compiler (the optional `vmrt[compile]`
extra: iree-base-compiler and onnx), with flags chosen for this machine, checked
against the default build, and kept in vmrt's cache (vmrt.compile, vmrt.load).

`import vmrt` never imports this package; it imports the compiler only to compile.
"""

from __future__ import annotations

import os
from typing import Optional

from vmrt.compiler.build import Build, build, save
from vmrt.compiler.flags import TARGETS
from vmrt.compiler.sources import SOURCE_SUFFIXES, is_source_path
from vmrt.compiler.tune import CompileWarning
from vmrt.vm.declaration import ValueInfo

__all__ = ["Build", "CompileWarning", "CompiledModule", "SOURCE_SUFFIXES", "TARGETS", "build",
           "is_source_path", "save"]


class CompiledModule(bytes):
    """A compiled module: its bytes (vmrt.load takes them; `save` writes them), the
    entry `function`, the `inputs` and `outputs` the source named, the `flags` it was
    built with, its `parameters` archive (a path, or None) and the full `record`."""

    build: Build

    @classmethod
    def of(cls, made: Build) -> "CompiledModule":
        module = cls(made.module_bytes())
        module.build = made
        return module

    @property
    def function(self) -> str:
        return self.build.function

    @property
    def inputs(self) -> list[ValueInfo]:
        return self.build.inputs

    @property
    def outputs(self) -> list[ValueInfo]:
        return self.build.outputs

    @property
    def flags(self) -> list[str]:
        return list(self.build.record["flags"])

    @property
    def record(self) -> dict:
        return dict(self.build.record)

    @property
    def parameters(self) -> Optional[str]:
        return self.build.irpa

    def save(self, path: "str | os.PathLike[str]") -> list[str]:
        """Writes the module (and its .irpa, and the record as PATH.json); returns the
        paths written."""
        return save(Build(bytes(self), self.build.irpa, self.build.record), path)

    def __repr__(self) -> str:
        return f"<vmrt compiled module {self.function} ({len(self)} bytes, " \
               f"{self.build.record['chosen']})>"

    __str__ = __repr__  # (print shows the module, not its bytes)
