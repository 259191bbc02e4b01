"""A function's bytecode, found through its descriptor, and its decoded instructions.

The one place that turns (module definition, internal ordinal) into a body:
loaded modules cache the result (BytecodeModule.instructions), tools that work on
definitions alone (the disassembler, source maps) call it directly.
"""

from __future__ import annotations

from vmrt.isa.decoder import Decoded, decode_function


def function_bytecode(definition, ordinal: int) -> memoryview:
    """The bytes of internal function `ordinal` (pcs count from their start)."""
    descriptor = definition.function_descriptors[ordinal]
    start = descriptor.bytecode_offset
    return memoryview(definition.bytecode_data)[start:start + descriptor.bytecode_length]


def decode_function_body(definition, ordinal: int) -> list[Decoded]:
    """Every instruction (block markers included) of internal function `ordinal`;
    a DecodeError (a VmrtError) when its bytes do not decode."""
    return list(decode_function(function_bytecode(definition, ordinal)))
