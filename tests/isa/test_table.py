"""The generated ISA table: complete, consistent, and reproducible from isa.json."""

import json
from pathlib import Path

import pytest

from vmrt import isa
from vmrt.isa import generate
from vmrt.isa.operands import OperandKind

ISA_JSON = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "isa.json"
TABLE = Path(isa.__file__).with_name("table.py")


def test_all_instructions_present():
    assert len(isa.INSTRUCTIONS) == 265
    assert {s.id for s in isa.OPCODE_SETS} == {"core", "ext_f32", "ext_f64"}
    assert isa.BYTECODE_VERSION == (17, 0)


def test_opcodes_unique_per_set():
    seen = set()
    for inst in isa.INSTRUCTIONS:
        key = (inst.opcode_set, inst.opcode)
        assert key not in seen, inst.symbol
        seen.add(key)
    assert len({i.symbol for i in isa.INSTRUCTIONS}) == 265


def test_indexes_agree_with_table():
    for inst in isa.INSTRUCTIONS:
        assert isa.BY_OPCODE[inst.opcode_set][inst.opcode] is inst
        assert isa.BY_SYMBOL[inst.symbol] is inst
        if inst.mnemonic:
            assert isa.BY_MNEMONIC[inst.mnemonic] is inst
    assert isa.BLOCK_OPCODE == 0x79
    assert sorted(isa.PREFIXES) == [0xE0, 0xE1]


def test_known_encodings():
    add = isa.BY_SYMBOL["AddI32"]
    assert [(o.kind, o.bank, o.access) for o in add.operands] == [
        (OperandKind.REGISTER, "i32", "r"), (OperandKind.REGISTER, "i32", "r"),
        (OperandKind.REGISTER, "i32", "w")]
    assert add.fixed_size == 6
    assert isa.BY_SYMBOL["ConstI64"].fixed_size == 10
    assert isa.BY_SYMBOL["Call"].fixed_size is None
    assert isa.BY_SYMBOL["AddF64"].opcode_set == "ext_f64"
    assert isa.BY_SYMBOL["AddF64"].opcode_bytes == 2
    shift = isa.BY_SYMBOL["ShlI64"]
    assert [o.bank for o in shift.operands] == ["i64", "i32", "i64"]


def test_terminators_match_upstream_verifier():
    terminators = {i.symbol for i in isa.INSTRUCTIONS if i.is_terminator}
    assert terminators == {"Branch", "CondBranch", "BranchTable", "Return", "Fail", "Yield",
                           "Break", "CondBreak", "CallYieldable", "CallVariadicYieldable"}


@pytest.mark.skipif(not ISA_JSON.exists(), reason="shared/reference/isa.json not present")
def test_table_regenerates_identically(tmp_path):
    data = json.loads(ISA_JSON.read_text())
    assert generate.generate(data) == TABLE.read_text()


@pytest.mark.skipif(not ISA_JSON.exists(), reason="shared/reference/isa.json not present")
def test_table_matches_isa_json_entries():
    data = json.loads(ISA_JSON.read_text())
    for entry in data["instructions"]:
        inst = isa.BY_OPCODE[entry["opcode_set"]][entry["opcode"]]
        assert inst.symbol == entry["symbol"]
        assert inst.mnemonic == entry["mnemonic"]
        if "encoding" in entry:
            fields = generate.resolve_fields(data, entry["encoding"])
            assert [f["name"] for f in fields] == [o.name for o in inst.operands]
