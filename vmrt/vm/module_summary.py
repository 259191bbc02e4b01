"""What contexts need of a bytecode module's definition, taken from it once: its
interface (exports, imports, dependencies, types), function names, which functions
suspend, its global storage and where its rodata and function bodies lie.
vmrt.vm.module_cache keeps it, so that a process loading a module found there reads
the definition only when something asks for it (code generation, tools)."""

from __future__ import annotations

from typing import NamedTuple

from vmrt.vm.source_maps import function_source_map

IMPORT_FLAG_OPTIONAL = 2
DEPENDENCY_FLAG_OPTIONAL = 2


class ModuleSummary(NamedTuple):
    """A module's summary; `tuple(summary)` is plain data (marshal keeps it)."""

    name: str
    version: int
    #: Full names of the type table's entries.
    type_names: tuple[str, ...]
    #: (local name, internal ordinal, cconv or None, ((attr key, value), ...)) per export.
    exports: tuple[tuple, ...]
    #: (full name, cconv, optional) per import.
    imports: tuple[tuple[str, str, bool], ...]
    #: (name, minimum version, optional) per dependency.
    dependencies: tuple[tuple[str, int, bool], ...]
    #: Names of internal functions by ordinal: exports first, then the debug database's.
    function_names: dict[int, str]
    #: Functions that can suspend (they compile to Python generators).
    generators: frozenset[int]
    #: Bytes of global storage and count of global refs.
    global_bytes: int
    global_refs: int
    #: (offset, length) of each rodata segment's contents in the bytes the module was
    #: read from; None for a definition made in memory.
    rodata: tuple[tuple[int, int], ...] | None
    #: (offset, length) of each internal function's bytecode in those bytes (or None):
    #: a module found in the cache decodes its functions without its definition.
    bodies: tuple[tuple[int, int], ...] | None


def summarize(definition, verified: list) -> ModuleSummary:
    """The summary of a definition and its verified functions (verify_module's)."""
    signatures = definition.function_signatures
    exports = tuple(
        (e.local_name, e.internal_ordinal, *_cconv_and_attrs(
            signatures[e.internal_ordinal] if 0 <= e.internal_ordinal < len(signatures)
            else None)) for e in definition.exported_functions)
    imports = tuple(
        (i.full_name, (i.signature.calling_convention or "") if i.signature is not None else "",
         bool(i.flags & IMPORT_FLAG_OPTIONAL)) for i in definition.imported_functions)
    dependencies = tuple((d.name, d.minimum_version, bool(d.flags & DEPENDENCY_FLAG_OPTIONAL))
                         for d in definition.dependencies)
    state = definition.module_state
    return ModuleSummary(
        definition.name, definition.version, tuple(t.full_name for t in definition.types),
        exports, imports, dependencies, _function_names(definition),
        _generators(verified),
        state.global_bytes_capacity if state is not None else 0,
        state.global_ref_count if state is not None else 0, _rodata_ranges(definition),
        _body_ranges(definition))


def _cconv_and_attrs(signature) -> tuple:
    """(cconv, reflection attrs) of an export's signature, as export_cconv and
    export_attrs give them."""
    if signature is None:
        return None, ()
    return signature.calling_convention, tuple(
        (a.key, a.value) for a in (signature.attrs or ()) if a is not None and a.key)


def _function_names(definition) -> dict[int, str]:
    names: dict[int, str] = {}
    for export in definition.exported_functions:
        names.setdefault(export.internal_ordinal, export.local_name)
    debug = definition.debug_database
    if debug is not None:
        for i, source_map in enumerate(debug.functions or ()):
            if source_map is not None and source_map.local_name and i not in names \
                    and i < len(definition.function_descriptors) \
                    and function_source_map(definition, i) is source_map:
                names[i] = source_map.local_name
    return names


def _generators(verified: list) -> frozenset[int]:
    """Functions that can suspend: they yield, call a yieldable import, or
    (transitively) call such a function."""
    may_yield = {f.ordinal for f in verified if f.may_yield}
    changed = True
    while changed:
        changed = False
        for f in verified:
            if f.ordinal not in may_yield and f.callees & may_yield:
                may_yield.add(f.ordinal)
                changed = True
    return frozenset(may_yield)


def _rodata_ranges(definition) -> tuple[tuple[int, int], ...] | None:
    segments = definition.rodata_segments
    if any(s.data_offset is None for s in segments):
        return None
    return tuple((s.data_offset, len(s.data)) for s in segments)


def _body_ranges(definition) -> tuple[tuple[int, int], ...] | None:
    base = getattr(definition, "bytecode_data_offset", None)
    if base is None:
        return None
    return tuple((base + d.bytecode_offset, d.bytecode_length)
                 for d in definition.function_descriptors)
