"""Loads IREE's embedded-elf-x86_64 executables (llvm-cpu machine code) into this
process through vmrt's own C loader (csrc/vmrt_elf*.c) and resolves their exports.
"""

from __future__ import annotations

import weakref

from vmrt.errors import HalError, StatusCode
from vmrt.memory import c_extension

# Machine code cannot be loaded without C: only the header checks have a Python
# twin (vmrt.hal.elf_check).
_ffi, _lib, _ = c_extension()

#: True when ELF executables can be loaded here.
AVAILABLE = _lib is not None

_ERROR_CAPACITY = 512


def _unload(handle) -> None:
    _lib.vmrt_elf_unload(handle)


def check_headers(data, *, for_system: bool = False) -> None:
    """The checks both native loaders make of an ELF's header, program headers,
    segment layout and section placement before anything is mapped: raises HalError
    as loading would. In C (csrc/vmrt_elf_headers.c), or its Python twin
    (vmrt.hal.elf_check) without the extension."""
    if _lib is None:
        from vmrt.hal.elf_check import check_headers as python_twin
        python_twin(data, for_system=for_system)
        return
    error = _ffi.new("char[]", _ERROR_CAPACITY)
    flags = _lib.VMRT_ELF_LOAD_FOR_SYSTEM if for_system else 0
    with memoryview(data) as raw, raw.cast("B") as view, \
            _ffi.from_buffer("uint8_t[]", view) as source:
        code = _lib.vmrt_elf_check_headers(source, view.nbytes, flags, error, _ERROR_CAPACITY)
    if code:
        raise HalError(_ffi.string(error).decode("utf-8", "replace"), StatusCode(code))


class ElfModule:
    """One loaded ELF image: mapped, relocated, protected, initializers run.

    `run_initializers=False` still checks DT_INIT/DT_INIT_ARRAY but calls
    nothing (for fuzzing and inspection, where no loaded code may run).
    """

    def __init__(self, data, *, run_initializers: bool = True):
        if _lib is None:
            raise HalError("native executables need the C extension (vmrt._cnative), "
                           "which is not built or is disabled by VMRT_NO_NATIVE",
                           StatusCode.UNAVAILABLE)
        out = _ffi.new("vmrt_elf_module_t**")
        error = _ffi.new("char[]", _ERROR_CAPACITY)
        flags = 0 if run_initializers else _lib.VMRT_ELF_LOAD_NO_INITIALIZERS
        # Views released before any raise: left to a traceback's frame, the
        # memoryview -> cast -> from_buffer chain would be torn down by the
        # cycle collector in arbitrary order, which crashes CPython.
        # from_buffer does not copy; the C loader copies what it keeps.
        with memoryview(data) as raw, raw.cast("B") as view, \
                _ffi.from_buffer("uint8_t[]", view) as source:
            code = _lib.vmrt_elf_load_ex(source, view.nbytes, flags, out, error,
                                         _ERROR_CAPACITY)
        if code:
            message = _ffi.string(error).decode("utf-8", "replace")
            raise HalError(f"invalid embedded ELF: {message}", code)
        self._handle = out[0]
        self.base = int(_lib.vmrt_elf_base(self._handle))
        self.size = int(_lib.vmrt_elf_size(self._handle))
        # Unmaps even if close() is never called; close() just runs it early (once).
        self._finalizer = weakref.finalize(self, _unload, self._handle)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    @property
    def c_handle(self):
        """The C loader's module (vmrt_elf_module_t*), for the native executable
        code that bounds a library's pointers by it; valid until close()."""
        if self.closed:
            raise HalError("ELF module is closed", StatusCode.FAILED_PRECONDITION)
        return self._handle

    def lookup(self, name: str) -> int:
        """The address of exported function `name`."""
        if self.closed:
            raise HalError("ELF module is closed", StatusCode.FAILED_PRECONDITION)
        encoded = name.encode()
        # C sees the name up to its first NUL: a name holding one would match a prefix.
        if b"\0" in encoded:
            raise HalError(f"ELF exports no function '{name}'", StatusCode.NOT_FOUND)
        address = _ffi.new("void**")
        status = _lib.vmrt_elf_find(self._handle, encoded, address)
        if status == StatusCode.INVALID_ARGUMENT:
            raise HalError(f"ELF export '{name}' is not the start of code (not where a "
                           "function the image lists starts, or not in executable bytes)",
                           StatusCode.INVALID_ARGUMENT)
        if status:
            raise HalError(f"ELF exports no function '{name}'", StatusCode.NOT_FOUND)
        return int(_ffi.cast("uintptr_t", address[0]))

    def close(self) -> None:
        """Unmaps the image; any address looked up becomes invalid. Idempotent."""
        self._finalizer()

    def __enter__(self) -> "ElfModule":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"base={self.base:#x} size={self.size:#x}"
        return f"<ElfModule {state}>"
