"""One function's vmasm as the script compiler writes it: registers, block
labels, hoisted constants, out-of-line traps, and the script location of every
instruction (for the module's debug database)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vmrt.errors import StatusCode
from vmrt.script.types import Type

#: Register-file units a value of each bank takes (i64/f64: an aligned pair).
_SIZES = {"i32": 1, "f32": 1, "i64": 2, "f64": 2}


def register_name(bank: str, index: int) -> str:
    if bank == "ref":
        return f"%r{index}"
    if _SIZES[bank] == 2:
        return f"%i{index}:{index + 1}"
    return f"%i{index}"


@dataclass
class Line:
    """A line of the function body: an instruction (with its script location)
    or a block label (location None)."""

    text: str
    location: tuple[int, int] | None


@dataclass
class FunctionEmitter:
    """Collects one function's body. Registers of locals live for the whole
    function; temporaries (`temp`) go back to a free list at `release_temps`,
    which statements call when they end."""

    location: tuple[int, int]
    body: list[Line] = field(default_factory=list)
    prologue: list[Line] = field(default_factory=list)
    cold: list[Line] = field(default_factory=list)
    next_i32: int = 0
    next_ref: int = 0
    free: dict = field(default_factory=lambda: {1: [], 2: [], "ref": []})
    temps: list = field(default_factory=list)
    constants: dict = field(default_factory=dict)
    traps: dict = field(default_factory=dict)
    labels: int = 0
    terminated: bool = False
    referenced: set = field(default_factory=set)  # labels some branch names
    recycled: set = field(default_factory=set)  # registers handed out more than once
    locals: list = field(default_factory=list)  # (bank, register) of variables

    # -- registers -------------------------------------------------------------------
    def allocate(self, bank: str, *, fresh: bool = False) -> str:
        """A register for a value of `bank` (fresh: by bumping, for arguments)."""
        if bank == "ref":
            pool = self.free["ref"]
            if pool and not fresh:
                self.recycled.add(register_name(bank, pool[-1]))
                return register_name(bank, pool.pop())
            self.next_ref += 1
            return register_name(bank, self.next_ref - 1)
        size = _SIZES[bank]
        pool = self.free[size]
        if pool and not fresh:
            self.recycled.add(register_name(bank, pool[-1]))
            return register_name(bank, pool.pop())
        if size == 2 and self.next_i32 % 2:
            self.free[1].append(self.next_i32)
            self.next_i32 += 1
        self.next_i32 += size
        return register_name(bank, self.next_i32 - size)

    def temp(self, type_: Type) -> str:
        register = self.allocate(type_.bank)
        self.temps.append((type_.bank, register))
        return register

    def release_temps(self) -> None:
        for bank, register in self.temps:
            index = int(register[2:].split(":")[0])
            self.free["ref" if bank == "ref" else _SIZES[bank]].append(index)
        self.temps.clear()

    def variable(self, bank: str, register: str | None = None) -> str:
        """A register for a variable, zero from the function's entry until assigned
        (a variable read before its assignment reads 0, or an empty ref): `register`
        when it is a temporary of this statement no other value used before, else a
        fresh one."""
        for position, (_, held) in enumerate(self.temps):
            if held == register and register not in self.recycled:
                del self.temps[position]
                break
        else:
            register = self.allocate(bank, fresh=True)
        zero = "vm.const.ref.zero" if bank == "ref" else f"vm.const.{bank}.zero"
        self.prologue.append(Line(f"{register} = {zero}", self.location))
        self.locals.append((bank, register))
        return register

    def constant(self, bank: str, value) -> str:
        """A register holding `value`, set once on entry (hoisted out of loops)."""
        key = (bank, repr(value))
        found = self.constants.get(key)
        if found is None:  # fresh: a freed temporary is written after entry
            found = self.allocate(bank, fresh=True)
            if bank == "f64":
                text = f"{found} = vm.const.f64 {_float_text(value)}"
            else:
                text = f"{found} = vm.const.{bank} {int(value)}"
            self.prologue.append(Line(text, self.location))
            self.constants[key] = found
        return found

    # -- code ------------------------------------------------------------------------
    def new_label(self, hint: str) -> str:
        self.labels += 1
        return f"^{hint}{self.labels}"

    def emit(self, text: str, location: tuple[int, int], *, terminator: bool = False) -> None:
        if self.terminated:  # unreachable code after a return, break or continue
            self.body.append(Line(self.new_label("dead") + ":", None))
        self.body.append(Line(text, location))
        self.terminated = terminator

    def place(self, label: str, location: tuple[int, int], *, forward: bool = False) -> None:
        """Starts block `label`, falling into it from the block before. A `forward`
        label (only branches after this point could name it) that no branch named
        starts no block: the code just goes on (no branch, no fuel for a block)."""
        if forward and label not in self.referenced and not self.terminated:
            return
        if not self.terminated:
            self.body.append(Line(f"vm.br {label}", location))
        self.body.append(Line(label + ":", None))
        self.terminated = False

    def jump(self, label: str, location: tuple[int, int]) -> None:
        self.referenced.add(label)
        self.emit(f"vm.br {label}", location, terminator=True)

    def branch(self, condition: str, if_true: str, if_false: str,
               location: tuple[int, int]) -> None:
        self.referenced.update((if_true, if_false))
        self.emit(f"vm.cond_br {condition}, {if_true}, {if_false}", location, terminator=True)

    def trap(self, code: StatusCode, message: str, location: tuple[int, int]) -> str:
        """The label of an out-of-line block failing with `message` at `location`."""
        key = (code, message, location)
        label = self.traps.get(key)
        if label is None:
            label = self.new_label("trap")
            status = self.constant("i32", int(code))
            quoted = message.replace('"', "'")
            self.cold += [Line(label + ":", None),
                          Line(f'vm.fail {status}, "{quoted}"', location)]
            self.traps[key] = label
        return label

    def check(self, condition: str, code: StatusCode, message: str,
              location: tuple[int, int]) -> None:
        """Goes on when `condition` (an i32 register) is nonzero, else traps."""
        go_on = self.new_label("ok")
        self.branch(condition, go_on, self.trap(code, message, location), location)
        self.place(go_on, location)

    def lines(self) -> list[Line]:
        return [Line("^entry:", None)] + self.prologue + self.body + self.cold


def _float_text(value: float) -> str:
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return value.hex()
