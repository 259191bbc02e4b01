"""Which source map of a module's debug database belongs to which function.

The database lists one map per function, meant to be indexed by internal
ordinal, but iree-compile 3.13.0 can write them all at index 0 (its debug
database builder reads an ordinal the functions do not have yet, so the last
function written wins). A map is therefore trusted for a function only when it
fits: its name is not another function's export, and every bytecode offset it
lists starts an instruction of that function.
"""

from __future__ import annotations

from vmrt.errors import VmrtError
from vmrt.isa.decoder import decode_function


def _instruction_pcs(definition, ordinal: int) -> set[int]:
    descriptor = definition.function_descriptors[ordinal]
    start = descriptor.bytecode_offset
    try:
        return {d.pc for d in decode_function(definition.bytecode_data, start,
                                              start + descriptor.bytecode_length)}
    except VmrtError:
        return set()


def function_source_map(definition, ordinal: int):
    """The FunctionSourceMapDef of internal function `ordinal`, or None."""
    debug = definition.debug_database
    if debug is None or not debug.functions:
        return None
    own_names, other_exports = set(), set()
    for export in definition.exported_functions:
        (own_names if export.internal_ordinal == ordinal else other_exports).add(
            export.local_name)
    candidates = []
    if ordinal < len(debug.functions):
        candidates.append(debug.functions[ordinal])
    candidates += [m for m in debug.functions if m is not None and m.local_name in own_names]
    pcs = None
    for source_map in candidates:
        if source_map is None:
            continue
        name = source_map.local_name or ""
        if name in other_exports and name not in own_names:
            continue
        locations = source_map.locations or ()
        if not locations and name not in own_names:
            continue
        if pcs is None:
            pcs = _instruction_pcs(definition, ordinal)
        if all(entry.bytecode_offset in pcs for entry in locations):
            return source_map
    return None
