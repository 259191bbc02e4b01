"""vm.buffer: a fixed-length byte buffer (upstream runtime/src/iree/vm/buffer.c).

Units (as upstream's dispatch.c/ops.h use them):

- load/store/fill (`vm.buffer.load.*`, `vm.buffer.store.*`,
  `vm.buffer.fill.*`): offsets and lengths count ELEMENTS of the access
  width; element k of an i32 access is bytes [4k, 4k+4). No alignment is
  required of the buffer's data.
- alloc/clone/copy/compare/hash/length: BYTES.

Failures (all VMError):

- OUT_OF_RANGE: any range that does not lie inside the buffer (negative
  offsets and lengths included: upstream reads the i64 operands as unsigned).
- PERMISSION_DENIED: a store/fill/copy into a read-only buffer (rodata),
  checked before the range (as upstream's iree_vm_buffer_check_rw does).
- INVALID_ARGUMENT: an alignment that is not 0 or a power of two; a fill
  pattern whose size is not 1, 2, 4 or 8.
- RESOURCE_EXHAUSTED: the host cannot allocate the bytes.

Storage is a `bytearray` (buffers made by the VM or copied from the host) or a
memoryview (read-only rodata, or host memory wrapped without a copy). Values
are little-endian.
"""

from __future__ import annotations

import struct
import sys
from itertools import chain

from vmrt import memory
from vmrt.errors import StatusCode, VMError
from vmrt.vm.error_kinds import ErrorKind, range_error, vm_error
from vmrt.vm.ref import RefObject, null_ref_error, register_ref_type
from vmrt.vm.value import round_f32, wrap_i32, wrap_i64  # noqa: F401 (wraps: generated stores)

__all__ = ["VMBuffer", "siphash24", "buffer_alloc", "buffer_clone", "buffer_copy",
           "buffer_compare", "ACCESS_MUTABLE", "ACCESS_ORIGIN_MODULE",
           "ACCESS_ORIGIN_GUEST", "ACCESS_ORIGIN_HOST"]

# iree_vm_buffer_access_bits_t
ACCESS_MUTABLE = 1 << 0
ACCESS_ORIGIN_MODULE = 1 << 1
ACCESS_ORIGIN_GUEST = 1 << 2
ACCESS_ORIGIN_HOST = 1 << 3

_MASK64 = 0xFFFFFFFFFFFFFFFF

if sys.byteorder != "little":  # typed views below are in host byte order
    raise ImportError("vmrt.vm.buffer needs a little-endian host, as IREE's "
                      "bytecode and rodata are little-endian")

# Typed views of the storage: slot name -> (memoryview format, item size).
_TYPED_VIEWS = {"_v_i8": ("b", 1), "_v_i16": ("h", 2), "_v_u16": ("H", 2),
                "_v_i32": ("i", 4), "_v_i64": ("q", 8), "_v_f32": ("f", 4),
                "_v_f64": ("d", 8)}
assert all(struct.calcsize(fmt) == size for fmt, size in _TYPED_VIEWS.values())
# Shared empty (writable) views standing in for views not made yet.
_PLACEHOLDER_VIEWS = {name: memoryview(bytearray()).cast(fmt)
                      for name, (fmt, _) in _TYPED_VIEWS.items()}
_PLACEHOLDERS = tuple(_PLACEHOLDER_VIEWS[name] for name in
                      ("_v_i8", "_v_i16", "_v_u16", "_v_i32", "_v_i64", "_v_f32", "_v_f64"))

_u16_bytes = struct.Struct("<H").pack
_u32_bytes = struct.Struct("<I").pack
_u64_bytes = struct.Struct("<Q").pack
_f32_bytes = struct.Struct("<f").pack
_f64_bytes = struct.Struct("<d").pack


def _is_valid_alignment(alignment: int) -> bool:
    return alignment == 0 or (alignment > 0 and alignment & (alignment - 1) == 0)


def _check_alignment(alignment: int) -> None:
    if not _is_valid_alignment(alignment):
        raise vm_error(ErrorKind.ALIGNMENT, alignment=alignment)


def _allocate(length: int) -> bytearray:
    if length < 0:
        raise vm_error(ErrorKind.NEGATIVE_LENGTH, length=length, unsigned=length & _MASK64)
    try:
        return bytearray(length)
    except (MemoryError, OverflowError):
        raise vm_error(ErrorKind.ALLOC, length=length) from None


class VMBuffer(RefObject):
    """A vm.buffer. `length` is its size in bytes (fixed)."""

    __slots__ = ("length", "access", "_data", "_view",
                 "_v_i8", "_v_i16", "_v_u16", "_v_i32", "_v_i64", "_v_f32", "_v_f64")

    def __init__(self, data, *, mutable: bool | None = None,
                 origin: int = ACCESS_ORIGIN_HOST):
        """Wraps `data` without copying: a bytearray, or any object exposing
        a contiguous buffer (memoryview, bytes, numpy array, mmap).

        `mutable` defaults to whether `data` is writable; asking for a
        mutable buffer over read-only memory fails with PERMISSION_DENIED.
        """
        if isinstance(data, bytearray):
            view = memoryview(data)
            store = data
        else:
            view = memoryview(data)
            if not view.c_contiguous:
                raise VMError("buffer storage must be contiguous",
                              StatusCode.INVALID_ARGUMENT)
            if view.ndim != 1 or view.format != "B":
                view = view.cast("B")
            store = view
        if mutable is None:
            mutable = not view.readonly
        elif mutable and view.readonly:
            raise VMError("cannot make a mutable buffer over read-only memory",
                          StatusCode.PERMISSION_DENIED)
        if not mutable and not view.readonly:
            view = view.toreadonly()
            store = view
        length = view.nbytes
        self.length = length
        self.access = origin | (ACCESS_MUTABLE if mutable else 0)
        self._data = store
        self._view = view
        (self._v_i8, self._v_i16, self._v_u16, self._v_i32, self._v_i64,
         self._v_f32, self._v_f64) = _PLACEHOLDERS

    # ----------------------------------------------------------------------
    # Construction
    # ----------------------------------------------------------------------

    @classmethod
    def alloc(cls, length: int, alignment: int = 0) -> "VMBuffer":
        """vm.buffer.alloc: a zeroed mutable buffer of `length` bytes.

        `alignment` (0 = default) must be 0 or a power of two; Python
        storage is at least 16-byte aligned and the VM never needs more, so
        it is only validated.
        """
        _check_alignment(alignment)
        return cls(_allocate(length), mutable=True, origin=ACCESS_ORIGIN_GUEST)

    def clone(self, offset: int, length: int, alignment: int = 0) -> "VMBuffer":
        """vm.buffer.clone: a new mutable buffer holding bytes
        [offset, offset+length) of this one (byte units)."""
        if offset < 0 or length < 0 or offset + length > self.length:
            raise self._range_error(offset, length, 1)
        _check_alignment(alignment)
        data = _allocate(length)
        if length:
            memory.copy_bytes(data, 0, self._view, offset, length)
        return type(self)(data, mutable=True, origin=ACCESS_ORIGIN_GUEST)

    @classmethod
    def wrap_rodata(cls, data) -> "VMBuffer":
        """A read-only buffer over module rodata (no copy). The module loader
        should make one per rodata segment and hand out that same object for
        every vm.const.ref.rodata of it (refs compare by identity)."""
        return cls(data, mutable=False, origin=ACCESS_ORIGIN_MODULE)

    @classmethod
    def wrap(cls, data, *, mutable: bool | None = None) -> "VMBuffer":
        """A buffer over host memory (no copy); see __init__."""
        return cls(data, mutable=mutable, origin=ACCESS_ORIGIN_HOST)

    @classmethod
    def from_bytes(cls, data, *, mutable: bool = True) -> "VMBuffer":
        """A buffer holding a copy of `data` (bytes-like)."""
        if mutable:
            return cls(bytearray(data), mutable=True, origin=ACCESS_ORIGIN_HOST)
        return cls(bytes(data), mutable=False, origin=ACCESS_ORIGIN_HOST)

    @classmethod
    def from_array(cls, array, *, mutable: bool = True) -> "VMBuffer":
        """A buffer holding a copy of a numpy array's bytes (C order)."""
        import numpy as np

        contiguous = np.ascontiguousarray(array)
        return cls.from_bytes(memoryview(contiguous).cast("B"), mutable=mutable)

    # ----------------------------------------------------------------------
    # Host access
    # ----------------------------------------------------------------------

    @property
    def mutable(self) -> bool:
        return bool(self.access & ACCESS_MUTABLE)

    @property
    def view(self) -> memoryview:
        """The whole buffer as a memoryview of bytes (read-only for
        read-only buffers)."""
        return self._view

    def __len__(self) -> int:
        return self.length

    def to_bytes(self, offset: int = 0, length: int | None = None) -> bytes:
        if length is None:
            length = self.length - offset
        if offset < 0 or length < 0 or offset + length > self.length:
            raise self._range_error(offset, length, 1)
        return bytes(self._view[offset:offset + length])

    def map_ro(self, offset: int, length: int, alignment: int = 1) -> memoryview:
        """A read-only view of bytes [offset, offset+length); like upstream's
        iree_vm_buffer_map_ro, offset and length are rounded down to
        `alignment` (a power of two)."""
        offset, length = self._align_range(offset, length, alignment)
        return self._view[offset:offset + length].toreadonly()

    def map_rw(self, offset: int, length: int, alignment: int = 1) -> memoryview:
        """A writable view of bytes [offset, offset+length) (rounded down to
        `alignment`); PERMISSION_DENIED for read-only buffers."""
        if not self.access & ACCESS_MUTABLE:
            raise self._read_only_error()
        offset, length = self._align_range(offset, length, alignment)
        return self._view[offset:offset + length]

    def as_array(self, dtype, offset: int = 0, count: int = -1):
        """A numpy view of the buffer (no copy) starting at byte `offset`;
        read-only for read-only buffers."""
        import numpy as np

        dtype = np.dtype(dtype)
        if offset < 0 or offset > self.length:
            raise self._range_error(offset, 0, 1)
        available = (self.length - offset) // dtype.itemsize
        if count < 0:
            count = available
        elif count > available:
            raise self._range_error(offset, count * dtype.itemsize, dtype.itemsize)
        return np.frombuffer(self._view, dtype=dtype, count=count, offset=offset)

    def __repr__(self) -> str:
        mode = "rw" if self.access & ACCESS_MUTABLE else "ro"
        return f"<VMBuffer {self.length} bytes {mode}>"

    # ----------------------------------------------------------------------
    # Byte-range operations (byte units)
    # ----------------------------------------------------------------------

    def copy(self, source_offset: int, target: "VMBuffer", target_offset: int,
             length: int) -> None:
        """vm.buffer.copy with this buffer as the source. Overlapping ranges
        of one buffer copy as memmove would."""
        if source_offset < 0 or length < 0 or source_offset + length > self.length:
            raise self._range_error(source_offset, length, 1)
        if not target.access & ACCESS_MUTABLE:
            raise target._read_only_error()
        if target_offset < 0 or target_offset + length > target.length:
            raise target._range_error(target_offset, length, 1)
        if length:
            memory.copy_bytes(target._view, target_offset, self._view, source_offset, length)

    def compare(self, lhs_offset: int, rhs: "VMBuffer", rhs_offset: int,
                length: int) -> int:
        """vm.buffer.compare with this buffer as lhs: 1 if the byte ranges
        are equal, else 0."""
        if lhs_offset < 0 or length < 0 or lhs_offset + length > self.length:
            raise self._range_error(lhs_offset, length, 1)
        if rhs_offset < 0 or rhs_offset + length > rhs.length:
            raise rhs._range_error(rhs_offset, length, 1)
        return 1 if (self._view[lhs_offset:lhs_offset + length]
                     == rhs._view[rhs_offset:rhs_offset + length]) else 0

    def hash(self, offset: int, length: int) -> int:
        """vm.buffer.hash: SipHash-2-4 (key 00 01 .. 0f) of bytes
        [offset, offset+length), as a signed i64."""
        if offset < 0 or length < 0 or offset + length > self.length:
            raise self._range_error(offset, length, 1)
        value = siphash24(self._view[offset:offset + length])
        return value - (1 << 64) if value >= (1 << 63) else value

    # ----------------------------------------------------------------------
    # Fills (element units)
    # ----------------------------------------------------------------------

    def fill(self, element_offset: int, element_count: int, pattern: bytes) -> None:
        """Fills elements [element_offset, element_offset+element_count) of
        size len(pattern) (1, 2, 4 or 8) with `pattern`."""
        size = len(pattern)
        if size not in (1, 2, 4, 8):
            raise VMError(f"invalid element length {size}; expected one of [1, 2, 4, 8]",
                          StatusCode.INVALID_ARGUMENT)
        if not self.access & ACCESS_MUTABLE:
            raise self._read_only_error()
        if (element_offset < 0 or element_count < 0
                or element_offset + element_count > self.length // size):
            raise self._range_error(element_offset * size, element_count * size, size)
        if element_count:
            memory.fill_pattern(self._view, element_offset * size,
                                element_count * size, pattern)

    def fill_i8(self, offset: int, length: int, value: int) -> None:
        self.fill(offset, length, bytes((value & 0xFF,)))

    def fill_i16(self, offset: int, length: int, value: int) -> None:
        self.fill(offset, length, _u16_bytes(value & 0xFFFF))

    def fill_i32(self, offset: int, length: int, value: int) -> None:
        self.fill(offset, length, _u32_bytes(value & 0xFFFFFFFF))

    def fill_i64(self, offset: int, length: int, value: int) -> None:
        self.fill(offset, length, _u64_bytes(value & _MASK64))

    def fill_f32(self, offset: int, length: int, value: float) -> None:
        try:
            pattern = _f32_bytes(value)
        except OverflowError:
            pattern = _f32_bytes(round_f32(value))
        self.fill(offset, length, pattern)

    def fill_f64(self, offset: int, length: int, value: float) -> None:
        self.fill(offset, length, _f64_bytes(value))

    def _typed_view(self, name: str) -> memoryview:
        view = getattr(self, name)
        if view is _PLACEHOLDER_VIEWS.get(name):
            fmt, size = _TYPED_VIEWS[name]
            view = self._view[:(self.length // size) * size].cast(fmt)
            setattr(self, name, view)
        return view

    def _load_miss(self, name: str, offset: int, size: int):
        view = self._typed_view(name)
        if 0 <= offset < len(view):
            return view[offset]
        raise self._range_error(offset * size, size, size)

    def _store_miss(self, name: str, offset: int, value, size: int) -> None:
        if not self.access & ACCESS_MUTABLE:
            raise self._read_only_error()
        view = self._typed_view(name)
        if not 0 <= offset < len(view):
            raise self._range_error(offset * size, size, size)
        view[offset] = value   # a TypeError here is a host passing a non-number

    # ----------------------------------------------------------------------
    # Errors
    # ----------------------------------------------------------------------

    def _range_error(self, offset: int, length: int, alignment: int) -> VMError:
        return range_error(offset, length, alignment, self.length)

    def _read_only_error(self) -> VMError:
        return vm_error(ErrorKind.READ_ONLY)

    def _align_range(self, offset: int, length: int, alignment: int) -> tuple[int, int]:
        if alignment > 1:
            offset &= ~(alignment - 1)
            length &= ~(alignment - 1)
        if offset < 0 or length < 0 or offset + length > self.length:
            raise self._range_error(offset, length, alignment)
        return offset, length


# ---------------------------------------------------------------------------
# Loads and stores (element units): the generated code's hot path, so each is
# written out as its own small method, made here from one template per
# direction (the same bytecode as if written by hand). Kept generated: closures
# reading the view through operator.attrgetter put the Python tier's
# buffer_reduce over its bar (benchmarks/vm_bench.py; the figures are in the
# commit that kept this).
#
# Element k of a width-w access is item k of a typed view of the first
# (length // w) * w bytes, so the view's own index check is the bounds check
# (negative offsets are refused first). Views are made on first use: until then
# the slot holds a shared empty view, whose IndexError leads to
# _load_miss/_store_miss, which make the view and retry. The hot path is one
# attribute load and one index.
#
# A stored value is wrapped to the store width, as the (uintN_t) cast upstream
# does (register values already fit; others take the ValueError path). Views of
# read-only buffers are read-only, so the one assignment also catches them
# (TypeError); _store_miss reports PERMISSION_DENIED before OUT_OF_RANGE, as
# upstream checks access first.
# ---------------------------------------------------------------------------

_LOAD = """
def load_{name}(self, offset):
    if offset >= 0:
        try:
            return self.{slot}[offset]
        except IndexError:
            pass
    return self._load_miss("{slot}", offset, {size})
"""
_STORE = """
def store_{name}(self, offset, value):
    if offset >= 0:
        try:
            self.{slot}[offset] = {value}
            return
        except (IndexError, TypeError):
            pass{on_overflow}
    self._store_miss("{slot}", offset, {value}, {size})
"""
_WRAP_ON_OVERFLOW = """
        except ValueError:
            value = {wrap}(value)"""

# name -> (slot, element size)
_LOADS = {"i8u": ("_data", 1), "i8s": ("_v_i8", 1), "i16u": ("_v_u16", 2),
          "i16s": ("_v_i16", 2), "i32": ("_v_i32", 4), "i64": ("_v_i64", 8),
          "f32": ("_v_f32", 4), "f64": ("_v_f64", 8)}
# name -> (slot, element size, the value as stored, wrap on overflow)
_STORES = {"i8": ("_data", 1, "value & 0xFF", None),
           "i16": ("_v_u16", 2, "value & 0xFFFF", None),
           "i32": ("_v_i32", 4, "value", "wrap_i32"), "i64": ("_v_i64", 8, "value", "wrap_i64"),
           "f32": ("_v_f32", 4, "value", None), "f64": ("_v_f64", 8, "value", None)}


def _define_accessors(cls) -> None:
    source = [_LOAD.format(name=name, slot=slot, size=size)
              for name, (slot, size) in _LOADS.items()]
    source += [_STORE.format(name=name, slot=slot, size=size, value=value, on_overflow=(
                   _WRAP_ON_OVERFLOW.format(wrap=wrap) if wrap else ""))
               for name, (slot, size, value, wrap) in _STORES.items()]
    namespace: dict = {}
    exec(compile("".join(source), f"<{__name__} accessors>", "exec"), globals(), namespace)
    for name, function in namespace.items():
        function.__qualname__ = f"{cls.__name__}.{name}"
        setattr(cls, name, function)


_define_accessors(VMBuffer)


register_ref_type("vm.buffer", VMBuffer)


# ---------------------------------------------------------------------------
# The vm.buffer instructions that take several buffers (or none), as plain
# functions for generated code (BUFFER_ALLOC, BUFFER_CLONE, BUFFER_COPY,
# BUFFER_COMPARE). Each checks that its ref operands are buffers: a null or
# other-typed ref fails with INVALID_ARGUMENT "<operand> is null", as upstream
# (whose deref of another type yields NULL).
# ---------------------------------------------------------------------------

def buffer_alloc(length: int, alignment: int) -> VMBuffer:
    """vm.buffer.alloc."""
    return VMBuffer.alloc(length, alignment)


def buffer_clone(source, offset: int, length: int, alignment: int) -> VMBuffer:
    """vm.buffer.clone."""
    if not isinstance(source, VMBuffer):
        raise null_ref_error("source", source)
    return source.clone(offset, length, alignment)


def buffer_copy(source, source_offset: int, target, target_offset: int, length: int) -> None:
    """vm.buffer.copy."""
    if not isinstance(source, VMBuffer):
        raise null_ref_error("source_buffer", source)
    if not isinstance(target, VMBuffer):
        raise null_ref_error("target_buffer", target)
    source.copy(source_offset, target, target_offset, length)


def buffer_compare(lhs, lhs_offset: int, rhs, rhs_offset: int, length: int) -> int:
    """vm.buffer.compare: 1 if equal, else 0."""
    if not isinstance(lhs, VMBuffer):
        raise null_ref_error("lhs_buffer", lhs)
    if not isinstance(rhs, VMBuffer):
        raise null_ref_error("rhs_buffer", rhs)
    return lhs.compare(lhs_offset, rhs, rhs_offset, length)


# ---------------------------------------------------------------------------
# SipHash-2-4 (Aumasson & Bernstein), written from the algorithm's definition:
# 64-bit state, 2 compression rounds per 8-byte little-endian word, the final
# word holding the length's low byte in its top byte and the trailing bytes
# below it, then 0xff into v2 and 4 finalization rounds. One loop runs all of
# them, so the round is written once.
# ---------------------------------------------------------------------------

_KEY0 = 0x0706050403020100
_KEY1 = 0x0F0E0D0C0B0A0908
_iter_u64 = struct.Struct("<Q").iter_unpack
_ROUNDS = {2: (0, 1), 4: (0, 1, 2, 3)}


def siphash24(data, key0: int = _KEY0, key1: int = _KEY1) -> int:
    """SipHash-2-4 of `data` (bytes-like) under the 128-bit key
    (key0, key1) given as two little-endian 64-bit halves; the default is
    the key bytes 00 01 02 .. 0f that vm.buffer.hash uses. Returns the
    unsigned 64-bit hash."""
    m64 = _MASK64
    v0 = 0x736F6D6570736575 ^ key0
    v1 = 0x646F72616E646F6D ^ key1
    v2 = 0x6C7967656E657261 ^ key0
    v3 = 0x7465646279746573 ^ key1
    view = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    n = len(view)
    full = n - (n & 7)
    last = ((n & 0xFF) << 56) | int.from_bytes(bytes(view[full:n]), "little")
    # Each step: m into v3, `count` rounds, m into v0; the last flips v2 first and
    # mixes no word (finalization).
    steps = chain(((m, 2, 0) for (m,) in _iter_u64(view[:full])), ((last, 2, 0), (0, 4, 0xFF)))
    for m, count, flip in steps:
        v3 ^= m
        v2 ^= flip
        for _ in _ROUNDS[count]:
            v0 = (v0 + v1) & m64
            v1 = ((v1 << 13) | (v1 >> 51)) & m64
            v1 ^= v0
            v0 = ((v0 << 32) | (v0 >> 32)) & m64
            v2 = (v2 + v3) & m64
            v3 = ((v3 << 16) | (v3 >> 48)) & m64
            v3 ^= v2
            v0 = (v0 + v3) & m64
            v3 = ((v3 << 21) | (v3 >> 43)) & m64
            v3 ^= v0
            v2 = (v2 + v1) & m64
            v1 = ((v1 << 17) | (v1 >> 47)) & m64
            v1 ^= v2
            v2 = ((v2 << 32) | (v2 >> 32)) & m64
        v0 ^= m
    return v0 ^ v1 ^ v2 ^ v3


# -- memory accounting (context limits) ------------------------------------------------------------
class MeteredBuffer(VMBuffer):
    """A buffer made by VM code in a context with limits: its bytes stay charged
    to the context's meter (charge_memory/release_memory) while it lives."""

    __slots__ = ("_meter", "_charged")

    def on_release(self) -> None:
        meter = getattr(self, "_meter", None)
        if meter is not None:
            self._meter = None
            meter.release_memory(self._charged)


def _metered(meter, length: int, make) -> MeteredBuffer:
    # Charged before allocating, so an over-budget length never reaches the allocator.
    meter.charge_memory(max(length, 0))
    try:
        buffer = make()
    except BaseException:
        meter.release_memory(max(length, 0))
        raise
    buffer._meter, buffer._charged = meter, max(length, 0)
    return buffer


def metered_buffer_alloc(meter, length: int, alignment: int) -> VMBuffer:
    """vm.buffer.alloc charged to `meter`."""
    _check_alignment(alignment)
    return _metered(meter, length, lambda: MeteredBuffer(
        _allocate(length), mutable=True, origin=ACCESS_ORIGIN_GUEST))


def metered_buffer_clone(meter, source, offset: int, length: int, alignment: int) -> VMBuffer:
    """vm.buffer.clone charged to `meter`."""
    if not isinstance(source, VMBuffer):
        raise null_ref_error("source", source)
    if offset < 0 or length < 0 or offset + length > source.length:
        raise source._range_error(offset, length, 1)

    def make():
        clone = source.clone(offset, length, alignment)
        return MeteredBuffer(clone._data, mutable=True, origin=ACCESS_ORIGIN_GUEST)
    return _metered(meter, length, make)
