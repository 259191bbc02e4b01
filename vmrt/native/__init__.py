"""Native modules written in Python and in C (see vmrt.native.module and
vmrt.native.cmodule; the C ABI is vmrt/native/include/vmrt_native.h)."""

from pathlib import Path

from vmrt.native.cmodule import (
    CExport, CState, c_export, c_module_class, held_ref_count, load_c_module,
)
from vmrt.native.module import (
    Dependency, Import, NativeModule, NativeState, export, ref_type,
)
from vmrt.native.types import Ref, Span, f32, f64, i32, i64
from vmrt.vm.ref import RefObject


def get_include() -> str:
    """The directory holding vmrt_native.h, for compiling C modules."""
    return str(Path(__file__).resolve().parent / "include")


__all__ = [
    "CExport", "CState", "Dependency", "Import", "NativeModule", "NativeState", "Ref",
    "RefObject", "Span", "c_export", "c_module_class", "export", "f32", "f64",
    "get_include", "held_ref_count", "i32", "i64", "load_c_module", "ref_type",
]
