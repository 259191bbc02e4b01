"""The bytecode verifier: valid functions pass; each rule rejects what it should.

Modules here are plain objects with the reader's attribute names, holding
bytecode built with vmrt.isa.encoder, so each test states exactly one defect.
"""

from types import SimpleNamespace as NS

import pytest

from vmrt.errors import StatusCode, VerificationError
from vmrt.isa.encoder import FunctionEncoder
from vmrt.isa.registers import encode_ref
from vmrt.vm.verifier import FEATURE_EXT_F32, verify_module

IMPORT = 0x80000000
R0, R1 = encode_ref(0), encode_ref(1)


def make_module(functions, imports=(), types=("!vm.buffer",), rodata=0,
                global_bytes=16, global_refs=2, requirements=0):
    """functions: list of dicts with body (bytes), cconv, blocks, i32, ref, req."""
    descriptors, signatures, data = [], [], bytearray()
    for f in functions:
        while len(data) % 8:
            data.append(0)
        body = bytes(f["body"])
        descriptors.append(NS(bytecode_offset=len(data), bytecode_length=len(body),
                              requirements=f.get("req", 0), reserved=0,
                              block_count=f.get("blocks", 1),
                              i32_register_count=f.get("i32", 8),
                              ref_register_count=f.get("ref", 2)))
        signatures.append(NS(calling_convention=f.get("cconv", "0v_v"), attrs=()))
        data += body
    return NS(
        name="m", requirements=requirements,
        function_descriptors=descriptors, function_signatures=signatures,
        imported_functions=[NS(full_name=n, signature=NS(calling_convention=c), flags=1)
                            for n, c in imports],
        exported_functions=[NS(local_name=f"f{i}", internal_ordinal=i)
                            for i in range(len(functions))],
        types=[NS(full_name=t) for t in types],
        rodata_segments=[NS()] * rodata,
        module_state=NS(global_bytes_capacity=global_bytes, global_ref_count=global_refs),
        bytecode_data=bytes(data), debug_database=None)


def body(*ops):
    """ops: ('block',) or (symbol, *values)."""
    f = FunctionEncoder()
    for op in ops:
        if op[0] == "block":
            f.block()
        else:
            f.emit(*op)
    return bytes(f.data)


def ret(*regs):
    return ("Return", tuple(regs))


def verify_one(ops, **fn):
    return verify_module(make_module([dict(body=body(*ops), **fn)]))


def rejects(ops, match, code=None, **fn):
    with pytest.raises(VerificationError) as info:
        verify_one(ops, **fn)
    assert match in info.value.message, info.value.message
    if code is not None:
        assert info.value.code == code
    return info.value


def test_valid_function_passes_and_reports_blocks():
    def build(second, third):
        f = FunctionEncoder()
        f.block()
        f.emit("ConstI32", 1, 0)
        f.emit("CondBranch", 0, second, (), third, ())
        pcs = [f.block()]
        f.emit("Return", (0,))
        pcs.append(f.block())
        f.emit("Return", (0,))
        return f, pcs

    # Targets do not change instruction sizes: a first pass finds the block pcs.
    _, (second, third) = build(0, 0)
    f, _ = build(second, third)
    [verified] = verify_module(make_module([dict(body=f.data, cconv="0v_i", blocks=3)]))
    assert verified.block_pcs == (0, second, third)
    assert (verified.arguments, verified.results) == ("", "i")


def test_error_names_function_and_offset():
    error = rejects([("block",), ("AddI32", 0, 1, 99), ret()], "out of range",
                    StatusCode.OUT_OF_RANGE)
    assert error.function == "f0" and error.offset == 1
    assert "at m.f0+00000001" in str(error)


def test_i32_register_beyond_rounded_count():
    # 5 declared registers round up to 8: ordinal 7 is fine, 8 is not.
    verify_one([("block",), ("AddI32", 0, 1, 7), ret()], i32=5)
    rejects([("block",), ("AddI32", 0, 1, 8), ret()], "register ordinal 8 out of range 8",
            i32=5)


def test_ref_register_in_i32_slot():
    rejects([("block",), ("AddI32", R0, 1, 2), ret()], "ref register")


def test_i64_register_must_be_pair_aligned():
    rejects([("block",), ("AddI64", 1, 2, 4), ret()], "not 8-byte aligned")
    rejects([("block",), ("AddI64", 8, 2, 4), ret()], "out of range", i32=7)


def test_ref_operand_without_ref_bit():
    rejects([("block",), ("BufferLength", 3, 0), ret()], "ref register required")


def test_move_bit_only_where_allowed():
    verify_one([("block",), ("AssignRef", encode_ref(0, move=True), R1), ret()])
    rejects([("block",), ("BufferLength", encode_ref(0, move=True), 0), ret()],
            "MOVE bit")


def test_branch_to_non_block():
    rejects([("block",), ("Branch", 1, ()), ], "block", blocks=2)


def test_block_count_mismatch():
    rejects([("block",), ret()], "invalid descriptor block count 2; found 1", blocks=2)
    rejects([("block",), ("Branch", 7, ()), ("block",), ret(), ("block",), ret()],
            "found at least 2 blocks", blocks=1)


def test_missing_terminator_and_op_outside_block():
    rejects([("block",), ("ConstI32", 1, 0), ("ConstI32", 1, 0)], "missing terminator")
    rejects([("ConstI32", 1, 0), ret()], "not in a block")
    rejects([("block",), ("ConstI32", 1, 0), ("block",), ret()], "while still in a block")


def test_call_targets_and_cconv():
    callee = dict(body=body(("block",), ret(0)), cconv="0i_i")
    good = dict(body=body(("block",), ("Call", 1, (0,), (1,)), ret()))
    verify_module(make_module([good, callee]))
    bad_ordinal = dict(body=body(("block",), ("Call", 5, (0,), (1,)), ret()))
    with pytest.raises(VerificationError, match="function ordinal 5 out of range"):
        verify_module(make_module([bad_ordinal, callee]))
    bad_bank = dict(body=body(("block",), ("Call", 1, (R0,), (1,)), ret()))
    with pytest.raises(VerificationError, match="call to internal function 1"):
        verify_module(make_module([bad_bank, callee]))
    too_few = dict(body=body(("block",), ("Call", 1, (), (1,)), ret()))
    with pytest.raises(VerificationError, match="register list underflow"):
        verify_module(make_module([too_few, callee]))


def test_import_calls():
    imports = [("x.f", "0rCiD_i")]
    ok = body(("block",), ("CallVariadic", IMPORT, (1, 2), (R0, 1, 2), (3,)), ret())
    verify_module(make_module([dict(body=ok)], imports=imports))
    short = body(("block",), ("CallVariadic", IMPORT, (1, 2), (R0, 1), (3,)), ret())
    with pytest.raises(VerificationError, match="variadic call to import 'x.f'|call to import"):
        verify_module(make_module([dict(body=short)], imports=imports))
    missing = body(("block",), ("Call", IMPORT | 4, (), ()), ret())
    with pytest.raises(VerificationError, match="import ordinal 4 out of range"):
        verify_module(make_module([dict(body=missing)], imports=imports))
    internal = body(("block",), ("CallVariadic", 0, (0,), (), ()), ret())
    with pytest.raises(VerificationError, match="variadic calls only supported"):
        verify_module(make_module([dict(body=internal)], imports=imports))
    resolved = body(("block",), ("ImportResolved", 0, 0), ret())
    with pytest.raises(VerificationError, match="not an import ordinal"):
        verify_module(make_module([dict(body=resolved)], imports=imports))


def test_return_matches_results():
    verify_one([("block",), ("ConstI64", 5, 2), ret(2)], cconv="0v_I")
    rejects([("block",), ret(R0)], "i32/f32 register required", cconv="0v_i")
    rejects([("block",), ret()], "register list underflow", cconv="0v_i")


def test_global_rodata_and_type_ordinals():
    verify_one([("block",), ("GlobalLoadI64", 8, 0), ret()], global_bytes=16)
    rejects([("block",), ("GlobalLoadI64", 12, 0), ret()], "global byte_offset out of range",
            StatusCode.OUT_OF_RANGE)
    rejects([("block",), ("GlobalLoadRef", 2, 0, R0), ret()], "global ref ordinal")
    rejects([("block",), ("ConstRefRodata", 0, R0), ret()], "rodata ref ordinal")
    rejects([("block",), ("ListAlloc", 3, 0, R0), ret()], "type id ordinal out of range")


def test_extension_opcodes_need_the_feature():
    ops = [("block",), ("AddF32", 0, 1, 2), ret()]
    verify_one(ops, req=FEATURE_EXT_F32)
    rejects(ops, "EXT_F32")


def test_truncated_and_unknown_opcodes():
    data = body(("block",), ("AddI32", 0, 1, 2), ret())
    with pytest.raises(VerificationError, match="overrun"):
        verify_module(make_module([dict(body=data[:5] + b"\x00")]))
    with pytest.raises(VerificationError, match="unhandled opcode"):
        verify_module(make_module([dict(body=b"\x79\xF0\x00\x00")]))


def test_signature_problems():
    rejects([("block",), ret()], "unsupported cconv version", cconv="1v_v")
    rejects([("block",), ret()], "insufficient register storage", cconv="0IIII_v", i32=4)
    rejects([("block",), ret()], "variadic", cconv="0CiD_v")


def test_register_count_overflow():
    rejects([("block",), ret()], "register count overflow", i32=0x7FFF)
