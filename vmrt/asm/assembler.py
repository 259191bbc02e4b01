"""vmasm text -> .vmfb, producing the bytecode iree-as-module 3.13.0 produces.

The grammar is iree-as-module's (line oriented; see vmrt/asm/lexer.py for
lines and numbers): a module header, `vm.type`, `vm.import`, `vm.rodata`,
`vm.global.*`, `vm.export` directives and `vm.func` bodies of labels and
instructions. Instructions are read through their syntax templates
(vmrt/asm/syntax.py), encoded from the ISA table (vmrt/isa/encoder.py), and
laid out as iree-as-module lays them out: the same type table order, register
counts, block markers, global layout and function alignment, so the function
bytecode is byte-identical.

Beyond iree-as-module, the assembler also reads iree-dump-module's spellings
where the two disagree (`vm.trace "x"(%a)`, `.rwdata[%i]` for indirect
globals), `vm.switch.ref`, `vm.global.ref` and any `^name:` block label; it
reports every error it can find (file:line:col) instead of stopping at the
first. See vmrt/asm/__init__.py for the grammar and every difference.
"""

from __future__ import annotations

import re

from vmrt.asm.directives import ModuleDirectives
from vmrt.asm.lexer import strip_line
from vmrt.asm.matching import PLANS, diagnose, plan_for, template_summary
from vmrt.asm.operands import OperandReader
from vmrt.asm.state import Diagnostic, Function, Global, LineError, MAX_ERRORS, Pending
from vmrt.errors import AssemblyError
from vmrt.format import (
    BytecodeModuleDef, ExportFunctionDef, FunctionDescriptor, FunctionSignatureDef,
    ImportFlagBits, ImportFunctionDef, ModuleDependencyDef, ModuleDependencyFlagBits,
    ModuleStateDef, RodataSegmentDef, TypeDef, write_module,
)
from vmrt.isa import BLOCK, BYTECODE_VERSION
from vmrt.isa.encoder import opcode_bytes
from vmrt.isa.registers import IMPORT_ORDINAL_BIT, REF_TYPE_BIT
from vmrt.vm import cconv as cconv_mod

_LABEL = re.compile(r"\^([\w$.]+)\s*:$")

__all__ = ["AssemblyError", "Assembler", "Diagnostic", "assemble"]


class Assembler(ModuleDirectives, OperandReader):
    """One assembly: the module's tables (directives.py), the function being read,
    and the diagnostics so far. Reads line by line, then lays the module out."""

    def __init__(self, filename: str = "<vmasm>"):
        self.filename = filename
        self.diagnostics: list[Diagnostic] = []
        self.lines: list[str] = []
        self.lineno = 0
        self.module_name: str | None = None
        self.module_version = 0
        self.types: list[str] = []
        self.type_index: dict[str, int] = {}
        self.imports: list[tuple[str, str, bool]] = []
        self.import_index: dict[str, int] = {}
        self.rodata: list[bytes] = []
        self.globals: list[Global] = []
        self.global_index: dict[str, Global] = {}
        self.global_bytes = 0
        self.global_refs = 0
        self.exports: list[tuple[str, str, int, int]] = []  # name, function, line, offset
        self.export_names: set[str] = set()
        self.functions: list[Function] = []
        self.function_index: dict[str, int] = {}
        self.requirements = 0
        self.current: Function | None = None
        #: Function arguments number registers one after another (%i1:2 is fine
        #: there); everywhere else i64/f64 pairs must start at even registers.
        self.in_signature = False
        self.module_pending: list[tuple[Function, Pending]] = []

    # -- diagnostics -------------------------------------------------------------
    def error(self, offset: int, message: str, line: int | None = None) -> None:
        line = self.lineno if line is None else line
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.diagnostics.append(Diagnostic(self.filename, line, offset + 1, message,
                                           source.rstrip("\r\n")))

    # -- driver ------------------------------------------------------------------
    def assemble(self, text: str) -> bytes:
        self.lines = text.split("\n")
        diagnostics = self.diagnostics
        for lineno, raw in enumerate(self.lines, 1):
            content = raw.strip()
            if not content:
                continue
            self.lineno = lineno
            if content[0] == "[" or "/" in content or "#" in content:
                content, base = strip_line(raw)
                if not content:
                    continue
            else:
                base = len(raw) - len(raw.lstrip())
            try:
                if self.current is None:
                    self.top_level(content, base)
                elif content[0] == "^" or content == "}" or content.startswith("vm.func "):
                    self.function_line(content, base)
                else:
                    self.instruction(content, base)
            except LineError as e:
                self.error(e.offset, e.message)
                if self.current is not None:
                    # The block's end is unknown now: no follow-up terminator errors.
                    self.current.unsure = True
                if len(diagnostics) >= MAX_ERRORS:
                    break
        self.lineno = len(self.lines)
        if len(self.diagnostics) < MAX_ERRORS:
            self.finish()
        if self.diagnostics:
            self.diagnostics.sort(key=lambda d: (d.line, d.column))
            raise AssemblyError(self.diagnostics)
        return self.build()

    def finish(self) -> None:
        if self.current is not None:
            self.error(0, f"function @{self.current.name} is not closed with '}}'",
                       line=self.current.line)
            self.current = None
        if self.module_name is None:
            self.error(0, "missing module directive (vm.module @name)", line=1)
            return
        if not self.functions and not self.diagnostics:
            self.error(0, "module has no functions (vm.func)",
                       line=max(1, len(self.lines) - (self.lines[-1:] == [""])))
        for name, function_name, line, offset in self.exports:
            if function_name not in self.function_index:
                self.error(offset, f"export of unknown function @{function_name}", line=line)
        self.assign_global_ordinals()
        for function, pending in self.module_pending:
            self.resolve(function, pending, module_level=True)
        if not self.diagnostics:
            for function in self.functions:
                self.count_wide_list_registers(function)

    def count_wide_list_registers(self, function: Function) -> None:
        """i64/f64 values in call and return lists are written `%iN` (as
        iree-dump-module prints them); the callee's cconv says they take the
        pair N, N+1, which the register count must cover."""
        for inst, values in function.calls:
            names = [o.name for o in inst.operands]
            if inst.handler == "return":
                fragment = cconv_mod.split_fragments(function.cconv)[1]
                lists = [(fragment, None, values[0])]
            else:
                callee = values[0]
                if callee & IMPORT_ORDINAL_BIT:
                    k = callee & ~IMPORT_ORDINAL_BIT
                    cconv = self.imports[k][1] if k < len(self.imports) else ""
                elif callee < len(self.functions):
                    cconv = self.functions[callee].cconv
                else:
                    continue
                arguments, results = cconv_mod.split_fragments(cconv)
                segments = values[names.index("segment_sizes")] \
                    if "segment_sizes" in names else None
                lists = [(arguments, segments, values[names.index("operands")]),
                         (results, None, values[names.index("results")])]
            for fragment, segments, registers in lists:
                for char, reg in _typed_registers(fragment, segments, registers):
                    if char in "IF" and not reg & REF_TYPE_BIT:
                        function.i32_count = max(function.i32_count, reg + 2)


    def function_line(self, text: str, base: int) -> None:
        function = self.current
        if text == "}":
            self.end_function(base)
            return
        if text.startswith("vm.func "):
            self.error(base, f"function @{function.name} is not closed with '}}' before "
                             f"the next function")
            function.unsure = True
            self.end_function(base)
            return self.function_header(text, base)
        if text.startswith("^"):
            m = _LABEL.match(text)
            if m is not None:
                return self.label(m.group(1), base)
        self.instruction(text, base)

    def label(self, name: str, base: int) -> None:
        function = self.current
        pc = len(function.data)
        if function.label_count == 0 and pc == 1:
            pc = 0  # the block every function starts with
        else:
            if not function.terminated and not function.unsure:
                self.error(base, "the block before this label is empty" if function.empty
                           else "the block before this label does not end with a "
                                "terminator (vm.br, vm.return, ...)")
            function.data += opcode_bytes(BLOCK)
            function.block_count += 1
        function.label_count += 1
        function.terminated = False
        function.empty = True
        function.unsure = False
        if name in function.labels:
            raise LineError(base, f"duplicate block label ^{name}")
        function.labels[name] = pc

    def end_function(self, base: int) -> None:
        function = self.current
        self.current = None
        if not function.terminated and not function.unsure:
            self.error(base, "the last block is empty" if function.empty else
                       "the last block does not end with a terminator (vm.return, ...)")
        for pending in function.pending:
            self.resolve(function, pending, module_level=False)
        if not function.name or function.name in self.function_index:
            return
        self.function_index[function.name] = len(self.functions)
        self.functions.append(function)

    # -- instructions ------------------------------------------------------------
    def instruction(self, text: str, base: int) -> None:
        function = self.current
        result_text = None
        result_at = 0
        rest, rest_at = text, base
        eq = text.find("=")
        if eq > 0 and text[0] == "%":
            result_text = text[:eq].rstrip()
            result_at = base
            rest = text[eq + 1:]
            rest_at = base + eq + 1
            lead = len(rest) - len(rest.lstrip())
            rest = rest[lead:]
            rest_at += lead
        space = rest.find(" ")
        mnemonic = rest if space < 0 else rest[:space]
        if "\t" in mnemonic:
            mnemonic = mnemonic.split(None, 1)[0]
        plan = PLANS.get(mnemonic)
        if plan is None:
            plan = plan_for(mnemonic)
            if plan is None:
                raise LineError(rest_at, f"unknown instruction '{mnemonic}'")
        if function.terminated:
            raise LineError(rest_at, "instruction after a terminator: start a new block with a "
                                  "label (^bbN:)")
        operands = rest[len(mnemonic):]
        operands_at = rest_at + len(mnemonic)
        for matcher in plan.matchers:
            match = matcher.regex.fullmatch(operands)
            if match is not None:
                break
        else:
            inst = plan.inst
            best = max((diagnose(m, operands) + (m,) for m in plan.matchers),
                       key=lambda r: r[0])
            offset, message, matcher = best
            raise LineError(operands_at + offset,
                         f"{message}; {inst.vm_name} is written "
                         f"`{template_summary(plan.matchers[0].template)}`")
        values, refs = self.operand_values(plan, matcher, match, result_text, result_at,
                                           operands_at, rest_at)
        pc = len(function.data)
        if plan.packer is not None and not refs:
            function.data += plan.prefix + plan.packer(*values)
        else:
            function.data += plan.encode(values, pc)
            if refs:
                function.pending.append(Pending(pc, plan.inst, values, refs))
        if plan.feature:
            function.requirements |= plan.feature
            self.requirements |= plan.feature
        if plan.checks_cconv:
            function.calls.append((plan.inst, values))
        function.empty = False
        function.terminated = plan.is_terminator

    def operand_values(self, plan, matcher, match, result_text, result_at, operands_at,
                       rest_at):
        """The ISA operand values of a matched instruction line, and the references
        (labels, functions, globals) left to resolve."""
        values: list = [None] * plan.operand_count
        refs: list = []
        # The result register(s), left of `=`.
        result = matcher.result
        if result is not None:
            if result_text is None:
                if not matcher.template.result_optional:
                    raise LineError(rest_at, f"{plan.inst.vm_name} needs a result register "
                                          f"(`{template_summary(matcher.template)}`)")
                values[result[0]] = ()
            else:
                values[result[0]] = result[1](self, result_text, result_at, refs)
        elif result_text is not None:
            raise LineError(result_at, f"{plan.inst.vm_name} has no result")
        for group, index, convert in matcher.converters:
            part = match.group(group)
            if part is None:
                values[index] = ()
            else:
                values[index] = convert(self, part, operands_at + match.start(group), refs)
        if plan.table_size is not None:
            values[plan.table_size] = len(values[plan.table_size + 1])
        return values, refs
    # -- output ------------------------------------------------------------------
    def build(self) -> bytes:
        bytecode = bytearray()
        descriptors = []
        signatures = []
        for f in self.functions:
            descriptors.append(FunctionDescriptor(
                bytecode_offset=len(bytecode), bytecode_length=len(f.data),
                requirements=f.requirements, reserved=0, block_count=f.block_count,
                i32_register_count=f.i32_count, ref_register_count=f.ref_count))
            signatures.append(FunctionSignatureDef(calling_convention=f.cconv))
            bytecode += f.data
            bytecode += bytes(-len(bytecode) % 8)
        imports = [ImportFunctionDef(
            full_name=name, signature=FunctionSignatureDef(calling_convention=cconv),
            flags=ImportFlagBits.OPTIONAL if optional else ImportFlagBits.REQUIRED)
            for name, cconv, optional in self.imports]
        exports = [ExportFunctionDef(local_name=name,
                                     internal_ordinal=self.function_index[function])
                   for name, function, _, _ in self.exports]
        # A module depends on every module it imports from (optionally when all
        # of those imports are optional). vmasm has no dependency directive and
        # iree-as-module writes none, but runtimes (iree-run-module) decide from
        # them which native modules (hal, io_parameters, ...) to create.
        dependencies: dict[str, bool] = {}
        for name, _, optional in self.imports:
            target = name.split(".", 1)[0]
            dependencies[target] = dependencies.get(target, True) and optional
        dependency_defs = [ModuleDependencyDef(
            name=target, minimum_version=0,
            flags=ModuleDependencyFlagBits.OPTIONAL if optional
            else ModuleDependencyFlagBits.REQUIRED)
            for target, optional in dependencies.items()]
        state = None
        if self.global_bytes or self.global_refs:
            state = ModuleStateDef(global_bytes_capacity=self.global_bytes,
                                   global_ref_count=self.global_refs)
        module = BytecodeModuleDef(
            name=self.module_name, version=self.module_version,
            requirements=self.requirements,
            types=[TypeDef(full_name=t) for t in self.types],
            dependencies=dependency_defs, imported_functions=imports, exported_functions=exports,
            function_signatures=signatures,
            rodata_segments=[RodataSegmentDef(embedded_data=data) for data in self.rodata],
            module_state=state, function_descriptors=descriptors,
            bytecode_version=(BYTECODE_VERSION[0] << 16) | BYTECODE_VERSION[1],
            bytecode_data=bytes(bytecode))
        return write_module(module)



def _typed_registers(fragment: str, segments, registers):
    """(cconv char, register) pairs of a call list, spans expanded by segment sizes."""
    out = []
    reg_i = seg_i = 0
    i = 0
    n = len(fragment)
    while i < n and reg_i <= len(registers):
        ch = fragment[i]
        if ch in "iIfFr":
            if reg_i < len(registers):
                out.append((ch, registers[reg_i]))
            reg_i += 1
        elif ch == "C":
            end = fragment.find("D", i + 1)
            end = n if end < 0 else end
            count = segments[seg_i] if segments is not None and seg_i < len(segments) else 0
            for _ in range(count):
                for sch in fragment[i + 1:end]:
                    if sch in "iIfFr" and reg_i < len(registers):
                        out.append((sch, registers[reg_i]))
                    reg_i += 1
            i = end
        i += 1
        seg_i += 1
    return out



def assemble(text: str, filename: str = "<vmasm>") -> bytes:
    """Assembles vmasm text into .vmfb bytes; raises AssemblyError listing every error."""
    return Assembler(filename).assemble(text)
