"""Modules: the interface every module implements, and bytecode modules.

As in IREE's vm/module.h a module is a small interface: a name, a version, its
exports (name -> cconv) and imports, and `instantiate(context)` giving the
per-context state that serves calls. Bytecode modules (this file) and native
modules (vmrt.native) are the two implementations; contexts see only this.

Calls across the interface use the Python calling convention of vmrt: one
positional argument per cconv element (ints for i/I, floats for f/F, ref objects
or None for r, and for a span `CxyD` a list of tuples), and one result, a tuple
of results, or None. A yieldable callee may return a generator: each value it
yields suspends the VM stack (upstream's DEFERRED) and its return value is the
result.
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from pathlib import Path

from vmrt.errors import ModuleFormatError, StatusCode, VMError, VmrtError
from vmrt.isa.decoder import decode_function
from vmrt.vm.cconv import signature_of
from vmrt.vm.error_kinds import ErrorKind, vm_error
from vmrt.vm import code_cache, codegen, generated_abi, numerics
from vmrt.vm.ctier import analysis as ctier_analysis, selected_tier
from vmrt.vm.buffer import (
    VMBuffer, buffer_alloc, buffer_clone, buffer_compare, buffer_copy, metered_buffer_alloc,
    metered_buffer_clone,
)
from vmrt.vm.list import list_alloc, metered_list_alloc
from vmrt.vm.module_cache import VerifiedModule, read_verified, verify_definition
from vmrt.vm.ref import check_ref_type, ref_or_null, resolve_type
from vmrt.vm.source_maps import source_location
from vmrt.isa.registers import IMPORT_ORDINAL_BIT


@dataclass(frozen=True)
class ImportDecl:
    full_name: str
    cconv: str
    optional: bool

    @property
    def module_name(self) -> str:
        return self.full_name.split(".", 1)[0]


@dataclass(frozen=True)
class Dependency:
    name: str
    minimum_version: int
    optional: bool


class Module:
    """The module interface (what a Context registers)."""

    name: str
    version: int = 0

    def export_names(self) -> list[str]:
        raise NotImplementedError

    def export_cconv(self, name: str) -> str | None:
        raise NotImplementedError

    def export_attrs(self, name: str) -> dict[str, str]:
        """Reflection attributes of an export (e.g. `iree.abi.model`); none by default."""
        return {}

    def imports(self) -> list[ImportDecl]:
        return []

    def dependencies(self) -> list[Dependency]:
        return []

    def instantiate(self, context) -> "ModuleInstance":
        raise NotImplementedError


class ModuleInstance:
    """Per-context state of a module: serves its exports as Python callables."""

    module: Module

    def lookup(self, name: str):
        """The callable for export `name`, or None."""
        raise NotImplementedError

    def is_generator(self, name: str) -> bool:
        """May export `name` return a generator (a suspended VM stack, see the module
        docstring)? Callers then drive it (run_to_completion). True, the default, is
        always safe: a result that is not a generator is used as it is."""
        return True

    def resolve_import(self, ordinal: int, fn, yieldable_fn=None) -> None:
        pass

    def initialize(self) -> None:
        """Runs after imports are resolved (a bytecode module's `__init`)."""

    def deinitialize(self) -> None:
        """Runs at context teardown (a bytecode module's `__deinit`)."""

    def notify(self, signal: int) -> None:
        """Hears a Context.notify signal (module-internal resources); the default ignores it."""

    def abandon(self) -> None:
        """Lets go of the instance's state without running VM code (Context.abandon)."""
        self.deinitialize()

    def frame_name(self, code) -> tuple[str, int | None] | None:
        """(function name, bytecode offset) for a Python code object of this
        instance's generated functions, so errors can show a VM stack."""
        return None


# --------------------------------------------------------------------------------------------
# Bytecode modules
# --------------------------------------------------------------------------------------------
class BytecodeModule(Module):
    """A loaded and verified .vmfb, shared by every context it is registered in.

    Each function is decoded and verified once here; it is compiled to Python
    on its first call and the compiled code is kept for every later context, and
    on disk for later processes (vmrt.vm.code_cache).
    """

    def __init__(self, read: VerifiedModule, source: str = "<memory>"):
        """`read`: the module's verified read (vmrt.vm.module_cache). Contexts need only
        its summary; the definition is made when first asked for (one found in the
        cache, with its code cached too, runs without it)."""
        summary = read.summary
        self._read = read
        self.summary = summary
        self.source = source
        self.name = summary.name
        self.version = summary.version
        self.verified = read.verified
        self.type_defs = [resolve_type(name, allow_placeholders=True)
                          for name in summary.type_names]
        self.function_count = len(self.verified)
        self._exports = {name: ordinal for name, ordinal, _, _ in summary.exports}
        self._export_signatures = {name: (cconv, attrs)
                                   for name, _, cconv, attrs in summary.exports}
        self._imports = [ImportDecl(*decl) for decl in summary.imports]
        self._dependencies = [Dependency(*dependency) for dependency in summary.dependencies]
        self._function_names = summary.function_names
        self.generators = summary.generators
        self._code: dict[tuple, code_cache.CompiledFunction] = {}
        self._instructions: dict[int, list] = {}
        self._static_costs: dict[int, int | None] = {}
        self.rodata = [VMBuffer.wrap_rodata(data) for data in read.rodata()]

    @functools.cached_property
    def definition(self):
        """The module definition (vmrt.format.BytecodeModuleDef)."""
        return self._read.definition()

    # -- Module interface ----------------------------------------------------------------
    def export_names(self) -> list[str]:
        return list(self._exports)

    def export_cconv(self, name: str) -> str | None:
        signature = self._export_signatures.get(name)
        return signature[0] if signature is not None else None

    def export_attrs(self, name: str) -> dict[str, str]:
        signature = self._export_signatures.get(name)
        return dict(signature[1]) if signature is not None else {}

    def export_ordinal(self, name: str) -> int | None:
        return self._exports.get(name)

    def imports(self) -> list[ImportDecl]:
        return list(self._imports)

    def dependencies(self) -> list[Dependency]:
        return list(self._dependencies)

    def instantiate(self, context) -> "BytecodeModuleInstance":
        return BytecodeModuleInstance(self, context)

    # -- functions -------------------------------------------------------------------------
    def function_name(self, ordinal: int) -> str:
        return self._function_names.get(ordinal, f"function#{ordinal}")

    def instructions(self, ordinal: int) -> list:
        """The decoded instructions (block markers included) of internal function
        `ordinal`, decoded on first use and kept."""
        decoded = self._instructions.get(ordinal)
        if decoded is None:
            decoded = self._instructions[ordinal] = list(
                decode_function(self._read.function_bytecode(ordinal)))
        return decoded

    def instruction_at(self, ordinal: int, pc: int):
        """The decoded instruction starting at `pc` of function `ordinal`, or None."""
        return next((d for d in self.instructions(ordinal) if d.pc == pc), None)

    def source_location(self, ordinal: int, pc: int) -> str | None:
        """file:line:col of the instruction at `pc` of function `ordinal`, from the
        debug database, if any."""
        return source_location(self.definition, ordinal, pc)

    def call_target(self, callee: int) -> codegen.CallTarget:
        if callee & IMPORT_ORDINAL_BIT:
            index = callee & ~IMPORT_ORDINAL_BIT
            decl = self._imports[index]
            arguments, results = signature_of(decl.cconv).fragments
            return codegen.CallTarget("import", index, arguments, results, name=decl.full_name)
        f = self.verified[callee]
        return codegen.CallTarget("internal", callee, f.arguments, f.results,
                                  is_generator=callee in self.generators,
                                  name=self.function_name(callee))

    def static_cost(self, ordinal: int) -> int | None:
        """Instructions a straight-line function runs (one block, calls only to such
        functions), or None. Limits charge these to the caller (vmrt.vm.codegen)."""
        if ordinal in self._static_costs:
            return self._static_costs[ordinal]
        self._static_costs[ordinal] = None  # a recursive call is not straight-line
        verified = self.verified[ordinal]
        cost = None
        if len(verified.block_pcs) == 1 and not verified.may_yield:
            cost = 0
            for d in self.instructions(ordinal):
                inst = d.instruction
                if inst.kind == "marker":
                    continue
                cost += inst.cost
                if inst.is_branch:  # even within its one block: a loop
                    cost = None
                elif inst.is_call:
                    callee = d.values[0]
                    callee_cost = None if callee & IMPORT_ORDINAL_BIT else \
                        self.static_cost(callee)
                    cost = None if callee_cost is None else cost + callee_cost
                if cost is None:
                    break
        self._static_costs[ordinal] = cost
        return cost

    def limits_call_target(self, callee: int) -> codegen.CallTarget:
        target = self.call_target(callee)
        if target.kind == "internal":
            target.static_cost = self.static_cost(callee)
        return target

    def compiled(self, ordinal: int, options: codegen.CodegenOptions = codegen.CodegenOptions()
                 ) -> code_cache.CompiledFunction:
        """The code object, line -> pc map and source of a function (a CompiledFunction,
        which unpacks as that triple), compiling it on first use."""
        key = (ordinal, options)
        entry = self._code.get(key)
        if entry is None:
            entry = self._code[key] = self._cached_or_compiled(ordinal, options)
        return entry

    def _cached_or_compiled(self, ordinal: int, options: codegen.CodegenOptions
                            ) -> code_cache.CompiledFunction:
        """A function variant from the on-disk cache, or compiled now and stored there."""
        cache = code_cache.default_cache()
        if cache is None:
            return self._compile(ordinal, options)
        key = code_cache.runtime_key(self.content_digest, ordinal, repr(options))
        entry = cache.load(key)
        if entry is not None:
            return code_cache.CompiledFunction._make(entry)
        compiled = self._compile(ordinal, options)
        cache.store(key, tuple(compiled))
        return compiled

    @functools.cached_property
    def content_digest(self) -> bytes:
        """A hash of all that the generated code of this module's functions depends on,
        besides the options: the bytecode and what _compile reads of the rest."""
        if self._read.key is not None:  # the bytes hold it all, but for a name set since
            return code_cache.content_digest(self._read.key, repr(self.name))
        definition = self.definition
        descriptors = [(d.bytecode_offset, d.bytecode_length, d.requirements)
                       for d in definition.function_descriptors]
        signatures = [(f.arguments, f.results) for f in self.verified]
        return code_cache.content_digest(definition.bytecode_data, repr((
            self.name, descriptors, signatures, sorted(self._function_names.items()),
            self._imports, sorted(self.generators))))

    def _compile(self, ordinal: int, options: codegen.CodegenOptions
                 ) -> code_cache.CompiledFunction:
        blocks: list[tuple[int, list]] = []
        for d in self.instructions(ordinal):
            if d.instruction.kind == "marker":
                blocks.append((d.pc, []))
            elif blocks:
                blocks[-1][1].append(d)
        verified = self.verified[ordinal]
        plan = codegen.FunctionPlan(
            ordinal=ordinal, name=self.function_name(ordinal),
            arguments=verified.arguments, results=verified.results, blocks=blocks,
            is_generator=ordinal in self.generators, call_target=self.call_target,
            options=options)
        if options.checkpoints:
            plan.call_target = self.limits_call_target
            plan.static_cost = self.static_cost(ordinal)
        generated = codegen.FunctionGenerator(plan).generate()
        # Names come from the module: compile() refuses a NUL in a file name.
        filename = f"<vmrt {self.name}.{plan.name}>".replace("\0", "\\0")
        module_code = compile(generated.source, filename, "exec")
        if options.checkpoints:  # the function sits in a scope holding its cells
            module_code = next(c for c in module_code.co_consts if isinstance(c, types.CodeType))
        function_code = next(c for c in module_code.co_consts
                             if isinstance(c, types.CodeType) and c.co_name == generated.entry_name)
        return code_cache.CompiledFunction(function_code, generated.line_pcs, generated.source)


def load_module(source) -> BytecodeModule:
    """Reads and verifies a module from a path, bytes-like object or ModuleDef (bytes
    read and verified before, in any process, come from vmrt.vm.module_cache)."""
    if hasattr(source, "function_descriptors"):
        return BytecodeModule(verify_definition(source))
    name = str(source) if isinstance(source, (str, Path)) else "<memory>"
    return BytecodeModule(read_verified(source), name)


# --------------------------------------------------------------------------------------------
# Per-context state of a bytecode module
# --------------------------------------------------------------------------------------------
def _fail(status: int, message: str):
    code = status & 0x1F
    try:
        code = StatusCode(code)
    except ValueError:
        code = StatusCode.UNKNOWN
    raise VMError(message, code)


def run_to_completion(result):
    """The result of a call that may have returned a generator (a suspended VM
    stack, reached from a call site that cannot yield): each yield resumes at once."""
    if result.__class__ is not types.GeneratorType:
        return result
    try:
        while True:
            next(result)
    except StopIteration as stop:
        return stop.value


def _ref_checks(type_defs: list) -> dict:
    """CAST and REF_OR_NULL of generated code: check_ref_type and ref_or_null of the
    ref type of a type ordinal, with their common case (null, or a ref of exactly
    that type) in the one frame generated code calls (an initializer storing a
    model's parameters runs them hundreds of times)."""
    ref_types = [type_def.ref_type for type_def in type_defs]

    def cast(obj, type_id):
        ref_type = ref_types[type_id]
        if obj is None or ref_type is not None and getattr(obj, "ref_type", None) is ref_type:
            return obj
        return check_ref_type(ref_type, obj)

    def ref_or_null_of(obj, type_id):
        ref_type = ref_types[type_id]
        if obj is None or ref_type is not None and getattr(obj, "ref_type", None) is ref_type:
            return obj
        return ref_or_null(ref_type, obj)
    return {"CAST": cast, "REF_OR_NULL": ref_or_null_of}


def _allocators(type_defs: list, meter) -> dict:
    """BUFFER_ALLOC, BUFFER_CLONE and LIST_ALLOC of generated code (with limits: metered)."""
    if meter is None:
        return {"BUFFER_ALLOC": buffer_alloc, "BUFFER_CLONE": buffer_clone,
                "LIST_ALLOC": lambda type_id, capacity: list_alloc(type_defs[type_id], capacity)}
    return {"BUFFER_ALLOC": lambda length, alignment: metered_buffer_alloc(
                meter, length, alignment),
            "BUFFER_CLONE": lambda source, offset, length, alignment: metered_buffer_clone(
                meter, source, offset, length, alignment),
            "LIST_ALLOC": lambda type_id, capacity: metered_list_alloc(
                meter, type_defs[type_id], capacity)}


def _unresolved_import(name: str):
    def call(*args):
        raise VMError(f"optional import '{name}' is not resolved", StatusCode.NOT_FOUND)
    return call


class BytecodeModuleInstance(ModuleInstance):
    """Globals, resolved imports and compiled functions of one module in one context."""

    def __init__(self, module: BytecodeModule, context):
        self.module = module
        self.context = context
        self.rwdata = bytearray(module.summary.global_bytes)
        self.global_refs = [None] * module.summary.global_refs
        self.namespace = self._namespace()
        self._code_ids: dict[int, int] = {}  # id(code object) -> ordinal
        self._host_entries: dict[int, object] = {}
        self.tier = getattr(context, "tier", None) or selected_tier()  # (vmrt.vm.ctier)
        #: While `__init` runs in `auto`: the functions it bound (see initialize).
        self._bound_by_init: list[int] | None = None

    def _namespace(self) -> dict:
        """The globals of the module's generated code (vmrt.vm.generated_abi)."""
        module = self.module
        rw = memoryview(self.rwdata)
        size = len(self.rwdata)
        values = dict(
            RW_I32=rw[:size - size % 4].cast("i"), RW_F32=rw[:size - size % 4].cast("f"),
            RW_I64=rw[:size - size % 8].cast("q"), RW_F64=rw[:size - size % 8].cast("d"),
            REFS=self.global_refs, RODATA=module.rodata,
            RESOLVED=[0] * len(module._imports),
            FAIL=_fail, GENERATOR=types.GeneratorType, RUN_TO_COMPLETION=run_to_completion,
            BUFFER_COPY=buffer_copy, BUFFER_COMPARE=buffer_compare,
            TRACE=self.context.trace_hook, PRINT=self.context.print_hook,
        )
        meter = self._meter()
        values.update(_allocators(module.type_defs, meter))
        values.update(_ref_checks(module.type_defs))
        values.update(self._global_accessors(size))
        for ordinal in range(module.function_count):
            values[f"F{ordinal}"] = self._stub(ordinal)
        for index, decl in enumerate(module._imports):
            values[f"I{index}"] = values[f"IY{index}"] = _unresolved_import(decl.full_name)
        ns = {name: value for name, value in vars(numerics).items() if not name.startswith("_")}
        ns.update(generated_abi.namespace("module", **values))
        hook_dispatcher = getattr(self.context, "hook_dispatcher", None)
        if hook_dispatcher is not None:  # ENTER/STEP/UNWIND/LEAVE of instrumented code
            ns.update(generated_abi.namespace("hooks", **hook_dispatcher.bindings(self)))
        if meter is not None:  # the limits variant (vmrt.vm.codegen)
            ns.update(generated_abi.namespace(
                "limits", MAXD=meter.max_depth, DEPTH_EXCEEDED=meter.depth_exceeded,
                REFILL=meter.refill))
        return ns

    def _global_accessors(self, size: int) -> dict:
        import struct

        accessors = {}
        for code, fmt in (("I32", "<i"), ("I64", "<q"), ("F32", "<f"), ("F64", "<d")):
            packer = struct.Struct(fmt)
            width = packer.size

            def load(offset, packer=packer, width=width):
                if offset < 0 or offset + width > size:
                    raise vm_error(ErrorKind.GLOBAL_RANGE, offset=offset, size=size)
                return packer.unpack_from(self.rwdata, offset)[0]

            def store(offset, value, packer=packer, width=width):
                if offset < 0 or offset + width > size:
                    raise vm_error(ErrorKind.GLOBAL_RANGE, offset=offset, size=size)
                packer.pack_into(self.rwdata, offset, value)

            accessors[f"GLOBAL_LOAD_{code}"] = load
            accessors[f"GLOBAL_STORE_{code}"] = store
        refs = self.global_refs

        def check_global_ref(index):
            if not 0 <= index < len(refs):
                raise VMError(f"global ref ordinal {index} out of range of {len(refs)}",
                              StatusCode.OUT_OF_RANGE)
        accessors["CHECK_GLOBAL_REF"] = check_global_ref
        return accessors

    def _stub(self, ordinal: int):
        def first_call(*args):
            return self.function(ordinal)(*args)
        first_call.vmrt_stub = True
        return first_call

    def function(self, ordinal: int):
        """The Python function running internal function `ordinal` in this context."""
        fn = self.namespace.get(f"F{ordinal}")
        if fn is not None and not getattr(fn, "vmrt_stub", False):
            return fn
        fn = self._c_function(ordinal) or self._bind(ordinal)
        self.namespace[f"F{ordinal}"] = fn
        if self._bound_by_init is not None:
            self._bound_by_init.append(ordinal)
        return fn

    def _c_function(self, ordinal: int):
        """Function `ordinal` in the C tier (vmrt.vm.ctier) when it runs there (not
        with hooks, which only the Python tier's code calls)."""
        if self.context.codegen_options.instrumented or self.tier == "python" or \
                self._bound_by_init is not None:
            return None
        if not ctier_analysis.may_compile(self.module, ordinal) or (
                self.tier == "auto" and self._small(ordinal)):
            return None
        from vmrt.vm.ctier.runtime import CModule  # (the build machinery: only when needed)

        meter = self._meter()
        cmodule = CModule.of(self.module, self.tier, may_build=meter is None)
        if cmodule is None or ordinal not in cmodule.shapes:
            return None
        python_tier = []

        def python_function():  # for calls with values the C tier does not model
            if not python_tier:
                python_tier.append(self._bind(ordinal))
            return python_tier[0]
        return cmodule.instance(self).entry(ordinal, python_function, meter)

    #: Straight-line functions of at most this many instructions run their Python
    #: tier's code when called from Python in `auto` (C callers call their C): an
    #: entry into C costs more than such a function's work (VMRT_TIER=c: C always).
    SMALL_FUNCTION = 64

    def _small(self, ordinal: int) -> bool:
        cost = self.module.static_cost(ordinal)
        return cost is not None and cost <= self.SMALL_FUNCTION

    def host_function(self, ordinal: int):
        """With limits: the entry of internal function `ordinal` for callers outside
        generated code (no depth argument: vmrt.vm.limits, Meter.entry)."""
        fn = self._host_entries.get(ordinal)
        if fn is None:
            module = self.module
            fn = self._host_entries[ordinal] = self._meter().entry(
                self.function(ordinal), module.static_cost(ordinal),
                ordinal in module.generators, f"{module.name}.{module.function_name(ordinal)}")
        return fn

    def _bind(self, ordinal: int):
        """Function `ordinal` compiled and bound to this context's namespace (and,
        with limits, to its meter's cells)."""
        code = self.module.compiled(ordinal, self.context.codegen_options).code
        meter = self._meter()
        closure = tuple(meter.cells[name] for name in code.co_freevars) if meter else None
        self._code_ids[id(code)] = ordinal
        return types.FunctionType(code, self.namespace, code.co_name, None, closure or None)

    def _meter(self):
        """The context's limits (vmrt.vm.context.Meter) when it compiles them in."""
        return getattr(self.context, "meter", None) \
            if self.context.codegen_options.checkpoints else None

    # -- ModuleInstance interface -------------------------------------------------------------
    def lookup(self, name: str):
        ordinal = self.module.export_ordinal(name)
        if ordinal is None:
            return None
        if self._meter() is not None:  # callers outside generated code pass no depth
            return self.host_function(ordinal)
        return self.function(ordinal)

    def is_generator(self, name: str) -> bool:
        ordinal = self.module.export_ordinal(name)
        return ordinal in self.module.generators

    def resolve_import(self, ordinal: int, fn, yieldable_fn=None) -> None:
        """Binds import `ordinal`: `fn` always completes; `yieldable_fn` (default
        `fn`) may return a generator and serves vm.call.yieldable sites."""
        self.namespace[f"I{ordinal}"] = fn
        self.namespace[f"IY{ordinal}"] = yieldable_fn or fn
        self.namespace["RESOLVED"][ordinal] = 1

    def initialize(self) -> None:
        """Runs `__init`. It runs once per context: in `auto` it and what it calls run in
        the Python tier (the C tier's first look at a function, and loading a module's
        C, cost more than an initializer's few calls into native modules take),
        and the functions it bound go back to their stubs after it, so that later
        calls choose their tier as usual."""
        if self.tier == "auto":
            self._bound_by_init = []
        try:
            init = self.lookup("__init")
            if init is not None:
                self.context.run_to_completion(init())
        finally:
            bound, self._bound_by_init = self._bound_by_init, None
            for ordinal in bound or ():
                self.namespace[f"F{ordinal}"] = self._stub(ordinal)
            if bound is not None:
                self._host_entries.clear()

    def deinitialize(self) -> None:
        deinit = self.lookup("__deinit")
        if deinit is not None:
            self.context.run_to_completion(deinit())

    def abandon(self) -> None:
        """Drops the globals and the namespace (its functions refer to it: a cycle)
        without running __deinit, so what they held goes at once."""
        self.global_refs[:] = [None] * len(self.global_refs)
        self.namespace.clear()
        self._host_entries.clear()

    def frame_name(self, code):
        ordinal = self._code_ids.get(id(code))
        if ordinal is None:
            return None
        return f"{self.module.name}.{self.module.function_name(ordinal)}", ordinal

    def pc_for_line(self, ordinal: int, line: int, code=None) -> int | None:
        line_pcs = self.module.compiled(ordinal, self.context.codegen_options).line_pcs
        if 1 <= line <= len(line_pcs):
            return line_pcs[line - 1]
        return None


__all__ = ["BytecodeModule", "BytecodeModuleInstance", "Dependency", "ImportDecl", "Module",
           "ModuleInstance", "ModuleFormatError", "VmrtError", "load_module", "run_to_completion"]
