"""What every VM instruction does: one hand-written row per instruction symbol.

This is the one place an instruction's meaning is written down. `make isa`
(vmrt/isa/generate.py) joins each row with upstream's isa.json (opcode and
operands) and the vmasm syntax into one frozen entry of vmrt/isa/table.py, which
is all the rest of vmrt reads: the code generator chooses an emitter by the
row's handler kind, and the verifier, the fuel costs, block terminators and the
assembler read its flags. No other file keeps a list of instruction names.

A row is `Op(handler, py, c=..., syntax=..., cost=...)`:

handler   how the code generator (vmrt/vm/codegen.py) emits the instruction:
          'formula'     `py` is Python source over the operand names;
          'method'      the same, where the formula is a call on a buffer or list
                        object (vmrt.vm.buffer, vmrt.vm.list);
          'global' / 'global_ref'   a load or store of a global (byte storage or
                        ref table, direct or through a register: read off the
                        operands);
          'resolved'    whether an import resolved; 'list_get_ref' a list element
                        taken (move bit) or copied; 'assign_ref', 'discard_refs';
          'call', 'call_yieldable';
          'branch', 'cond_branch', 'branch_table', 'return', 'fail', 'yield'
                        (block terminators); 'marker' and 'prefix' are never
                        emitted (block markers; extension opcode prefixes).
py        the Python formula of 'formula' and 'method' rows. Operands are named
          as in the ISA (`{left}`, `{result}`); a variadic operand `{values}` is
          its registers joined by commas, `{count}` their number and
          `{values_tuple}` a Python tuple of them. Three statement macros keep wrap
          and rounding visible: `W32 x` and `W64 x` wrap an integer to 32/64 bits
          (a range check first, since most results are in range), `F32 x` rounds a
          float to single precision. Helpers (`div_s`, `c_exp`, ...) come from
          vmrt.vm.numerics.
c         the C formula the C tier (vmrt/vm/ctier/cgen.py) emits, over the same
          operand names as C locals, and `{pc}` (the instruction's offset, for the
          runtime's checked macros: VMRT_LOAD, VMRT_DIV_CHECK, ... in
          vmrt/vm/ctier/runtime.h). Integer arithmetic wraps through unsigned
          types; f32 results of double library functions are narrowed as the
          Python formula's `F32` does. Empty: the instruction keeps its function
          in the Python tier.
syntax    vmasm templates for this instruction when they differ from those of its
          encoding class (SYNTAX_BY_CLASS below) and from the generic template
          (see vmrt.isa.generate.generic_template).
cost      fuel an executed instruction charges under limits (vmrt.vm.limits).
store_bits  for an integer store narrower than its value register (8, 16): the
          bits it writes (the execution trace shows the value so truncated).
flags     derived from the handler kind (KIND_FLAGS) unless given:
          terminator  ends a block; branch  may continue in another block (or the
          same one again); call  calls a function; may_yield  may suspend the
          invocation; handles_moves  the emitter applies its operands' move bits
          itself (otherwise the code generator clears moved ref registers).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Flags every row of a handler kind has (see the module docstring).
KIND_FLAGS: dict[str, frozenset[str]] = {
    "formula": frozenset(), "method": frozenset(), "global": frozenset(),
    "resolved": frozenset(), "list_get_ref": frozenset(), "marker": frozenset(),
    "prefix": frozenset(),
    "global_ref": frozenset({"handles_moves"}),
    "assign_ref": frozenset({"handles_moves"}),
    "discard_refs": frozenset({"handles_moves"}),
    "call": frozenset({"call", "handles_moves"}),
    "call_yieldable": frozenset({"call", "may_yield", "branch", "terminator"}),
    "branch": frozenset({"branch", "terminator"}),
    "cond_branch": frozenset({"branch", "terminator"}),
    "branch_table": frozenset({"branch", "terminator"}),
    "yield": frozenset({"branch", "terminator", "may_yield"}),
    "return": frozenset({"terminator"}),
    "fail": frozenset({"terminator"}),
}
FLAGS = ("terminator", "branch", "call", "may_yield", "handles_moves")
FORMULA_KINDS = frozenset({"formula", "method"})


@dataclass(frozen=True)
class Op:
    """One instruction's meaning (see the module docstring)."""

    handler: str
    py: str = ""
    c: str = ""
    syntax: tuple[str, ...] = ()
    cost: int = 1
    store_bits: int = 0
    flags: frozenset[str] | None = None  # None: KIND_FLAGS[handler]

    def resolved_flags(self) -> frozenset[str]:
        return KIND_FLAGS[self.handler] if self.flags is None else self.flags


# vmasm templates by encoding class (the ISA encoding name with a leading value type
# dropped: `i32_global_load` -> `global_load`); template language: vmrt/asm/syntax.py.
# fmt: off
SYNTAX_BY_CLASS: dict[str, tuple[str, ...]] = {
    # -- globals: storage operands print as .rwdata[N] / .refs[N] (or @name in source)
    "global_load":               ("$result = $op $byte_offset",),
    "global_store":              ("$op $value, $byte_offset",),
    "global_load_indirect":      ("$result = $op .rwdata[$byte_offset]",
                                  "$result = $op $byte_offset"),
    "global_store_indirect":     ("$op $value, .rwdata[$byte_offset]",
                                  "$op $byte_offset, $value"),
    "global_load_ref":           ("$value = $op $global : $type_def",),
    "global_store_ref":          ("$op $value, $global : $type_def",),
    "global_load_indirect_ref":  ("$value = $op .refs[$global] : $type_def",
                                  "$value = $op $global : $type_def"),
    "global_store_indirect_ref": ("$op $value, .refs[$global] : $type_def",
                                  "$op $global : $type_def, $value"),
    # -- constants
    "const_ref_zero":            ("${result:nomove} = $op",),
    "const_ref_rodata":          ("$value = $op $rodata  // ${rodata:size}b",),
    # -- lists, conditional assignment
    "list_alloc":                ("$result = $op $initial_capacity : !vm.list<$element_type>",),
    "list_get_ref":              ("$result = $op $list, $index : $type_def",),
    "select":                    ("$result = $op $condition ? $true_value : $false_value",),
    "select_ref":                ("$result = $op $condition ? $true_value : $false_value "
                                  "-> $true_value_type_def",),
    "switch":                    ("$result = $op $index[$values] else $default_value",),
    # vmrt's own spelling: iree-as-module cannot write switch.ref and
    # iree-dump-module mis-decodes it (it skips the type operand).
    "switch_ref":                ("$result = $op $index[$values] else $default_value "
                                  "-> $type_def",),
    "cast_any_ref":              ("$result = $op $operand : $_type -> $result_type",),
    # -- buffers: the stored value comes first
    "buffer_store":              ("$op $value, $target_buffer, $target_offset",),
    # -- control flow
    "branch":                    ("$op $dest_pc($operands)",),
    "conditional_branch":        ("$op $condition, $true_dest_pc($true_operands), "
                                  "$false_dest_pc($false_operands)",),
    "conditional_break":         ("$op $condition, $dest_pc($operands)",),
    "branch_table":              ("$op $index { default: $default_dest_pc($default_operands)"
                                  "$cases }",),
    "call":                      ("{?$results = ?}$op $callee_ordinal($operands)",),
    "call_variadic":             ("{?$results = ?}$op $callee_ordinal "
                                  "segments[$segment_sizes]($operands)",),
    "yieldable_call":            ("$op $callee_ordinal($operands) -> $dest_pc($results)",),
    "call_variadic_yieldable":   ("$op $callee_ordinal segments[$segment_sizes]($operands) "
                                  "-> $dest_pc($results)",),
    "return":                    ("$op{? $operands?}",),
    "fail":                      ("$op $status, $message",),
    # iree-dump-module prints `"name"(operands)`, iree-as-module reads `"name", operands`.
    "trace":                     ("$op $event_name($operands)",
                                  "$op $event_name{?, $operands?}"),
}

#: symbol -> row, in isa.json order.
OPS: dict[str, Op] = {
    "GlobalLoadI32":          Op('global'),
    "GlobalStoreI32":         Op('global'),
    "GlobalLoadIndirectI32":  Op('global'),
    "GlobalStoreIndirectI32": Op('global'),
    "GlobalLoadI64":          Op('global'),
    "GlobalStoreI64":         Op('global'),
    "GlobalLoadIndirectI64":  Op('global'),
    "GlobalStoreIndirectI64": Op('global'),
    "GlobalLoadRef":          Op('global_ref'),
    "GlobalStoreRef":         Op('global_ref'),
    "GlobalLoadIndirectRef":  Op('global_ref'),
    "GlobalStoreIndirectRef": Op('global_ref'),
    "ConstI32Zero":           Op('formula', '{result} = 0', c='{result} = 0;'),
    "ConstI32":               Op('formula', '{result} = {value}', c='{result} = (int32_t){value};', syntax=('$result = $op $value  // ${value:hex}',)),
    "ConstI64Zero":           Op('formula', '{result} = 0', c='{result} = 0;'),
    "ConstI64":               Op('formula', '{result} = {value}', c='{result} = (int64_t){value};', syntax=('$result = $op $value  // ${value:hex}',)),
    "ConstRefZero":           Op('formula', '{result} = None', c='VMRT_DROP_REF({result});'),
    "ConstRefRodata":         Op('formula', '{value} = RODATA[{rodata}]', c='VMRT_SET_REF({value}, c->inst->rodata[{rodata}]);'),
    "ListAlloc":              Op('method', '{result} = LIST_ALLOC({element_type}, {initial_capacity})'),
    "ListReserve":            Op('method', '{list}.reserve({minimum_capacity})'),
    "ListSize":               Op('method', '{result} = {list}.size'),
    "ListResize":             Op('method', '{list}.resize({new_size})'),
    "ListGetI32":             Op('method', '{result} = {list}.get_i32({index})'),
    "ListSetI32":             Op('method', '{list}.set_i32({index}, {value})'),
    "ListGetI64":             Op('method', '{result} = {list}.get_i64({index})'),
    "ListSetI64":             Op('method', '{list}.set_i64({index}, {value})'),
    "ListGetRef":             Op('list_get_ref'),
    "ListSetRef":             Op('method', '{list}.set_ref({index}, {value})'),
    "SelectI32":              Op('formula', '{result} = {true_value} if {condition} else {false_value}', c='{result} = {condition} ? {true_value} : {false_value};'),
    "SelectI64":              Op('formula', '{result} = {true_value} if {condition} else {false_value}', c='{result} = {condition} ? {true_value} : {false_value};'),
    "SelectRef":              Op('formula', '{result} = CAST({true_value} if {condition} else {false_value}, {true_value_type_def})'),
    "SwitchI32":              Op('formula', '{result} = ({values},)[{index}] if 0 <= {index} < {count} else {default_value}'),
    # Upstream reads the chosen i64 through a 32-bit register: only the low half survives.
    "SwitchI64":              Op('formula', '{result} = wrap_i32(({values},)[{index}]) if 0 <= {index} < {count} else {default_value}'),
    "SwitchRef":              Op('formula', '{result} = CAST(({values},)[{index}] if 0 <= {index} < {count} else {default_value}, {type_def})'),
    "AddI32":                 Op('formula', '{result} = {left} + {right}\nW32 {result}', c='{result} = (int32_t)((uint32_t){left} + (uint32_t){right});'),
    "SubI32":                 Op('formula', '{result} = {left} - {right}\nW32 {result}', c='{result} = (int32_t)((uint32_t){left} - (uint32_t){right});'),
    "MulI32":                 Op('formula', '{result} = {left} * {right}\nW32 {result}', c='{result} = (int32_t)((uint32_t){left} * (uint32_t){right});'),
    "DivI32S":                Op('formula', '{result} = div_s({left}, {right})\nW32 {result}', c='VMRT_DIV_CHECK({pc}, {right}); {result} = vmrt_div_s32({left}, {right});'),
    "DivI32U":                Op('formula', '{result} = div_u32({left}, {right})', c='VMRT_DIV_CHECK({pc}, {right}); {result} = (int32_t)((uint32_t){left} / (uint32_t){right});'),
    "RemI32S":                Op('formula', '{result} = rem_s({left}, {right})', c='VMRT_DIV_CHECK({pc}, {right}); {result} = vmrt_rem_s32({left}, {right});'),
    "RemI32U":                Op('formula', '{result} = rem_u32({left}, {right})', c='VMRT_DIV_CHECK({pc}, {right}); {result} = (int32_t)((uint32_t){left} % (uint32_t){right});'),
    "FMAI32":                 Op('formula', '{result} = {first} * {second} + {third}\nW32 {result}', c='{result} = (int32_t)((uint32_t){first} * (uint32_t){second} + (uint32_t){third});'),
    "AddI64":                 Op('formula', '{result} = {left} + {right}\nW64 {result}', c='{result} = (int64_t)((uint64_t){left} + (uint64_t){right});'),
    "SubI64":                 Op('formula', '{result} = {left} - {right}\nW64 {result}', c='{result} = (int64_t)((uint64_t){left} - (uint64_t){right});'),
    "MulI64":                 Op('formula', '{result} = {left} * {right}\nW64 {result}', c='{result} = (int64_t)((uint64_t){left} * (uint64_t){right});'),
    "DivI64S":                Op('formula', '{result} = div_s({left}, {right})\nW64 {result}', c='VMRT_DIV_CHECK({pc}, {right}); {result} = vmrt_div_s64({left}, {right});'),
    "DivI64U":                Op('formula', '{result} = div_u64({left}, {right})', c='VMRT_DIV_CHECK({pc}, {right}); {result} = (int64_t)((uint64_t){left} / (uint64_t){right});'),
    "RemI64S":                Op('formula', '{result} = rem_s({left}, {right})', c='VMRT_DIV_CHECK({pc}, {right}); {result} = vmrt_rem_s64({left}, {right});'),
    "RemI64U":                Op('formula', '{result} = rem_u64({left}, {right})', c='VMRT_DIV_CHECK({pc}, {right}); {result} = (int64_t)((uint64_t){left} % (uint64_t){right});'),
    "FMAI64":                 Op('formula', '{result} = {first} * {second} + {third}\nW64 {result}', c='{result} = (int64_t)((uint64_t){first} * (uint64_t){second} + (uint64_t){third});'),
    "NotI32":                 Op('formula', '{result} = ~{operand}', c='{result} = ~{operand};'),
    "AndI32":                 Op('formula', '{result} = {left} & {right}', c='{result} = {left} & {right};'),
    "OrI32":                  Op('formula', '{result} = {left} | {right}', c='{result} = {left} | {right};'),
    "XorI32":                 Op('formula', '{result} = {left} ^ {right}', c='{result} = {left} ^ {right};'),
    "NotI64":                 Op('formula', '{result} = ~{operand}', c='{result} = ~{operand};'),
    "AndI64":                 Op('formula', '{result} = {left} & {right}', c='{result} = {left} & {right};'),
    "OrI64":                  Op('formula', '{result} = {left} | {right}', c='{result} = {left} | {right};'),
    "XorI64":                 Op('formula', '{result} = {left} ^ {right}', c='{result} = {left} ^ {right};'),
    "ShlI32":                 Op('formula', '{result} = {operand} << ({amount} & 31)\nW32 {result}', c='{result} = (int32_t)((uint32_t){operand} << ({amount} & 31));'),
    "ShrI32S":                Op('formula', '{result} = {operand} >> ({amount} & 31)', c='{result} = {operand} >> ({amount} & 31);'),
    "ShrI32U":                Op('formula', '{result} = ({operand} & 0xFFFFFFFF) >> ({amount} & 31)\nW32 {result}', c='{result} = (int32_t)((uint32_t){operand} >> ({amount} & 31));'),
    "ShlI64":                 Op('formula', '{result} = {operand} << ({amount} & 63)\nW64 {result}', c='{result} = (int64_t)((uint64_t){operand} << ({amount} & 63));'),
    "ShrI64S":                Op('formula', '{result} = {operand} >> ({amount} & 63)', c='{result} = {operand} >> ({amount} & 63);'),
    "ShrI64U":                Op('formula', '{result} = ({operand} & 0xFFFFFFFFFFFFFFFF) >> ({amount} & 63)\nW64 {result}', c='{result} = (int64_t)((uint64_t){operand} >> ({amount} & 63));'),
    "TruncI32I8":             Op('formula', '{result} = {operand} & 0xFF', c='{result} = {operand} & 0xFF;'),
    "TruncI32I16":            Op('formula', '{result} = {operand} & 0xFFFF', c='{result} = {operand} & 0xFFFF;'),
    "TruncI64I32":            Op('formula', '{result} = {operand}\nW32 {result}', c='{result} = (int32_t){operand};'),
    "ExtI8I32S":              Op('formula', '{result} = (({operand} & 0xFF) ^ 0x80) - 0x80', c='{result} = (int8_t){operand};'),
    "ExtI8I32U":              Op('formula', '{result} = {operand} & 0xFF', c='{result} = {operand} & 0xFF;'),
    "ExtI16I32S":             Op('formula', '{result} = (({operand} & 0xFFFF) ^ 0x8000) - 0x8000', c='{result} = (int16_t){operand};'),
    "ExtI16I32U":             Op('formula', '{result} = {operand} & 0xFFFF', c='{result} = {operand} & 0xFFFF;'),
    "ExtI32I64S":             Op('formula', '{result} = {operand}', c='{result} = (int64_t){operand};'),
    "ExtI32I64U":             Op('formula', '{result} = {operand} & 0xFFFFFFFF', c='{result} = (int64_t)(uint32_t){operand};'),
    "CmpEQI32":               Op('formula', '{result} = 1 if {left} == {right} else 0', c='{result} = {left} == {right};'),
    "CmpNEI32":               Op('formula', '{result} = 1 if {left} != {right} else 0', c='{result} = {left} != {right};'),
    "CmpLTI32S":              Op('formula', '{result} = 1 if {left} < {right} else 0', c='{result} = {left} < {right};'),
    "CmpLTI32U":              Op('formula', '{result} = 1 if ({left} & 0xFFFFFFFF) < ({right} & 0xFFFFFFFF) else 0', c='{result} = (uint32_t){left} < (uint32_t){right};'),
    "CmpNZI32":               Op('formula', '{result} = 1 if {operand} else 0', c='{result} = {operand} != 0;'),
    "CmpEQI64":               Op('formula', '{result} = 1 if {left} == {right} else 0', c='{result} = {left} == {right};'),
    "CmpNEI64":               Op('formula', '{result} = 1 if {left} != {right} else 0', c='{result} = {left} != {right};'),
    "CmpLTI64S":              Op('formula', '{result} = 1 if {left} < {right} else 0', c='{result} = {left} < {right};'),
    "CmpLTI64U":              Op('formula', '{result} = 1 if ({left} & 0xFFFFFFFFFFFFFFFF) < ({right} & 0xFFFFFFFFFFFFFFFF) else 0', c='{result} = (uint64_t){left} < (uint64_t){right};'),
    "CmpNZI64":               Op('formula', '{result} = 1 if {operand} else 0', c='{result} = {operand} != 0;'),
    "CmpEQRef":               Op('formula', '{result} = 1 if {left} is {right} else 0', c='{result} = {left} == {right};'),
    "CmpNERef":               Op('formula', '{result} = 0 if {left} is {right} else 1', c='{result} = {left} != {right};'),
    "CmpNZRef":               Op('formula', '{result} = 0 if {operand} is None else 1', c='{result} = {operand} != NULL;'),
    "Branch":                 Op('branch'),
    "CondBranch":             Op('cond_branch'),
    "Call":                   Op('call'),
    "CallVariadic":           Op('call'),
    "Return":                 Op('return'),
    "Fail":                   Op('fail'),
    "ImportResolved":         Op('resolved'),
    "Yield":                  Op('yield'),
    "Trace":                  Op('formula', 'TRACE({event_name}, {operands_tuple})'),
    "Print":                  Op('formula', 'PRINT({event_name}, {operands_tuple})'),
    "CondBreak":              Op('branch'),
    "Break":                  Op('branch'),
    "BufferLoadI8U":          Op('method', '{result} = {source_buffer}.load_i8u({source_offset})', c='VMRT_LOAD({pc}, uint8_t, 1, {result}, {source_buffer}, {source_offset});'),
    "BufferLoadI8S":          Op('method', '{result} = {source_buffer}.load_i8s({source_offset})', c='VMRT_LOAD({pc}, int8_t, 1, {result}, {source_buffer}, {source_offset});'),
    "BufferLoadI16U":         Op('method', '{result} = {source_buffer}.load_i16u({source_offset})', c='VMRT_LOAD({pc}, uint16_t, 2, {result}, {source_buffer}, {source_offset});'),
    "BufferLoadI16S":         Op('method', '{result} = {source_buffer}.load_i16s({source_offset})', c='VMRT_LOAD({pc}, int16_t, 2, {result}, {source_buffer}, {source_offset});'),
    "BufferLoadI32":          Op('method', '{result} = {source_buffer}.load_i32({source_offset})', c='VMRT_LOAD({pc}, int32_t, 4, {result}, {source_buffer}, {source_offset});'),
    "BufferLoadI64":          Op('method', '{result} = {source_buffer}.load_i64({source_offset})', c='VMRT_LOAD({pc}, int64_t, 8, {result}, {source_buffer}, {source_offset});'),
    "BufferStoreI8":          Op('method', '{target_buffer}.store_i8({target_offset}, {value})', c='VMRT_STORE({pc}, uint8_t, 1, {value}, {target_buffer}, {target_offset});', store_bits=8),
    "BufferStoreI16":         Op('method', '{target_buffer}.store_i16({target_offset}, {value})', c='VMRT_STORE({pc}, uint16_t, 2, {value}, {target_buffer}, {target_offset});', store_bits=16),
    "BufferStoreI32":         Op('method', '{target_buffer}.store_i32({target_offset}, {value})', c='VMRT_STORE({pc}, int32_t, 4, {value}, {target_buffer}, {target_offset});'),
    "BufferStoreI64":         Op('method', '{target_buffer}.store_i64({target_offset}, {value})', c='VMRT_STORE({pc}, int64_t, 8, {value}, {target_buffer}, {target_offset});'),
    "BufferAlloc":            Op('method', '{result} = BUFFER_ALLOC({length}, {alignment})', c='VMRT_ALLOC({pc}, {result}, {length}, {alignment});'),
    "BufferClone":            Op('method', '{result} = BUFFER_CLONE({source}, {offset}, {length}, {alignment})'),
    "BufferLength":           Op('method', '{result} = {buffer}.length', c='VMRT_LENGTH({pc}, {result}, {buffer});'),
    "BufferCopy":             Op('method', 'BUFFER_COPY({source_buffer}, {source_offset}, {target_buffer}, {target_offset}, {length})', c='VMRT_COPY({pc}, {source_buffer}, {source_offset}, {target_buffer}, {target_offset}, {length});'),
    "BufferCompare":          Op('method', '{result} = BUFFER_COMPARE({lhs_buffer}, {lhs_offset}, {rhs_buffer}, {rhs_offset}, {length})', c='VMRT_COMPARE({pc}, {result}, {lhs_buffer}, {lhs_offset}, {rhs_buffer}, {rhs_offset}, {length});'),
    "BufferFillI8":           Op('method', '{target_buffer}.fill_i8({target_offset}, {length}, {value})', c='VMRT_FILL({pc}, uint8_t, 1, {target_buffer}, {target_offset}, {length}, {value});', store_bits=8),
    "BufferFillI16":          Op('method', '{target_buffer}.fill_i16({target_offset}, {length}, {value})', c='VMRT_FILL({pc}, uint16_t, 2, {target_buffer}, {target_offset}, {length}, {value});', store_bits=16),
    "BufferFillI32":          Op('method', '{target_buffer}.fill_i32({target_offset}, {length}, {value})', c='VMRT_FILL({pc}, uint32_t, 4, {target_buffer}, {target_offset}, {length}, {value});'),
    "BufferFillI64":          Op('method', '{target_buffer}.fill_i64({target_offset}, {length}, {value})', c='VMRT_FILL({pc}, uint64_t, 8, {target_buffer}, {target_offset}, {length}, {value});'),
    "CtlzI32":                Op('formula', '{result} = ctlz32({operand})', c='{result} = vmrt_ctlz32({operand});'),
    "CtlzI64":                Op('formula', '{result} = ctlz64({operand})', c='{result} = vmrt_ctlz64({operand});'),
    "AbsI32":                 Op('formula', '{result} = abs({operand})\nW32 {result}', c='{result} = (int32_t)({operand} < 0 ? 0u - (uint32_t){operand} : (uint32_t){operand});'),
    "AbsI64":                 Op('formula', '{result} = abs({operand})\nW64 {result}', c='{result} = (int64_t)({operand} < 0 ? 0ull - (uint64_t){operand} : (uint64_t){operand});'),
    "Block":                  Op('marker'),
    "MinI32S":                Op('formula', '{result} = {right} if {right} < {left} else {left}', c='{result} = {right} < {left} ? {right} : {left};'),
    "MinI32U":                Op('formula', '{result} = {right} if ({right} & 0xFFFFFFFF) < ({left} & 0xFFFFFFFF) else {left}', c='{result} = (uint32_t){right} < (uint32_t){left} ? {right} : {left};'),
    "MaxI32S":                Op('formula', '{result} = {right} if {left} < {right} else {left}', c='{result} = {left} < {right} ? {right} : {left};'),
    "MaxI32U":                Op('formula', '{result} = {right} if ({left} & 0xFFFFFFFF) < ({right} & 0xFFFFFFFF) else {left}', c='{result} = (uint32_t){left} < (uint32_t){right} ? {right} : {left};'),
    "MinI64S":                Op('formula', '{result} = {right} if {right} < {left} else {left}', c='{result} = {right} < {left} ? {right} : {left};'),
    "MinI64U":                Op('formula', '{result} = {right} if ({right} & 0xFFFFFFFFFFFFFFFF) < ({left} & 0xFFFFFFFFFFFFFFFF) else {left}', c='{result} = (uint64_t){right} < (uint64_t){left} ? {right} : {left};'),
    "MaxI64S":                Op('formula', '{result} = {right} if {left} < {right} else {left}', c='{result} = {left} < {right} ? {right} : {left};'),
    "MaxI64U":                Op('formula', '{result} = {right} if ({left} & 0xFFFFFFFFFFFFFFFF) < ({right} & 0xFFFFFFFFFFFFFFFF) else {left}', c='{result} = (uint64_t){left} < (uint64_t){right} ? {right} : {left};'),
    "CastAnyRef":             Op('formula', '{result} = CAST({operand}, {result_type})'),
    "BranchTable":            Op('branch_table'),
    "BufferHash":             Op('method', '{result} = {source_buffer}.hash({source_offset}, {length})'),
    "DiscardRefs":            Op('discard_refs'),
    "AssignRef":              Op('assign_ref'),
    "CallYieldable":          Op('call_yieldable'),
    "CallVariadicYieldable":  Op('call_yieldable'),
    "PrefixExtF32":           Op('prefix'),
    "PrefixExtF64":           Op('prefix'),
    "GlobalLoadF32":          Op('global'),
    "GlobalStoreF32":         Op('global'),
    "GlobalLoadIndirectF32":  Op('global'),
    "GlobalStoreIndirectF32": Op('global'),
    "ConstF32Zero":           Op('formula', '{result} = 0.0', c='{result} = 0.0;'),
    "ConstF32":               Op('formula', '{result} = {value}', c='{result} = {value};'),
    "ListGetF32":             Op('method', '{result} = {list}.get_f32({index})'),
    "ListSetF32":             Op('method', '{list}.set_f32({index}, {value})'),
    "SelectF32":              Op('formula', '{result} = {true_value} if {condition} else {false_value}', c='{result} = {condition} ? {true_value} : {false_value};'),
    "SwitchF32":              Op('formula', '{result} = ({values},)[{index}] if 0 <= {index} < {count} else {default_value}'),
    "AddF32":                 Op('formula', '{result} = {left} + {right}\nF32 {result}', c='{result} = {left} + {right};'),
    "SubF32":                 Op('formula', '{result} = {left} - {right}\nF32 {result}', c='{result} = {left} - {right};'),
    "MulF32":                 Op('formula', '{result} = {left} * {right}\nF32 {result}', c='{result} = {left} * {right};'),
    "DivF32":                 Op('formula', '{result} = c_div({left}, {right})\nF32 {result}', c='{result} = {left} / {right};'),
    "RemF32":                 Op('formula', '{result} = c_remainder({left}, {right})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_remainder({left}, {right}));'),
    "FMAF32":                 Op('formula', '{result} = c_fma_f32({first}, {second}, {third})', c='{result} = vmrt_fma_f32({first}, {second}, {third});'),
    "AbsF32":                 Op('formula', '{result} = fabs({operand})', c='{result} = fabsf({operand});'),
    "NegF32":                 Op('formula', '{result} = -{operand}', c='{result} = -{operand};'),
    "CeilF32":                Op('formula', '{result} = c_ceil({operand})', c='{result} = vmrt_narrow(vmrt_ceil({operand}));'),
    "FloorF32":               Op('formula', '{result} = c_floor({operand})', c='{result} = vmrt_narrow(vmrt_floor({operand}));'),
    "CastSI32F32":            Op('formula', '{result} = float({operand})\nF32 {result}', c='{result} = (float){operand};'),
    "CastUI32F32":            Op('formula', '{result} = u32_to_f32({operand})', c='{result} = (float)(uint32_t){operand};'),
    "CastF32SI32":            Op('formula', '{result} = f32_to_si32({operand})', c='{result} = (int32_t)vmrt_llround({operand});'),
    "CastF32UI32":            Op('formula', '{result} = f32_to_ui32({operand})', c='{result} = (int32_t)vmrt_llround({operand});'),
    "BitcastI32F32":          Op('formula', '{result} = bitcast_i32_f32({operand})', c='{result} = vmrt_f32_bits((uint32_t){operand});'),
    "BitcastF32I32":          Op('formula', '{result} = bitcast_f32_i32({operand})', c='{result} = (int32_t)vmrt_bits_f32({operand});'),
    "AtanF32":                Op('formula', '{result} = atan({operand})\nF32 {result}', c='{result} = vmrt_narrow(atan({operand}));'),
    "Atan2F32":               Op('formula', '{result} = atan2({left}, {right})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_atan2({left}, {right}));'),
    "CosF32":                 Op('formula', '{result} = c_cos({operand})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_trig({operand}, cos));'),
    "SinF32":                 Op('formula', '{result} = c_sin({operand})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_trig({operand}, sin));'),
    "ExpF32":                 Op('formula', '{result} = c_exp({operand})\nF32 {result}', c='{result} = vmrt_narrow(exp({operand}));'),
    "Exp2F32":                Op('formula', '{result} = c_exp2({operand})\nF32 {result}', c='{result} = vmrt_narrow(exp2({operand}));'),
    "ExpM1F32":               Op('formula', '{result} = c_expm1({operand})\nF32 {result}', c='{result} = vmrt_narrow(expm1({operand}));'),
    "LogF32":                 Op('formula', '{result} = c_log({operand})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_log_domain({operand}, log));'),
    "Log10F32":               Op('formula', '{result} = c_log10({operand})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_log_domain({operand}, log10));'),
    "Log1pF32":               Op('formula', '{result} = c_log1p({operand})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_log1p({operand}));'),
    "Log2F32":                Op('formula', '{result} = c_log2({operand})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_log_domain({operand}, log2));'),
    "PowF32":                 Op('formula', '{result} = c_pow({left}, {right})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_pow({left}, {right}));'),
    "RsqrtF32":               Op('formula', '{result} = c_rsqrt_f32({operand})', c='{result} = vmrt_rsqrt_f32({operand});'),
    "SqrtF32":                Op('formula', '{result} = c_sqrt({operand})\nF32 {result}', c='{result} = vmrt_narrow(vmrt_sqrt({operand}));'),
    "TanhF32":                Op('formula', '{result} = tanh({operand})\nF32 {result}', c='{result} = vmrt_narrow(tanh({operand}));'),
    "ErfF32":                 Op('formula', '{result} = erf({operand})\nF32 {result}', c='{result} = vmrt_narrow(erf({operand}));'),
    "CmpEQF32O":              Op('formula', '{result} = 1 if {left} == {right} else 0', c='{result} = {left} == {right};'),
    "CmpEQF32U":              Op('formula', '{result} = 1 if ({left} != {left} or {right} != {right} or {left} == {right}) else 0', c='{result} = isnan({left}) || isnan({right}) || {left} == {right};'),
    "CmpNEF32O":              Op('formula', '{result} = 1 if {left} != {right} else 0', c='{result} = {left} != {right};'),
    "CmpNEF32U":              Op('formula', '{result} = 1 if ({left} != {left} or {right} != {right} or {left} != {right}) else 0', c='{result} = {left} != {right};'),
    "CmpLTF32O":              Op('formula', '{result} = 1 if {left} < {right} else 0', c='{result} = {left} < {right};'),
    "CmpLTF32U":              Op('formula', '{result} = 1 if ({left} != {left} or {right} != {right} or {left} < {right}) else 0', c='{result} = isnan({left}) || isnan({right}) || {left} < {right};'),
    "CmpLTEF32O":             Op('formula', '{result} = 1 if {left} <= {right} else 0', c='{result} = {left} <= {right};'),
    "CmpLTEF32U":             Op('formula', '{result} = 1 if ({left} != {left} or {right} != {right} or {left} <= {right}) else 0', c='{result} = isnan({left}) || isnan({right}) || {left} <= {right};'),
    "CmpNaNF32":              Op('formula', '{result} = 1 if {operand} != {operand} else 0', c='{result} = isnan({operand});'),
    "BufferLoadF32":          Op('method', '{result} = {source_buffer}.load_f32({source_offset})', c='VMRT_LOAD({pc}, float, 4, {result}, {source_buffer}, {source_offset});'),
    "BufferStoreF32":         Op('method', '{target_buffer}.store_f32({target_offset}, {value})', c='VMRT_STORE({pc}, float, 4, {value}, {target_buffer}, {target_offset});'),
    "BufferFillF32":          Op('method', '{target_buffer}.fill_f32({target_offset}, {length}, {value})', c='VMRT_FILL({pc}, float, 4, {target_buffer}, {target_offset}, {length}, {value});'),
    "RoundF32":               Op('formula', '{result} = round_half_away({operand})', c='{result} = vmrt_narrow(vmrt_round_away({operand}));'),
    "MinF32":                 Op('formula', '{result} = {right} if {right} < {left} else {left}', c='{result} = {right} < {left} ? {right} : {left};'),
    "MaxF32":                 Op('formula', '{result} = {right} if {left} < {right} else {left}', c='{result} = {left} < {right} ? {right} : {left};'),
    "RoundF32Even":           Op('formula', '{result} = round_half_even({operand})', c='{result} = vmrt_narrow(vmrt_round_even({operand}));'),
    "CastF32SI64":            Op('formula', '{result} = f32_to_si64({operand})', c='{result} = vmrt_llround({operand});'),
    "CastF32UI64":            Op('formula', '{result} = f32_to_ui64({operand})', c='{result} = vmrt_f32_to_ui64({operand});'),
    "CastSI64F32":            Op('formula', '{result} = int_to_f32({operand})', c='{result} = (float){operand};'),
    "CastUI64F32":            Op('formula', '{result} = u64_to_f32({operand})', c='{result} = (float)(uint64_t){operand};'),
    "GlobalLoadF64":          Op('global'),
    "GlobalStoreF64":         Op('global'),
    "GlobalLoadIndirectF64":  Op('global'),
    "GlobalStoreIndirectF64": Op('global'),
    "ConstF64Zero":           Op('formula', '{result} = 0.0', c='{result} = 0.0;'),
    "ConstF64":               Op('formula', '{result} = {value}', c='{result} = {value};'),
    "ListGetF64":             Op('method', '{result} = {list}.get_f64({index})'),
    "ListSetF64":             Op('method', '{list}.set_f64({index}, {value})'),
    "SelectF64":              Op('formula', '{result} = {true_value} if {condition} else {false_value}', c='{result} = {condition} ? {true_value} : {false_value};'),
    "SwitchF64":              Op('formula', '{result} = ({values},)[{index}] if 0 <= {index} < {count} else {default_value}'),
    "AddF64":                 Op('formula', '{result} = {left} + {right}', c='{result} = {left} + {right};'),
    "SubF64":                 Op('formula', '{result} = {left} - {right}', c='{result} = {left} - {right};'),
    "MulF64":                 Op('formula', '{result} = {left} * {right}', c='{result} = {left} * {right};'),
    "DivF64":                 Op('formula', '{result} = c_div({left}, {right})', c='{result} = {left} / {right};'),
    "RemF64":                 Op('formula', '{result} = c_remainder({left}, {right})', c='{result} = vmrt_remainder({left}, {right});'),
    "FMAF64":                 Op('formula', '{result} = {first} * {second} + {third}', c='{result} = {first} * {second} + {third};'),
    "AbsF64":                 Op('formula', '{result} = fabs({operand})', c='{result} = fabs({operand});'),
    "NegF64":                 Op('formula', '{result} = -{operand}', c='{result} = -{operand};'),
    "CeilF64":                Op('formula', '{result} = c_ceil({operand})', c='{result} = vmrt_ceil({operand});'),
    "FloorF64":               Op('formula', '{result} = c_floor({operand})', c='{result} = vmrt_floor({operand});'),
    "TruncF64F32":            Op('formula', '{result} = {operand}\nF32 {result}', c='{result} = vmrt_narrow({operand});'),
    # (double)f: exact, but a signalling NaN comes out quiet (x * 1.0 does the same).
    "ExtF32F64":              Op('formula', '{result} = {operand} * 1.0', c='{result} = (double){operand};'),
    "CastSI32F64":            Op('formula', '{result} = float({operand})', c='{result} = (double){operand};'),
    "CastUI32F64":            Op('formula', '{result} = u32_to_f64({operand})', c='{result} = (double)(uint32_t){operand};'),
    "CastF64SI32":            Op('formula', '{result} = f64_to_si32({operand})', c='{result} = (int32_t)vmrt_llround((double)(float){operand});'),
    "CastF64UI32":            Op('formula', '{result} = f64_to_ui32({operand})', c='{result} = (int32_t)vmrt_llround((double)(float){operand});'),
    "CastSI64F64":            Op('formula', '{result} = float({operand})', c='{result} = (double){operand};'),
    "CastUI64F64":            Op('formula', '{result} = u64_to_f64({operand})', c='{result} = (double)(uint64_t){operand};'),
    "CastF64SI64":            Op('formula', '{result} = f64_to_si64({operand})', c='{result} = vmrt_llround({operand});'),
    "CastF64UI64":            Op('formula', '{result} = f64_to_ui64({operand})', c='{result} = vmrt_llround({operand});'),
    "BitcastI64F64":          Op('formula', '{result} = bitcast_i64_f64({operand})', c='{result} = vmrt_f64_bits((uint64_t){operand});'),
    "BitcastF64I64":          Op('formula', '{result} = bitcast_f64_i64({operand})', c='{result} = (int64_t)vmrt_bits_f64({operand});'),
    "AtanF64":                Op('formula', '{result} = atan({operand})', c='{result} = atan({operand});'),
    "Atan2F64":               Op('formula', '{result} = atan2({left}, {right})', c='{result} = vmrt_atan2({left}, {right});'),
    "CosF64":                 Op('formula', '{result} = c_cos({operand})', c='{result} = vmrt_trig({operand}, cos);'),
    "SinF64":                 Op('formula', '{result} = c_sin({operand})', c='{result} = vmrt_trig({operand}, sin);'),
    "ExpF64":                 Op('formula', '{result} = c_exp({operand})', c='{result} = exp({operand});'),
    "Exp2F64":                Op('formula', '{result} = c_exp2({operand})', c='{result} = exp2({operand});'),
    "ExpM1F64":               Op('formula', '{result} = c_expm1({operand})', c='{result} = expm1({operand});'),
    "LogF64":                 Op('formula', '{result} = c_log({operand})', c='{result} = vmrt_log_domain({operand}, log);'),
    "Log10F64":               Op('formula', '{result} = c_log10({operand})', c='{result} = vmrt_log_domain({operand}, log10);'),
    "Log1pF64":               Op('formula', '{result} = c_log1p({operand})', c='{result} = vmrt_log1p({operand});'),
    "Log2F64":                Op('formula', '{result} = c_log2({operand})', c='{result} = vmrt_log_domain({operand}, log2);'),
    "PowF64":                 Op('formula', '{result} = c_pow({left}, {right})', c='{result} = vmrt_pow({left}, {right});'),
    "RsqrtF64":               Op('formula', '{result} = c_rsqrt({operand})', c='{result} = vmrt_rsqrt({operand});'),
    "SqrtF64":                Op('formula', '{result} = c_sqrt({operand})', c='{result} = vmrt_sqrt({operand});'),
    "TanhF64":                Op('formula', '{result} = tanh({operand})', c='{result} = tanh({operand});'),
    "ErfF64":                 Op('formula', '{result} = erf({operand})', c='{result} = erf({operand});'),
    "CmpEQF64O":              Op('formula', '{result} = 1 if {left} == {right} else 0', c='{result} = {left} == {right};'),
    "CmpEQF64U":              Op('formula', '{result} = 1 if ({left} != {left} or {right} != {right} or {left} == {right}) else 0', c='{result} = isnan({left}) || isnan({right}) || {left} == {right};'),
    "CmpNEF64O":              Op('formula', '{result} = 1 if {left} != {right} else 0', c='{result} = {left} != {right};'),
    "CmpNEF64U":              Op('formula', '{result} = 1 if ({left} != {left} or {right} != {right} or {left} != {right}) else 0', c='{result} = {left} != {right};'),
    "CmpLTF64O":              Op('formula', '{result} = 1 if {left} < {right} else 0', c='{result} = {left} < {right};'),
    "CmpLTF64U":              Op('formula', '{result} = 1 if ({left} != {left} or {right} != {right} or {left} < {right}) else 0', c='{result} = isnan({left}) || isnan({right}) || {left} < {right};'),
    "CmpLTEF64O":             Op('formula', '{result} = 1 if {left} <= {right} else 0', c='{result} = {left} <= {right};'),
    "CmpLTEF64U":             Op('formula', '{result} = 1 if ({left} != {left} or {right} != {right} or {left} <= {right}) else 0', c='{result} = isnan({left}) || isnan({right}) || {left} <= {right};'),
    "CmpNaNF64":              Op('formula', '{result} = 1 if {operand} != {operand} else 0', c='{result} = isnan({operand});'),
    "BufferLoadF64":          Op('method', '{result} = {source_buffer}.load_f64({source_offset})', c='VMRT_LOAD({pc}, double, 8, {result}, {source_buffer}, {source_offset});'),
    "BufferStoreF64":         Op('method', '{target_buffer}.store_f64({target_offset}, {value})', c='VMRT_STORE({pc}, double, 8, {value}, {target_buffer}, {target_offset});'),
    "BufferFillF64":          Op('method', '{target_buffer}.fill_f64({target_offset}, {length}, {value})', c='VMRT_FILL({pc}, double, 8, {target_buffer}, {target_offset}, {length}, {value});'),
    "RoundF64":               Op('formula', '{result} = round_half_away({operand})', c='{result} = vmrt_round_away({operand});'),
    "MinF64":                 Op('formula', '{result} = {right} if {right} < {left} else {left}', c='{result} = {right} < {left} ? {right} : {left};'),
    "MaxF64":                 Op('formula', '{result} = {right} if {left} < {right} else {left}', c='{result} = {left} < {right} ? {right} : {left};'),
    "RoundF64Even":           Op('formula', '{result} = round_half_even({operand})', c='{result} = vmrt_round_even({operand});'),
}
# fmt: on
