"""Decoding instructions from bytes through the table-derived decoders."""

import struct

import pytest
from hypothesis import given, settings, strategies as st

from vmrt.isa import BY_SYMBOL
from vmrt.isa.decoder import DecodeError, decode_at, decode_function
from vmrt.isa import registers


def op(symbol):
    inst = BY_SYMBOL[symbol]
    if inst.opcode_set == "core":
        return bytes([inst.opcode])
    prefix = {"ext_f32": 0xE0, "ext_f64": 0xE1}[inst.opcode_set]
    return bytes([prefix, inst.opcode])


def test_binary_i32():
    data = op("AddI32") + struct.pack("<HHH", 1, 2, 3)
    d = decode_at(data, 0, len(data))
    assert d.instruction.symbol == "AddI32"
    assert d.values == (1, 2, 3)
    assert d.next_pc == 7


def test_constants_of_every_width():
    data = (op("ConstI32") + struct.pack("<iH", -5, 1) + op("ConstI64")
            + struct.pack("<qH", -(2**40), 2) + op("ConstF32") + struct.pack("<fH", 1.5, 3)
            + op("ConstF64") + struct.pack("<dH", -0.25, 4))
    values = [d.values for d in decode_function(data)]
    assert values == [(-5, 1), (-(2**40), 2), (1.5, 3), (-0.25, 4)]


def test_variadic_lists_align_to_two_bytes():
    # call: opcode(1) + ordinal(4) = pc 5 -> aligned to 6 for the operand list.
    data = (op("Call") + struct.pack("<I", 0x80000001) + b"\x00"
            + struct.pack("<HHH", 2, 4, registers.encode_ref(1, move=True))
            + struct.pack("<HH", 1, 6))
    d = decode_at(data, 0, len(data))
    ordinal, operands, results = d.values
    assert ordinal == 0x80000001
    assert operands == (4, 0xC001)
    assert results == (6,)
    assert d.next_pc == len(data)


def test_branch_and_table():
    data = (op("BranchTable") + struct.pack("<H", 3) + struct.pack("<I", 40) + b"\x00"
            + struct.pack("<HHH", 1, 5, 6) + struct.pack("<H", 2)
            + struct.pack("<I", 50) + struct.pack("<H", 0)
            + struct.pack("<I", 60) + struct.pack("<HHH", 1, 7, 8))
    d = decode_at(data, 0, len(data))
    index, default, default_ops, size, cases = d.values
    assert (index, default, default_ops, size) == (3, 40, ((5, 6),), 2)
    assert cases == ((50, ()), (60, ((7, 8),)))
    assert d.next_pc == len(data)


def test_string_attribute():
    data = op("Fail") + struct.pack("<HH", 2, 5) + b"hello"
    assert decode_at(data, 0, len(data)).values == (2, b"hello")


def test_truncation_is_a_decode_error():
    data = op("Fail") + struct.pack("<HH", 2, 5) + b"hello"
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            decode_at(data, 0, cut)


def test_unknown_opcodes():
    with pytest.raises(DecodeError, match="unknown opcode"):
        decode_at(b"\xFF\x00\x00", 0, 3)
    with pytest.raises(DecodeError, match="unknown ext_f32 opcode"):
        decode_at(b"\xE0\xFF\x00", 0, 3)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_decode_error(data):
    try:
        for d in decode_function(data):
            assert d.next_pc > d.pc
    except DecodeError:
        pass


def test_register_helpers():
    r = registers.encode_ref(5, move=True)
    assert registers.is_ref(r) and registers.is_move(r) and registers.ref_index(r) == 5
    assert not registers.is_move(registers.encode_ref(5))
    assert registers.encode_i64(4) == 4
    with pytest.raises(ValueError):
        registers.encode_i64(3)
    assert registers.round_up_pow2(0) == 1
    assert registers.round_up_pow2(5) == 8
    assert registers.format_register(registers.encode_ref(2)) == "%r2"
    assert registers.format_register(4, "i64") == "%i4:5"


def test_encoder_is_the_inverse_of_the_decoder():
    from vmrt.isa.encoder import FunctionEncoder
    f = FunctionEncoder()
    f.block()
    f.emit("ConstI32", 7, 0)
    f.emit("Call", 0x80000000, (0, registers.encode_ref(0)), (2,))
    f.emit("SwitchI64", 0, 2, (4, 6), 8)
    f.emit("BranchTable", 0, 0, ((1, 2),), 2, ((0, ()), (0, ((3, 4),))))
    f.emit("AddF32", 1, 2, 3)
    f.emit("Fail", 0, "boom")
    decoded = list(decode_function(bytes(f.data)))
    assert [d.instruction.symbol for d in decoded] == [
        "Block", "ConstI32", "Call", "SwitchI64", "BranchTable", "AddF32", "Fail"]
    assert decoded[2].values == (0x80000000, (0, 0x8000), (2,))
    assert decoded[3].values == (0, 2, (4, 6), 8)
    assert decoded[4].values == (0, 0, ((1, 2),), 2, ((0, ()), (0, ((3, 4),))))
    assert decoded[6].values == (0, b"boom")
