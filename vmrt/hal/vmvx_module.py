"""The `vmvx` native module: the microkernels VMVX executables import when they
are compiled with `--iree-vmvx-enable-microkernels`
(runtime/src/iree/modules/vmvx/exports.inl, module.c, elementwise.c and
runtime/src/iree/builtins/ukernel/ for mmt4d/pack/unpack).

It lives in the HAL, below the VMVX loader that registers it before every VMVX
executable (as IREE's vmvx module lies below its VMVX module loader); vmrt.modules
re-exports it with the other native modules.

Buffers are vm.buffers; offsets and strides count elements. Each kernel works
on numpy views of the buffer bytes, after the same bounds check upstream does
(the last element touched must lie inside the buffer).
"""

from __future__ import annotations

import numpy as np

from vmrt.errors import StatusCode, VMError
from vmrt.native import NativeModule, export
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.ref import null_ref_error

# IREE_UK_FLAG_* (runtime/src/iree/builtins/ukernel/exported_bits.h).
MMT4D_TYPE_MASK = 0xFF
MMT4D_TYPE_F32F32F32 = 0x01
MMT4D_TYPE_S8S8S32 = 0x02
MMT4D_ACCUMULATE = 0x100
PACK_TYPE_MASK = 0xFF
PACK_TYPE_F32F32 = 0x01
PACK_TYPE_I8I8 = 0x02
PACK_TYPE_I32I32 = 0x03
PACK_TRANSPOSE_INNER = 0x100
PACK_TRANSPOSE_OUTER = 0x200
QUERY_ROLE_MASK = 0xFF
QUERY_ROLE_LHS, QUERY_ROLE_RHS, QUERY_ROLE_RESULT = 0x01, 0x02, 0x03
# The generic matmul tile sizes (M, K, N) upstream reports without an
# architecture-specific answer.
GENERIC_MATMUL_TILE = (8, 4, 8)


def _buffer(value) -> VMBuffer:
    if isinstance(value, VMBuffer):
        return value
    raise null_ref_error("buffer", value)


def _view_2d(buffer, dtype, offset: int, stride0: int, stride1: int, size0: int, size1: int,
             writable: bool):
    """A (size0, size1) numpy view of a vm.buffer (element offsets and strides)."""
    buffer = _buffer(buffer)
    dtype = np.dtype(dtype)
    item = dtype.itemsize
    for name, value in (("size0", size0), ("size1", size1), ("stride0", stride0),
                        ("stride1", stride1), ("offset", offset)):
        if value < 0 or value >= 1 << 32:
            raise VMError(f"buffer overflow for {name}={value}", StatusCode.INVALID_ARGUMENT)
    if writable and not buffer.mutable:
        raise VMError("buffer is read-only", StatusCode.PERMISSION_DENIED)
    start = offset * item
    if size0 == 0 or size1 == 0:
        return np.empty((size0, size1), dtype)
    extent = ((size0 - 1) * stride0 + (size1 - 1) * stride1 + 1) * item
    if start + extent > buffer.length:
        raise VMError(f"2d range (offset={offset}, size={size0}x{size1}, strides="
                      f"{stride0}x{stride1}) exceeds the {buffer.length}-byte buffer",
                      StatusCode.OUT_OF_RANGE)
    flat = np.frombuffer(buffer.view, dtype=np.uint8, count=extent, offset=start)
    return _strided(flat, dtype, size0, size1, stride0, stride1, writable)


def _strided(flat, dtype, size0, size1, stride0, stride1, writable):
    item = dtype.itemsize
    base = np.ndarray(shape=(size0, size1), dtype=dtype, buffer=flat,
                      strides=(stride0 * item, stride1 * item))
    if not writable:
        base.flags.writeable = False
    return base


def _binary(op, dtype):
    def kernel(self, lhs, lhs_offset, lhs_stride0, lhs_stride1, rhs, rhs_offset, rhs_stride0,
               rhs_stride1, out, out_offset, out_stride0, out_stride1, size0, size1):
        a = _view_2d(lhs, dtype, lhs_offset, lhs_stride0, lhs_stride1, size0, size1, False)
        b = _view_2d(rhs, dtype, rhs_offset, rhs_stride0, rhs_stride1, size0, size1, False)
        o = _view_2d(out, dtype, out_offset, out_stride0, out_stride1, size0, size1, True)
        with np.errstate(all="ignore"):
            o[...] = op(a, b)
    return kernel


def _unary(op, dtype):
    def kernel(self, source, in_offset, in_stride0, in_stride1, out, out_offset, out_stride0,
               out_stride1, size0, size1):
        a = _view_2d(source, dtype, in_offset, in_stride0, in_stride1, size0, size1, False)
        o = _view_2d(out, dtype, out_offset, out_stride0, out_stride1, size0, size1, True)
        with np.errstate(all="ignore"):
            o[...] = op(a)
    return kernel


def _int_divide(signed: bool):
    def divide(a, b):
        if not np.all(b):
            raise VMError("integer division by zero", StatusCode.INVALID_ARGUMENT)
        if not signed:
            return a // b
        quotient = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
        return np.where((a < 0) != (b < 0), -quotient, quotient).astype(np.int32)
    return divide


def _shift(kind: str):
    # C shifts by 32 or more are undefined; like the hardware, use the low 5 bits.
    def shift(a, b):
        amount = (b.astype(np.uint32) & 31).astype(a.dtype)
        return a << amount if kind == "shl" else a >> amount
    return shift


def _count_leading_zeros(a):
    values = a.astype(np.uint64)
    result = np.full(values.shape, 32, dtype=np.uint32)
    nonzero = values != 0
    result[nonzero] = 31 - np.floor(np.log2(values[nonzero])).astype(np.uint32)
    return result


F32, I32, U32 = np.float32, np.int32, np.uint32


def _binary_export(name: str, op, dtype):
    return export("0rIIIrIIIrIIIII_v", name=name)(_binary(op, dtype))


def _unary_export(name: str, op, dtype):
    return export("0rIIIrIIIII_v", name=name)(_unary(op, dtype))


class VmvxModule(NativeModule, name="vmvx", version=0):
    """Registered first in every VMVX worker context (as upstream's loader does)."""

    add_2d_f32 = _binary_export("add.2d.f32", np.add, F32)
    add_2d_i32 = _binary_export("add.2d.i32", np.add, U32)
    and_2d_i32 = _binary_export("and.2d.i32", np.bitwise_and, U32)
    div_2d_f32 = _binary_export("div.2d.f32", np.divide, F32)
    divs_2d_i32 = _binary_export("divs.2d.i32", _int_divide(True), I32)
    divu_2d_i32 = _binary_export("divu.2d.i32", _int_divide(False), U32)
    mul_2d_f32 = _binary_export("mul.2d.f32", np.multiply, F32)
    mul_2d_i32 = _binary_export("mul.2d.i32", np.multiply, U32)
    or_2d_i32 = _binary_export("or.2d.i32", np.bitwise_or, U32)
    shl_2d_i32 = _binary_export("shl.2d.i32", _shift("shl"), U32)
    shrs_2d_i32 = _binary_export("shrs.2d.i32", _shift("shr"), I32)
    shru_2d_i32 = _binary_export("shru.2d.i32", _shift("shr"), U32)
    sub_2d_f32 = _binary_export("sub.2d.f32", np.subtract, F32)
    sub_2d_i32 = _binary_export("sub.2d.i32", np.subtract, U32)
    xor_2d_i32 = _binary_export("xor.2d.i32", np.bitwise_xor, U32)

    abs_2d_f32 = _unary_export("abs.2d.f32", np.abs, F32)
    ceil_2d_f32 = _unary_export("ceil.2d.f32", np.ceil, F32)
    ctlz_2d_i32 = _unary_export("ctlz.2d.i32", _count_leading_zeros, U32)
    exp_2d_f32 = _unary_export("exp.2d.f32", np.exp, F32)
    floor_2d_f32 = _unary_export("floor.2d.f32", np.floor, F32)
    log_2d_f32 = _unary_export("log.2d.f32", np.log, F32)
    neg_2d_f32 = _unary_export("neg.2d.f32", np.negative, F32)
    rsqrt_2d_f32 = _unary_export("rsqrt.2d.f32", lambda a: np.float32(1) / np.sqrt(a), F32)

    copy_2d_x8 = _unary_export("copy.2d.x8", lambda a: a, np.uint8)
    copy_2d_x16 = _unary_export("copy.2d.x16", lambda a: a, np.uint16)
    copy_2d_x32 = _unary_export("copy.2d.x32", lambda a: a, np.uint32)
    copy_2d_x64 = _unary_export("copy.2d.x64", lambda a: a, np.uint64)

    @export("0irIIII_v", name="fill.2d.x32")
    def fill_2d_x32(self, value, out, out_offset, out_row_stride, size0, size1):
        o = _view_2d(out, np.uint32, out_offset, out_row_stride, 1, size0, size1, True)
        o[...] = value & 0xFFFFFFFF

    @export("0IIi_II", name="query_tile_sizes.2d")
    def query_tile_sizes_2d(self, size0, size1, flags):
        m, k, n = GENERIC_MATMUL_TILE
        role = flags & QUERY_ROLE_MASK
        if role == QUERY_ROLE_LHS:
            return m, k
        if role == QUERY_ROLE_RHS:
            return n, k
        if role == QUERY_ROLE_RESULT:
            return m, n
        raise VMError(f"query_tile_sizes.2d: unknown operand role in flags {flags:#x}",
                      StatusCode.INVALID_ARGUMENT)

    @export("0rIIrIIrIIIIIiiii_v", name="mmt4d")
    def mmt4d(self, lhs, lhs_offset, lhs_row_stride, rhs, rhs_offset, rhs_row_stride, out,
              out_offset, out_row_stride, m, n, k, m0, n0, k0, flags):
        kind = flags & MMT4D_TYPE_MASK
        if kind == MMT4D_TYPE_F32F32F32:
            in_type, out_type = np.float32, np.float32
        elif kind == MMT4D_TYPE_S8S8S32:
            in_type, out_type = np.int8, np.int32
        else:
            raise VMError("unhandled flags", StatusCode.INVALID_ARGUMENT)
        a = _view_2d(lhs, in_type, lhs_offset, lhs_row_stride, 1, m, k * m0 * k0, False)
        b = _view_2d(rhs, in_type, rhs_offset, rhs_row_stride, 1, n, k * n0 * k0, False)
        o = _view_2d(out, out_type, out_offset, out_row_stride, 1, m, n * m0 * n0, True)
        if m == 0 or n == 0:
            return
        a4 = a.reshape(m, k, m0, k0).astype(out_type)
        b4 = b.reshape(n, k, n0, k0).astype(out_type)
        product = np.einsum("akce,bkde->abcd", a4, b4).astype(out_type)
        result = o.reshape(m, n, m0, n0)
        with np.errstate(all="ignore"):
            if flags & MMT4D_ACCUMULATE:
                result += product
            else:
                result[...] = product

    @export("0rIIIrIIIIIIIIIIi_v", name="pack")
    def pack(self, source, in_offset, in_stride0, in_stride1, out, out_offset, out_stride0,
             out_stride1, in_size0, in_size1, out_size0, out_size1, out_size2, out_size3,
             padding_value, flags):
        dtype = _pack_dtype(flags)
        tile = out_size2 * out_size3
        a = _view_2d(source, dtype, in_offset, in_stride0, in_stride1, in_size0, in_size1, False)
        o = _view_2d(out, dtype, out_offset, out_stride0, 1, out_size0, out_size1 * tile, True)
        if not (out_size0 and out_size1 and out_size2 and out_size3):
            return
        outer0, outer1, tile0, tile1 = _logical_tiles(out_size0, out_size1, out_size2,
                                                      out_size3, flags)
        padding = np.array([padding_value & ((1 << (8 * np.dtype(dtype).itemsize)) - 1)],
                           dtype=np.dtype(f"u{np.dtype(dtype).itemsize}")).view(dtype)[0]
        padded = np.full((outer0 * tile0, outer1 * tile1), padding, dtype=dtype)
        rows, cols = min(in_size0, outer0 * tile0), min(in_size1, outer1 * tile1)
        padded[:rows, :cols] = a[:rows, :cols]
        tiles = padded.reshape(outer0, tile0, outer1, tile1).transpose(0, 2, 1, 3)
        if flags & PACK_TRANSPOSE_INNER:
            tiles = tiles.transpose(0, 1, 3, 2)
        if flags & PACK_TRANSPOSE_OUTER:
            tiles = tiles.transpose(1, 0, 2, 3)
        o.reshape(out_size0, out_size1, out_size2, out_size3)[...] = tiles

    @export("0rIIIrIIIIIIIIIi_v", name="unpack")
    def unpack(self, source, in_offset, in_stride0, in_stride1, out, out_offset, out_stride0,
               out_stride1, in_size0, in_size1, in_size2, in_size3, out_size0, out_size1, flags):
        kind = flags & PACK_TYPE_MASK
        if kind == PACK_TYPE_F32F32:
            dtype = np.float32
        elif kind == PACK_TYPE_I32I32:
            dtype = np.int32
        else:
            raise VMError("unhandled flags", StatusCode.INVALID_ARGUMENT)
        tile = in_size2 * in_size3
        a = _view_2d(source, dtype, in_offset, in_stride0, 1, in_size0, in_size1 * tile, False)
        o = _view_2d(out, dtype, out_offset, out_stride0, out_stride1, out_size0, out_size1,
                     True)
        if not (in_size0 and in_size1 and in_size2 and in_size3):
            return
        tiles = a.reshape(in_size0, in_size1, in_size2, in_size3)
        if flags & PACK_TRANSPOSE_OUTER:
            tiles = tiles.transpose(1, 0, 2, 3)
        if flags & PACK_TRANSPOSE_INNER:
            tiles = tiles.transpose(0, 1, 3, 2)
        outer0, outer1, tile0, tile1 = tiles.shape
        dense = tiles.transpose(0, 2, 1, 3).reshape(outer0 * tile0, outer1 * tile1)
        o[...] = dense[:out_size0, :out_size1]


def _pack_dtype(flags: int):
    kind = flags & PACK_TYPE_MASK
    if kind == PACK_TYPE_F32F32:
        return np.float32
    if kind == PACK_TYPE_I32I32:
        return np.int32
    if kind == PACK_TYPE_I8I8:
        return np.int8
    raise VMError("unhandled flags", StatusCode.INVALID_ARGUMENT)


def _logical_tiles(out_size0, out_size1, out_size2, out_size3, flags):
    """(outer0, outer1, tile0, tile1) in the source's orientation."""
    outer0, outer1, tile0, tile1 = out_size0, out_size1, out_size2, out_size3
    if flags & PACK_TRANSPOSE_OUTER:
        outer0, outer1 = outer1, outer0
    if flags & PACK_TRANSPOSE_INNER:
        tile0, tile1 = tile1, tile0
    return outer0, outer1, tile0, tile1
