"""One conformance suite for every device of the emulated HAL (CPU, Vulkan...), written once.

Each case is a function ``case(target)`` that drives a device through the ``hal`` module's exports, the way
a compiled program does, and checks the results against numpy. A device's test file builds a
``ConformanceTarget`` and runs every case of ``CASES``::

    @pytest.mark.parametrize("case", CASES, ids=case_id)
    def test_conformance(case, cpu_target):
        case(cpu_target)

The dispatch cases need one real executable of the device's format: the ``elementwise`` sample's only
dispatch (``out = a * b + |a|`` over 4x8 f32, bindings a, b, out, no constants).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.runtime.hal import constants as c
from engine.runtime.hal.buffers import HalBuffer
from engine.runtime.hal.device import Device, DispatchObserver, DispatchRecord
from engine.runtime.hal.module import HalModule
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vm.values import VmBuffer

F32 = 0x21000020
DEVICE_LOCAL = c.MEMORY_TYPE_DEVICE_LOCAL
USAGE = 0xC03  # TRANSFER | DISPATCH_STORAGE: what compiled programs allocate with
ANY = -1


@dataclass(frozen=True)
class DispatchCase:
    """An executable of the device's format and how to dispatch its elementwise export."""

    format: str
    data: bytes
    export_name: str
    workgroup_count: tuple[int, int, int]


@dataclass
class ConformanceTarget:
    name: str
    make_device: Callable[[], Device]
    elementwise: Callable[[], DispatchCase]


def vm_text(text: str) -> VmBuffer:
    return VmBuffer(np.frombuffer(text.encode(), dtype=np.uint8).copy(), False, "rodata")


def vm_bytes(data: bytes) -> VmBuffer:
    return VmBuffer(np.frombuffer(data, dtype=np.uint8).copy(), False, "rodata")


def _setup(target: ConformanceTarget) -> tuple[HalModule, Device]:
    device = target.make_device()
    return HalModule([device]), device


def _alloc(hal: HalModule, device: Device, size: int) -> HalBuffer:
    return hal.allocator_allocate(hal.device_allocator(device), ANY, DEVICE_LOCAL, USAGE, size)


def _write(buffer: HalBuffer, data: np.ndarray) -> None:
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    buffer.write_view(0, raw.nbytes)[:] = raw


def _read(buffer: HalBuffer, dtype=np.uint8, offset: int = 0, length: int = -1) -> np.ndarray:
    return np.array(buffer.read_view(offset, length)).view(dtype)


def _execute(hal: HalModule, device: Device, cb, table=None) -> None:
    """Submit and wait like compiled programs: signal fence, queue.execute(.indirect), fence.await."""
    fence = hal.fence_create(device, 0)
    if table is None:
        hal.device_queue_execute(device, ANY, None, fence, cb, 0)
    else:
        hal.device_queue_execute_indirect(device, ANY, None, fence, cb, 0, table)
    assert hal.fence_await(-1, 0, [fence]) == 0
    assert hal.fence_query(fence) == 0


def _executable(hal: HalModule, device: Device, target: ConformanceTarget):
    case = target.elementwise()
    exe = hal.executable_create(device, ANY, vm_text(case.format), vm_bytes(case.data), None)
    return case, exe, hal.executable_lookup_function(exe, vm_text(case.export_name))


def _inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((4, 8)).astype(np.float32)
    return a, b


def _expected(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a * b + np.abs(a)


def _check(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    # Kernels may fuse the multiply-add (one rounding); bit-exactness is the end-to-end tests' job.
    np.testing.assert_allclose(got.reshape(4, 8), _expected(a, b), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------- cases


def allocate_zeroed_host_visible(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    buffer = _alloc(hal, device, 1000)
    assert hal.buffer_length(buffer) == 1000
    assert not _read(buffer).any()
    # Programs assert device visibility and the usage they allocated with.
    hal.buffer_assert(
        buffer, vm_text("tensor"), hal.device_allocator(device), 1000, c.MEMORY_TYPE_DEVICE_VISIBLE, USAGE
    )


def fill_patterns(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    buffer = _alloc(hal, device, 64)
    fence = hal.fence_create(device, 0)
    hal.device_queue_fill(device, ANY, None, fence, buffer, 0, 64, 0xAB, 1, 0)
    hal.device_queue_fill(device, ANY, fence, None, buffer, 8, 8, 0x1234, 2, 0)
    cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
    hal.command_buffer_fill_buffer(cb, buffer, 32, 16, 0, 0xDEADBEEF, 4, 0)
    hal.command_buffer_finalize(cb)
    _execute(hal, device, cb)
    got = _read(buffer)
    want = np.full(64, 0xAB, np.uint8)
    want[8:16] = np.frombuffer(np.full(4, 0x1234, "<u2").tobytes(), np.uint8)
    want[32:48] = np.frombuffer(np.full(4, 0xDEADBEEF, "<u4").tobytes(), np.uint8)
    np.testing.assert_array_equal(got, want)


def copy_between_subspans(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    src, dst = _alloc(hal, device, 256), _alloc(hal, device, 256)
    _write(src, np.arange(256, dtype=np.uint8))
    fence = hal.fence_create(device, 0)
    hal.device_queue_copy(device, ANY, None, fence, src, 16, dst, 64, 32, 0)
    assert hal.fence_await(-1, 0, [fence]) == 0
    view = hal.buffer_subspan(dst, 128, 64)
    cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
    hal.command_buffer_copy_buffer(cb, 0, 0, src, 0, view, 0, 16, 0)
    hal.command_buffer_finalize(cb)
    _execute(hal, device, cb)
    got = _read(dst)
    want = np.zeros(256, np.uint8)
    want[64:96] = np.arange(16, 48)
    want[128:144] = np.arange(16)
    np.testing.assert_array_equal(got, want)


def update_from_host(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    buffer = _alloc(hal, device, 64)
    payload = vm_bytes(bytes(range(100, 140)))
    fence = hal.fence_create(device, 0)
    hal.device_queue_update(device, ANY, None, fence, payload, 4, buffer, 0, 16, 0)
    cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
    hal.command_buffer_update_buffer(cb, payload, 0, buffer, 32, 8, 0, 0)
    hal.command_buffer_finalize(cb)
    payload.data[:] = 0  # the update was captured when it was recorded
    _execute(hal, device, cb)
    got = _read(buffer)
    np.testing.assert_array_equal(got[:16], np.arange(104, 120))
    np.testing.assert_array_equal(got[32:40], np.arange(100, 108))
    assert not got[16:32].any() and not got[40:].any()


def dispatch_direct(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    case, exe, ordinal = _executable(hal, device, target)
    a, b = _inputs(1)
    ba, bb, out = _alloc(hal, device, 128), _alloc(hal, device, 128), _alloc(hal, device, 128)
    _write(ba, a)
    _write(bb, b)
    cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
    x, y, z = case.workgroup_count
    bindings = [(0, 0, ba, 0, 128), (0, 0, bb, 0, 128), (0, 0, out, 0, 128)]
    hal.command_buffer_dispatch(cb, exe, ordinal, x, y, z, 0, [], bindings)
    hal.command_buffer_finalize(cb)
    _execute(hal, device, cb)
    _check(_read(out, np.float32).reshape(4, 8), a, b)


def dispatch_indirect_bindings_reused(target: ConformanceTarget) -> None:
    """A reusable command buffer with binding-table slots, replayed with two tables (what __init records)."""
    hal, device = _setup(target)
    case, exe, ordinal = _executable(hal, device, target)
    cb = hal.command_buffer_create(device, 0, 3, ANY, 2)
    x, y, z = case.workgroup_count
    # Slot 0 holds a and b side by side (offsets 0 and 128); slot 1 is the output, at an offset of 64.
    bindings = [(0, 0, None, 0, 128), (0, 0, None, 128, 128), (0, 1, None, 64, 128)]
    hal.command_buffer_dispatch(cb, exe, ordinal, x, y, z, 0, [], bindings)
    hal.command_buffer_execution_barrier(cb, 28, 13, 0)
    hal.command_buffer_finalize(cb)
    for seed in (2, 3):
        a, b = _inputs(seed)
        inputs, out = _alloc(hal, device, 256), _alloc(hal, device, 256)
        _write(inputs, np.concatenate([a.reshape(-1), b.reshape(-1)]))
        _execute(hal, device, cb, [(inputs, 0, 256), (out, 0, 256)])
        _check(_read(out, np.float32, 64, 128).reshape(4, 8), a, b)
        assert not _read(out)[:64].any()
    # A table without the slot a dispatch uses is refused.
    fence = hal.fence_create(device, 0)
    try:
        hal.device_queue_execute_indirect(device, ANY, None, fence, cb, 0, [(inputs, 0, 256)])
    except VmStatusError as e:
        assert e.code in (StatusCode.INVALID_ARGUMENT, StatusCode.OUT_OF_RANGE)
    else:
        raise AssertionError("a binding table with too few entries was accepted")


def dispatch_indirect_workgroup_count(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    case, exe, ordinal = _executable(hal, device, target)
    a, b = _inputs(4)
    ba, bb, out, counts = (_alloc(hal, device, n) for n in (128, 128, 128, 64))
    _write(ba, a)
    _write(bb, b)
    _write(counts, np.array([0, 0, 0, 0, *case.workgroup_count], dtype="<u4"))
    cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
    bindings = [(0, 0, ba, 0, 128), (0, 0, bb, 0, 128), (0, 0, out, 0, 128)]
    hal.command_buffer_dispatch_indirect(cb, exe, ordinal, 0, counts, 16, 0, [], bindings)
    hal.command_buffer_finalize(cb)
    _execute(hal, device, cb)
    _check(_read(out, np.float32).reshape(4, 8), a, b)


def barrier_orders_dispatch_then_copy(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    case, exe, ordinal = _executable(hal, device, target)
    a, b = _inputs(5)
    ba, bb, out, copy = (_alloc(hal, device, 128) for _ in range(4))
    _write(ba, a)
    _write(bb, b)
    cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
    x, y, z = case.workgroup_count
    hal.command_buffer_dispatch(
        cb, exe, ordinal, x, y, z, 0, [], [(0, 0, ba, 0, 128), (0, 0, bb, 0, 128), (0, 0, out, 0, 128)]
    )
    hal.command_buffer_execution_barrier(cb, 28, 13, 0)
    hal.command_buffer_copy_buffer(cb, 0, 0, out, 0, copy, 0, 128, 0)
    hal.command_buffer_execution_barrier(cb, 28, 13, 0)
    hal.command_buffer_fill_buffer(cb, out, 0, 128, 0, 0, 4, 0)
    hal.command_buffer_finalize(cb)
    _execute(hal, device, cb)
    _check(_read(copy, np.float32).reshape(4, 8), a, b)
    assert not _read(out).any()


def barrier_orders_dispatch_then_dispatch(target: ConformanceTarget) -> None:
    """dispatch → execution barrier → a dispatch reading what the first wrote, in one command buffer."""
    hal, device = _setup(target)
    case, exe, ordinal = _executable(hal, device, target)
    a, b = _inputs(9)
    ba, bb, mid, out = (_alloc(hal, device, 128) for _ in range(4))
    _write(ba, a)
    _write(bb, b)
    cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
    x, y, z = case.workgroup_count
    hal.command_buffer_dispatch(
        cb, exe, ordinal, x, y, z, 0, [], [(0, 0, ba, 0, 128), (0, 0, bb, 0, 128), (0, 0, mid, 0, 128)]
    )
    hal.command_buffer_execution_barrier(cb, 28, 13, 0)
    hal.command_buffer_dispatch(
        cb, exe, ordinal, x, y, z, 0, [], [(0, 0, mid, 0, 128), (0, 0, bb, 0, 128), (0, 0, out, 0, 128)]
    )
    hal.command_buffer_finalize(cb)
    _execute(hal, device, cb)
    first = _read(mid, np.float32).reshape(4, 8)
    _check(first, a, b)
    _check(_read(out, np.float32).reshape(4, 8), first, b)
    assert device.dispatch_count == 2


def fences_defer_until_signaled(target: ConformanceTarget) -> None:
    """Work waiting on a fence the host signals later runs when it is signaled, in submission order."""
    hal, device = _setup(target)
    buffer = _alloc(hal, device, 16)
    gate, step1, step2 = (hal.fence_create(device, 0) for _ in range(3))
    hal.device_queue_fill(device, ANY, step1, step2, buffer, 0, 16, 2, 1, 0)  # waits for step1
    hal.device_queue_fill(device, ANY, gate, step1, buffer, 0, 16, 1, 1, 0)  # waits for gate
    assert hal.fence_query(step2) == StatusCode.DEFERRED
    assert hal.fence_await(0, 0, [step2]) == StatusCode.DEADLINE_EXCEEDED
    assert not _read(buffer).any()
    hal.fence_signal(gate)
    assert hal.fence_query(step1) == 0 and hal.fence_query(step2) == 0
    np.testing.assert_array_equal(_read(buffer), np.full(16, 2, np.uint8))
    joined = hal.fence_join(0, [None, step1, step2])
    assert hal.fence_await(-1, 0, [joined, None]) == 0
    assert hal.fence_join(0, [None, None]) is None


def fence_failure_propagates(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    buffer = _alloc(hal, device, 16)
    gate, done = hal.fence_create(device, 0), hal.fence_create(device, 0)
    hal.device_queue_fill(device, ANY, gate, done, buffer, 0, 16, 7, 1, 0)
    hal.fence_fail(gate, int(StatusCode.ABORTED))
    assert hal.fence_query(gate) == StatusCode.ABORTED
    assert hal.fence_query(done) == StatusCode.ABORTED
    assert not _read(buffer).any()  # the waiting work never ran
    try:
        hal.fence_await(-1, 0, [done])
    except VmStatusError as e:
        assert e.code == StatusCode.ABORTED
    else:
        raise AssertionError("awaiting a failed fence succeeded")


class _Recorder(DispatchObserver):
    def __init__(self) -> None:
        self.events: list[tuple[str, DispatchRecord, np.ndarray]] = []

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.events.append(("before", record, np.array(record.bindings[2].data)))

    def after_dispatch(self, record: DispatchRecord) -> None:
        self.events.append(("after", record, np.array(record.bindings[2].data)))


def dispatch_observed(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    recorder = _Recorder()
    device.observers.append(recorder)
    case, exe, ordinal = _executable(hal, device, target)
    a, b = _inputs(6)
    ba, bb, out = _alloc(hal, device, 128), _alloc(hal, device, 128), _alloc(hal, device, 192)
    _write(ba, a)
    _write(bb, b)
    _write(out, np.full(48, -1.0, np.float32))
    cb = hal.command_buffer_create(device, 0, 3, ANY, 1)
    x, y, z = case.workgroup_count
    hal.command_buffer_dispatch(
        cb, exe, ordinal, x, y, z, 0, [], [(0, 0, ba, 0, 128), (0, 0, bb, 0, 128), (0, 0, None, 64, 128)]
    )
    hal.command_buffer_finalize(cb)
    for _ in range(2):
        _execute(hal, device, cb, [(out, 0, 192)])
    assert [e[0] for e in recorder.events] == ["before", "after", "before", "after"]
    first = recorder.events[0][1]
    assert [e[1].sequence for e in recorder.events] == [0, 0, 1, 1]
    assert first.export_name == case.export_name and first.export_ordinal == ordinal
    assert first.executable_format == case.format
    assert first.workgroup_count == case.workgroup_count and first.constants == ()
    assert [(bd.offset, bd.length) for bd in first.bindings] == [(0, 128), (0, 128), (64, 128)]
    np.testing.assert_array_equal(recorder.events[0][2].view(np.float32), np.full(32, -1.0, np.float32))
    _check(recorder.events[1][2].view(np.float32).reshape(4, 8), a, b)
    np.testing.assert_array_equal(np.array(first.bindings[0].data).view(np.float32).reshape(4, 8), a)
    assert device.dispatch_count == 2


def dispatch_argument_errors(target: ConformanceTarget) -> None:
    hal, device = _setup(target)
    case, exe, ordinal = _executable(hal, device, target)
    ba = _alloc(hal, device, 128)
    x, y, z = case.workgroup_count
    for bindings, code in (
        ([(0, 0, ba, 0, 128)] * 2, StatusCode.INVALID_ARGUMENT),  # one binding short
        (
            [(0, 0, ba, 0, 128), (0, 0, ba, 0, 128), (0, 0, None, 0, 128)],
            StatusCode.FAILED_PRECONDITION,
        ),  # null
    ):
        cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
        hal.command_buffer_dispatch(cb, exe, ordinal, x, y, z, 0, [], bindings)
        hal.command_buffer_finalize(cb)
        fence = hal.fence_create(device, 0)
        try:
            hal.device_queue_execute(device, ANY, None, fence, cb, 0)
        except VmStatusError as e:
            assert e.code == code, e
            assert hal.fence_query(fence) == code
        else:
            raise AssertionError(f"dispatch with bindings {bindings} was accepted")


CASES: list[Callable[[ConformanceTarget], None]] = [
    allocate_zeroed_host_visible,
    fill_patterns,
    copy_between_subspans,
    update_from_host,
    dispatch_direct,
    dispatch_indirect_bindings_reused,
    dispatch_indirect_workgroup_count,
    barrier_orders_dispatch_then_copy,
    barrier_orders_dispatch_then_dispatch,
    fences_defer_until_signaled,
    fence_failure_propagates,
    dispatch_observed,
    dispatch_argument_errors,
]


def case_id(case: Callable) -> str:
    return case.__name__
