"""The `yieldable_test` native module: the exports and behaviour of upstream's
runtime/src/iree/vm/testing/yieldable_test_module.h, for conformance tests."""

from __future__ import annotations

from vmrt.native import NativeModule, export


class YieldableTestModule(NativeModule, name="yieldable_test", version=0):
    @export("0ii_i")
    def yield_n(self, value, yield_count):
        """Yields `yield_count` times, then returns value + yield_count."""
        for _ in range(max(0, yield_count)):
            yield
        return _wrap32(value + max(0, yield_count))

    @export("0CiDi_i")
    def yield_variadic_sum(self, values, yield_count):
        """Yields `yield_count` times, then returns the span's sum + yield_count."""
        for _ in range(max(0, yield_count)):
            yield
        return _wrap32(sum(v for (v,) in values) + max(0, yield_count))


def _wrap32(x: int) -> int:
    return ((x + 0x80000000) & 0xFFFFFFFF) - 0x80000000
