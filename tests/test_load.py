"""vmrt.load: vmasm text, .vmasm and .vmfb paths or bytes -> exports as callables,
native modules first, context options passed on, everything closed by `with`."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import vmrt
from vmrt.vm.hooks import Profiler

ADDER = """\
vm.module @adder version 1
vm.type i32
vm.import @host.twice cconv "0i_i"

vm.export @add
vm.func @add(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i2 = vm.add.i32 %i0, %i1
  vm.return %i2
}

vm.export @add_twice
vm.func @add_twice(%i0: i32, %i1: i32) -> (i32) {
^bb0:
  %i2 = vm.add.i32 %i0, %i1
  %i3 = vm.call @host.twice(%i2)
  vm.return %i3
}
"""

PLAIN = """\
vm.module @plain version 1
vm.type i32
vm.export @neg
vm.func @neg(%i0: i32) -> (i32) {
^bb0:
  %i1 = vm.const.i32.zero
  %i1 = vm.sub.i32 %i1, %i0
  vm.return %i1
}
"""


class Host(vmrt.NativeModule, name="host", version=1):
    def __init__(self):
        self.calls = 0

    @vmrt.export("0i_i")
    def twice(self, value):
        self.calls += 1
        return 2 * value


def test_vmasm_text_with_a_native_module():
    host = Host()
    with vmrt.load(ADDER, modules=[host]) as m:
        assert m.add(2, 3) == 5
        assert m.add_twice(2, 3) == 10
        assert host.calls == 1
        assert m.name == "adder" and set(m.exports) == {"add", "add_twice"}
        assert isinstance(m.add, vmrt.Function)
        assert "add_twice" in dir(m)


def test_paths_and_bytes(tmp_path):
    source = tmp_path / "plain.vmasm"
    source.write_text(PLAIN)
    with vmrt.load(source) as m:
        assert m.neg(4) == -4
    with vmrt.load(str(source)) as m:
        assert m.neg(-9) == 9
    with vmrt.load(PLAIN.encode()) as m:
        assert m.neg(1) == -1
    from vmrt.asm import assemble
    binary = assemble(PLAIN)
    vmfb = tmp_path / "plain.vmfb"
    vmfb.write_bytes(binary)
    for source in (vmfb, str(vmfb), binary, bytearray(binary)):
        with vmrt.load(source) as m:
            assert m.neg(3) == -3


def test_vmfb_from_iree_as_module(tmp_path):
    if not shutil.which("iree-as-module"):
        pytest.skip("needs iree-as-module")
    source = tmp_path / "plain.vmasm"
    source.write_text(PLAIN)
    vmfb = tmp_path / "plain.vmfb"
    subprocess.run(["iree-as-module", f"--output={vmfb}", str(source)], check=True)
    with vmrt.load(vmfb) as m:
        assert m.neg(21) == -21


def test_close_releases_the_context():
    m = vmrt.load(PLAIN)
    add = m.neg
    with m:
        assert add(1) == -1
    assert "(closed)" in repr(m) and m.context.instances == []
    with pytest.raises(vmrt.VmrtError) as info:
        m.neg(1)
    assert info.value.code == vmrt.StatusCode.FAILED_PRECONDITION
    m.close()  # closing twice is harmless


def test_context_options_are_passed_on():
    profiler = Profiler()
    with vmrt.load(PLAIN, hooks=[profiler]) as m:
        m.neg(5)
    assert profiler.functions["plain.neg"].instructions == 3
    with vmrt.load(PLAIN, instrumented=True) as m:
        assert m.context.codegen_options.instrumented


def test_missing_export_is_an_attribute_error():
    with vmrt.load(PLAIN) as m:
        with pytest.raises(AttributeError):
            m.nothing
        assert not hasattr(m, "__wrapped__")


def test_bad_sources_are_vmrt_errors(tmp_path):
    with pytest.raises(vmrt.VmrtError) as info:
        vmrt.load(tmp_path / "missing.vmfb")
    assert info.value.code == vmrt.StatusCode.NOT_FOUND
    with pytest.raises(vmrt.VmrtError) as info:
        vmrt.load(12)
    assert info.value.code == vmrt.StatusCode.INVALID_ARGUMENT
    with pytest.raises(vmrt.VmrtError):
        vmrt.load(b"\x00garbage that is not a module")
    with pytest.raises(vmrt.VmrtError):
        vmrt.load("vm.module @broken version 1\nvm.func @f( {\n")
    with pytest.raises(vmrt.VmrtError) as info:
        vmrt.load(ADDER)  # imports host.twice, which nobody provides
    assert info.value.code == vmrt.StatusCode.NOT_FOUND


def test_import_vmrt_stays_cheap():
    code = ("import sys, vmrt; "
            "assert 'vmrt.asm' not in sys.modules and 'vmrt.debug' not in sys.modules; "
            "vmrt.load; assert 'vmrt.api' in sys.modules and 'vmrt.asm' not in sys.modules")
    import sys
    subprocess.run([sys.executable, "-c", code], check=True)
