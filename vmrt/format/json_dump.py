"""flatcc-style JSON for modules, as ``iree-dump-module --output=flatbuffer-json``.

The printer walks the schema declarations and reproduces flatcc's JSON printer
(flatcc/src/runtime/json_printer.c and the generated per-schema printers) with
the settings iree-dump-module uses: strict quoting, enum names, and
``skip_default`` (scalars equal to their default are not printed, present or
not).  Fields come in schema order; strings, vectors and tables print when
present; structs print every member; ``bit_flags`` enums print as
space-separated names, or as a number when 0 or when unknown bits are set;
unions print a ``<name>_type`` then the value (union vectors: a name array,
then values with ``null`` for NONE).  ``pretty`` indents by 2 as ``--pretty``.
"""

from __future__ import annotations

from vmrt.format.flatbuffer_schema import EnumDecl, StructDecl, TableDecl, is_vector_present
from vmrt.format.module_def import BytecodeModuleDef

# flatcc escapes control characters, '"' and '\'; everything else is raw.
_ESCAPES = {i: "\\u%04x" % i for i in range(0x20)}
_ESCAPES.update({ord("\t"): "\\t", ord("\f"): "\\f", ord("\r"): "\\r", ord("\n"): "\\n",
                 ord("\b"): "\\b", ord('"'): '\\"', ord("\\"): "\\\\"})


def json_string(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


def enum_text(decl: EnumDecl, value: int) -> str:
    if decl.bit_flags:
        mask = (1 << (8 * decl.size)) - 1
        if value == 0 or (value & mask & ~decl.known_mask):
            return str(value)
        return '"' + " ".join(decl.names(value)) + '"'
    names = decl.names(value)
    return f'"{names[0]}"' if names else str(value)


class _Printer:
    """Mirrors flatcc's printer context: level, indent, and its primitives."""

    def __init__(self, indent: int):
        self.indent = indent
        self.level = 0
        self.out: list[str] = []

    def nl(self):
        if self.indent:
            self.out.append("\n" + " " * (self.level * self.indent))

    def start(self, c: str):
        self.level += 1
        self.out.append(c)

    def end(self, c: str):
        if self.indent:
            self.level -= 1
            self.out.append("\n" + " " * (self.level * self.indent))
        self.out.append(c)

    def name(self, name: str):
        self.nl()
        self.out.append('"' + name + '":' + (" " if self.indent else ""))

    # -- values ------------------------------------------------------------

    def table(self, obj):
        decl: TableDecl = type(obj).__fb__
        self.start("{")
        count = 0
        for f in decl.fields:
            value = getattr(obj, f.name)
            if f.kind == "scalar":
                present = value is not None and value != f.default
            elif f.kind in ("vector", "union_vector"):
                present = is_vector_present(obj, f.name)
            else:
                present = value is not None
            if not present:
                continue
            if count:
                self.out.append(",")
            count += 1
            # (a union, or union vector, writes its `<name>_type` field first, as flatc)
            self.name(f.name + "_type" if f.kind in ("union", "union_vector") else f.name)
            getattr(self, "_" + f.kind)(f, value)
        self.end("}")

    # The value of each kind of table field, after its name.
    def _scalar(self, f, value):
        t = f.type
        self.out.append(enum_text(t, value) if isinstance(t, EnumDecl) else str(value))

    def _string(self, f, value):
        self.out.append(json_string(value))

    def _table(self, f, value):
        self.table(value)

    def _vector(self, f, value):
        self.vector(f, value)

    def _union(self, f, value):
        self.out.append('"' + type(value).__fb__.name + '"')
        self.out.append(",")
        self.name(f.name)
        self.table(value)

    def _union_vector(self, f, value):
        out = self.out
        items = list(value)
        self.start("[")
        for i, item in enumerate(items):
            if i:
                out.append(",")
            self.nl()
            out.append('"' + (type(item).__fb__.name if item is not None else "NONE") + '"')
        self.end("]")
        out.append(",")
        self.name(f.name)
        self.start("[")
        for i, item in enumerate(items):
            if i:
                out.append(",")
            if item is None:
                out.append("null")
            else:
                self.table(item)
        self.end("]")

    def vector(self, f, value):
        out = self.out
        ek = f.elem_kind
        self.start("[")
        if ek == "table":
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                self.table(item)
        elif ek == "struct":
            decl: StructDecl = f.elem
            for i, item in enumerate(value):
                if i:
                    out.append(",")
                self.nl()
                self.start("{")
                for j, name in enumerate(decl.field_names):
                    if j:
                        out.append(",")
                    self.name(name)
                    v = getattr(item, name)
                    e = decl.enums.get(name)
                    out.append(enum_text(e, v) if e is not None else str(v))
                self.end("}")
        else:
            if isinstance(value, list) or ek != "bytes":
                values = value
            else:
                values = memoryview(value).cast("B")
            if self.indent:
                for i, v in enumerate(values):
                    if i:
                        out.append(",")
                    self.nl()
                    out.append(str(v))
            else:
                out.append(",".join(map(str, values)))
        self.end("]")


def module_to_json(module: BytecodeModuleDef, *, pretty: bool = False) -> str:
    """The module as ``iree-dump-module --output=flatbuffer-json [--pretty]``."""
    return table_to_json(module, pretty=pretty)


def table_to_json(obj, *, pretty: bool = False) -> str:
    """Any declared table as flatcc's JSON printer prints it as a root."""
    printer = _Printer(2 if pretty else 0)
    printer.table(obj)
    if pretty:
        printer.out.append("\n")
    return "".join(printer.out)
