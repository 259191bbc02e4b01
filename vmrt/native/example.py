"""The example C module `cexample` (csrc/vmrt_example.c), built into vmrt._cnative.

    from vmrt.native.example import example_module
    ctx = vmrt.Context(vmrt.Instance(), modules=[example_module(), app])

Its exports cover every cconv element in both directions; see the C source.
"""

from __future__ import annotations

from vmrt.native.cmodule import _require_native, c_module_class, lib

_CLASS = None


def example_class():
    """The NativeModule subclass generated from the C descriptor."""
    global _CLASS
    _require_native()
    if _CLASS is None:
        _CLASS = c_module_class(lib.vmrt_example_module())
    return _CLASS


def example_module():
    """A fresh instance of the example C module (per-context state in C)."""
    return example_class()()


def live_states() -> int:
    """C states the example module has allocated and not yet freed."""
    _require_native()
    return lib.vmrt_example_live_states()
