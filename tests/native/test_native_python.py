"""Python native modules: declaration (explicit and derived cconvs), result
checking, exceptions, per-context state, imports and dependencies, custom ref
types, and yieldable (generator) exports driven by vm.call.yieldable."""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Generator, Optional

import numpy as np
import pytest

import vmrt
from vmrt.errors import StatusCode, VmrtError
from vmrt.native import (
    Dependency, Import, NativeModule, NativeState, Ref, RefObject, Span, c_export, export,
    f32, f64, i32, i64, ref_type,
)
from vmrt.native import cmodule
from vmrt.vm.buffer import VMBuffer

from native_helpers import assemble


# -- the README shape ---------------------------------------------------------------------------------
APP = """
vm.module @app version 1
vm.type i32
vm.import @host.add cconv "0ii_i"
vm.export @twice_add
vm.func @twice_add(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i2 = vm.call @host.add(%i0, %i1)
  %i2 = vm.call @host.add(%i2, %i2)
  vm.return %i2
}
"""


class Host(vmrt.NativeModule, name="host", version=1):
    @vmrt.export("0ii_i")
    def add(self, a, b):
        return a + b


def test_readme_shape(workdir):
    ctx = vmrt.Context(vmrt.Instance(), modules=[Host(), vmrt.load_module(assemble(APP, workdir))])
    assert ctx.function("app.twice_add")(2, 3) == 10
    assert ctx.function("host.add")(2, 3) == 5
    assert Host().export_cconv("add") == "0ii_i"
    assert Host.name == "host" and Host.version == 1


# -- cconvs derived from annotations ------------------------------------------------------------------
class Derived(NativeModule, name="derived", version=1):
    @export
    def scalars(self, a: i32, b: i64, c: f32, d: f64) -> tuple[f64, f32, i64, i32]:
        return d, c, b, a

    @export()
    def plain(self, a: int, b: float) -> int:
        return a

    @export
    def refs(self, a: Ref, b: VMBuffer, c: Optional[VMBuffer]) -> VMBuffer | None:
        return a

    @export
    def spans(self, x: i32, items: Span[i32, Ref], more: list[tuple[i64, f64]],
              plain: list[i32]) -> None:
        pass

    @export
    def nothing(self) -> None:
        pass

    @export
    def stepping(self, n: i32) -> Generator[None, None, i64]:
        yield
        return n

    @export(state=True)
    def with_state(self, state, x: i32) -> i32:
        return x

    @export(name="renamed.export")
    def renamed(self, x: i32) -> i32:
        return x


@pytest.mark.parametrize("name,cconv", [
    ("scalars", "0iIfF_FfIi"),
    ("plain", "0if_i"),
    ("refs", "0rrr_r"),
    ("spans", "0iCirDCIFDCiD_v"),
    ("nothing", "0v_v"),
    ("stepping", "0i_I"),
    ("with_state", "0i_i"),
    ("renamed.export", "0i_i"),
])
def test_derived_cconv(name, cconv):
    assert Derived().export_cconv(name) == cconv


def test_missing_annotation_names_module_and_function():
    with pytest.raises(vmrt.VMError) as info:
        class Missing(NativeModule, name="missing", version=1):
            @export
            def f(self, x) -> i32:
                return x
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert "'missing'" in str(info.value) and "'f'" in str(info.value)
    assert "'x'" in str(info.value)


@pytest.mark.parametrize("cconv", [
    "", "1i_i", "0ii", "0i_i_i", "0x_i", "0i_x", "0CiD", "0C_i", "0Ci_i", "0D_i",
    "0CCiDD_i", "0CvD_i", "0i_CiD", 5,
])
def test_bad_cconv_names_module_function_and_cconv(cconv):
    with pytest.raises(vmrt.VMError) as info:
        class Bad(NativeModule, name="badmod", version=1):
            @export(cconv)
            def fn(self, *args):
                return 0
    text = str(info.value)
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert "'badmod'" in text and "'fn'" in text and repr(cconv) in text


def test_bad_cconv_of_a_c_export():
    if cmodule.lib is None:
        pytest.skip("vmrt._cnative is not built")
    from vmrt.native.example import example_class

    address = example_class()._exports["add_1"].c_export.address
    with pytest.raises(vmrt.VMError) as info:
        class BadC(NativeModule, name="badc", version=1):
            add_1 = c_export("0i_q", address)
    assert "'badc'" in str(info.value) and "'add_1'" in str(info.value)
    assert "'0i_q'" in str(info.value)


def test_method_arity_must_match_the_cconv():
    with pytest.raises(vmrt.VMError) as info:
        class Arity(NativeModule, name="arity", version=1):
            @export("0ii_i")
            def f(self, a):
                return a
    assert "'arity'" in str(info.value) and "'f'" in str(info.value)
    assert "'0ii_i'" in str(info.value)


# -- results are checked on the way out ---------------------------------------------------------------
CALLER = """
vm.module @caller version 1
vm.type i32
vm.type i64
vm.type f32
vm.type !vm.buffer
vm.import @ret.i cconv "0i_i"
vm.import @ret.I cconv "0i_I"
vm.import @ret.f cconv "0i_f"
vm.import @ret.r cconv "0i_r"
vm.import @ret.v cconv "0i_v"
vm.import @ret.ii cconv "0i_ii"
vm.export @call_i
vm.func @call_i(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.call @ret.i(%i0)
  vm.return %i1
}
vm.export @call_I
vm.func @call_I(%i0: i32) -> (i64) {
^bb0:
  %i2:3 = vm.call @ret.I(%i0)
  vm.return %i2:3
}
vm.export @call_f
vm.func @call_f(%i0: i32) -> (f32) {
^bb0:
  %i1 = vm.call @ret.f(%i0)
  vm.return %i1
}
vm.export @call_r
vm.func @call_r(%i0: i32) -> (!vm.buffer) {
^bb0:
  %r0 = vm.call @ret.r(%i0)
  vm.return %r0
}
vm.export @call_v
vm.func @call_v(%i0: i32) -> () {
^bb0:
  vm.call @ret.v(%i0)
  vm.return
}
vm.export @call_ii
vm.func @call_ii(%i0: i32) -> (i32, i32) {
^bb0:
  %i1, %i2 = vm.call @ret.ii(%i0)
  vm.return %i1, %i2
}
"""

_BUFFER = VMBuffer.from_bytes(b"ok")


class ValueError_(Exception):
    pass


#: For each result kind: values by selector; exceptions by selector >= 100.
RETURNS = {
    "i": [7, True, np.int32(-5), (9,), "x", 1.5, 1 << 31, None, (1, 2), -(1 << 31) - 1],
    "I": [1 << 40, np.int64(-3), "x", 1.0, 1 << 63, None],
    "f": [0.1, 2, np.float32(0.5), "x", None, _BUFFER],
    "r": [_BUFFER, None, 5, "buffer", (_BUFFER, _BUFFER)],
    "v": [None, 5, (1,)],
    "ii": [(1, 2), [3, 4], 3, (1,), (1, "a"), (1, 2, 3), None],
}
GOOD = {
    "i": {0: 7, 1: 1, 2: -5, 3: 9},
    "I": {0: 1 << 40, 1: -3},
    "f": {0: np.float32(0.1).item(), 1: 2.0, 2: 0.5},
    "r": {0: _BUFFER, 1: None},
    "v": {0: None},
    "ii": {0: (1, 2), 1: (3, 4)},
}


def _returner(kind):
    def fn(self, selector):
        if selector == 100:
            raise RuntimeError("host failure")
        if selector == 101:
            raise VmrtError("not here", StatusCode.NOT_FOUND)
        if selector == 102:
            raise vmrt.VMError("already a vm error", StatusCode.ABORTED)
        return RETURNS[kind][selector]
    return export(f"0i_{kind}", name=kind)(fn)


class Ret(NativeModule, name="ret", version=1):
    i = _returner("i")
    I = _returner("I")
    f = _returner("f")
    r = _returner("r")
    v = _returner("v")
    ii = _returner("ii")


@pytest.fixture(scope="module")
def caller(tmp_path_factory):
    module = vmrt.load_module(assemble(CALLER, tmp_path_factory.mktemp("caller")))
    ctx = vmrt.Context(vmrt.Instance(), modules=[Ret(), module])
    yield ctx
    ctx.close()


@pytest.mark.parametrize("kind,selector", [(k, s) for k, values in RETURNS.items()
                                           for s in range(len(values))])
def test_results_checked(caller, kind, selector):
    fn = caller.function(f"caller.call_{kind}")
    good = GOOD[kind]
    if selector in good:
        got = fn(selector)
        if kind == "r":
            assert got is good[selector]
        else:
            assert got == good[selector]
        return
    with pytest.raises(vmrt.VMError) as info:
        fn(selector)
    error = info.value
    assert error.code == StatusCode.INVALID_ARGUMENT
    assert f"ret.{kind} (cconv '0i_{kind}')" in str(error)
    assert error.stack and error.stack[0].startswith(f"caller.call_{kind}")
    # The context stays usable.
    assert caller.function("caller.call_i")(0) == 7


@pytest.mark.parametrize("selector,code,text", [
    (100, StatusCode.INTERNAL, "ret.i (cconv '0i_i') raised RuntimeError: host failure"),
    (101, StatusCode.NOT_FOUND, "ret.i (cconv '0i_i'): not here"),
    (102, StatusCode.ABORTED, "already a vm error"),
])
def test_exceptions_become_vm_errors(caller, selector, code, text):
    with pytest.raises(vmrt.VMError) as info:
        caller.function("caller.call_i")(selector)
    error = info.value
    assert error.code == code
    assert text in str(error)
    assert error.stack and error.stack[0].startswith("caller.call_i")
    if selector == 102:
        assert "in native export ret.i (cconv '0i_i')" in str(error)
    assert caller.function("caller.call_i")(0) == 7


def test_f32_results_are_rounded(caller):
    assert caller.function("caller.call_f")(0) == float(np.float32(0.1))


# -- per-context state ---------------------------------------------------------------------------------
class Counting(NativeModule, name="counting", version=1):
    created = []

    def create_state(self, context):
        state = {"context": context, "count": 0, "released": False}
        Counting.created.append(state)
        return state

    def release_state(self, state):
        state["released"] = True

    @export("0v_i", state=True)
    def next(self, state):
        state["count"] += 1
        return state["count"]


def test_state_created_per_context_and_released():
    Counting.created.clear()
    module = Counting()
    a = vmrt.Context(vmrt.Instance(), modules=[module])
    b = vmrt.Context(vmrt.Instance(), modules=[module])
    assert [s["context"] for s in Counting.created] == [a, b]
    na, nb = a.function("counting.next"), b.function("counting.next")
    assert [na(), na(), nb(), na()] == [1, 2, 1, 3]
    a.close()
    assert Counting.created[0]["released"] and not Counting.created[1]["released"]
    b.close()
    assert Counting.created[1]["released"]


def test_state_failure_fails_registration():
    class Broken(NativeModule, name="broken", version=1):
        def create_state(self, context):
            raise RuntimeError("no state today")

    with pytest.raises(vmrt.VMError) as info:
        vmrt.Context(vmrt.Instance(), modules=[Broken()])
    assert info.value.code == StatusCode.INTERNAL
    assert "broken" in str(info.value) and "no state today" in str(info.value)


# -- imports and dependencies -----------------------------------------------------------------------------
LIB = """
vm.module @natlib version 3
vm.type i32
vm.export @double
vm.func @double(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.add.i32 %i0, %i0
  vm.return %i1
}
"""

TOP = """
vm.module @top version 1
vm.type i32
vm.import @user.quad cconv "0i_i"
vm.export @octo
vm.func @octo(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.call @user.quad(%i0)
  %i1 = vm.add.i32 %i1, %i1
  vm.return %i1
}
"""


class User(NativeModule, name="user", version=1,
           imports=[Import("natlib.double", "0i_i"),
                    Import("host.add", "0ii_i", optional=True),
                    Import("nowhere.fn", "0i_i", optional=True)],
           dependencies=[Dependency("natlib", 2)]):
    @export("0i_i", state=True)
    def quad(self, state, x):
        double = state.imports["natlib.double"]
        return double(double(x))

    @export("0v_i", state=True)
    def resolved(self, state):
        return sum(1 << k for k, name in enumerate(["natlib.double", "host.add", "nowhere.fn"])
                   if state.imports.get(name) is not None)


def test_imports_resolve_and_call(workdir):
    lib = vmrt.load_module(assemble(LIB, workdir))
    top = vmrt.load_module(assemble(TOP, workdir))
    ctx = vmrt.Context(vmrt.Instance(), modules=[lib, User(), top])
    assert ctx.function("user.quad")(3) == 12
    assert ctx.function("top.octo")(3) == 24
    assert ctx.function("user.resolved")() == 1
    ctx2 = vmrt.Context(vmrt.Instance(), modules=[lib, Host(), User()])
    assert ctx2.function("user.resolved")() == 3
    assert User().imports()[1].optional


def test_missing_required_import(workdir):
    class Needs(NativeModule, name="needs", version=1,
                imports=[Import("natlib.triple", "0i_i")]):
        pass

    lib = vmrt.load_module(assemble(LIB, workdir))
    with pytest.raises(vmrt.VMError) as info:
        vmrt.Context(vmrt.Instance(), modules=[lib, Needs()])
    assert info.value.code == StatusCode.NOT_FOUND
    assert "natlib.triple" in str(info.value)


def test_dependencies(workdir):
    lib = vmrt.load_module(assemble(LIB, workdir))
    with pytest.raises(vmrt.VMError) as info:
        vmrt.Context(vmrt.Instance(), modules=[User()])
    assert info.value.code == StatusCode.NOT_FOUND

    class Newer(NativeModule, name="newer", version=1,
                dependencies=[Dependency("natlib", 4)]):
        pass

    with pytest.raises(vmrt.VMError) as info:
        vmrt.Context(vmrt.Instance(), modules=[lib, Newer()])
    assert info.value.code == StatusCode.FAILED_PRECONDITION

    class Relaxed(NativeModule, name="relaxed", version=1,
                  dependencies=[Dependency("absent", 1, optional=True)]):
        @export("0v_i")
        def one(self):
            return 1

    assert vmrt.Context(vmrt.Instance(), modules=[Relaxed()]).function("relaxed.one")() == 1


def test_bad_import_cconv():
    with pytest.raises(vmrt.VMError) as info:
        class BadImport(NativeModule, name="badimport", version=1,
                        imports=[Import("a.b", "0i_z")]):
            pass
    assert "'badimport'" in str(info.value) and "a.b" in str(info.value)


# -- custom ref types ---------------------------------------------------------------------------------------
@ref_type("!vmrt_test.counter")
class Counter(RefObject):
    __slots__ = ("value", "__weakref__")
    released = 0

    def __init__(self, value):
        self.value = value

    def on_release(self):
        Counter.released += 1


class Counters(NativeModule, name="counters", version=1):
    @export("0i_r")
    def make(self, value):
        return Counter(value)

    @export("0r_i")
    def read(self, counter):
        return counter.value

    @export("0r_v")
    def bump(self, counter):
        counter.value += 1


COUNTERS = """
vm.module @keeper version 1
vm.type i32
vm.type !vmrt_test.counter
vm.type !vm.list<!vmrt_test.counter>
vm.import @counters.make cconv "0i_r"
vm.import @counters.read cconv "0r_i"
vm.import @counters.bump cconv "0r_v"

// Makes a counter, keeps it in global .refs[0] and in a list, bumps it twice.
vm.export @keep
vm.func @keep(%i0: i32) -> (i32) {
^bb0:
  %r0 = vm.call @counters.make(%i0)
  vm.global.store.ref %r0, .refs[0] : !vmrt_test.counter
  %i1 = vm.const.i32 1
  %r1 = vm.list.alloc %i1 : !vm.list<!vmrt_test.counter>
  vm.list.resize %r1, %i1
  %i2 = vm.const.i32.zero
  vm.list.set.ref %r1, %i2, %r0
  vm.call @counters.bump(%r0)
  %r2 = vm.list.get.ref %r1, %i2 : !vmrt_test.counter
  vm.call @counters.bump(%r2)
  %i3 = vm.call @counters.read(%R2)
  vm.return %i3
}

vm.export @stored
vm.func @stored() -> (!vmrt_test.counter) {
^bb0:
  %r0 = vm.global.load.ref .refs[0] : !vmrt_test.counter
  vm.return %r0
}

vm.export @forget
vm.func @forget() -> () {
^bb0:
  %r0 = vm.const.ref.zero
  vm.global.store.ref %r0, .refs[0] : !vmrt_test.counter
  vm.return
}
"""


def test_custom_ref_type_in_globals_and_lists(workdir):
    module = vmrt.load_module(assemble(COUNTERS, workdir))
    assert module.type_defs[1].ref_type is Counter.ref_type
    gc.collect()
    released = Counter.released
    ctx = vmrt.Context(vmrt.Instance(), modules=[Counters(), module])
    assert ctx.function("keeper.keep")(40) == 42
    stored = ctx.function("keeper.stored")()
    assert isinstance(stored, Counter) and stored.value == 42
    probe = weakref.ref(stored)
    base = sys.getrefcount(stored)
    for _ in range(100):
        ctx.function("keeper.stored")()
    assert sys.getrefcount(stored) == base
    del stored
    assert probe() is not None           # the global still holds it
    ctx.function("keeper.forget")()
    assert probe() is None                # released exactly when the last ref went
    assert Counter.released == released + 1
    ctx.close()


def test_custom_ref_through_c_export():
    if cmodule.lib is None:
        pytest.skip("vmrt._cnative is not built")
    from vmrt.native.example import example_module

    ctx = vmrt.Context(vmrt.Instance(), modules=[example_module()])
    counter = Counter(1)
    base = sys.getrefcount(counter)
    held = cmodule.held_ref_count()
    assert ctx.function("cexample.ref_echo")(counter) is counter
    assert ctx.function("cexample.ref_swap")(counter, None) == (None, counter)
    with pytest.raises(vmrt.VMError) as info:
        ctx.function("cexample.buffer_sum")(counter)
    assert "not a vm.buffer" in str(info.value)
    del info  # its traceback holds the call's frames
    assert sys.getrefcount(counter) == base
    assert cmodule.held_ref_count() == held
    ctx.close()


# -- yieldable exports ------------------------------------------------------------------------------------------
YIELDING = """
vm.module @ycall version 1
vm.type i32
vm.import @gen.steps cconv "0ii_i"
vm.import @gen.vsum cconv "0CiDi_i"
vm.import @gen.fails_after cconv "0i_i"
vm.import @gen.bad_result cconv "0i_i"

vm.export @run
vm.func @run(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  vm.call.yieldable @gen.steps(%i0, %i1) -> ^bb1(%i2)
^bb1:
  vm.return %i2
}

vm.export @run_twice
vm.func @run_twice(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  vm.call.yieldable @gen.steps(%i0, %i1) -> ^bb1(%i2)
^bb1:
  vm.call.yieldable @gen.steps(%i2, %i1) -> ^bb2(%i3)
^bb2:
  vm.return %i3
}

vm.export @run_plain
vm.func @run_plain(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i2 = vm.call @gen.steps(%i0, %i1)
  vm.return %i2
}

vm.export @run_vsum
vm.func @run_vsum(%i0: i32, %i1: i32, %i2: i32) -> (i32) {
^bb0:
  vm.call.variadic.yieldable @gen.vsum segments[2, 1](%i0, %i1, %i2) -> ^bb1(%i3)
^bb1:
  vm.return %i3
}

vm.export @run_fail
vm.func @run_fail(%i0: i32) -> (i32) {
^bb0:
  vm.call.yieldable @gen.fails_after(%i0) -> ^bb1(%i1)
^bb1:
  vm.return %i1
}

vm.export @run_bad
vm.func @run_bad(%i0: i32) -> (i32) {
^bb0:
  vm.call.yieldable @gen.bad_result(%i0) -> ^bb1(%i1)
^bb1:
  vm.return %i1
}
"""


class Gen(NativeModule, name="gen", version=1):
    def create_state(self, context):
        state = NativeState(context)
        state.log = []
        return state

    @export("0ii_i", state=True)
    def steps(self, state, base, count):
        for k in range(count):
            state.log.append((base, k))
            yield
        return base + count

    @export("0CiDi_i")
    def vsum(self, values, count):
        for _ in range(count):
            yield
        return sum(v for (v,) in values) + count

    @export("0i_i")
    def fails_after(self, count):
        for _ in range(count):
            yield
        raise RuntimeError(f"failed after {count} yields")

    @export("0i_i")
    def bad_result(self, count):
        for _ in range(count):
            yield
        return "not an int"


@pytest.fixture
def yctx(workdir):
    module = vmrt.load_module(assemble(YIELDING, workdir))
    ctx = vmrt.Context(vmrt.Instance(), modules=[Gen(), module])
    yield ctx
    ctx.close()


def test_each_yield_suspends_the_vm_stack(yctx):
    invocation = yctx.function("ycall.run").invoke_async(10, 3)
    steps = 0
    while not invocation.resume():
        steps += 1
    assert invocation.result == 13 and steps == 3 == invocation.yields


def test_yieldable_invocations_interleave(yctx):
    log = yctx.module("gen").state.log
    a = yctx.function("ycall.run_twice").invoke_async(100, 2)
    b = yctx.function("ycall.run").invoke_async(200, 3)
    order = []
    while not (a.done and b.done):
        for name, inv in (("a", a), ("b", b)):
            if not inv.done:
                inv.resume()
                order.append(name)
    assert a.result == 104 and b.result == 203
    # Each resume runs exactly one step of its own invocation.
    assert log == [(100, 0), (200, 0), (100, 1), (200, 1), (102, 0), (200, 2), (102, 1)]
    assert a.yields == 4 and b.yields == 3


def test_plain_call_site_runs_a_generator_export_to_completion(yctx):
    assert yctx.function("ycall.run_plain")(5, 4) == 9
    invocation = yctx.function("ycall.run_plain").invoke_async(5, 4)
    assert invocation.resume() and invocation.result == 9


def test_variadic_yieldable(yctx):
    invocation = yctx.function("ycall.run_vsum").invoke_async(10, 20, 2)
    assert invocation.wait() == 32 and invocation.yields == 2
    assert yctx.function("ycall.run_vsum")(1, 2, 0) == 3


def test_exception_after_yields(yctx):
    invocation = yctx.function("ycall.run_fail").invoke_async(2)
    assert not invocation.resume() and not invocation.resume()
    with pytest.raises(vmrt.VMError) as info:
        invocation.resume()
    assert info.value.code == StatusCode.INTERNAL
    assert "gen.fails_after (cconv '0i_i') raised RuntimeError: failed after 2 yields" \
        in str(info.value)
    assert info.value.stack and info.value.stack[0].startswith("ycall.run_fail")
    assert yctx.function("ycall.run")(1, 1) == 2


def test_bad_result_after_yields(yctx):
    with pytest.raises(vmrt.VMError) as info:
        yctx.function("ycall.run_bad")(3)
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert "gen.bad_result (cconv '0i_i')" in str(info.value)
    assert yctx.function("ycall.run")(1, 1) == 2


def test_generator_export_called_from_host(yctx):
    assert yctx.function("gen.steps")(7, 2) == 9
    invocation = yctx.function("gen.steps").invoke_async(7, 2)
    assert invocation.wait() == 9 and invocation.yields == 2
