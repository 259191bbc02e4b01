"""Calling exports from Python: `Function` (convert the arguments by the export's
Signature, run, convert the results), `AsyncFunction` (the same call with fences
appended) and `Invocation` (a call resumed step by step).

A context may have a host adapter (`HostAdapter`, set with
`Context.set_host_adapter`): it converts host values for ref positions on the
way in and ref results on the way out (the hal module's: numpy arrays <->
buffer views) and makes the fences of async-external calls.
"""

from __future__ import annotations

import operator
import types
from typing import TYPE_CHECKING, Any, Callable, Protocol

from vmrt.errors import StatusCode, VMError
from vmrt.vm.buffer import VMBuffer
from vmrt.vm.cconv import Signature, signature_of
from vmrt.vm.declaration import parse_declaration
from vmrt.vm.list import VMList
from vmrt.vm.module import ModuleInstance, run_to_completion
from vmrt.vm.numerics import f32
from vmrt.vm.ref import RefObject

if TYPE_CHECKING:
    from vmrt.vm.declaration import ValueInfo
    from vmrt.vm.context import Context


class HostAdapter(Protocol):
    """What a context's host adapter provides (vmrt.modules.hal.HostAdapter is one)."""

    def convert_arguments(self, signature: Signature, args: tuple) -> tuple:
        """Host values -> VM values, one per element of `signature.arguments`."""

    def convert_results(self, signature: Signature, result: Any) -> Any:
        """VM results (None, one value or a tuple) -> host values."""

    def create_signal_fence(self) -> Any:
        """A fence for an async-external call to signal (AsyncFunction)."""

    def wait_fence(self, fence: Any) -> None:
        """Blocks until `fence` is signalled."""

    def tensor_arguments(self, args: tuple, inputs: list[ValueInfo]) -> tuple:
        """`args` with each value the declaration's `inputs` say is a tensor, and that
        is not an array or ref, made an array of the declared dtype (as numpy.asarray
        would); an adapter without this method leaves such values alone."""


# -- Python values <-> registers ----------------------------------------------------------------
def _integer(value) -> int:
    """An exact integer (int, bool, numpy integer): no silent float truncation or str parsing."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{value!r} is not an integer") from None


def _real(value) -> float:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


def _to_i32(value) -> int:
    v = _integer(value)
    if not -(1 << 31) <= v < (1 << 32):
        raise ValueError(f"{value!r} does not fit in i32")
    return v - (1 << 32) if v >= (1 << 31) else v


def _to_i64(value) -> int:
    v = _integer(value)
    if not -(1 << 63) <= v < (1 << 64):
        raise ValueError(f"{value!r} does not fit in i64")
    return v - (1 << 64) if v >= (1 << 63) else v


def _to_ref(value):
    if value is None or isinstance(value, RefObject):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return VMBuffer.from_bytes(value)
    if hasattr(value, "__array_interface__"):
        return VMBuffer.from_array(value)
    if isinstance(value, (list, tuple)):
        return VMList.from_values(value)
    raise TypeError(f"{type(value).__name__} is not a ref (buffer, list or None)")


def _to_tensor_ref(value):
    """A ref at a declared tensor position: what is not yet a ref (an array, a nested
    list) is for the host adapter to convert (Function._convert_declared)."""
    if value is None or isinstance(value, RefObject):
        return value
    raise TypeError(f"{type(value).__name__} is not a tensor")


_CONVERT = {"i": _to_i32, "I": _to_i64, "f": lambda v: f32(_real(v)), "F": _real, "r": _to_ref,
            "t": _to_tensor_ref}


def convert_arguments(signature: Signature, args) -> list:
    """Python values -> VM values for `signature`'s arguments; a VMError naming the
    bad argument (spans: lists of tuples, converted member by member)."""
    elements = signature.arguments
    values = list(args)
    converted = []
    for index, element in enumerate(elements):
        if index >= len(values):
            raise _count_error(elements, values)
        value = values[index]
        if isinstance(element, tuple):
            converted.append([_convert_span_entry(element, item, index) for item in value])
            continue
        try:
            converted.append(_CONVERT[element](value))
        except (TypeError, ValueError, OverflowError) as error:
            raise VMError(f"argument {index}: {error}", StatusCode.INVALID_ARGUMENT) from None
    if len(values) != len(elements):
        raise _count_error(elements, values)
    return converted


def _count_error(elements: tuple, values: list) -> VMError:
    return VMError(f"expected {len(elements)} arguments, got {len(values)}",
                   StatusCode.INVALID_ARGUMENT)


def _convert_span_entry(span: tuple, item, index: int) -> tuple:
    item = item if isinstance(item, (tuple, list)) else (item,)
    if len(item) != len(span):
        raise VMError(f"argument {index}: span entries need {len(span)} values",
                      StatusCode.INVALID_ARGUMENT)
    return tuple(_CONVERT[c](v) for c, v in zip(span, item))


def _argument_converter(elements: tuple) -> Callable[..., tuple]:
    """A function (*args) -> converted tuple for span-free arguments; a wrong count is
    a TypeError, which Function.__call__'s slow path turns into a clear error. Up to
    four arguments (most exports) it is one expression, without a loop."""
    converters = tuple(_CONVERT[element] for element in elements)
    count = len(converters)
    if count == 0:
        return lambda: ()
    if count == 1:
        (c0,) = converters
        return lambda a: (c0(a),)
    if count == 2:
        c0, c1 = converters
        return lambda a, b: (c0(a), c1(b))
    if count == 3:
        c0, c1, c2 = converters
        return lambda a, b, c: (c0(a), c1(b), c2(c))
    if count == 4:
        c0, c1, c2, c3 = converters
        return lambda a, b, c, d: (c0(a), c1(b), c2(c), c3(d))

    def convert(*args):
        if len(args) != count:
            raise TypeError(f"expected {count} arguments, got {len(args)}")
        return tuple([convert_one(value) for convert_one, value in zip(converters, args)])
    return convert


# -- calls ------------------------------------------------------------------------------------
class Function:
    """A callable export: converts Python arguments, runs, converts results.

    `signature` is its cconv (vmrt.vm.cconv.Signature); `arguments`/`results`
    are the cconv's fragments as text."""

    def __init__(self, context: Context, instance: ModuleInstance, name: str, cconv: str,
                 fn: Callable[..., Any]) -> None:
        self.context = context
        self.instance = instance
        self.name = name
        self.cconv = cconv
        self.signature = signature = signature_of(cconv)
        self.arguments, self.results = signature.fragments
        self._fn = fn
        self._may_yield = instance.is_generator(name)
        # Only calls with ref values have anything for the host adapter to convert.
        host = context.host_adapter
        self._host = host if host is not None and signature.has_refs else None
        self._convert: Callable[..., Any] = (
            _argument_converter(self._marked_tensors()) if not signature.has_spans
            else lambda *args: convert_arguments(signature, args))

    @property
    def entry(self) -> Callable[..., Any]:
        """What runs the function in its context: generated Python, or a C tier entry
        (vmrt.vm.ctier), which VMVX dispatches ask for `run_workgroups`."""
        return self._fn

    @property
    def full_name(self) -> str:
        return f"{self.instance.module.name}.{self.name}"

    @property
    def reflection(self) -> dict[str, str]:
        """The export's reflection attributes: `iree.abi.declaration` (its signature in
        tensors, from iree-compile), `iree.abi.model`, ...; empty when it has none."""
        return dict(self.instance.module.export_attrs(self.name))

    @property
    def declaration(self) -> str:
        """The export's signature for people: its `iree.abi.declaration`, or else
        `name(cconv arguments) -> (cconv results)`."""
        text = self.instance.module.export_attrs(self.name).get("iree.abi.declaration")
        return text or f"{self.name}({self.arguments}) -> ({self.results})"

    @property
    def inputs(self) -> list[ValueInfo]:
        """The inputs the declaration names (name, type, shape, dtype: vmrt.vm.declaration
        .ValueInfo), as onnxruntime's get_inputs(); empty when the module has none."""
        parsed = parse_declaration(self.declaration)
        return parsed[0] if parsed else []

    @property
    def outputs(self) -> list[ValueInfo]:
        """The outputs the declaration names (see `inputs`)."""
        parsed = parse_declaration(self.declaration)
        return parsed[1] if parsed else []

    def __repr__(self) -> str:
        # As iree.runtime shows a VmFunction: the cconv, then the reflection (whose
        # iree.abi.declaration tells the tensor types the cconv's refs carry).
        reflection = self.reflection
        shown = f", reflection = {reflection}" if reflection else ""
        return f"<vmrt function {self.full_name}({self.cconv}){shown}>"

    def __call__(self, *args: Any) -> Any:
        # The one call path (hot: kept in one frame, without keyword parameters).
        host = self._host
        if host is not None:
            args = host.convert_arguments(self.signature, args)
        try:
            converted = self._convert(*args)
        except (TypeError, ValueError, OverflowError):
            converted = self._convert_declared(args)
        try:
            result = self._fn(*converted)
            if self._may_yield:
                result = run_to_completion(result)
            if host is None:
                return result
            return host.convert_results(self.signature, result)
        except BaseException as exc:
            self.context._vm_errors().__exit__(type(exc), exc, exc.__traceback__)
            raise

    def _marked_tensors(self) -> tuple:
        """The cconv's arguments, with refs the declaration says are tensors as `t`
        when a host adapter converts them: a list there is not a vm.list but the
        elements of a tensor (taken on the slow path, _convert_declared)."""
        elements = self.signature.arguments
        if self._host is None:
            return elements
        inputs = self.inputs
        return tuple("t" if element == "r" and index < len(inputs) and inputs[index].is_tensor
                     else element for index, element in enumerate(elements))

    def _convert_declared(self, args: tuple) -> list:
        """The arguments the fast path refused: nested lists and numbers where the
        declaration says tensor become arrays of its dtype (the host adapter's
        tensor_arguments); what still does not convert is a VMError naming the
        argument and showing the function's declaration."""
        host = self._host
        if host is not None and hasattr(host, "tensor_arguments"):
            args = host.convert_arguments(self.signature,
                                          host.tensor_arguments(args, self.inputs))
        try:
            return convert_arguments(self.signature, args)
        except VMError as error:  # (names a bad argument; the declaration shows them all)
            raise error.annotate(f"calling `{self.declaration}`") from None

    def invoke_async(self, *args: Any) -> Invocation:
        """Starts a call that may yield; resume it step by step with Invocation.resume."""
        converted = convert_arguments(self.signature, args)
        with self.context._vm_errors():
            result = self._fn(*converted)
        return Invocation(self.context, result)


class AsyncFunction(Function):
    """An export compiled with --iree-execution-model=async-external (`iree.abi.model`
    = `coarse-fences`): its last two arguments are a wait fence and a signal fence.

    Through a context whose host adapter (the hal module's, with host_arrays) can make
    fences, it may be called with the other arguments only: it appends a null wait
    fence and a new signal fence, waits for the signal, then converts the results,
    as iree.runtime's function invoker does. Passing both fences works as for any
    function.
    """

    def __call__(self, *args: Any) -> Any:
        host = self._host
        if host is None or self.signature.has_spans \
                or len(args) != len(self.signature.arguments) - 2:
            return super().__call__(*args)
        signal = host.create_signal_fence()
        # Function's call path, through a copy whose host adapter waits for the fence.
        call = object.__new__(Function)
        call.__dict__.update(self.__dict__)
        call._host = _FencedHost(host, signal)
        return Function.__call__(call, *args, None, signal)


class _FencedHost:
    """A host adapter for one async-external call: results are ready (and converted)
    only once its signal fence is signalled."""

    __slots__ = ("host", "signal")

    def __init__(self, host: HostAdapter, signal) -> None:
        self.host = host
        self.signal = signal

    def convert_arguments(self, signature: Signature, args: tuple) -> tuple:
        return self.host.convert_arguments(signature, args)

    def tensor_arguments(self, args: tuple, inputs: list[ValueInfo]) -> tuple:
        return self.host.tensor_arguments(args, inputs)

    def convert_results(self, signature: Signature, result: Any) -> Any:
        self.host.wait_fence(self.signal)
        return self.host.convert_results(signature, result)


class Invocation:
    """A call in progress: each resume() runs the VM stack until its next yield."""

    def __init__(self, context: Context, result: Any) -> None:
        self.context = context
        self._generator = result if result.__class__ is types.GeneratorType else None
        self.done = self._generator is None
        self.result = None if self._generator else result
        self.yields = 0

    def resume(self) -> bool:
        """Runs until the next yield (False) or completion (True)."""
        generator = self._generator
        if self.done or generator is None:
            return True
        try:
            with self.context._vm_errors():
                next(generator)
        except StopIteration as stop:
            self.done = True
            self.result = stop.value
            return True
        self.yields += 1
        return False

    def wait(self) -> Any:
        while not self.resume():
            pass
        return self.result
