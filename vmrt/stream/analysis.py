"""What each op touches, and which pairs of ops must stay ordered.

Storage: every argument and every untied result starts a storage; a tied result
names its operand's storage. An op *accesses* byte ranges of storages:

    splat, param.load        write the whole new storage
    dispatch                 reads every operand range; writes every untied result
                             whole, and the operand range of every tied result
    fill                     writes the target range
    copy                     reads the source range, writes the target range
    param.gather             writes each target range

Two ops have a *hazard* when they access overlapping ranges of one storage and at
least one of them writes (read-after-write, write-after-read, write-after-write;
IREE's ResourceHazardAnalysis with whole-range overlap tests). A hazard forces the
later op into a strictly later wave. An op that uses another's result without a
hazard (disjoint ranges) may share its wave but never runs before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vmrt.stream.ir import Func, Lifetime, Op, Value


@dataclass
class Storage:
    id: int
    name: str           # the first value naming it
    lifetime: Lifetime
    size: int
    #: index of the op creating it, or None for an argument.
    def_op: int | None
    values: list[Value] = field(default_factory=list)

    @property
    def is_transient(self) -> bool:
        return self.lifetime is Lifetime.TRANSIENT


@dataclass(frozen=True)
class Access:
    storage: int
    lo: int
    hi: int
    write: bool


def ranges_overlap(a: Access, b: Access) -> bool:
    return a.storage == b.storage and a.lo < b.hi and b.lo < a.hi


class FuncAnalysis:
    """Storages, accesses, hazards and SSA uses of one function."""

    def __init__(self, func: Func):
        self.func = func
        self.storages: list[Storage] = []
        self.storage_of: dict[Value, int] = {}
        for value in func.args:
            self._new_storage(value, None)
        n = len(func.ops)
        self.accesses: list[list[Access]] = []
        for op in func.ops:
            self.accesses.append(self._op_accesses(op))
        #: per op: later ops that use one of its results (SSA edges).
        self.ssa_users: list[set[int]] = [set() for _ in range(n)]
        for op in func.ops:
            for use in op.operands:
                producer = use.value.op
                if producer is not None:
                    self.ssa_users[producer.index].add(op.index)
        #: per op: later ops with a hazard against it.
        self.hazards: list[set[int]] = [set() for _ in range(n)]
        by_storage: dict[int, list[tuple[int, Access]]] = {}
        for index, accesses in enumerate(self.accesses):
            for access in accesses:
                by_storage.setdefault(access.storage, []).append((index, access))
        for entries in by_storage.values():
            for a_pos, (i, a) in enumerate(entries):
                for j, b in entries[a_pos + 1:]:
                    if i != j and (a.write or b.write) and ranges_overlap(a, b):
                        self.hazards[i].add(j)
        #: per op: every later op it must not run after (SSA users and hazards).
        self.successors: list[set[int]] = [self.ssa_users[i] | self.hazards[i]
                                           for i in range(n)]
        #: first and last op (program order) accessing each storage.
        self.first_access: dict[int, int] = {}
        self.last_access: dict[int, int] = {}
        #: per storage: the ops touching it, in program order.
        self.touching: dict[int, list[int]] = {}
        for index, accesses in enumerate(self.accesses):
            for access in accesses:
                self.first_access.setdefault(access.storage, index)
                self.last_access[access.storage] = index
                ops = self.touching.setdefault(access.storage, [])
                if not ops or ops[-1] != index:
                    ops.append(index)

    # -- storages ---------------------------------------------------------------------------
    def _new_storage(self, value: Value, def_op: int | None) -> int:
        storage = Storage(len(self.storages), value.name, value.type.lifetime,
                          value.type.size, def_op, [value])
        self.storages.append(storage)
        self.storage_of[value] = storage.id
        return storage.id

    def _op_accesses(self, op: Op) -> list[Access]:
        accesses: list[Access] = []
        tied_operands = {tie for tie in op.ties if tie is not None}
        for position, use in enumerate(op.operands):
            storage = self.storage_of[use.value]
            writes = op.kind in ("fill", "param.gather") or (
                op.kind == "copy" and position == 1)
            if writes:
                accesses.append(Access(storage, use.offset, use.end, True))
            else:
                accesses.append(Access(storage, use.offset, use.end, False))
                if position in tied_operands and op.kind == "dispatch":
                    accesses.append(Access(storage, use.offset, use.end, True))
        for result, tie in zip(op.results, op.ties):
            if tie is None:
                storage = self._new_storage(result, op.index)
                accesses.append(Access(storage, 0, result.type.size, True))
            else:
                storage = self.storage_of[op.operands[tie].value]
                self.storage_of[result] = storage
                self.storages[storage].values.append(result)
        return accesses

    @property
    def transients(self) -> list[Storage]:
        return [s for s in self.storages if s.is_transient]

    def has_hazard(self, i: int, j: int) -> bool:
        """Whether ops i < j conflict on some storage range."""
        return j in self.hazards[i]

    # -- transient birth / death (program order) ----------------------------------------------
    def transient_births(self) -> list[list[int]]:
        """Per op: the transient storages it creates."""
        return self._transients_by_op(self.first_access)

    def transient_deaths(self) -> list[list[int]]:
        """Per op: the transient storages it is the last to access."""
        return self._transients_by_op(self.last_access)

    def _transients_by_op(self, op_of_storage: dict[int, int]) -> list[list[int]]:
        """Per op: the transient storages that `op_of_storage` maps to it."""
        by_op: list[list[int]] = [[] for _ in self.func.ops]
        for storage in self.transients:
            if storage.id in op_of_storage:
                by_op[op_of_storage[storage.id]].append(storage.id)
        return by_op
