"""Context.notify: system signals reach every module, in upstream's order."""

from __future__ import annotations

import pytest

import vmrt
from vmrt.asm import assemble
from vmrt.errors import StatusCode, VMError
from vmrt.io import IndexProvider, ParameterIndex, ProviderSignal
from vmrt.modules.io_parameters import IoParametersModule
from vmrt.vm.context import Signal

HEARD = """vm.module @heard version 1
vm.type i32
vm.import @host.heard cconv "0i_v"
vm.global.i32 mutable @last
vm.export @__notify
vm.func @__notify(%i0: i32) -> () {
^bb0:
  vm.global.store.i32 %i0, @last
  vm.call @host.heard(%i0)
  vm.return
}
vm.export @last
vm.func @last() -> (i32) {
^bb0:
  %i0 = vm.global.load.i32 @last
  vm.return %i0
}
"""


class Host(vmrt.NativeModule, name="host", version=1):
    def __init__(self, log):
        self.log = log

    @vmrt.export("0i_v")
    def heard(self, signal):
        self.log.append(("heard.__notify", signal))

    def notify(self, signal):
        self.log.append(("host", signal))


class Recorder(IndexProvider):
    def __init__(self, log):
        super().__init__("model", ParameterIndex())
        self.log = log

    def notify(self, signal):
        self.log.append(("provider", int(signal)))


def _context(log):
    module = vmrt.load_module(assemble(HEARD))
    return vmrt.Context(modules=[IoParametersModule([Recorder(log)]), Host(log), module])


@pytest.mark.parametrize("signal", [Signal.RESUME, Signal.FORK])
def test_resume_walks_modules_forward(signal):
    log = []
    with _context(log) as ctx:
        ctx.notify(signal)
        assert ctx.function("heard.last")() == signal
    providers = [("provider", signal)] if signal != Signal.FORK else []  # not a provider signal
    assert log == providers + [("host", signal), ("heard.__notify", signal)]


@pytest.mark.parametrize("signal", [Signal.SUSPEND, Signal.LOW_MEMORY])
def test_suspend_walks_modules_backward(signal):
    log = []
    with _context(log) as ctx:
        ctx.notify(signal)
        assert ctx.function("heard.last")() == signal
    assert log == [("heard.__notify", signal), ("host", signal), ("provider", signal)]
    assert ProviderSignal(signal) == signal


def test_unknown_signal_is_an_error():
    with _context([]) as ctx:
        with pytest.raises(VMError) as info:
            ctx.notify(7)
        assert info.value.code == StatusCode.INVALID_ARGUMENT
