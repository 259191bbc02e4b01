"""Importing IREE's stream IR (as it stands just before IREE partitions it) into a vmrt
stream program: one function per IREE function, walked with IREE's MLIR bindings.

    imported = import_model("model.mlir")          # runs iree-compile (iree_compiler.py)
    imported.program, imported.notes, imported.constants

How IREE's ops map (vmrt/stream/README.md, "Importing IREE programs"):

    stream.tensor.import / util.global.load     a function argument
    stream.tensor.export + util.return          a function result
    util.global.store                           a function result (the new state)
    stream.async.dispatch                       dispatch @exe::@entry (tied results kept)
    stream.async.splat / fill                   splat / fill
    stream.async.update / copy                  copy (in place into the target)
    stream.async.clone / slice / transfer       dispatch @vmrt.copy (a new resource)
    stream.async.alloca                         splat 0 : i8 (IREE leaves it uninitialized)
    stream.async.constant                       splat (splat values), param.load of the
                                                parameter, else param.load "constants"::key
    stream.async.parameter.load / read / gather param.load / param.gather
    stream.async.barrier / cast, stream.timepoint.await / barrier,
    util.optimization_barrier                   the same resource (no op)

Scalar host work (arith, hal.buffer_view.assert, timepoints, resource sizes) has no
part in the program. Every other op is reported by name and source location.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vmrt.errors import StatusCode, StreamError
from vmrt.stream.builder import FuncBuilder, ProgramBuilder
from vmrt.stream.ir import ELEMENT_TYPES, Lifetime, Loc, Pattern, Program, Use, Value
from vmrt.stream.iree_compiler import (SCHEDULE_PASS, compile_stream_ir, constant_int,
                                       function_ops, parse_modules, source_location, walk)
from vmrt.stream.text import format_program

#: IREE resource lifetimes (`!stream.resource<...>`) as vmrt lifetimes.
LIFETIMES = {"external": Lifetime.EXTERNAL, "transient": Lifetime.TRANSIENT,
             "constant": Lifetime.CONSTANT, "variable": Lifetime.PARAMETER,
             "staging": Lifetime.EXTERNAL}
#: ops with no part in the program: host-side scalars, shapes, timepoints.
SCALAR_OPS = {"hal.buffer_view.assert", "hal.element_type", "hal.encoding_type",
              "hal.buffer_view.dim", "hal.buffer_view.rank", "stream.resource.size",
              "stream.timepoint.immediate", "stream.timepoint.join", "util.buffer.constant",
              "util.assume.int", "util.null",
              # fences of async entry points (coarse-fences ABI): host synchronisation
              "stream.timepoint.import", "stream.timepoint.export",
              "stream.timepoint.chain_external", "hal.devices.get", "hal.fence.create",
              "hal.fence.await", "hal.fence.signal", "hal.fence.join"}
SCALAR_PREFIXES = ("arith.", "math.", "index.")
#: the scope non-splat constants are loaded from (their bytes are in `constants`).
CONSTANTS_SCOPE = "constants"
COPY_KERNEL = "vmrt.copy"

_RESOURCE_RE = re.compile(r"^!stream\.resource<([a-z*]+)>")
_PARAMETER_RE = re.compile(r'#stream\.parameter\.named<(?:"((?:[^"\\]|\\.)*)"::)?'
                           r'"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class UnsupportedOp:
    name: str
    location: str
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.name} at {self.location}" + (f" ({self.reason})" if self.reason else "")


#: op kinds an ImportFailed message names (the most frequent); --verbose lists all.
MESSAGE_KINDS = 6
#: the longest reason the one-line message quotes.
MESSAGE_REASON = 80


class ImportFailed(StreamError):
    """Ops the importer cannot map: a one-line message (counts per op name, the first
    op's location) and, in `unsupported` / `details()`, every one of them."""

    def __init__(self, unsupported: list[UnsupportedOp]):
        self.unsupported = unsupported
        super().__init__(self._summary(), code=StatusCode.UNIMPLEMENTED)

    def _summary(self) -> str:
        counts: dict[str, int] = {}
        for op in self.unsupported:
            counts[op.name] = counts.get(op.name, 0) + 1
        kinds = sorted(counts, key=lambda name: (-counts[name], name))
        named = ", ".join(f"{name} x{counts[name]}" for name in kinds[:MESSAGE_KINDS])
        if len(kinds) > MESSAGE_KINDS:
            named += f", {len(kinds) - MESSAGE_KINDS} more kinds"
        first = self.unsupported[0]
        reason = first.reason if len(first.reason) <= MESSAGE_REASON \
            else first.reason[:MESSAGE_REASON - 3] + "..."
        where = f"{first.name} at {first.location}" + (f" ({reason})" if reason else "")
        return (f"cannot import {len(self.unsupported)} op(s) ({named}); first: {where} "
                "(--verbose lists all)")

    def details(self) -> list[str]:
        """One line per op that cannot be imported, in the order they were met."""
        return [str(op) for op in self.unsupported]


@dataclass
class ImportedProgram:
    program: Program
    #: what the importer approximated, one line per kind (with a count).
    notes: list[str] = field(default_factory=list)
    #: non-splat constants: key in the "constants" scope -> bytes.
    constants: dict[str, bytes] = field(default_factory=dict)
    #: per vmrt function: the IREE op names it was made from, with counts.
    op_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: IREE functions with no stream work (e.g. a synchronous wrapper that calls the
    #: async entry point): name -> why it was skipped.
    skipped: dict[str, str] = field(default_factory=dict)

    def text(self, source: str | None = None) -> str:
        """The program's text form, headed by where it came from and what the import
        approximated (as comments)."""
        lines = [f"// Imported from {source or 'IREE stream IR'} by `vmrt stream import` "
                 f"(IREE's stream IR before {SCHEDULE_PASS})."]
        lines += [f"// approximated: {note}" for note in self.notes]
        lines += [f"// skipped: @{name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines) + "\n" + format_program(self.program)


class _Skip(Exception):
    """An operand comes from an op already reported as unsupported."""


@dataclass
class _View:
    """An IREE resource value as a range of a vmrt value (a subview or the whole)."""

    value: Value
    offset: int
    length: int

    def use(self, offset: int = 0, length: int | None = None) -> Use:
        length = self.length - offset if length is None else length
        return Use(self.value, self.offset + offset, length)


def resource_lifetime(mlir_type) -> Lifetime | None:
    """The vmrt lifetime of a `!stream.resource<...>` type, None for other types."""
    match = _RESOURCE_RE.match(str(mlir_type))
    if not match:
        return None
    return LIFETIMES.get(match.group(1), Lifetime.EXTERNAL)


def vmrt_name(text: str) -> str:
    """An MLIR value or symbol name as a vmrt name (`%8#1` -> `8.1`)."""
    return re.sub(r"[^A-Za-z0-9_.$]", "_", text.lstrip("%").replace("#", "."))


def _loc(op) -> Loc | None:
    match = re.match(r"^(.*):(\d+):(\d+)$", source_location(op))
    return Loc(int(match.group(2)), int(match.group(3)), match.group(1)) if match else None


class _Unsupported(Exception):
    """Raised by a handler: the op cannot be mapped (the message says why)."""


class _FunctionImporter:
    """Converts one IREE function-like op into a vmrt function."""

    def __init__(self, owner: "_ModuleImporter", name: str, op):
        from iree.compiler import ir
        self.owner = owner
        self.name = name
        self.op = op
        self.names = ir.AsmState(op)
        self.env: dict = {}            # IREE resource value -> _View
        self.exported: dict = {}       # IREE !hal.buffer_view from an export -> _View
        self.returns: list[_View] = []
        self.stores: list[_View] = []     # util.global.store values, in order
        self.failed = False
        self.builder: FuncBuilder | None = None

    # -- values ---------------------------------------------------------------------------
    def value_name(self, value) -> str:
        return vmrt_name(value.get_name(self.names))

    def size(self, value) -> int:
        number = constant_int(value)
        if number is not None:
            return number
        owner = value.owner
        if getattr(owner, "name", None) == "stream.resource.size":
            return self.view(owner.operands[0]).length
        raise _Unsupported(f"size {value.get_name(self.names)} is not a constant "
                           "(dynamic shapes are not supported)")

    def view(self, value) -> _View:
        try:
            return self.env[value]
        except KeyError:
            if self.failed:
                raise _Skip() from None
            raise _Unsupported(f"{value.get_name(self.names)} is not a resource the "
                               "importer knows") from None

    def scalar(self, value) -> tuple[int | float, str]:
        """(constant, element type) of a splat or fill pattern operand."""
        element_type = str(value.type)
        if element_type not in ELEMENT_TYPES:
            raise _Unsupported(f"pattern of type {element_type}")
        owner = value.owner
        if getattr(owner, "name", None) != "arith.constant":
            self.owner.note("pattern computed on the host: imported as 0")
            return 0, element_type
        attr = owner.attributes["value"]
        return attr.value, element_type

    def text(self, value) -> str:
        """The string of a `util.buffer.constant` (parameter scopes and keys)."""
        owner = value.owner
        if getattr(owner, "name", None) != "util.buffer.constant":
            raise _Unsupported("parameter scope or key is not a constant")
        return owner.attributes["value"].value

    # -- the function ------------------------------------------------------------------------
    def signature(self) -> list[tuple[object, str, Lifetime, int]]:
        """(IREE value, name, lifetime, size) per argument: the imported buffer views
        and the resource globals loaded, in the order the body takes them."""
        args = []
        for op in self.op.regions[0].blocks[0].operations:
            if op.operation.name == "stream.tensor.import":
                args.append((op.result, self.value_name(op.source),
                             resource_lifetime(op.result.type), self.size(op.result_size)))
            elif (op.operation.name == "util.global.load"
                  and resource_lifetime(op.result.type) is not None):
                symbol = op.global_.value
                if symbol not in self.owner.global_sizes:
                    raise _Unsupported(f"the size of global @{symbol} is unknown (no "
                                       "initializer stores it)")
                args.append((op.result, self.value_name(op.result),
                             resource_lifetime(op.result.type),
                             self.owner.global_sizes[symbol]))
        return args

    def run(self, program: ProgramBuilder) -> None:
        blocks = self.op.regions[0].blocks
        if len(blocks) != 1:
            self.owner.unsupported_op(self.op, f"{len(blocks)} blocks (control flow)")
            return
        try:
            args = self.signature()
        except _Unsupported as error:
            self.owner.unsupported_op(self.op, str(error))
            return
        self.builder = program.func(self.name, [(name, lifetime, size)
                                                for _, name, lifetime, size in args],
                                    loc=_loc(self.op))
        for (value, *_), arg in zip(args, self.builder.args):
            self.env[value] = _View(arg, 0, arg.type.size)
        counts = self.owner.op_counts.setdefault(self.name, {})
        for op in blocks[0].operations:
            name = op.operation.name
            counts[name] = counts.get(name, 0) + 1
            self.convert(op)
        if not self.failed:
            self.finish()

    def convert(self, op) -> None:
        name = op.operation.name
        handler = HANDLERS.get(name)
        if handler is None:
            if name in SCALAR_OPS or name.startswith(SCALAR_PREFIXES):
                if not op.operation.regions:
                    return
            self.fail(op, "")
            return
        try:
            handler(self, op)
        except _Skip:
            pass
        except _Unsupported as error:
            self.fail(op, str(error))
        except StreamError as error:
            self.fail(op, error.bare_message)

    def fail(self, op, reason: str) -> None:
        self.failed = True
        self.owner.unsupported_op(op.operation, reason)

    def finish(self) -> None:
        """Declares the results (known only now: the values returned) and returns."""
        returned = []
        for view in self.returns:
            if view.offset or view.length != view.value.type.size:
                self.owner.unsupported_op(self.op, "returns part of a resource")
                return
            returned.append(view.value)
        self.builder.func.result_types = [value.type for value in returned]
        self.builder.ret(*returned)

    def define(self, results, values, views=None) -> None:
        """Binds IREE results to new vmrt values (or to `views` of them)."""
        for index, (result, value) in enumerate(zip(results, values)):
            view = views[index] if views else None
            self.env[result] = (_View(value, view.offset, view.length) if view
                                else _View(value, 0, value.type.size))

    def new_type(self, result, size_value) -> tuple[Lifetime, int]:
        return resource_lifetime(result.type), self.size(size_value)


# -- one handler per IREE op: (function importer, op) ---------------------------------------
def _dispatch(fi: _FunctionImporter, op) -> None:
    uses: list[Use] = []
    views: list[_View] = []
    position: dict[int, int] = {}     # index among resource_operands -> index in uses
    offsets, lengths = list(op.resource_operand_offsets), list(op.resource_operand_lengths)
    for index, operand in enumerate(op.resource_operands):
        if resource_lifetime(operand.type) is None:
            fi.owner.note("dispatch scalar operands dropped (kernels get bindings only)")
            continue
        position[index] = len(uses)
        view = fi.view(operand)
        uses.append(view.use(fi.size(offsets[len(uses)]), fi.size(lengths[len(uses)])))
        views.append(view)
    ties = [tie.value for tie in op.attributes["tied_operands"]] \
        if "tied_operands" in op.attributes else [-1] * len(op.results)
    results, result_views = [], []
    for result, tie, size in zip(op.results, ties, op.result_sizes):
        if tie < 0:
            results.append(fi.new_type(result, size))
            result_views.append(None)
        else:
            results.append(uses[position[tie]].value)
            result_views.append(views[position[tie]])
    entry_points = list(op.attributes["entry_points"])
    if len(entry_points) > 1:
        fi.owner.note("dispatches with several entry points: the first is the kernel")
    callee = entry_points[0].value
    values = fi.builder.dispatch(callee, uses, results, loc=_loc(op),
                                 names=[fi.value_name(r) for r in op.results])
    fi.define(op.results, values, result_views)


def _splat(fi: _FunctionImporter, op) -> None:
    lifetime, size = fi.new_type(op.result, op.result_size)
    value = fi.builder.splat(fi.scalar(op.value), lifetime, size,
                             name=fi.value_name(op.result), loc=_loc(op))
    fi.define([op.result], [value])


def _fill(fi: _FunctionImporter, op) -> None:
    view = fi.view(op.target)
    target = view.use(fi.size(op.target_offset), fi.size(op.target_length))
    value = fi.builder.fill(fi.scalar(op.value), target, name=fi.value_name(op.result),
                            loc=_loc(op))
    fi.define([op.result], [value], [view])


def _copy_into(fi: _FunctionImporter, op, source: Use, target_view: _View,
               target: Use) -> None:
    value = fi.builder.copy(source, target, name=fi.value_name(op.result), loc=_loc(op))
    fi.define([op.result], [value], [target_view])


def _update(fi: _FunctionImporter, op) -> None:
    view = fi.view(op.target)
    offset = fi.size(op.target_offset)
    target = view.use(offset, fi.size(op.target_end) - offset)
    _copy_into(fi, op, fi.view(op.update).use(), view, target)


def _copy(fi: _FunctionImporter, op) -> None:
    view = fi.view(op.target)
    length = fi.size(op.length)
    source = fi.view(op.source).use(fi.size(op.source_offset), length)
    _copy_into(fi, op, source, view, view.use(fi.size(op.target_offset), length))


def _copy_to_new(fi: _FunctionImporter, op, source: Use, result_size) -> None:
    """clone, slice, transfer: a new resource holding the source range."""
    value, = fi.builder.dispatch(COPY_KERNEL, [source], [fi.new_type(op.result, result_size)],
                                 names=[fi.value_name(op.result)], loc=_loc(op))
    fi.define([op.result], [value])


def _clone(fi: _FunctionImporter, op) -> None:
    _copy_to_new(fi, op, fi.view(op.source).use(), op.result_size)


def _slice(fi: _FunctionImporter, op) -> None:
    offset = fi.size(op.source_offset)
    source = fi.view(op.source).use(offset, fi.size(op.source_end) - offset)
    _copy_to_new(fi, op, source, op.result_size)


def _alloca(fi: _FunctionImporter, op) -> None:
    fi.owner.note("stream.async.alloca imported as splat 0 : i8 (IREE leaves it "
                  "uninitialized)")
    lifetime, size = fi.new_type(op.result, op.storage_size)
    value = fi.builder.splat((0, "i8"), lifetime, size, name=fi.value_name(op.result),
                             loc=_loc(op))
    fi.define([op.result], [value])


def _param_load(fi: _FunctionImporter, op, scope: str, key: str, size_value) -> None:
    lifetime, size = fi.new_type(op.result, size_value)
    value = fi.builder.param_load(scope, key, lifetime, size, name=fi.value_name(op.result),
                                  loc=_loc(op))
    fi.define([op.result], [value])


def _constant(fi: _FunctionImporter, op) -> None:
    attr = op.attributes["value"]
    parameter = _PARAMETER_RE.match(str(attr))
    if parameter:
        _param_load(fi, op, parameter.group(1) or "", parameter.group(2), op.result_size)
        return
    splat = fi.owner.splat_pattern(attr)
    if splat is not None:
        _splat_constant(fi, op, splat)
        return
    key = f"{fi.name}.{fi.value_name(op.result)}"
    fi.owner.add_constant(key, attr, fi.size(op.result_size))
    _param_load(fi, op, CONSTANTS_SCOPE, key, op.result_size)


def _splat_constant(fi: _FunctionImporter, op, pattern: Pattern) -> None:
    lifetime, size = fi.new_type(op.result, op.result_size)
    value = fi.builder.splat(pattern, lifetime, size, name=fi.value_name(op.result),
                             loc=_loc(op))
    fi.define([op.result], [value])


def _parameter_source(fi: _FunctionImporter, op, offsets) -> str:
    if any(constant_int(offset) != 0 for offset in offsets):
        fi.owner.note("parameter source offsets dropped (vmrt reads each key from 0)")
    return fi.text(op.source_scope) if op.source_scope is not None else ""


def _parameter_load(fi: _FunctionImporter, op) -> None:
    scope = _parameter_source(fi, op, [op.source_offset])
    _param_load(fi, op, scope, fi.text(op.source_key), op.result_size)


def _parameter_entries(fi: _FunctionImporter, op, scope, keys, offsets, lengths) -> None:
    view = fi.view(op.target)
    entries = [(fi.text(key), view.use(fi.size(offset), fi.size(length)))
               for key, offset, length in zip(keys, offsets, lengths)]
    value = fi.builder.param_gather(scope, entries, name=fi.value_name(op.result),
                                    loc=_loc(op))
    fi.define([op.result], [value], [view])


def _parameter_read(fi: _FunctionImporter, op) -> None:
    scope = _parameter_source(fi, op, [op.source_offset])
    _parameter_entries(fi, op, scope, [op.source_key], [op.target_offset],
                       [op.target_length])


def _parameter_gather(fi: _FunctionImporter, op) -> None:
    scope = _parameter_source(fi, op, list(op.source_offsets))
    _parameter_entries(fi, op, scope, list(op.source_keys), list(op.target_offsets),
                       list(op.target_lengths))


def _alias(fi: _FunctionImporter, sources, results) -> None:
    """Results naming the same storage as their sources (ordering only)."""
    for source, result in zip(sources, results):
        if resource_lifetime(source.type) is not None:
            fi.env[result] = fi.view(source)


def _tensor_import(fi: _FunctionImporter, op) -> None:
    pass    # bound to its argument by the signature


def _tensor_export(fi: _FunctionImporter, op) -> None:
    fi.exported[op.result] = fi.view(op.source)


def _global_load(fi: _FunctionImporter, op) -> None:
    pass    # a resource is bound to its argument by the signature; scalars stay on the host


def _global_store(fi: _FunctionImporter, op) -> None:
    if resource_lifetime(op.value.type) is None:
        return      # host scalar state
    view = fi.view(op.value)
    fi.owner.global_sizes[op.global_.value] = view.length
    fi.stores.append(view)


def _return(fi: _FunctionImporter, op) -> None:
    for operand in op.operands:
        if operand in fi.exported:
            fi.returns.append(fi.exported[operand])
        elif resource_lifetime(operand.type) is not None:
            fi.returns.append(fi.view(operand))
        else:
            fi.owner.note("non-resource function results dropped")
    fi.returns += fi.stores


HANDLERS = {
    "stream.async.dispatch": _dispatch,
    "stream.async.splat": _splat,
    "stream.async.fill": _fill,
    "stream.async.update": _update,
    "stream.async.copy": _copy,
    "stream.async.clone": _clone,
    "stream.async.transfer": _clone,
    "stream.async.slice": _slice,
    "stream.async.alloca": _alloca,
    "stream.async.constant": _constant,
    "stream.async.parameter.load": _parameter_load,
    "stream.async.parameter.read": _parameter_read,
    "stream.async.parameter.gather": _parameter_gather,
    "stream.async.barrier": lambda fi, op: _alias(fi, [op.source], [op.result]),
    "stream.async.cast": lambda fi, op: _alias(fi, [op.source], [op.result]),
    "stream.timepoint.barrier": lambda fi, op: _alias(fi, [op.resource], [op.result]),
    "stream.timepoint.await": lambda fi, op: _alias(fi, op.resource_operands, op.results_),
    "util.optimization_barrier": lambda fi, op: _alias(fi, op.operands_, op.results_),
    "stream.tensor.import": _tensor_import,
    "stream.tensor.export": _tensor_export,
    "util.global.load": _global_load,
    "util.global.store": _global_store,
    "util.return": _return,
}


class _ModuleImporter:
    """The state shared by a module's functions: globals, notes, constants, failures."""

    def __init__(self):
        from iree.compiler import ir
        self.ir = ir
        self.global_sizes: dict[str, int] = {}
        self.unsupported: list[UnsupportedOp] = []
        self.notes: dict[str, int] = {}
        self.constants: dict[str, bytes] = {}
        self.op_counts: dict[str, dict[str, int]] = {}

    def note(self, text: str) -> None:
        self.notes[text] = self.notes.get(text, 0) + 1

    def unsupported_op(self, op, reason: str) -> None:
        self.unsupported.append(UnsupportedOp(op.name, source_location(op), reason))

    def splat_pattern(self, attr) -> Pattern | None:
        """The pattern of a splat dense constant of a vmrt element type, else None."""
        if not isinstance(attr, self.ir.DenseElementsAttr):
            return None
        element_type = str(attr.type.element_type)
        if not attr.is_splat or element_type not in ELEMENT_TYPES:
            return None
        return Pattern(attr.get_splat_value().value, element_type)

    def add_constant(self, key: str, attr, size: int) -> None:
        """Keeps a constant's bytes for the "constants" scope (zeros when the bindings
        cannot give them, e.g. dense_resource blobs)."""
        import numpy as np
        try:
            data = np.asarray(attr).tobytes()
        except (ValueError, TypeError, RuntimeError):
            self.note("constants whose bytes the bindings do not expose: zeros")
            data = b""
        if data and len(data) != size:
            self.note("constants whose stored size differs from their data: padded")
        self.constants[key] = data[:size].ljust(size, b"\0")
        self.note(f'non-splat constants: param.load "{CONSTANTS_SCOPE}"::key')


def no_stream_work(op) -> str | None:
    """Why a function is skipped (it has no stream op; its calls name the functions
    that do the work), or None when it has stream work to import."""
    children = list(walk(op))
    if any(child.name.startswith("stream.async.") for child in children):
        return None
    calls = sorted({"@" + child.attributes["callee"].value for child in children
                    if child.name == "util.call"})
    return "no stream work" + (f" (calls {', '.join(calls)})" if calls else "")


def _is_partitioned(op) -> bool:
    return any(child.name in ("stream.async.execute", "stream.cmd.execute")
               for child in walk(op))


def unpartitioned_functions(modules) -> list[tuple[str, object]]:
    """(name, op) per function, each taken from a module in which IREE has not
    partitioned it yet (the print made just before its turn)."""
    chosen: dict[str, object] = {}
    order: list[str] = []
    for module in modules:
        for name, op in function_ops(module):
            if name not in order:
                order.append(name)
            if name not in chosen and not _is_partitioned(op):
                chosen[name] = op
    missing = [name for name in order if name not in chosen]
    if missing:
        raise StreamError(f"no print of {', '.join('@' + n for n in missing)} before "
                          "partitioning", code=StatusCode.FAILED_PRECONDITION)
    # Initializers first: they store the globals the functions load (and their sizes).
    return sorted(((name, chosen[name]) for name in order),
                  key=lambda item: item[1].name != "util.initializer")


def import_stream_ir(texts, name: str = "imported") -> ImportedProgram:
    """A vmrt program from module texts printed before `iree-stream-schedule-execution`
    (one, or one per function as iree_compiler.compile_stream_ir returns them)."""
    if isinstance(texts, str):
        texts = [texts]
    _context, modules = parse_modules(texts)
    importer = _ModuleImporter()
    builder = ProgramBuilder(vmrt_name(name) or "imported")
    skipped = {}
    for func_name, op in unpartitioned_functions(modules):
        why = no_stream_work(op)
        if why is not None:
            skipped[vmrt_name(func_name)] = why
            continue
        _FunctionImporter(importer, vmrt_name(func_name), op).run(builder)
    if importer.unsupported:
        raise ImportFailed(importer.unsupported)
    notes = [text + (f" (x{count})" if count > 1 else "")
             for text, count in importer.notes.items()]
    return ImportedProgram(builder.build(), notes, importer.constants, importer.op_counts,
                           skipped)


def import_model(model, compile_args=()) -> ImportedProgram:
    """Compiles `model` with iree-compile up to partitioning and imports the result."""
    from pathlib import Path
    stream_ir = compile_stream_ir(model, compile_args=compile_args)
    return import_stream_ir(stream_ir.before_partitioning, Path(model).stem)


def write_constants(imported: ImportedProgram, path) -> None:
    """Writes the non-splat constants as a parameter archive (.irpa, .safetensors,
    .gguf by extension) for scope "constants"."""
    from vmrt.io import ParameterIndex
    from vmrt.io.formats import write_file
    index = ParameterIndex()
    for key, data in imported.constants.items():
        index.add_buffer(key, bytearray(data))
    write_file(index, path)
