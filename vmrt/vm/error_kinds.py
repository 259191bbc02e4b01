"""The errors instructions raise, as one table both tiers read: each kind's number
(the C tier's VMRT_E_<NAME>), status code and message template. The Python tier
raises `vm_error(kind, ...)` where it finds the fault; a failed C call records the
kind and its numbers (c->err_kind, err_a, ...) and vmrt/vm/ctier/runtime.py fills
in the same row, so a message is written once whichever tier runs."""

from __future__ import annotations

import enum
from typing import NamedTuple

from vmrt.errors import DepthExceeded, StatusCode, VMError


class ErrorKind(enum.IntEnum):
    """What went wrong. The numbers are the C tier's (c->err_kind); the comments say
    what the C tier records beside the kind."""

    RANGE_ELEMENTS = 1    # a: element offset, b: element size
    RANGE_BYTES = 2       # a: byte offset, b: byte length
    READ_ONLY = 3
    NULL_REF = 4          # the instruction's ref operand is null
    WRONG_REF = 5         # ... or not of the kind the instruction needs
    DIV_ZERO = 6
    FAIL = 7              # a: status (the message is the instruction's)
    DEPTH = 8             # a: depth
    ALLOC = 9             # a: length
    NEGATIVE_LENGTH = 10  # a: length
    ALIGNMENT = 11        # a: alignment
    GLOBAL_RANGE = 12     # a: byte offset
    LIST_INDEX = 13       # a: index
    FELL_THROUGH = 14
    NULL_NAMED = 15       # a: operand number (NULL_OPERANDS)
    RANGE_FILL = 19       # a: element offset, b: element size, err_c: count
    LIMIT = 20            # the host's refill or memory charge stopped the call
    CTRL_C = 21           # Ctrl-C was pressed during the call (vmrt/ctrl_c.py)


class ErrorRow(NamedTuple):
    status: StatusCode
    template: str
    error_class: type = VMError


#: `where` is "vm.<instruction>: " when the failing instruction is known, else "".
#: The three RANGE kinds share one message; FAIL carries the module's own message;
#: LIMIT and CTRL_C are the limit's own errors (vmrt/vm/limits.py, vmrt/ctrl_c.py).
ERRORS: dict[ErrorKind, ErrorRow] = {
    ErrorKind.RANGE_BYTES: ErrorRow(
        StatusCode.OUT_OF_RANGE,
        "out-of-bounds access detected (offset={offset}, length={length}, "
        "alignment={alignment}, buffer length={buffer_length})"),
    ErrorKind.READ_ONLY: ErrorRow(
        StatusCode.PERMISSION_DENIED, "buffer is read-only and cannot be mapped for mutation"),
    ErrorKind.NULL_REF: ErrorRow(StatusCode.INVALID_ARGUMENT, "{where}null ref operand"),
    ErrorKind.WRONG_REF: ErrorRow(StatusCode.INVALID_ARGUMENT,
                                  "{where}ref operand of the wrong type ({detail})"),
    ErrorKind.DIV_ZERO: ErrorRow(StatusCode.INVALID_ARGUMENT, "{where}integer division by zero"),
    ErrorKind.DEPTH: ErrorRow(StatusCode.RESOURCE_EXHAUSTED,
                              "{where}VM call stack depth exceeded", DepthExceeded),
    ErrorKind.ALLOC: ErrorRow(StatusCode.RESOURCE_EXHAUSTED,
                              "cannot allocate a buffer of {length} bytes"),
    ErrorKind.NEGATIVE_LENGTH: ErrorRow(
        StatusCode.OUT_OF_RANGE, "buffer length {length} is negative (as unsigned: {unsigned})"),
    ErrorKind.ALIGNMENT: ErrorRow(StatusCode.INVALID_ARGUMENT,
                                  "alignments must be powers of two (got {alignment})"),
    ErrorKind.GLOBAL_RANGE: ErrorRow(StatusCode.OUT_OF_RANGE,
                                     "global byte offset {offset} out of range of {size} bytes"),
    ErrorKind.LIST_INDEX: ErrorRow(StatusCode.OUT_OF_RANGE, "index {index} out of bounds ({count})"),
    ErrorKind.FELL_THROUGH: ErrorRow(StatusCode.FAILED_PRECONDITION,
                                     "execution fell through the end of the function"),
    ErrorKind.NULL_NAMED: ErrorRow(StatusCode.INVALID_ARGUMENT, "{what} is null{got}"),
}

#: The operands a NULL_NAMED error names, by the number the C tier records.
NULL_OPERANDS = ("source_buffer", "target_buffer", "lhs_buffer", "rhs_buffer")


def vm_error(kind: ErrorKind, **fields) -> VMError:
    """The error of `kind`, its template filled in with `fields`."""
    row = ERRORS[kind]
    return row.error_class(row.template.format(**fields), row.status)


def range_error(offset: int, length: int, alignment: int, buffer_length: int) -> VMError:
    """An access of `length` bytes at `offset` past a buffer of `buffer_length`."""
    return vm_error(ErrorKind.RANGE_BYTES, offset=offset, length=length, alignment=alignment,
                    buffer_length=buffer_length)


def c_error_kinds() -> str:
    """The kinds as the C enum generated code and vmrt/vm/ctier/runtime.h use."""
    return "enum {\n" + "".join(f"  VMRT_E_{kind.name} = {kind.value},\n"
                                for kind in ErrorKind) + "};\n"
