"""cffi (API mode) build script for vmrt's C helpers; run by setup.py at install."""

from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent

ffibuilder = FFI()
ffibuilder.cdef(
    """
    void vmrt_copy_bytes(uint8_t* target, const uint8_t* source, size_t length);
    void vmrt_fill_pattern(uint8_t* target, size_t length, const uint8_t* pattern,
                           size_t pattern_length);
    """
)
ffibuilder.set_source(
    "vmrt._cnative",
    '#include "vmrt_memory.h"',
    sources=[str(Path("csrc") / "vmrt_memory.c")],
    include_dirs=[str(Path("csrc"))],
    extra_compile_args=["-O2"],
)

if __name__ == "__main__":
    ffibuilder.compile(tmpdir=str(HERE.parent / "build" / "cffi"), verbose=True)
