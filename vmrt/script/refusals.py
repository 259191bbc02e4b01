"""What scripts may not write, and what to write instead: one row per Python
construct outside the subset, each turned into a file:line:col ScriptError."""

from __future__ import annotations

import ast

from vmrt.errors import ScriptError

#: ast node class name -> (what, what to use instead).
REFUSED = {
    "ClassDef": ("classes are", "module-level functions and numbers, lists or bytearrays"),
    "FunctionDef": ("nested functions (closures) are", "a module-level function taking the "
                    "values as arguments"),
    "AsyncFunctionDef": ("async functions are", "a plain def"),
    "Lambda": ("lambda is", "a module-level def"),
    "Try": ("exceptions (try) are", "checks with if; a failing operation stops the script "
            "with its error"),
    "TryStar": ("exceptions (try) are", "checks with if"),
    "Raise": ("raise is", "assert CONDITION, or return an error code"),
    "Yield": ("generators (yield) are", "filling a list or a bytearray"),
    "YieldFrom": ("generators (yield from) are", "filling a list or a bytearray"),
    "Await": ("await is", "plain calls"),
    "AsyncFor": ("async for is", "for ... in range(...)"),
    "AsyncWith": ("async with is", "plain statements"),
    "With": ("with is", "plain statements"),
    "Global": ("global variables that change are", "arguments and return values"),
    "Nonlocal": ("nonlocal is", "arguments and return values"),
    "ListComp": ("comprehensions are", "a for loop calling append"),
    "SetComp": ("comprehensions are", "a for loop"),
    "DictComp": ("comprehensions are", "a for loop"),
    "GeneratorExp": ("generator expressions are", "a for loop"),
    "Dict": ("dicts are", "lists of numbers"),
    "Set": ("sets are", "lists of numbers"),
    "Delete": ("del is", "assigning a new value"),
    "Starred": ("starred expressions are", "naming each value"),
    "NamedExpr": ("assignment expressions (:=) are", "an assignment on its own line"),
    "Match": ("match is", "if/elif/else"),
    "JoinedStr": ("strings are", "numbers, or bytes in a bytearray"),
    "Slice": ("slices are", "indexing elements one at a time"),
    "Import": ("imports are", "host modules passed to compile(imports=...)"),
    "ImportFrom": ("imports are", "host modules passed to compile(imports=...)"),
    "TypeAlias": ("type aliases are", "the types int, float, bool, bytearray, list[int], "
                  "list[float]"),
}


def refuse(node: ast.AST, filename: str, what: str | None = None,
           instead: str | None = None) -> ScriptError:
    """The error for `node`: from the table unless `what`/`instead` are given."""
    row = REFUSED.get(type(node).__name__)
    if what is None:
        what, instead = row if row else (f"'{type(node).__name__}' is", instead)
    message = f"{what} not supported"
    if instead:
        message += f"; use {instead}"
    return error(node, filename, message)


def error(node: ast.AST, filename: str, message: str) -> ScriptError:
    """A ScriptError at `node` (1-based column, as compilers print it)."""
    return ScriptError(message, filename, getattr(node, "lineno", 0),
                       getattr(node, "col_offset", -1) + 1)


def constant_refusal(value) -> tuple[str, str] | None:
    """(what, instead) for a literal the subset has no type for."""
    if isinstance(value, (str, bytes)):
        return "strings are", "numbers, or bytes in a bytearray"
    if isinstance(value, complex):
        return "complex numbers are", "two floats"
    if value is None:
        return "None as a value is", "a number (None is only a return annotation)"
    if value is Ellipsis:
        return "'...' is", "a value"
    return None
