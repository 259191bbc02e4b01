"""Which source map of a module's debug database belongs to which function, and
the source location (file:line:col) of an instruction.

The database lists one map per function, meant to be indexed by internal
ordinal, but iree-compile 3.13.0 can write them all at index 0 (its debug
database builder reads an ordinal the functions do not have yet, so the last
function written wins). A map is therefore trusted for a function only when it
fits: its name is not another function's export, and every bytecode offset it
lists starts an instruction of that function.
"""

from __future__ import annotations

from vmrt.errors import VmrtError
from vmrt.format.function_body import decode_function_body


def _instruction_pcs(definition, ordinal: int) -> set[int]:
    # (maps are chosen while the module loads, before it can cache decoded bodies)
    try:
        return {d.pc for d in decode_function_body(definition, ordinal)}
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


def source_location(definition, ordinal: int, pc: int) -> str | None:
    """file:line:col of the op at `pc` from the module's debug database, if any."""
    if definition.debug_database is None:
        return None
    source_map = function_source_map(definition, ordinal)
    if source_map is None or not source_map.locations:
        return None
    best = None
    for entry in source_map.locations:
        if entry.bytecode_offset <= pc + 1:
            best = entry.location
        else:
            break
    return _file_line_column(definition.debug_database.location_table, best)


def _file_line_column(table, best) -> str | None:
    """Follows call-site, fused and child locations to the first file location
    (at most 16 steps: tables from untrusted modules may loop)."""
    seen = 0
    while best is not None and 0 <= best < len(table) and seen < 16:
        seen += 1
        loc = table[best]
        if loc is None:
            return None
        if hasattr(loc, "filename"):
            return f"{loc.filename}:{loc.line}:{loc.column}"
        if hasattr(loc, "caller"):
            best = loc.callee
        elif hasattr(loc, "child_location"):
            best = loc.child_location
        elif hasattr(loc, "locations"):
            best = loc.locations[0] if loc.locations else None
        else:
            return None
    return None
