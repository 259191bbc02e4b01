"""Regenerates vmrt/isa/table.py from upstream's isa.json (the ISA as data).

    python -m vmrt.isa.generate PATH/TO/isa.json [-o vmrt/isa/table.py]

Encodings are resolved here ("$value_type" parameters bound), so the table holds
each instruction's complete operand list on one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HEADER = '''\
"""The VM bytecode ISA {major}.{minor}: every instruction on one line (generated; do not edit).

Regenerate with `python -m vmrt.isa.generate isa.json`. Each entry is
(opcode set, opcode, symbol, mnemonic, operands in wire order); operand builders
are defined in vmrt/isa/operands.py.
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


def generate(isa: dict) -> str:
    version = isa["bytecode_version"]
    sets = []
    for s in isa["opcode_sets"]:
        sets.append(f"    OpcodeSet({s['id']!r}, {s['c_tag']!r}, prefix={s['prefix']!r}, "
                    f"feature={s['feature']!r}),")
    lines = []
    for inst in isa["instructions"]:
        head = f"I({inst['opcode_set']!r:9}, 0x{inst['opcode']:02X}, {inst['symbol']!r:26}, "
        kind = inst.get("kind")
        if kind == "marker":
            lines.append(head + f"{None!r:28}, (), kind='marker'),")
            continue
        if kind == "prefix":
            lines.append(head + f"{None!r:28}, (), kind='prefix', "
                         f"target={inst['target_opcode_set']!r}),")
            continue
        sources = [operand_source(f) for f in resolve_fields(isa, inst["encoding"])]
        operands = ", ".join(sources)
        comma = "," if len(sources) == 1 else ""
        lines.append(head + f"{inst['mnemonic']!r:28}, ({operands}{comma}), "
                     f"encoding={inst['encoding']!r}),")
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
