"""Exports written in C with upstream's shim ABI (vmrt/native/include/vmrt_native.h).

    from vmrt.native import NativeModule, c_export

    class Fast(NativeModule, name="fast", version=1):
        add_1 = c_export("0i_i", ffi.addressof(lib, "my_add_1"))

or a whole module described in C (a vmrt_module_descriptor_t):

    module = vmrt.native.load_c_module(lib.my_module_descriptor())

A call packs the arguments into the struct the cconv lays out
(vmrt.native.signature), calls the function through vmrt._cnative with the
GIL released, and unpacks the results. Cconvs of scalars only (i, I, f, F; up
to 16 arguments and 16 results) go through vmrt._cnative.Caller
(csrc/vmrt_caller.c), which does all of that in C; cconvs with refs or spans,
and every cconv when VMRT_NO_NATIVE=1, through the generic path here (Python's
struct module), which gives the same results.

Refs cross as (ptr, type) pairs: ptr is the object's address and type a small
integer per registered ref type. Every reference C holds is counted in a table
here (`held_ref_count()`), so the object stays alive while C owns it: argument
refs for the duration of the call, plus whatever C retained.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref

from vmrt.errors import StatusCode, VMError, VmrtError
from vmrt.memory import MISSING_C_EXTENSION
from vmrt.native.module import ForeignCode, ForeignExport, NativeModule, adapter_factory
from vmrt.vm.cconv import Signature
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.ref import RefObject, lookup_ref_type

try:
    from vmrt import _cnative
    from vmrt._cnative import ffi, lib
except ImportError:  # not built: C exports are unavailable
    _cnative = ffi = lib = None

_Caller = None
if lib is not None:
    if getattr(_cnative, "Caller", None) is None:
        lib.vmrt_caller_install()
    _Caller = getattr(_cnative, "Caller", None)

#: Exports whose cconv has only scalars are served by vmrt._cnative.Caller, which
#: marshals in C (off with VMRT_NO_NATIVE=1: the generic Python marshalling then
#: serves every call).
FAST_PATH = _Caller is not None and os.environ.get("VMRT_NO_NATIVE", "") in ("", "0")

_NULL_TYPE = 0
# What vmrt_call_packed returns for a released binding (INTPTR_MIN).
_CALL_RELEASED = -(1 << (8 * ffi.sizeof("intptr_t") - 1)) if ffi is not None else None


def _require_native():
    if lib is None:
        raise VMError(f"C native modules need vmrt's C extension: {MISSING_C_EXTENSION}",
                      StatusCode.UNAVAILABLE)


def _status_code(code: int) -> StatusCode:
    try:
        return StatusCode(code)
    except ValueError:
        return StatusCode.UNKNOWN


def _address(pointer) -> int:
    """The address of a C function: an int, or a cdata pointer of any FFI."""
    if isinstance(pointer, int):
        return pointer
    _require_native()
    try:
        return int(ffi.cast("uintptr_t", pointer))
    except TypeError:
        raise VMError(f"{pointer!r} is not a C function pointer (use ffi.addressof(lib, name))",
                      StatusCode.INVALID_ARGUMENT) from None


# ----------------------------------------------------------------------------------------------
# Declarations
# ----------------------------------------------------------------------------------------------
class CExport(ForeignExport):
    """A class attribute declaring an export implemented in C."""

    __slots__ = ("cconv", "address", "name")

    def __init__(self, cconv: str, function, name: str | None = None):
        self.cconv = cconv
        self.address = _address(function)
        self.name = name
        if not self.address:
            raise VMError(f"C export {name or ''} (cconv {cconv!r}): null function pointer",
                          StatusCode.INVALID_ARGUMENT)

    def __repr__(self) -> str:
        return f"<C export {self.name or '?'} {self.cconv!r} at {self.address:#x}>"

    @staticmethod
    def binding(module) -> "CBinding":
        return CBinding(module)


def c_export(cconv: str, function, *, name: str | None = None) -> CExport:
    """Declares an export implemented by the C function `function` (a cdata
    function pointer, e.g. `ffi.addressof(lib, "fn")`, or an address)."""
    return CExport(cconv, function, name)


class CState(ForeignCode):
    """Per-context C state: `alloc(module, &state)` at registration, `free(module,
    state)` at teardown (vmrt_alloc_state_fn_t / vmrt_free_state_fn_t)."""

    __slots__ = ("alloc", "free")

    def __init__(self, alloc, free=None):
        self.alloc = _address(alloc) if alloc is not None else 0
        self.free = _address(free) if free is not None else 0

    @staticmethod
    def binding(module) -> "CBinding":
        return CBinding(module)


def c_module_class(descriptor):
    """A NativeModule subclass for a vmrt_module_descriptor_t (pointer or address)."""
    _require_native()
    d = ffi.cast("const vmrt_module_descriptor_t*", _address(descriptor))
    if d == ffi.NULL:
        raise VMError("null C module descriptor", StatusCode.INVALID_ARGUMENT)
    if d.abi_version != lib.vmrt_native_abi_version():
        raise VMError(f"C module descriptor has ABI version {d.abi_version}, this runtime "
                      f"speaks {lib.vmrt_native_abi_version()}", StatusCode.INCOMPATIBLE)
    name = ffi.string(d.name).decode() if d.name != ffi.NULL else ""
    namespace: dict = {"__module__": __name__, "c_descriptor": d}
    for k in range(d.export_count):
        entry = d.exports[k]
        export_name = ffi.string(entry.name).decode()
        cconv = ffi.string(entry.cconv).decode() if entry.cconv != ffi.NULL else ""
        namespace[f"_c_{k}"] = CExport(cconv, int(ffi.cast("uintptr_t", entry.fn)),
                                       name=export_name)
    c_state = None
    if d.alloc_state != ffi.NULL or d.free_state != ffi.NULL:
        c_state = CState(int(ffi.cast("uintptr_t", d.alloc_state)) or None,
                         int(ffi.cast("uintptr_t", d.free_state)) or None)
    module_pointer = int(ffi.cast("uintptr_t", d.module))
    class_name = "".join(part.capitalize() for part in name.split("_")) or "CModule"
    return type(NativeModule)(class_name, (NativeModule,), namespace, name=name,
                              version=d.version, c_state=c_state,
                              c_module=module_pointer or None)


def load_c_module(descriptor):
    """A module instance for a vmrt_module_descriptor_t, ready for a Context."""
    return c_module_class(descriptor)()


# ----------------------------------------------------------------------------------------------
# References held by C
# ----------------------------------------------------------------------------------------------
_lock = threading.Lock()
_held: dict[int, list] = {}        # address -> [object, count]
_type_ids: dict[object, int] = {}  # RefType -> id
_types_by_id: dict[int, object] = {}


def held_ref_count() -> int:
    """References C code currently holds (0 when nothing is retained)."""
    with _lock:
        return sum(entry[1] for entry in _held.values())


def type_id(ref_type) -> int:
    """The integer C sees in vmrt_ref_t.type for a RefType."""
    if ref_type is None:
        return _NULL_TYPE
    found = _type_ids.get(ref_type)
    if found is not None:
        return found
    with _lock:
        found = _type_ids.get(ref_type)
        if found is None:
            found = _type_ids[ref_type] = len(_type_ids) + 1
            _types_by_id[found] = ref_type
        return found


def _hold(obj) -> int:
    address = id(obj)
    with _lock:
        entry = _held.get(address)
        if entry is None:
            _held[address] = [obj, 1]
        else:
            entry[1] += 1
    return address


def _retain_address(address: int) -> None:
    with _lock:
        entry = _held.get(address)
        if entry is None:
            raise VmrtError(f"ref {address:#x} is not held by C code", StatusCode.INVALID_ARGUMENT)
        entry[1] += 1


def _release_address(address: int):
    """Drops one reference C held; returns the object."""
    with _lock:
        entry = _held.get(address)
        if entry is None:
            raise VmrtError(f"ref {address:#x} is not held by C code", StatusCode.INVALID_ARGUMENT)
        entry[1] -= 1
        if not entry[1]:
            del _held[address]
        return entry[0]


def _held_object(address: int):
    with _lock:
        entry = _held.get(address)
    if entry is None:
        raise VmrtError(f"ref {address:#x} is not held by C code", StatusCode.INVALID_ARGUMENT)
    return entry[0]


def _make_status(code: int, message: str) -> int:
    lib.vmrt_host_make_status(code, message.encode("utf-8", "replace")[:500])
    return code


def _status_callback(label: str):
    """Decorates a callback C code makes: a VmrtError it raises becomes the status it
    returns (its message prefixed with `label`), as C cannot take a Python exception."""
    def decorate(callback):
        @functools.wraps(callback)
        def with_status(*args):
            try:
                return callback(*args)
            except VmrtError as error:
                return _make_status(error.code, f"{label}: {error.message}")
        return with_status
    return decorate


if lib is not None:
    @ffi.def_extern(error=StatusCode.INTERNAL)
    @_status_callback("ref_retain")
    def vmrt_py_ref_retain(ref, out_ref):
        address = int(ffi.cast("uintptr_t", ref.ptr))
        if address:
            _retain_address(address)
        old = int(ffi.cast("uintptr_t", out_ref.ptr))
        out_ref.ptr = ref.ptr
        out_ref.type = ref.type if address else _NULL_TYPE
        if old:
            _release_address(old)
        return 0

    @ffi.def_extern(error=StatusCode.INTERNAL)
    @_status_callback("ref_release")
    def vmrt_py_ref_release(ref):
        address = int(ffi.cast("uintptr_t", ref.ptr))
        ref.ptr = ffi.NULL
        ref.type = _NULL_TYPE
        if address:
            _release_address(address)
        return 0

    @ffi.def_extern(error=StatusCode.INTERNAL)
    @_status_callback("buffer_span")
    def vmrt_py_buffer_span(ref, writable, out_data, out_length):
        address = int(ffi.cast("uintptr_t", ref.ptr))
        if not address:
            raise VmrtError("buffer is null", StatusCode.INVALID_ARGUMENT)
        obj = _held_object(address)
        if not isinstance(obj, VMBuffer):
            raise VmrtError(f"ref is {type(obj).__name__}, not a vm.buffer",
                            StatusCode.INVALID_ARGUMENT)
        if writable and not obj.mutable:
            raise VmrtError("buffer is read-only", StatusCode.PERMISSION_DENIED)
        # The VMBuffer keeps its storage exported (its view), so the address stays
        # valid while the ref is held even after this temporary cdata is gone.
        data = ffi.from_buffer("uint8_t[]", obj.view)
        out_data[0] = ffi.cast("uint8_t*", data)
        out_length[0] = obj.length
        return 0

    @ffi.def_extern(error=StatusCode.INTERNAL)
    @_status_callback("buffer_alloc")
    def vmrt_py_buffer_alloc(length, out_ref):
        try:
            buffer = VMBuffer(bytearray(length), mutable=True)
        except (MemoryError, OverflowError):
            raise VmrtError(f"cannot allocate {length} bytes",
                            StatusCode.RESOURCE_EXHAUSTED) from None
        old = int(ffi.cast("uintptr_t", out_ref.ptr))
        out_ref.ptr = ffi.cast("void*", _hold(buffer))
        out_ref.type = type_id(buffer.ref_type)
        if old:
            _release_address(old)
        return 0

    @ffi.def_extern(error=0)
    def vmrt_py_lookup_type(name):
        found = lookup_ref_type(ffi.string(name).decode("utf-8", "replace"))
        return type_id(found) if found is not None else 0


# ----------------------------------------------------------------------------------------------
# Binding exports of one module in one context
# ----------------------------------------------------------------------------------------------
class CBinding:
    """The C side of a NativeModule in one context: its C state and call records."""

    def __init__(self, module):
        _require_native()
        self.module_name = module.name
        self.module_pointer = ffi.cast("void*", _address(module._c_module or 0))
        self.state_pointer = ffi.NULL
        self._calls = []
        self._finalizer = None
        c_state = module._c_state
        if c_state is not None and c_state.alloc:
            out = ffi.new("void**")
            status = lib.vmrt_alloc_state(ffi.cast("vmrt_alloc_state_fn_t", c_state.alloc),
                                          self.module_pointer, out)
            if status:
                message = ffi.string(lib.vmrt_status_message()).decode("utf-8", "replace")
                raise VMError(f"native module '{module.name}': alloc_state failed"
                              + (f": {message}" if message else ""), _status_code(status))
            self.state_pointer = out[0]
            if c_state.free:
                self._finalizer = weakref.finalize(
                    self, lib.vmrt_free_state, ffi.cast("vmrt_free_state_fn_t", c_state.free),
                    self.module_pointer, self.state_pointer)

    def release(self) -> None:
        """Frees the C state (once); later calls of this binding's exports fail
        with FAILED_PRECONDITION instead of reaching freed state."""
        for call in self._calls:
            call.fn = ffi.NULL
            call.state = ffi.NULL
        if self._finalizer is not None:
            self._finalizer()

    def adapter(self, export, module_name: str):
        call = ffi.new("vmrt_call_t*")
        call.fn = ffi.cast("vmrt_native_fn_t", export.c_export.address)
        call.stack = lib.vmrt_default_stack()
        call.module = self.module_pointer
        call.state = self.state_pointer
        self._calls.append(call)
        return c_adapter(call, export.signature, f"{module_name}.{export.name}", keep=self)


def c_adapter(call, signature: Signature, where: str, keep=None):
    """The callable serving a C export: the C Caller when it fits, else generic.

    `call` is the vmrt_call_t record; the adapter keeps `keep` (the binding that
    owns the record and the C state) alive."""
    fail = _failure(where, signature.cconv)
    if FAST_PATH and not signature.has_spans and not signature.has_refs \
            and len(signature.arguments) <= 16 and len(signature.results) <= 16:
        return _Caller(int(ffi.cast("uintptr_t", call)), (keep, call),
                       "".join(signature.arguments), "".join(signature.results), fail)
    adapter = _generic_adapter(call, signature, where, fail)
    adapter.vmrt_keep = keep
    return adapter


def _failure(where: str, cconv: str):
    label = f"{where} (cconv '{cconv}')"

    def fail(code: int) -> VMError:
        if code == -1:
            return VMError(f"{label}: its module was released (context closed)",
                           StatusCode.FAILED_PRECONDITION)
        message = ffi.string(lib.vmrt_status_message()).decode("utf-8", "replace")
        status = _status_code(code)
        text = f"{label} failed: {message}" if message else f"{label} failed with {status.name}"
        return VMError(text, status)
    return fail


def _block_type(words: int):
    """The cdata type of a call block of `words` 8-byte words (8-byte aligned)."""
    found = _BLOCK_TYPES.get(words)
    if found is None:
        found = _BLOCK_TYPES[words] = ffi.typeof(f"uint64_t[{words}]")
    return found


_BLOCK_TYPES: dict[int, object] = {}


def _rets_offset(args_size: int) -> int:
    return (args_size + 15) & ~15


def _hold_argument(obj) -> tuple[int, int]:
    """(ptr, type) of a non-null argument ref, holding it."""
    if not isinstance(obj, RefObject):
        raise VmrtError(f"{type(obj).__name__} is not a ref", StatusCode.INVALID_ARGUMENT)
    return _hold(obj), type_id(obj.ref_type)


def _release_all(*addresses) -> None:
    for address in addresses:
        if address:
            _release_address(address)


def _result_maker(results, where: str, cconv: str):
    """raw unpacked results -> Python result(s); refs taken from the held table."""
    def make(raw):
        return _unflatten(results, raw, where, cconv)
    return make


def _failed_maker(results_layout, fail):
    """Releases refs C stored in the results before failing, then raises."""
    slots = results_layout.ref_slots

    def failed(status, raw):
        if status == _CALL_RELEASED:
            return fail(-1)
        for slot in slots:
            if raw[slot]:
                try:
                    _release_address(raw[slot])
                except VmrtError:
                    pass
        return fail(status if 0 < status < 256 else StatusCode.UNKNOWN)
    return failed


def _bad_argument(where: str, cconv: str):
    def bad(error: BaseException) -> VMError:
        if isinstance(error, VMError):
            return error
        message = error.message if isinstance(error, VmrtError) else str(error)
        return VMError(f"{where} (cconv '{cconv}'): bad argument: {message}",
                       StatusCode.INVALID_ARGUMENT)
    return bad


def _foreign_argument(where: str, cconv: str):
    def release(*addresses):
        try:
            _release_all(*addresses)
        except VmrtError as error:
            raise VMError(f"{where} (cconv '{cconv}') left a foreign ref in its arguments: "
                          f"{error.message}", StatusCode.INVALID_ARGUMENT) from None
    return release


def _generic_adapter(call, signature: Signature, where: str, fail):
    """Marshals through packed structs in Python (the twin of the C Caller)."""
    if signature.has_spans:
        adapter = _span_adapter(call, signature, where, fail)
    else:
        adapter = _fixed_adapter(call, signature, where, fail)
    adapter.__name__ = adapter.__qualname__ = where.rpartition(".")[2]
    adapter.vmrt_native = (where, signature.cconv)
    return adapter


def _return_line(results: tuple) -> str:
    """The generated adapter's return statement for the unpacked results `r`."""
    if "r" in results:
        return "        return RESULTS(r)"
    if not results:
        return "        return None"
    return "        return r[0]" if len(results) == 1 else "        return r"


def _fixed_adapter(call, signature: Signature, where: str, fail):
    """A generated adapter for a cconv without spans (any refs and results)."""
    args_layout = signature.arguments_layout()
    rets_layout = signature.results_layout
    offset = _rets_offset(args_layout.size)
    words = (offset + rets_layout.size + 7) // 8
    cconv = signature.cconv
    make = adapter_factory(_fixed_adapter_source(signature), f"C adapter {cconv}")
    return make(
        call, lib.vmrt_call_packed, ffi.new, _block_type(words), ffi.buffer,
        args_layout.struct.pack_into, args_layout.struct.unpack_from,
        rets_layout.struct.unpack_from, _hold_argument, _release_all,
        _foreign_argument(where, signature.cconv),
        _result_maker(signature.results, where, signature.cconv),
        _failed_maker(rets_layout, fail), _bad_argument(where, signature.cconv), _CALL_RELEASED)


def _fixed_adapter_source(signature: Signature) -> str:
    """The source of the factory of adapters of one span-less cconv."""
    arguments = signature.arguments
    args_layout = signature.arguments_layout()
    offset = _rets_offset(args_layout.size)
    params = [f"a{k}" for k in range(len(arguments))]
    refs = [k for k, t in enumerate(arguments) if t == "r"]
    values = []
    for k, t in enumerate(arguments):
        values += [f"p{k}", f"t{k}"] if t == "r" else [f"a{k}"]
    lines = ["def make(CALL, CALLP, NEW, BLOCK, BUF, PACK, UNPACK_ARGS, UNPACK_RETS, HOLD,",
             "         UNDO, RELEASE_ARGS, RESULTS, FAILED, BAD, RELEASED):",
             f"    def adapter({', '.join(params)}):",
             "        block = NEW(BLOCK)",
             "        view = BUF(block)"]
    if refs:
        lines.append("        " + " = ".join(f"p{k}" for k in refs) + " = 0")
    lines.append("        try:")
    for k in refs:
        lines.append(f"            if a{k} is None:")
        lines.append(f"                t{k} = 0")
        lines.append("            else:")
        lines.append(f"                p{k}, t{k} = HOLD(a{k})")
    lines.append(f"            PACK(view, 0{''.join(', ' + v for v in values)})")
    lines.append("        except Exception as e:")
    if refs:
        lines.append(f"            UNDO({', '.join(f'p{k}' for k in refs)})")
    lines.append("            raise BAD(e)")
    lines.append(f"        s = CALLP(CALL, block, {offset})")
    if refs:
        lines.append("        if s == RELEASED:")
        lines.append(f"            UNDO({', '.join(f'p{k}' for k in refs)})")
        lines.append("            raise FAILED(s, ())")
    if refs:
        after_slots = args_layout.ref_slots
        lines.append("        after = UNPACK_ARGS(view)")
        lines.append(f"        RELEASE_ARGS({', '.join(f'after[{slot}]' for slot in after_slots)})")
    lines.append(f"        r = UNPACK_RETS(view, {offset})")
    lines.append("        if s:")
    lines.append("            raise FAILED(s, r)")
    lines.append(_return_line(signature.results))
    lines.append("    return adapter")
    return "\n".join(lines) + "\n"


def _span_adapter(call, signature: Signature, where: str, fail):
    """Cconvs with spans: the layout depends on the span counts of each call."""
    arguments = signature.arguments
    spans = [k for k, a in enumerate(arguments) if isinstance(a, tuple)]
    rets_layout = signature.results_layout
    unpack_rets = rets_layout.struct.unpack_from
    cconv = signature.cconv
    call_packed = lib.vmrt_call_packed
    new = ffi.new
    buffer = ffi.buffer
    bad = _bad_argument(where, cconv)
    release_arguments = _foreign_argument(where, cconv)
    results = _result_maker(signature.results, where, cconv)
    failed = _failed_maker(rets_layout, fail)

    def adapter(*args):
        if len(args) != len(arguments):
            raise VMError(f"{where} (cconv '{cconv}') takes {len(arguments)} arguments, "
                          f"got {len(args)}", StatusCode.INVALID_ARGUMENT)
        held: list[int] = []
        try:
            layout = signature.arguments_layout(tuple(len(args[k]) for k in spans))
            offset = _rets_offset(layout.size)
            block = new(_block_type((offset + rets_layout.size + 7) // 8))
            view = buffer(block)
            layout.struct.pack_into(view, 0, *_flatten(arguments, args, held, where, cconv))
        except Exception as error:
            _release_all(*held)
            raise bad(error) from None
        status = call_packed(call, block, offset)
        if status == _CALL_RELEASED:
            _release_all(*held)
            raise failed(status, ())
        if layout.ref_slots:
            after = layout.struct.unpack_from(view)
            release_arguments(*(after[slot] for slot in layout.ref_slots))
        raw = unpack_rets(view, offset)
        if status:
            raise failed(status, raw)
        return results(raw)
    return adapter


def _flatten(arguments, args, held: list, where, cconv) -> list:
    values = []
    for element, value in zip(arguments, args):
        if isinstance(element, tuple):
            values.append(len(value))
            width = len(element)
            for item in value:
                if not isinstance(item, (tuple, list)) or len(item) != width:
                    raise VMError(f"{where} (cconv '{cconv}'): span entries are tuples of "
                                  f"{width}, got {item!r}", StatusCode.INVALID_ARGUMENT)
                for member, v in zip(element, item):
                    _append(values, member, v, held)
        else:
            _append(values, element, value, held)
    return values


def _append(values: list, kind: str, value, held: list) -> None:
    if kind == "r":
        if value is None:
            values.append(0)
            values.append(_NULL_TYPE)
            return
        ptr, type_ = _hold_argument(value)
        held.append(ptr)
        values.append(ptr)
        values.append(type_)
    else:
        values.append(value)


def _unflatten(results, raw, where, cconv):
    out = []
    index = 0
    problem = None
    for kind in results:
        if kind == "r":
            address = raw[index]
            index += 2
            if not address:
                out.append(None)
                continue
            try:
                out.append(_release_address(address))
            except VmrtError:
                problem = problem or f"returned a ref it does not own ({address:#x})"
                out.append(None)
        else:
            out.append(raw[index])
            index += 1
    if problem:
        raise VMError(f"{where} (cconv '{cconv}') {problem}", StatusCode.INVALID_ARGUMENT)
    if not out:
        return None
    if len(out) == 1:
        return out[0]
    return tuple(out)


__all__ = ["CBinding", "CExport", "CState", "c_export", "c_module_class", "held_ref_count",
           "load_c_module", "type_id"]
