"""A script module as a whole: its functions' signatures, module constants, host
imports, the vmasm text of everything, assembled into a .vmfb with a debug
database mapping each instruction to its script file:line:col."""

from __future__ import annotations

import ast
import inspect

from vmrt.asm import assemble
from vmrt.errors import ScriptError, VmrtError
from vmrt.format import (
    BytecodeLocationDef, DebugDatabaseDef, FileLineColLocDef, FunctionSourceMapDef,
    read_module, write_module,
)
from vmrt.format.function_body import decode_function_body
from vmrt.script import prelude
from vmrt.script.refusals import constant_refusal, error, refuse
from vmrt.script.statements import FunctionCompiler
from vmrt.script.types import BY_NAME, Type, annotation_type, from_python, result_types

_CCONV_TYPES = {"I": BY_NAME["int"], "F": BY_NAME["float"], "i": BY_NAME["i32"],
                "f": BY_NAME["f32"]}
_ALLOWED_IMPORTS = ("vmrt", "vmrt.script")


class ScriptModule:
    """What every function of one script may refer to (see FunctionCompiler)."""

    def __init__(self, source: str, filename: str, hosts):
        self.filename = filename
        self.functions: dict[str, tuple[tuple[Type, ...], tuple[Type, ...]]] = {}
        self.definitions: dict[str, ast.FunctionDef] = {}
        self.constants: dict[str, object] = {}
        self.hosts = {host.name: host for host in hosts}
        self.host_modules: set[str] = set()
        self.host_names: dict[str, str] = {}
        self.imports: dict[str, tuple[tuple[Type, ...], tuple[Type, ...]]] = {}
        self.helpers: list[str] = []
        self.prelude_names: set[str] = set()
        tree = parse(source, filename)
        for node in tree.body:
            self.top_level(node)
        for node in parse(prelude.SOURCE, "<vmrt.script prelude>").body:
            self.prelude_names.add(node.name)
            self.declare(node, filename="<vmrt.script prelude>")

    # -- the module level --------------------------------------------------------------------
    def top_level(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef):
            return self.declare(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return self.import_statement(node)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            return self.constant(node)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):
            return None  # a docstring
        if isinstance(node, ast.If) and ast.unparse(node.test).replace("'", '"') == \
                '__name__ == "__main__"':
            return None  # what CPython runs of the script, for testing it there
        if isinstance(node, (ast.AugAssign, ast.For, ast.While, ast.If, ast.Expr)):
            raise error(node, self.filename, "statements at module level are not "
                                             "supported; put them in a function")
        raise refuse(node, self.filename)

    def declare(self, node: ast.FunctionDef, filename: str | None = None) -> None:
        where = filename or self.filename
        args = node.args
        if node.decorator_list:
            raise error(node.decorator_list[0], where, "decorators are not supported; "
                                                       "write plain functions")
        extra = args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs
        if extra or args.defaults:
            raise error(node, where, "default, keyword-only, *args and **kwargs parameters "
                                     "are not supported; use plain positional parameters")
        if node.name in self.functions:
            raise error(node, where, f"function '{node.name}' is defined twice")
        params = []
        for arg in args.args:
            found = annotation_type(arg.annotation)
            if not found:
                raise error(arg, where, f"parameter '{arg.arg}' needs a type annotation: "
                                        "int, float, bool, bytearray, list[int], "
                                        "list[float], vmrt.script.i32 or f32")
            params.append(found)
        results = result_types(node.returns)
        if results is False:
            raise error(node.returns, where, f"unknown return type "
                                             f"'{ast.unparse(node.returns)}'; use a script "
                                             "type, a tuple[...] of them, or None")
        self.functions[node.name] = (tuple(params), results)
        self.definitions[node.name] = node

    def constant(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = _literal(node.value)
        if value is None or len(targets) != 1 or not isinstance(targets[0], ast.Name):
            refusal = constant_refusal(getattr(node.value, "value", 0))
            what = refusal[0] if refusal else "module-level values other than number " \
                                              "literals are"
            raise refuse(node.value or node, self.filename, what,
                         "number constants (N = 10) and functions")
        self.constants[targets[0].id] = value

    def import_statement(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _ALLOWED_IMPORTS and alias.asname is None:
                    continue
                self.need_host(node, alias.name)
                self.host_modules.add(alias.asname or alias.name)
                if alias.asname:
                    raise error(node, self.filename, "import ... as is not supported; "
                                                     "import the host module by its name")
            return
        if node.module in _ALLOWED_IMPORTS:  # the width names (i32, f32) of annotations
            return
        self.need_host(node, node.module or "")
        for alias in node.names:
            self.host_names[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def need_host(self, node: ast.AST, name: str) -> None:
        if name not in self.hosts:
            raise refuse(node, self.filename, f"importing '{name}' is",
                         "only the host modules passed to compile(imports=...)" +
                         (f" ({', '.join(sorted(self.hosts))})" if self.hosts else ""))

    # -- host imports -------------------------------------------------------------------------
    def import_signature(self, full_name: str, node: ast.AST):
        """(parameter types, result types) of host function `full_name`, from the
        export's cconv and, for refs and bools, its method's annotations."""
        found = self.imports.get(full_name)
        if found is not None:
            return found
        module_name, _, name = full_name.partition(".")
        host = self.hosts[module_name]
        # A NativeModule class or instance: its exports are declared on the class.
        cconv = host.export_cconv(host, name) if isinstance(host, type) else \
            host.export_cconv(name)
        if cconv is None:
            raise error(node, self.filename, f"host module '{module_name}' has no export "
                                             f"'{name}'")
        arguments, _, results = cconv[1:].partition("_")
        hints = _annotations(host, name)
        params = [self.import_type(node, full_name, c, hints.get(i))
                  for i, c in enumerate(arguments.replace("v", ""))]
        outs = [self.import_type(node, full_name, c, hints.get("return"))
                for c in results.replace("v", "")]
        self.imports[full_name] = (tuple(params), tuple(outs))
        return self.imports[full_name]

    def import_type(self, node: ast.AST, full_name: str, char: str, hint) -> Type:
        declared = from_python(hint) if hint is not None else None
        if declared and declared.cconv == char:
            return declared
        if char in _CCONV_TYPES:
            return _CCONV_TYPES[char]
        raise error(node, self.filename, f"host function {full_name}: cconv '{char}' needs "
                                         "an annotation on the export (bytearray, list[int] "
                                         "or list[float] for refs)")

    def use_helper(self, name: str) -> None:
        if name not in self.helpers:
            self.helpers.append(name)


def parse(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename)
    except SyntaxError as err:
        raise ScriptError(f"invalid syntax: {err.msg}", filename, err.lineno or 0,
                          err.offset or 0) from None


def _literal(node: ast.expr | None):
    """The number a module constant's literal (possibly negated) gives, else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand)
        return None if inner is None or isinstance(inner, bool) else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
        return node.value
    return None


def _annotations(host, name: str) -> dict:
    """Annotations of the host's export method `name`, by parameter position."""
    method = getattr(host if isinstance(host, type) else type(host), name, None)
    if method is None:
        return {}
    try:
        signature = inspect.signature(method, eval_str=True)
    except (TypeError, ValueError, NameError):
        return {}
    hints, position = {}, 0
    for parameter in list(signature.parameters.values())[1:]:
        if parameter.annotation is not inspect.Parameter.empty:
            hints[position] = parameter.annotation
        position += 1
    if signature.return_annotation is not inspect.Signature.empty:
        hints["return"] = signature.return_annotation
    return hints


# -- the whole module -------------------------------------------------------------------------


def compile_module(source: str, module: str, filename: str, hosts) -> bytes:
    script = ScriptModule(source, filename, hosts)
    compiled = []  # (name, header, lines, exported)
    for name, node in script.definitions.items():
        if name not in script.prelude_names:
            compiled.append((name,) + FunctionCompiler(script, node).compile() +
                            (not name.startswith("_"), True))
    done = set()
    while len(done) < len(script.helpers):  # helpers may need further helpers
        for name in [h for h in script.helpers if h not in done]:
            done.add(name)
            compiled.append((name,) + FunctionCompiler(script, script.definitions[name],
                                                       in_prelude=True).compile() +
                            (False, False))
    text = module_text(script, module, compiled)
    data = assemble(text, filename=f"<vmasm of {filename}>")
    return with_debug_database(data, filename, compiled)


def module_text(script: ScriptModule, module: str, compiled) -> str:
    out = [f"vm.module @{module} version 1"]
    for full_name, (params, results) in script.imports.items():
        cconv = "0" + ("".join(t.cconv for t in params) or "v") + "_" + \
            ("".join(t.cconv for t in results) or "v")
        out.append(f'vm.import @{full_name} cconv "{cconv}"')
    for name, header, lines, exported, _ in compiled:
        if exported:
            out.append(f"vm.export @{name}")
        out.append(header)
        out += [("  " if line.location else "") + line.text for line in lines]
        out.append("}")
    return "\n".join(out) + "\n"


def with_debug_database(data: bytes, filename: str, compiled) -> bytes:
    """`data` with a debug database: each instruction's script file:line:col, as
    iree-compile records MLIR locations (one source map per function)."""
    definition = read_module(data)
    table, index, maps = [], {}, []
    for ordinal, (name, _, lines, _, mapped) in enumerate(compiled):
        try:
            decoded = [d for d in decode_function_body(definition, ordinal)
                       if d.instruction.kind != "marker"]
        except VmrtError:
            decoded = []
        where = [line.location for line in lines if line.location is not None]
        entries = []
        if mapped and len(decoded) == len(where):
            for instruction, location in zip(decoded, where):
                if location not in index:
                    index[location] = len(table)
                    table.append(FileLineColLocDef(filename=filename, line=location[0],
                                                   column=location[1]))
                entries.append(BytecodeLocationDef(instruction.pc, index[location]))
        maps.append(FunctionSourceMapDef(local_name=name, locations=entries))
    definition.debug_database = DebugDatabaseDef(location_table=table, functions=maps)
    definition.archive = None
    return write_module(definition)
