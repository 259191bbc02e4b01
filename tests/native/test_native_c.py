"""C native modules: the struct layout against C's, the C Caller (fast path)
against the generic (Python twin) marshalling for many scalar cconvs, a module
compiled here with cffi against vmrt/native/include/vmrt_native.h (descriptor,
c_export beside Python exports, module pointer, state failures, GIL release),
and bad C behaviour."""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import threading
import time

import cffi
import gc

import pytest
from hypothesis import given, settings, strategies as st

import vmrt
from vmrt.errors import StatusCode
from vmrt.native import (
    NativeModule, RefObject, c_export, cmodule, export, get_include, load_c_module, ref_type,
)
from vmrt.native.signature import parse

from native_helpers import f32

pytestmark = pytest.mark.skipif(cmodule.lib is None, reason="vmrt._cnative is not built")

#: Milliseconds no wait here comes near unless it would never end.
HANG_MS = 60_000
C_TYPES = {"i": "int32_t", "I": "int64_t", "f": "float", "F": "double", "r": "vmrt_ref_t"}


# -- layout: our struct format against the C compiler's rules (cffi computes C layout) -----------------
def _c_layout(fields: str):
    ffi = cffi.FFI()
    ffi.cdef("typedef struct { void* ptr; uintptr_t type; } vmrt_ref_t;")
    body = " ".join(f"{C_TYPES[t]} m{k};" for k, t in enumerate(fields)) or "int unused;"
    ffi.cdef(f"typedef struct {{ {body} }} s_t;")
    offsets = [ffi.offsetof("s_t", f"m{k}") for k in range(len(fields))]
    return ffi.sizeof("s_t"), offsets


def _our_offsets(layout, fields: str):
    """Byte offsets of each field from the struct format (codes and pads in order)."""
    import re

    offsets = []
    position = 0
    for count, code in re.findall(r"(\d*)([a-zA-Z])", layout.struct.format[1:]):
        count = int(count or 1)
        if code == "x":
            position += count
            continue
        for _ in range(count):
            offsets.append(position)
            position += {"i": 4, "f": 4, "q": 8, "d": 8, "Q": 8, "I": 4}[code]
    # Refs are two words: keep the first of each pair.
    result, k = [], 0
    for t in fields:
        result.append(offsets[k])
        k += 2 if t == "r" else 1
    return result


@settings(max_examples=200, deadline=None)
@given(fields=st.text(alphabet="iIfFr", max_size=8))
def test_fixed_layout_is_the_c_struct(fields):
    layout = parse(f"0{fields or 'v'}_v").arguments_layout()
    size, offsets = _c_layout(fields)
    assert layout.size == size
    assert _our_offsets(layout, fields) == offsets


@settings(max_examples=150, deadline=None)
@given(before=st.text(alphabet="iIfFr", max_size=4), members=st.text(alphabet="iIfFr",
       min_size=1, max_size=4), count=st.integers(0, 3))
def test_span_layout_is_a_flexible_array_of_c_structs(before, members, count):
    ffi = cffi.FFI()
    ffi.cdef("typedef struct { void* ptr; uintptr_t type; } vmrt_ref_t;")
    element = " ".join(f"{C_TYPES[t]} e{k};" for k, t in enumerate(members))
    ffi.cdef(f"typedef struct {{ {element} }} e_t;")
    head = " ".join(f"{C_TYPES[t]} m{k};" for k, t in enumerate(before))
    ffi.cdef(f"typedef struct {{ {head} int32_t count; e_t items[]; }} s_t;")
    layout = parse(f"0{before}C{members}D_v").arguments_layout((count,))
    items = ffi.offsetof("s_t", "items")
    stride = ffi.sizeof("e_t")
    if count:
        # Upstream's count is followed by elements aligned to their struct; the
        # struct is padded to its largest alignment.
        end = items + stride * count
        alignment = max(ffi.alignof("e_t"), ffi.alignof("s_t"))
        assert layout.size == end + (-end % alignment)
    else:
        assert layout.size >= ffi.offsetof("s_t", "count") + 4


# -- a module compiled here ---------------------------------------------------------------------------
def _scalar_signatures():
    """(arguments, results) of the scalar cconvs the compiled test module exports."""
    argument_sets = ["v"]
    for n in (1, 2):
        argument_sets += ["".join(p) for p in itertools.product("iIfF", repeat=n)]
    argument_sets += ["".join(p) for p in itertools.product("iI", repeat=3)]
    argument_sets += ["iiii", "fIiFfIiF"]
    result_sets = ["v", "i", "I", "f", "F", "iF", "Ifi"]
    return [(a, r) for a in argument_sets for r in result_sets]


def _test_module_source() -> str:
    lines = ['#include <unistd.h>', '#include "vmrt_native.h"', ""]
    exports = []
    for arguments, result in _scalar_signatures():
        name = f"s_{arguments}_{result}"
        args = "" if arguments == "v" else arguments
        results = "" if result == "v" else result
        fields = " ".join(f"{C_TYPES[t]} a{k};" for k, t in enumerate(args)) or "int unused;"
        rets = " ".join(f"{C_TYPES[t]} r{k};" for k, t in enumerate(results)) or "int unused;"
        lines.append(f"typedef struct {{ {fields} }} {name}_args_t;")
        lines.append(f"typedef struct {{ {rets} }} {name}_rets_t;")
        lines.append(f"static vmrt_status_t {name}(void* stack, void* module, void* state, "
                     f"void* args_, void* rets_) {{")
        lines.append(f"  {name}_args_t* args = ({name}_args_t*)args_;")
        lines.append(f"  {name}_rets_t* rets = ({name}_rets_t*)rets_;")
        lines.append("  (void)args; (void)rets; (void)module; (void)state;")
        lines.append("  double acc = 0;")
        for k in range(len(args)):
            lines.append(f"  acc += {k + 1} * (double)args->a{k};")
        if args:
            lines.append("  if (args->a0 == -7) return vmrt_make_status((vmrt_stack_t*)stack, "
                         f'VMRT_DATA_LOSS, "bad %s", "{name}");')
            lines.append("  if (args->a0 == -9) return VMRT_ABORTED;")
        for k, t in enumerate(results):
            lines.append(f"  rets->r{k} = ({C_TYPES[t]})(acc + {k});")
        lines.append("  return VMRT_OK;")
        lines.append("}")
        exports.append(f'  {{"{name}", "0{arguments}_{result}", {name}}},')
    lines += [
        "static int32_t the_module_value = 1234;",
        "VMRT_EXPORT(t_module_value, void, v, i) {",
        "  rets->i0 = *(int32_t*)module;",
        "  return VMRT_OK;",
        "}",
        "VMRT_EXPORT(t_sleep_ms, void, i, v) {",
        "  usleep((useconds_t)args->i0 * 1000);",
        "  return VMRT_OK;",
        "}",
        # meet(ms): says it has started, then waits up to ms for release() from
        # another thread; 1 if it came (that thread ran Python meanwhile), else 0.
        "static int t_meet_started, t_meet_released;",
        "VMRT_EXPORT(t_meet, void, i, i) {",
        "  __atomic_store_n(&t_meet_started, 1, __ATOMIC_SEQ_CST);",
        "  rets->i0 = 0;",
        "  for (int32_t waited = 0; waited < args->i0 && !rets->i0; ++waited) {",
        "    usleep(1000);",
        "    rets->i0 = __atomic_load_n(&t_meet_released, __ATOMIC_SEQ_CST);",
        "  }",
        "  return VMRT_OK;",
        "}",
        "int t_meet_has_started(void) {",
        "  return __atomic_load_n(&t_meet_started, __ATOMIC_SEQ_CST);",
        "}",
        "void t_meet_release(void) { __atomic_store_n(&t_meet_released, 1, __ATOMIC_SEQ_CST); }",
        "VMRT_EXPORT(t_leak_arg, void, r, v) {",
        "  vmrt_ref_t* keep = &((vmrt_ref_t*)state)[0];",
        "  return vmrt_ref_retain(stack, &args->r0, keep);",
        "}",
        "VMRT_EXPORT(t_drop_kept, void, v, v) {",
        "  return vmrt_ref_release(stack, &((vmrt_ref_t*)state)[0]);",
        "}",
        "static vmrt_status_t t_alloc(void* module, void** out_state) {",
        "  static vmrt_ref_t slots[4];",
        "  *out_state = slots;",
        "  return VMRT_OK;",
        "}",
        "static vmrt_status_t t_alloc_fails(void* module, void** out_state) {",
        "  (void)module; (void)out_state;",
        "  return VMRT_RESOURCE_EXHAUSTED;",
        "}",
        "static const vmrt_export_descriptor_t t_exports[] = {",
        *exports,
        '  {"module_value", "0v_i", t_module_value},',
        '  {"sleep_ms", "0i_v", t_sleep_ms},',
        '  {"meet", "0i_i", t_meet},',
        '  {"leak_arg", "0r_v", t_leak_arg},',
        '  {"drop_kept", "0v_v", t_drop_kept},',
        "};",
        "static const vmrt_module_descriptor_t t_descriptor = {",
        "  VMRT_NATIVE_ABI_VERSION, 2, \"ctest\", &the_module_value, t_alloc, NULL,",
        "  sizeof(t_exports) / sizeof(t_exports[0]), t_exports,",
        "};",
        "const vmrt_module_descriptor_t* t_module(void) { return &t_descriptor; }",
        "static const vmrt_export_descriptor_t t_bad_exports[] = {",
        '  {"weird", "0i_?", t_module_value},',
        "};",
        "static const vmrt_module_descriptor_t t_bad_descriptor = {",
        "  VMRT_NATIVE_ABI_VERSION, 1, \"cbad\", NULL, NULL, NULL, 1, t_bad_exports,",
        "};",
        "const vmrt_module_descriptor_t* t_bad_module(void) { return &t_bad_descriptor; }",
        "static const vmrt_module_descriptor_t t_old_descriptor = {",
        "  99, 1, \"cold\", NULL, NULL, NULL, 0, NULL,",
        "};",
        "const vmrt_module_descriptor_t* t_old_module(void) { return &t_old_descriptor; }",
        "static const vmrt_module_descriptor_t t_failing_descriptor = {",
        "  VMRT_NATIVE_ABI_VERSION, 1, \"cfailing\", NULL, t_alloc_fails, NULL, 0, NULL,",
        "};",
        "const vmrt_module_descriptor_t* t_failing_module(void) "
        "{ return &t_failing_descriptor; }",
        "vmrt_status_t t_sleep_ms_fn(void* a, void* b, void* c, void* d, void* e) "
        "{ return t_sleep_ms(a, b, c, d, e); }",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def ctest(tmp_path_factory):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    workdir = tmp_path_factory.mktemp("ctest")
    ffi = cffi.FFI()
    ffi.cdef("""
        const void* t_module(void);
        const void* t_bad_module(void);
        const void* t_old_module(void);
        const void* t_failing_module(void);
        intptr_t t_sleep_ms_fn(void*, void*, void*, void*, void*);
        int t_meet_has_started(void);
        void t_meet_release(void);
    """)
    ffi.set_source("_vmrt_native_ctest", _test_module_source(), include_dirs=[get_include()],
                   extra_compile_args=["-O1", "-Wall", "-Wno-unused-variable"])
    library = ffi.compile(tmpdir=str(workdir))
    spec = importlib.util.spec_from_file_location("_vmrt_native_ctest", library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _expected(arguments: str, result: str, values):
    acc = sum((k + 1) * v for k, v in enumerate(values))
    if result == "v":
        return None
    out = []
    for k, t in enumerate(result):
        value = acc + k
        out.append(int(value) if t in "iI" else f32(value) if t == "f" else float(value))
    return out[0] if len(out) == 1 else tuple(out)


def _values(arguments: str, seed: int):
    out = []
    for k, t in enumerate(arguments):
        x = ((seed * 7 + k * 13) % 41) - 20
        out.append(x + 0.5 if t in "fF" else x)
    return out


def test_every_scalar_cconv_matches_the_generic_path(ctest, monkeypatch):
    """The C Caller and the Python struct path agree on a C module laid out by
    the C compiler, for 1-8 arguments and 0-3 results of every scalar type."""
    fast = load_c_module(ctest.lib.t_module())
    monkeypatch.setattr(cmodule, "FAST_PATH", False)
    generic = load_c_module(ctest.lib.t_module())
    monkeypatch.undo()
    ctx_fast = vmrt.Context(vmrt.Instance(), modules=[fast])
    ctx_generic = vmrt.Context(vmrt.Instance(), modules=[generic])
    signatures = _scalar_signatures()
    for arguments, result in signatures:
        name = f"s_{arguments}_{result}"
        args_types = "" if arguments == "v" else arguments
        adapter = ctx_fast.module("ctest").lookup(name)
        if cmodule.FAST_PATH:
            assert type(adapter).__name__ == "Caller", name
        for seed in range(5):
            values = _values(args_types, seed)
            want = _expected(args_types, result, values)
            for ctx in (ctx_fast, ctx_generic):
                got = ctx.function(f"ctest.{name}")(*values)
                assert got == want, (name, values, got, want)
        if args_types:
            for ctx in (ctx_fast, ctx_generic):
                values = [-7] + _values(args_types, 1)[1:]
                with pytest.raises(vmrt.VMError) as info:
                    ctx.function(f"ctest.{name}")(*values)
                assert info.value.code == StatusCode.DATA_LOSS
                assert f"ctest.{name} (cconv '0{arguments}_{result}') failed: bad {name}" \
                    in str(info.value)
                values[0] = -9
                with pytest.raises(vmrt.VMError) as info:
                    ctx.function(f"ctest.{name}")(*values)
                assert info.value.code == StatusCode.ABORTED
    ctx_fast.close()
    ctx_generic.close()


def test_descriptor_module_pointer_and_version(ctest):
    module = load_c_module(ctest.lib.t_module())
    assert module.name == "ctest" and module.version == 2
    ctx = vmrt.Context(vmrt.Instance(), modules=[module])
    assert ctx.function("ctest.module_value")() == 1234


def test_c_and_python_exports_in_one_class(ctest):
    class Mixed(NativeModule, name="mixed", version=1):
        wait = c_export("0i_v", ctest.ffi.addressof(ctest.lib, "t_sleep_ms_fn"))

        @export("0i_i")
        def twice(self, x):
            return 2 * x

    ctx = vmrt.Context(vmrt.Instance(), modules=[Mixed()])
    assert ctx.function("mixed.twice")(4) == 8
    assert ctx.function("mixed.wait")(1) is None
    assert Mixed().export_cconv("wait") == "0i_v"


def test_bad_descriptors(ctest):
    with pytest.raises(vmrt.VMError) as info:
        load_c_module(ctest.lib.t_bad_module())
    text = str(info.value)
    assert "'cbad'" in text and "'weird'" in text and "'0i_?'" in text
    with pytest.raises(vmrt.VMError) as info:
        load_c_module(ctest.lib.t_old_module())
    assert info.value.code == StatusCode.INCOMPATIBLE
    with pytest.raises(vmrt.VMError) as info:
        vmrt.Context(vmrt.Instance(), modules=[load_c_module(ctest.lib.t_failing_module())])
    assert info.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert "cfailing" in str(info.value)


def test_gil_is_released_during_c_exports(ctest):
    """While a C export runs on one thread, Python runs on another: the export waits
    for this thread to see it started and release it, which a held GIL forbids."""
    ctx = vmrt.Context(vmrt.Instance(), modules=[load_c_module(ctest.lib.t_module())])
    meet = ctx.function("ctest.meet")
    met = []
    thread = threading.Thread(target=lambda: met.append(meet(HANG_MS)))
    thread.start()
    give_up = time.monotonic() + 2 * HANG_MS / 1000
    # (ctest.lib's own calls are cffi's, which release the GIL: they decide nothing)
    while not ctest.lib.t_meet_has_started() and time.monotonic() < give_up:
        time.sleep(0.001)
    ctest.lib.t_meet_release()
    thread.join()
    assert met == [1], "the C export held the GIL: no Python ran until it gave up"


@ref_type("!vmrt_test.kept")
class Kept(RefObject):
    __slots__ = ("__weakref__",)


def test_refs_c_keeps_stay_alive_until_released(ctest):
    import weakref

    ctx = vmrt.Context(vmrt.Instance(), modules=[load_c_module(ctest.lib.t_module())])
    held = cmodule.held_ref_count()
    buffer = Kept()
    probe = weakref.ref(buffer)
    ctx.function("ctest.leak_arg")(buffer)
    assert cmodule.held_ref_count() == held + 1
    del buffer
    assert probe() is not None            # C holds it
    ctx.function("ctest.drop_kept")()
    assert probe() is None
    assert cmodule.held_ref_count() == held


def test_foreign_ref_from_c_is_rejected():
    from vmrt.native.example import example_module

    ctx = vmrt.Context(vmrt.Instance(), modules=[example_module()])
    with pytest.raises(vmrt.VMError) as info:
        ctx.function("cexample.bad_ref")()
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert "cexample.bad_ref (cconv '0v_r') returned a ref it does not own" in str(info.value)
    assert ctx.function("cexample.add_1")(1) == 2


def test_wrong_argument_count_from_host():
    from vmrt.native.example import example_module

    ctx = vmrt.Context(vmrt.Instance(), modules=[example_module()])
    with pytest.raises(vmrt.VMError) as info:
        ctx.function("cexample.span_sum")([(1, 2)])
    assert info.value.code == StatusCode.INVALID_ARGUMENT
    assert ctx.function("cexample.span_sum")([(1,), (2,)]) == 3


def test_calls_after_close_fail_cleanly():
    from vmrt.native.example import example_module, live_states
    from vmrt.vm.buffer import VMBuffer

    # live_states() counts every context of the process: collect the ones
    # earlier tests dropped first, so only this test's context can change it.
    gc.collect()
    gc.disable()
    try:
        before = live_states()
        ctx = vmrt.Context(vmrt.Instance(), modules=[example_module()])
        functions = [(ctx.function("cexample.counter"), ()),
                     (ctx.function("cexample.ref_echo"), (VMBuffer.from_bytes(b"x"),)),
                     (ctx.function("cexample.span_sum"), ([(1,)],))]
        assert functions[0][0]() == 1
        held = cmodule.held_ref_count()
        ctx.close()
        assert live_states() == before
    finally:
        gc.enable()
    for fn, args in functions:
        with pytest.raises(vmrt.VMError) as info:
            fn(*args)
        assert info.value.code == StatusCode.FAILED_PRECONDITION
        assert "released" in str(info.value)
    assert cmodule.held_ref_count() == held
