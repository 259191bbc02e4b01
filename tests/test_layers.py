"""The layering of vmrt (README: "Layers import only the layers above them:
errors, isa, format, vm, native, asm, hal, io, modules, stream, script, compiler, tools").

Every import statement of vmrt/ counts, at module level and inside functions
(a lazy import still couples the files); only `if TYPE_CHECKING:` blocks, which
never run, are left out. Files directly in vmrt/ other than errors.py (the
package entry, api, debug, memory, ...) belong to no layer: they are only part
of the cycle check.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "vmrt"
LAYERS = ["errors", "elements", "isa", "format", "vm", "native", "asm", "hal", "io", "modules",
          "stream", "script", "compiler", "tools"]

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.lru_cache(maxsize=None)
def _files() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported_names(tree: ast.AST, package: str, modules):
    """Dotted names of the vmrt files each import statement of `tree` loads (outside
    TYPE_CHECKING): `from pkg import sub` loads pkg.sub, `from pkg import name` pkg.
    (Parent packages load with their children in any case: no edge of their own.)"""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                child = f"{base}.{alias.name}"
                yield child if child in modules else base
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    """vmrt module -> the vmrt modules (files) its import statements load."""
    files = _files()
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for imported in _imported_names(ast.parse(path.read_text()), package, files):
            if imported in files and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def folder(name: str) -> str:
    """The directory of a module's file (vmrt.io and vmrt.io.formats are two)."""
    path = _files()[name]
    return str(path.parent.relative_to(ROOT.parent))


def layer(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) >= 2 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return None


def cross_folder_cycles(graph) -> list[list[str]]:
    """Strongly connected components of the file graph spanning several folders."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    counter = [0]

    def visit(root: str) -> None:  # iterative Tarjan (the graph is deep)
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len({folder(m) for m in component}) > 1:
                    components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def upward_imports(graph) -> list[tuple[str, str]]:
    """Imports from a layer of a layer below it (listed later in LAYERS)."""
    found = []
    for source, targets in graph.items():
        source_layer = layer(source)
        for target in targets:
            target_layer = layer(target)
            if source_layer is not None and target_layer is not None \
                    and target_layer > source_layer:
                found.append((source, target))
    return sorted(found)


def test_the_graph_sees_function_level_imports():
    graph = import_graph()
    assert "vmrt.vm.module" in graph["vmrt.vm.context"]
    assert graph["vmrt.errors"] <= set(graph)


def test_no_import_cycle_spans_folders():
    assert cross_folder_cycles(import_graph()) == []


def test_no_import_runs_up_the_layers():
    assert upward_imports(import_graph()) == []


if __name__ == "__main__":
    graph = import_graph()
    print("cross-folder cycles:", cross_folder_cycles(graph))
    print("upward imports:", upward_imports(graph))
