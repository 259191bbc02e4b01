"""Building stream programs from Python, verified op by op.

    pb = ProgramBuilder("demo", partitioning="min-peak-memory")
    f = pb.func("step", args=[("x", "external", 1024)], results=[("external", 1024)])
    x = f.args[0]
    t = f.splat((0.0, "f32"), "transient", 1024)
    y, = f.dispatch("ex::add", [x, t], [("external", 1024)])
    f.ret(y)
    program = pb.build()

The text parser builds through the same classes, so a program is checked by the
same rules whichever way it was made; errors carry the source location when one
was given.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from vmrt.stream.ir import (Func, Lifetime, Loc, Op, Pattern, Program, ResourceType,
                            enum_member,
                            StreamError, Use, Value, check_pattern)
from vmrt.stream.partition import parse_favor

_NAME_RE = re.compile(r"^[A-Za-z0-9_.$]+$")


def as_lifetime(lifetime: Lifetime | str, loc: Loc | None = None) -> Lifetime:
    return enum_member(Lifetime, lifetime, "lifetime", loc)


def as_type(spec, loc: Loc | None = None) -> ResourceType:
    """ResourceType, or (lifetime, size)."""
    if isinstance(spec, ResourceType):
        rtype = spec
    else:
        lifetime, size = _pair(spec, "resource type", "lifetime, size", loc)
        rtype = ResourceType(as_lifetime(lifetime, loc), size)
    if not isinstance(rtype.size, int) or isinstance(rtype.size, bool) or rtype.size <= 0:
        raise StreamError(f"resource size must be a positive integer, not {rtype.size!r}", loc)
    return rtype


def as_pattern(spec, loc: Loc | None = None) -> Pattern:
    """Pattern, or (value, element type)."""
    if isinstance(spec, Pattern):
        pattern = spec
    else:
        pattern = Pattern(*_pair(spec, "pattern", "value, element type", loc))
    check_pattern(pattern, loc)
    return pattern


def _pair(spec, what: str, expected: str, loc: Loc | None) -> tuple:
    """The two items of `spec`, a `what` given as a pair of `expected`."""
    try:
        first, second = spec
    except (TypeError, ValueError):
        raise StreamError(f"not a {what}: {spec!r} (expected ({expected}))", loc) from None
    return first, second


def _check_name(name: str, what: str, loc: Loc | None) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise StreamError(f"invalid {what} name {name!r} (letters, digits, '_', '.', '$')", loc)


class FuncBuilder:
    """Appends ops to one function, checking each as it comes."""

    def __init__(self, program: "ProgramBuilder", func: Func):
        self._program = program
        self.func = func
        self._names: dict[str, Value] = {}
        #: value -> the op that updated it in place (it may not be used after that).
        self._consumed: dict[Value, Op] = {}
        self._next_name = 0
        self._finished = False
        for value in func.args:
            self._names[value.name] = value

    # -- values ---------------------------------------------------------------------------
    @property
    def args(self) -> list[Value]:
        return self.func.args

    def value(self, name: str) -> Value | None:
        """The value named `name` (without '%'), or None."""
        return self._names.get(name)

    def _fresh_name(self) -> str:
        while str(self._next_name) in self._names:
            self._next_name += 1
        name = str(self._next_name)
        self._next_name += 1
        return name

    def _define(self, name: str | None, rtype: ResourceType, op: Op | None, index: int,
                loc: Loc | None) -> Value:
        if name is None:
            name = self._fresh_name()
        _check_name(name, "value", loc)
        if name in self._names:
            raise StreamError(f"value %{name} is defined twice in @{self.func.name}", loc)
        value = Value(name, rtype, op, index, self.func)
        self._names[name] = value
        return value

    def _check_live(self, value: Value, loc: Loc | None) -> None:
        if not isinstance(value, Value):
            raise StreamError(f"not a stream value: {value!r}", loc)
        if value.func is not self.func:
            raise StreamError(f"value %{value.name} belongs to @{value.func.name}, "
                              f"not @{self.func.name}", loc)
        consumer = self._consumed.get(value)
        if consumer is not None:
            raise StreamError(f"%{value.name} is used after it was updated in place by "
                              f"{consumer.describe()}", loc)

    def _use(self, spec, loc: Loc | None) -> Use:
        """A Use, a Value (the whole resource), or (value, offset, length)."""
        if isinstance(spec, Use):
            use = spec
            if use.loc is None and loc is not None:
                use = Use(use.value, use.offset, use.length, loc)
        elif isinstance(spec, Value):
            use = Use(spec, 0, spec.type.size, loc)
        else:
            try:
                value, offset, length = spec
            except (TypeError, ValueError):
                raise StreamError(f"not an operand: {spec!r} (expected a value or "
                                  f"(value, offset, length))", loc) from None
            if length is None and isinstance(value, Value):
                length = value.type.size - offset
            use = Use(value, offset, length, loc)
        where = use.loc or loc
        self._check_live(use.value, where)
        for what, number in (("offset", use.offset), ("length", use.length)):
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise StreamError(f"range {what} must be a non-negative integer, "
                                  f"not {number!r}", where)
        if use.length == 0:
            raise StreamError(f"empty range of %{use.value.name}", where)
        if use.end > use.value.type.size:
            raise StreamError(f"range [{use.offset} for {use.length}] is outside "
                              f"%{use.value.name} ({use.value.type.size} bytes)", where)
        return use

    # -- ops ------------------------------------------------------------------------------
    def _append(self, op: Op, result_names: Sequence[str | None],
                result_types: Sequence[ResourceType]) -> list[Value]:
        if self._finished:
            raise StreamError(f"@{self.func.name} already returned; no op may follow",
                              op.loc)
        if len(result_names) != len(result_types):
            raise StreamError(f"{op.kind} has {len(result_types)} result(s) but "
                              f"{len(result_names)} name(s) were given", op.loc)
        tied_seen: set[Value] = set()
        for tie in op.ties:
            if tie is None:
                continue
            target = op.operands[tie].value
            if target in tied_seen:
                raise StreamError(f"%{target.name} is updated in place twice by one op",
                                  op.operands[tie].loc or op.loc)
            tied_seen.add(target)
            if target.type.lifetime is Lifetime.CONSTANT:
                raise StreamError(f"%{target.name} is constant and cannot be updated in place",
                                  op.operands[tie].loc or op.loc)
        op.index = len(self.func.ops)
        for index, (name, rtype) in enumerate(zip(result_names, result_types)):
            op.results.append(self._define(name, rtype, op, index, op.loc))
        for value in tied_seen:
            self._consumed[value] = op
        self.func.ops.append(op)
        return op.results

    def splat(self, pattern, lifetime: Lifetime | str, size: int, *, name: str | None = None,
              loc: Loc | None = None) -> Value:
        """A new resource of `size` bytes holding `pattern` repeated."""
        pattern = as_pattern(pattern, loc)
        rtype = as_type((lifetime, size), loc)
        if rtype.size % pattern.byte_width:
            raise StreamError(f"splat of {rtype.size} bytes is not a whole number of "
                              f"{pattern.element_type} elements", loc)
        op = Op("splat", [], [], [None], pattern=pattern, loc=loc)
        return self._append(op, [name], [rtype])[0]

    def fill(self, pattern, target, offset: int = 0, length: int | None = None, *,
             name: str | None = None, loc: Loc | None = None) -> Value:
        """Fills a range of `target` in place; the result is the updated resource."""
        pattern = as_pattern(pattern, loc)
        use = self._use(target if isinstance(target, Use) else (target, offset, length), loc)
        if use.length % pattern.byte_width:
            raise StreamError(f"fill of {use.length} bytes is not a whole number of "
                              f"{pattern.element_type} elements", use.loc or loc)
        op = Op("fill", [use], [], [0], pattern=pattern, loc=loc)
        return self._append(op, [name], [use.value.type])[0]

    def copy(self, source, target, *, source_offset: int = 0, target_offset: int = 0,
             length: int | None = None, name: str | None = None,
             loc: Loc | None = None) -> Value:
        """Copies a range of `source` into `target` in place; returns the updated target."""
        if isinstance(source, Use):
            src = self._use(source, loc)
        else:
            if length is None and isinstance(source, Value):
                length = source.type.size - source_offset
            src = self._use((source, source_offset, length), loc)
        dst = self._use(target if isinstance(target, Use)
                        else (target, target_offset, src.length), loc)
        if src.length != dst.length:
            raise StreamError(f"copy of {src.length} bytes into a range of {dst.length} bytes",
                              dst.loc or loc)
        op = Op("copy", [src, dst], [], [1], loc=loc)
        return self._append(op, [name], [dst.value.type])[0]

    def dispatch(self, callee: str | Sequence[str], operands: Iterable = (),
                 results: Iterable = (), *, names: Sequence[str | None] | None = None,
                 loc: Loc | None = None, result_locs: Sequence[Loc | None] | None = None
                 ) -> list[Value]:
        """A kernel over `operands` (read) producing `results`.

        Each result is a resource type ((lifetime, size) or ResourceType) for a new
        resource, or an operand Value for a result tied to that operand (the kernel
        updates the operand's range in place).
        """
        if isinstance(callee, str):
            parts = tuple(part.lstrip("@") for part in callee.split("::"))
        else:
            parts = tuple(part.lstrip("@") for part in callee)
        if not parts:
            raise StreamError("dispatch needs a kernel symbol", loc)
        for part in parts:
            _check_name(part, "symbol", loc)
        uses = [self._use(spec, loc) for spec in operands]
        results = list(results)
        result_locs = list(result_locs or [None] * len(results))
        ties: list[int | None] = []
        types: list[ResourceType] = []
        for spec, rloc in zip(results, result_locs):
            where = rloc or loc
            if isinstance(spec, Value):
                matches = [i for i, use in enumerate(uses) if use.value is spec]
                if not matches:
                    raise StreamError(f"result tied to %{spec.name}, which is not an operand "
                                      f"of the dispatch", where)
                if len(matches) > 1:
                    raise StreamError(f"result tied to %{spec.name}, which is an operand more "
                                      f"than once (ambiguous)", where)
                ties.append(matches[0])
                types.append(spec.type)
            else:
                ties.append(None)
                types.append(as_type(spec, where))
        names = list(names) if names is not None else [None] * len(results)
        op = Op("dispatch", uses, [], ties, callee=parts, loc=loc)
        return self._append(op, names, types)

    def param_load(self, scope: str, key: str, lifetime: Lifetime | str, size: int, *,
                   name: str | None = None, loc: Loc | None = None) -> Value:
        """A new resource holding the parameter `scope`::`key`."""
        rtype = as_type((lifetime, size), loc)
        op = Op("param.load", [], [], [None], scope=str(scope), keys=[str(key)], loc=loc)
        return self._append(op, [name], [rtype])[0]

    def param_gather(self, scope: str, entries: Iterable, *, name: str | None = None,
                     loc: Loc | None = None) -> Value:
        """Reads parameters `scope`::key into ranges of one target resource, in place.

        entries: (key, target, offset, length) or (key, Use); every entry names the
        same target value and the ranges may not overlap.
        """
        keys: list[str] = []
        uses: list[Use] = []
        for entry in entries:
            if len(entry) == 2:
                key, spec = entry
            else:
                key, *spec = entry
                spec = tuple(spec)
            use = self._use(spec, loc)
            keys.append(str(key))
            uses.append(use)
        if not uses:
            raise StreamError("param.gather needs at least one entry", loc)
        target = uses[0].value
        for use in uses[1:]:
            if use.value is not target:
                raise StreamError(f"param.gather writes %{use.value.name} but its first entry "
                                  f"writes %{target.name}; one gather has one target",
                                  use.loc or loc)
        ordered = sorted(uses, key=lambda u: u.offset)
        for before, after in zip(ordered, ordered[1:]):
            if after.offset < before.end:
                raise StreamError(f"param.gather entries overlap in %{target.name} "
                                  f"([{before.offset} for {before.length}] and "
                                  f"[{after.offset} for {after.length}])", after.loc or loc)
        op = Op("param.gather", uses, [], [0], scope=str(scope), keys=keys, loc=loc)
        return self._append(op, [name], [target.type])[0]

    def ret(self, *values: Value, loc: Loc | None = None,
            locs: Sequence[Loc | None] | None = None) -> None:
        """Ends the function returning `values`."""
        if self._finished:
            raise StreamError(f"@{self.func.name} returns twice", loc)
        locs = list(locs or [None] * len(values))
        func = self.func
        if len(values) != len(func.result_types):
            raise StreamError(f"@{func.name} returns {len(values)} value(s) but its signature "
                              f"declares {len(func.result_types)}", loc)
        for value, declared, vloc in zip(values, func.result_types, locs):
            where = vloc or loc
            self._check_live(value, where)
            if value.type.lifetime is Lifetime.TRANSIENT:
                raise StreamError(f"%{value.name} is transient and cannot escape @{func.name}; "
                                  f"give it another lifetime", where)
            if value.type != declared:
                raise StreamError(f"%{value.name} is {value.type} but @{func.name} declares "
                                  f"{declared}", where)
        func.returns = list(values)
        func.return_loc = loc
        self._finished = True

    def finish(self) -> Func:
        if not self._finished:
            if self.func.result_types:
                raise StreamError(f"@{self.func.name} has no return", self.func.loc)
            self._finished = True
        return self.func


class ProgramBuilder:
    def __init__(self, name: str, *, partitioning: str | None = None,
                 attributes: dict | None = None, loc: Loc | None = None):
        _check_name(name, "program", loc)
        attrs = dict(attributes or {})
        if partitioning is not None:
            attrs["partitioning"] = partitioning
        _check_attributes(attrs, loc)
        self.program = Program(name, [], attrs, loc)
        self._builders: list[FuncBuilder] = []

    def func(self, name: str, args: Iterable = (), results: Iterable = (), *,
             partitioning: str | None = None, attributes: dict | None = None,
             loc: Loc | None = None, arg_locs: Sequence[Loc | None] | None = None
             ) -> FuncBuilder:
        """A new function. args: (name, lifetime, size) or (name, ResourceType)."""
        _check_name(name, "function", loc)
        if any(f.name == name for f in self.program.funcs):
            raise StreamError(f"function @{name} is defined twice", loc)
        attrs = dict(attributes or {})
        if partitioning is not None:
            attrs["partitioning"] = partitioning
        _check_attributes(attrs, loc)
        func = Func(name, [], [as_type(r, loc) for r in results], [], [], attrs, loc)
        args = list(args)
        arg_locs = list(arg_locs or [None] * len(args))
        seen: set[str] = set()
        for index, (spec, aloc) in enumerate(zip(args, arg_locs)):
            where = aloc or loc
            if len(spec) == 2:
                arg_name, rtype = spec
                rtype = as_type(rtype, where)
            else:
                arg_name, lifetime, size = spec
                rtype = as_type((lifetime, size), where)
            _check_name(arg_name, "argument", where)
            if arg_name in seen:
                raise StreamError(f"argument %{arg_name} is declared twice", where)
            seen.add(arg_name)
            if rtype.lifetime is Lifetime.TRANSIENT:
                raise StreamError(f"argument %{arg_name} cannot be transient (transients live "
                                  f"inside one invocation)", where)
            func.args.append(Value(arg_name, rtype, None, index, func))
        self.program.funcs.append(func)
        builder = FuncBuilder(self, func)
        self._builders.append(builder)
        return builder

    def build(self) -> Program:
        for builder in self._builders:
            builder.finish()
        return self.program


def _check_attributes(attrs: dict, loc: Loc | None) -> None:
    for key, value in attrs.items():
        if not isinstance(key, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", key):
            raise StreamError(f"invalid attribute name {key!r}", loc)
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise StreamError(f"attribute '{key}' must be a string or a number, "
                              f"not {value!r}", loc)
    if "partitioning" in attrs:
        parse_favor(attrs["partitioning"], loc)
