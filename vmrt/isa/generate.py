"""Regenerates vmrt/isa/table.py: upstream's isa.json joined with vmrt/isa/ops.py.

    python -m vmrt.isa.generate PATH/TO/isa.json [-o vmrt/isa/table.py]   (make isa)

Encodings are resolved here ("$value_type" parameters bound), and each
instruction's op row (handler, formula, flags) and vmasm syntax (its own, its
encoding class's, or the generic template) are looked up here, so the table
holds everything about an instruction on one line. Every instruction must have
exactly one op row and every op row an instruction.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vmrt.isa import operands as operand_builders
from vmrt.isa.operands import OperandKind
from vmrt.isa.ops import FLAGS, FORMULA_KINDS, KIND_FLAGS, OPS, SYNTAX_BY_CLASS, Op

HEADER = '''\
"""The VM bytecode ISA {major}.{minor}: every instruction on one line (generated; do not edit).

Regenerate with `make isa` after editing vmrt/isa/ops.py. Each entry is (opcode
set, opcode, symbol, mnemonic, operands in wire order, encoding) from isa.json,
then the instruction's row of vmrt/isa/ops.py (handler, formula, syntax, flags).
Operand builders are defined in vmrt/isa/operands.py.
"""

from vmrt.isa.operands import (
    attr, branch_operands, branch_table_cases, branch_target, const_i16, func_attr,
    global_attr, reg, rodata_attr, string_attr, type_of, variadic_operands,
    variadic_results,
)
from vmrt.isa.spec import Instruction as I, OpcodeSet

BYTECODE_VERSION = ({major}, {minor})

OPCODE_SETS = (
{opcode_sets}
)

# fmt: off
INSTRUCTIONS = (
{instructions}
)
# fmt: on
'''


def _bind(value, parameters):
    if isinstance(value, str) and value.startswith("$"):
        return parameters[value[1:]]
    return value


def resolve_fields(isa: dict, encoding_name: str) -> list[dict]:
    encoding = isa["encodings"][encoding_name]
    if "class" in encoding:
        parameters = encoding.get("parameters", {})
        fields = isa["operation_classes"][encoding["class"]]["fields"]
        return [{k: _bind(v, parameters) for k, v in f.items()} for f in fields]
    return [dict(f) for f in encoding["fields"]]


def operand_source(field: dict) -> str:
    kind, name = field["kind"], repr(field["name"])
    if kind == "register":
        access = {"read": "'r'", "write": "'w'"}[field["access"]]
        move = ", move=True" if field.get("move") == "allow" else ""
        return f"reg({name}, {field['bank']!r}, {access}{move})"
    if kind == "attribute":
        return f"attr({name}, {field['type']!r})"
    if kind in ("variadic_operands", "variadic_results"):
        move = ", move=True" if field.get("move") == "allow" else ""
        return f"{kind}({name}, {field['type']!r}{move})"
    simple = {"global_attr", "func_attr", "rodata_attr", "string_attr", "type_of",
              "const_i16", "branch_target", "branch_operands", "branch_table_cases"}
    if kind in simple:
        return f"{kind}({name})"
    raise SystemExit(f"isa.json: unknown field kind {kind!r}")


_VALUE_TYPES = ("i32_", "i64_", "f32_", "f64_")


def encoding_class(encoding: str | None) -> str | None:
    """The encoding name with a leading value type dropped: `i32_binary` -> `binary`."""
    if encoding and encoding.startswith(_VALUE_TYPES):
        return encoding[4:]
    return encoding


def generic_template(symbol: str, operands) -> str:
    """`RESULTS = $op READS`; a type operand follows the register before it as `: TYPE`."""
    results = []
    reads: list[str] = []
    for operand in operands:
        kind = operand.kind
        if ((kind is OperandKind.REGISTER and operand.access == "w")
                or kind is OperandKind.VARIADIC_RESULTS):
            results.append("$" + operand.name)
        elif kind is OperandKind.TYPE_OF:
            if not reads:
                raise ValueError(f"no generic syntax for {symbol}: leading type")
            reads[-1] += " : $" + operand.name
        elif kind in (OperandKind.REGISTER, OperandKind.ATTRIBUTE, OperandKind.FUNC_ATTR,
                      OperandKind.GLOBAL_ATTR, OperandKind.RODATA_ATTR,
                      OperandKind.STRING_ATTR, OperandKind.VARIADIC_OPERANDS):
            reads.append("$" + operand.name)
        else:
            raise ValueError(f"no generic syntax for {symbol}: {kind.value} operand")
    if len(results) > 1:
        raise ValueError(f"no generic syntax for {symbol}: several results")
    text = "$op"
    if reads:
        text += " " + ", ".join(reads)
    if results:
        text = results[0] + " = " + text
    return text


def op_row(symbol: str, kind: str) -> Op:
    """The instruction's row of ops.py, checked against what the table needs."""
    op = OPS.get(symbol)
    if op is None:
        raise SystemExit(f"vmrt/isa/ops.py: no row for {symbol}")
    if op.handler not in KIND_FLAGS:
        raise SystemExit(f"vmrt/isa/ops.py: {symbol}: unknown handler {op.handler!r}")
    if (op.handler in FORMULA_KINDS) != bool(op.py):
        raise SystemExit(f"vmrt/isa/ops.py: {symbol}: a formula goes with handler "
                         f"'formula' or 'method', and only there")
    if (kind in ("marker", "prefix")) != (op.handler == kind):
        raise SystemExit(f"vmrt/isa/ops.py: {symbol} is a {kind}: handler {kind!r}")
    unknown = op.resolved_flags() - set(FLAGS)
    if unknown:
        raise SystemExit(f"vmrt/isa/ops.py: {symbol}: unknown flags {sorted(unknown)}")
    return op


def row_source(op: Op, syntax: tuple[str, ...]) -> str:
    """The op part of a table entry: keyword arguments of spec.Instruction."""
    parts = [f"handler={op.handler!r}"]
    if op.py:
        parts.append(f"py={op.py!r}")
    if op.c:
        parts.append(f"c={op.c!r}")
    if syntax:
        parts.append(f"syntax={syntax!r}")
    if op.cost != 1:
        parts.append(f"cost={op.cost!r}")
    if op.store_bits:
        parts.append(f"store_bits={op.store_bits!r}")
    flags = op.resolved_flags()
    names = {"terminator": "is_terminator", "branch": "is_branch", "call": "is_call"}
    parts += [f"{names.get(flag, flag)}=True" for flag in FLAGS if flag in flags]
    return ", ".join(parts)


def syntax_of(symbol: str, op: Op, encoding: str, sources: list[str]) -> tuple[str, ...]:
    if op.syntax:
        return op.syntax
    by_class = SYNTAX_BY_CLASS.get(encoding_class(encoding) or "")
    if by_class:
        return by_class
    operands = [eval(source, vars(operand_builders)) for source in sources]
    return (generic_template(symbol, operands),)


def instruction_line(isa: dict, inst: dict) -> str:
    head = f"I({inst['opcode_set']!r:9}, 0x{inst['opcode']:02X}, {inst['symbol']!r:26}, "
    kind = inst.get("kind")
    op = op_row(inst["symbol"], kind or "op")
    if kind == "marker":
        return head + f"{None!r:28}, (), kind='marker', {row_source(op, ())}),"
    if kind == "prefix":
        return head + (f"{None!r:28}, (), kind='prefix', "
                       f"target={inst['target_opcode_set']!r}, {row_source(op, ())}),")
    sources = [operand_source(f) for f in resolve_fields(isa, inst["encoding"])]
    operands = ", ".join(sources)
    comma = "," if len(sources) == 1 else ""
    syntax = syntax_of(inst["symbol"], op, inst["encoding"], sources)
    return head + (f"{inst['mnemonic']!r:28}, ({operands}{comma}), "
                   f"encoding={inst['encoding']!r}, {row_source(op, syntax)}),")


def generate(isa: dict) -> str:
    version = isa["bytecode_version"]
    sets = []
    for s in isa["opcode_sets"]:
        sets.append(f"    OpcodeSet({s['id']!r}, {s['c_tag']!r}, prefix={s['prefix']!r}, "
                    f"feature={s['feature']!r}),")
    lines = [instruction_line(isa, inst) for inst in isa["instructions"]]
    extra = set(OPS) - {inst["symbol"] for inst in isa["instructions"]}
    if extra:
        raise SystemExit(f"vmrt/isa/ops.py: rows for no instruction of isa.json: {sorted(extra)}")
    return HEADER.format(major=version["major"], minor=version["minor"],
                         opcode_sets="\n".join(sets), instructions="\n".join(lines))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("isa_json")
    parser.add_argument("-o", "--output", default=str(Path(__file__).with_name("table.py")))
    args = parser.parse_args(argv)
    isa = json.loads(Path(args.isa_json).read_text())
    Path(args.output).write_text(generate(isa))
    print(f"wrote {args.output}: {len(isa['instructions'])} instructions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
