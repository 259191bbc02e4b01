"""vmasm: the textual form of VM bytecode modules, in both directions.

    assemble(text, filename="<vmasm>") -> bytes        # a .vmfb, as iree-as-module builds it
    disassemble(module, function=None, bytecode_offsets=False) -> str
                                                       # as iree-dump-module --output=disassembly

`module` is a ModuleDef (vmrt.format.read_module), bytes or a path;
`function` keeps one function (name or internal ordinal). `assemble` raises
AssemblyError carrying every Diagnostic (file, line, column, message) found.
Command line: `vmrt asm IN.vmasm -o OUT.vmfb`, `vmrt disasm MODULE
[--function=F] [--bytecode-offsets]`.

Both directions are driven by the ISA table (vmrt.isa: operands, banks,
encoding) and one syntax table (vmrt/asm/syntax.py: how each instruction is
spelled; the first spelling is printed, all are read).

The grammar (iree-as-module 3.13.0's, one statement per line)::

    vm.module @name [version N]
    vm.type TYPE                              # type table entries, in order
    vm.import [optional] @module.fn cconv "0ii_i"
    vm.rodata[N] = HEXBYTES                   # in ordinal order
    vm.global.{i32,i64,f32,f64} [private] [mutable] @name [= 0 : TYPE]
    vm.export @name [= @function]
    vm.func @name(%i0: i32, %i1:2: i64, %r0: !vm.buffer) -> (i32, !vm.buffer) {
    ^bb0:
      %i3 = vm.add.i32 %i0, %i0
      vm.cond_br %i3, ^bb1(%i3->%i4), ^bb2
    ...
    }

Registers are `%iN` (i32/f32), `%iN:N+1` (i64/f64 pairs), `%rN` and `%RN`
(a ref, moved). Argument registers are numbered one after another, as
iree-as-module requires (so `%i1:2: i64` after one i32, although the value
arrives in the aligned pair %i2:3 at run time). Globals are addressed as
`.rwdata[BYTE_OFFSET]`, `.refs[N]` or `@name`; functions as `@name`,
`@module.name`, `@module:ORDINAL` or an import's full name. Comments start
with `//` or `#`; a leading `[XXXXXXXX]` offset is ignored. Numbers follow C
(`0x10`, and `010` is octal); floats C's strtof/strtod (`0x1.8p1`, `inf`, `nan`).

Where iree-as-module and iree-dump-module disagree, vmrt reads both:

* `vm.trace "x"(%a, %b)` (printed) and `vm.trace "x", %a, %b` (parsed);
  the same for vm.print;
* indirect globals `vm.global.store.indirect.i32 %v, .rwdata[%o]` (printed)
  and `... %o, %v` (parsed); loads `.rwdata[%o]` and `%o`; ref forms alike;
* strings run to the last quote of the line (the printer does not escape).

vmrt-only additions: any `^name:` block label; `vm.switch.ref %i[%r1, %r2]
else %r3 -> TYPE` (iree-as-module cannot write it and iree-dump-module
mis-decodes it); `vm.global.ref [private] [mutable] @name : TYPE`;
subnormal float constants (C flags them ERANGE and iree-as-module refuses
them, but the printer produces them).

The module is laid out as iree-as-module lays it out (same type order,
register counts, block markers, global layout), so function bytecode and
descriptors are byte-identical; the FlatBuffer itself is written by
vmrt.format. Differences: an i64/f64 written `%iN` in a call or return list
(as the printer writes them) counts as the pair it is, from the callee's
cconv; a module depends on every module it imports from (iree-run-module
creates hal/io_parameters from dependencies); and vmrt reports errors
iree-as-module lets through to the loader (undefined rodata, blocks without
terminators, odd i64 pairs, registers beyond the register file).

What the text does not carry (so a round trip loses it): function feature
bits other than EXT_F32/EXT_F64, debug information, attributes, and the
declared global storage beyond what `.rwdata[N]` / `.refs[N]` name.
"""

from vmrt.asm.assembler import AssemblyError, Diagnostic, assemble
from vmrt.asm.disassembler import DisassemblyError, disassemble

__all__ = ["AssemblyError", "Diagnostic", "DisassemblyError", "assemble", "disassemble"]
