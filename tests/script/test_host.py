"""Host imports: a script calls functions of a native module written in Python;
the calls are typed from the exports' cconvs (and annotations for refs)."""

from __future__ import annotations

import types

import pytest

import vmrt
import vmrt.script
from vmrt.errors import ScriptError

from script_helpers import corpus_source, cpython_namespace


class Host(vmrt.NativeModule, name="host", version=1):
    def __init__(self):
        super().__init__()
        self.records = []

    @vmrt.export("0I_I")
    def scale(self, value):
        return 3 * value + 1

    @vmrt.export("0I_v")
    def record(self, value):
        self.records.append(value)

    @vmrt.export("0r_I")
    def checksum(self, data: bytearray):  # a vmrt.VMBuffer arrives
        return sum(data.to_bytes()) % 65521

    @vmrt.export("0f_f")
    def half(self, value):
        return value / 2


def cpython_host(records: list):
    """The same functions as a plain module, for running the script in CPython."""
    return types.SimpleNamespace(scale=lambda v: 3 * v + 1, record=records.append,
                                 checksum=lambda d: sum(d) % 65521, half=lambda v: v / 2)


CASES = [("scaled_sum", (100,)), ("log_values", (5,)), ("checksum_of", (1000,)),
         ("halves", (3.0,))]


@pytest.mark.parametrize("function,args", CASES, ids=[c[0] for c in CASES])
def test_script_calls_the_host(function, args, tier):
    host = Host()
    data = vmrt.script.compile(corpus_source("host"), module="app", imports=[Host],
                               filename="host.py")
    module = vmrt.load(data, modules=[host], tier=tier)
    records: list = []
    namespace = cpython_namespace(corpus_source("host"), {"host": cpython_host(records)})
    assert getattr(module, function)(*args) == namespace[function](*args)
    assert host.records == records


def test_instance_or_class_declares_the_imports():
    source = "from host import scale\n\ndef f(a: int) -> int:\n    return scale(a)\n"
    for declared in (Host, Host()):
        assert vmrt.load(vmrt.script.compile(source, imports=[declared]),
                         modules=[Host()]).f(2) == 7


def test_unknown_host_function_and_module():
    with pytest.raises(ScriptError, match=r"s\.py:4:12: host module 'host' has no export "
                                          r"'nothing'"):
        vmrt.script.compile("import host\n\ndef f() -> int:\n    return host.nothing()\n",
                            imports=[Host], filename="s.py")
    with pytest.raises(ScriptError, match=r"importing 'other' is not supported; use only "
                                          r"the host modules .* \(host\)"):
        vmrt.script.compile("import other\n", imports=[Host])


def test_host_argument_types_are_checked():
    source = "import host\n\ndef f() -> int:\n    return host.scale(1.5)\n"
    with pytest.raises(ScriptError, match="expected int, got float"):
        vmrt.script.compile(source, imports=[Host])


def test_iree_runtime_runs_the_script_with_the_same_host():
    """The module's imports are plain VM imports: iree.runtime satisfies them with
    its own Python module interface (rt.PyModuleInterface)."""
    rt = pytest.importorskip("iree.runtime")
    records: list = []
    host = cpython_host(records)

    class Methods:
        def __init__(self, iface):
            pass

        def scale(self, value):
            return host.scale(value)

        def record(self, value):
            host.record(value)

        def checksum(self, data):
            raise NotImplementedError  # refs: not called by these cases

        def half(self, value):
            return host.half(value)

    iface = rt.PyModuleInterface("host", Methods)
    for name, cconv in (("scale", "0I_I"), ("record", "0I_v"), ("checksum", "0r_I"),
                        ("half", "0f_f")):
        iface.export(name, cconv, getattr(Methods, name))
    instance = rt.VmInstance()
    data = vmrt.script.compile(corpus_source("host"), module="app", imports=[Host],
                               filename="host.py")
    module = rt.VmModule.copy_buffer(instance, data)
    context = rt.VmContext(instance, modules=[iface.create(), module])
    namespace = cpython_namespace(corpus_source("host"), {"host": cpython_host([])})
    for function, args in (("scaled_sum", (100,)), ("log_values", (5,))):
        inputs, outputs = rt.VmVariantList(1), rt.VmVariantList(1)
        for value in args:
            inputs.push_int(value)
        context.invoke(module.lookup_function(function), inputs, outputs)
        assert outputs.get_variant(0) == namespace[function](*args)
    assert records == [0, 1, 4, 9, 16]
