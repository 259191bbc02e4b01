"""Timeline semaphores and fences: values, waits, callbacks and failure propagation."""

from __future__ import annotations

import threading
import time

import pytest

from vmrt.errors import StatusCode
from vmrt.hal import Fence, HalError, Semaphore
from vmrt.hal.semaphore import deadline_after


def test_signal_is_monotonic():
    semaphore = Semaphore(3)
    semaphore.signal(5)
    assert semaphore.query() == 5
    for value in (5, 4):
        with pytest.raises(HalError) as info:
            semaphore.signal(value)
        assert info.value.code == StatusCode.OUT_OF_RANGE


def test_callbacks_run_when_their_value_is_reached():
    semaphore = Semaphore()
    seen = []
    semaphore.on_reached(2, lambda error: seen.append(("two", error)))
    semaphore.on_reached(1, lambda error: seen.append(("one", error)))
    semaphore.signal(1)
    assert seen == [("one", None)]
    semaphore.signal(3)
    assert seen == [("one", None), ("two", None)]
    semaphore.on_reached(3, lambda error: seen.append(("now", error)))
    assert seen[-1] == ("now", None)


def test_failure_reaches_waiters_callbacks_and_later_queries():
    semaphore = Semaphore()
    errors = []
    semaphore.on_reached(1, errors.append)
    semaphore.fail(HalError("dispatch failed", StatusCode.ABORTED))
    semaphore.fail(HalError("second failure is ignored", StatusCode.INTERNAL))
    assert [e.code for e in errors] == [StatusCode.ABORTED]
    for call in (semaphore.query, lambda: semaphore.wait(1), lambda: semaphore.signal(2)):
        with pytest.raises(HalError) as info:
            call()
        assert info.value.code == StatusCode.ABORTED
        assert info.value.message == "dispatch failed"


def test_wait_blocks_until_another_thread_signals():
    semaphore = Semaphore()
    timer = threading.Timer(0.05, semaphore.signal, args=(1,))
    timer.start()
    semaphore.wait(1, deadline_after(5.0))
    assert semaphore.query() == 1


def test_wait_past_the_deadline():
    semaphore = Semaphore()
    start = time.monotonic()
    with pytest.raises(HalError) as info:
        semaphore.wait(1, deadline_after(0.02))
    assert info.value.code == StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - start >= 0.02


def test_fence_keeps_the_largest_value_per_semaphore_and_joins():
    a, b = Semaphore(), Semaphore()
    fence = Fence([(a, 1), (a, 3), (b, 2)])
    assert fence.timepoints == {a: 3, b: 2}
    other = Fence([(a, 5)])
    fence.extend(other)
    assert fence.timepoints[a] == 5
    assert fence.status() == (StatusCode.DEFERRED, None)
    fence.signal()
    assert fence.is_reached() and a.query() == 5 and b.query() == 2


def test_fence_callback_fires_once_after_all_timepoints():
    a, b = Semaphore(), Semaphore()
    fence = Fence([(a, 1), (b, 1)])
    calls = []
    fence.on_reached(calls.append)
    a.signal(1)
    assert calls == []
    b.signal(1)
    assert calls == [None]
    empty = []
    Fence().on_reached(empty.append)
    assert empty == [None]


def test_fence_failure_status_and_callback():
    a, b = Semaphore(), Semaphore()
    fence = Fence([(a, 1), (b, 1)])
    calls = []
    fence.on_reached(calls.append)
    b.fail(HalError("boom", StatusCode.DATA_LOSS))
    a.signal(1)
    assert len(calls) == 1 and calls[0].code == StatusCode.DATA_LOSS
    code, error = fence.status()
    assert code == StatusCode.DATA_LOSS and error.message == "boom"
