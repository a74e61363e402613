"""The shared HAL conformance suite (``hal_conformance.py``) on the Vulkan device (lavapipe where no GPU),
and what is particular to it: an unobserved command buffer is one Vulkan submission that computes what the
observed, dispatch-by-dispatch replay computes, and bindings are read back only when someone reads them."""

from __future__ import annotations

import numpy as np
import pytest
from support.hal_conformance import CASES, ConformanceTarget, DispatchCase, case_id

from engine.runtime.hal.convert import buffer_view_from_numpy
from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.runtime.hal.module import HalModule
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.runtime.vm.context import VmContext
from engine.runtime.vmfb.module import open_vmfb

_NO_VULKAN = vulkan_available()
pytestmark = [
    pytest.mark.vulkan,
    pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}"),
]


class _FirstDispatch(DispatchObserver):
    def __init__(self) -> None:
        self.record: DispatchRecord | None = None

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.record = self.record or record


@pytest.fixture(scope="module")
def vulkan_target(compiled) -> ConformanceTarget:
    from engine.runtime.hal.vulkan_hal_device import VulkanHalDevice

    path = compiled.path("elementwise", "vulkan-spirv")
    module = open_vmfb(path)
    (executable,) = module.executables
    # The workgroup count is the host code's choice for this device: learn it by running the program once.
    device = VulkanHalDevice()
    seen = _FirstDispatch()
    device.observers.append(seen)
    context = VmContext([HalModule(device), open_vmfb(path, writable=True)])
    x = np.ones((4, 8), np.float32)
    context.invoke("main", [buffer_view_from_numpy(device, x), buffer_view_from_numpy(device, x)])
    assert seen.record is not None
    case = DispatchCase(
        executable.format, bytes(executable.data), seen.record.export_name, seen.record.workgroup_count
    )
    return ConformanceTarget("vulkan", lambda: VulkanHalDevice(vulkan_device=device.vulkan), lambda: case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_conformance(case, vulkan_target):
    case(vulkan_target)


class _CountingVulkanDevice:
    """A real ``VulkanDevice`` whose ``submit`` calls are counted (subclassed on first use: importing Vulkan
    at collection time would fail where it is missing)."""

    @staticmethod
    def create():
        from engine.runtime.hal.vulkan import VulkanDevice

        class Counting(VulkanDevice):
            submits = 0
            reads = 0

            def read(self, buffer, offset=0, length=None):
                Counting.reads += 1
                return super().read(buffer, offset, length)

            def submit(self, command_buffer, observer=None):
                Counting.submits += 1
                return super().submit(command_buffer, observer)

        return Counting()


def _chain(hal, device, vulkan_target, a, b, links: int):
    """One command buffer: ``links`` dispatches, each reading the previous output, barriers between."""
    from support.hal_conformance import ANY, _alloc, _executable, _execute, _write

    from engine.runtime.hal import constants as c

    case, exe, ordinal = _executable(hal, device, vulkan_target)
    ba, bb = _alloc(hal, device, 128), _alloc(hal, device, 128)
    outs = [_alloc(hal, device, 128) for _ in range(links)]
    _write(ba, a)
    _write(bb, b)
    cb = hal.command_buffer_create(device, c.COMMAND_BUFFER_MODE_ONE_SHOT, 3, ANY, 0)
    x, y, z = case.workgroup_count
    source = ba
    for i, out in enumerate(outs):
        if i:
            hal.command_buffer_execution_barrier(cb, 28, 13, 0)
        bindings = [(0, 0, source, 0, 128), (0, 0, bb, 0, 128), (0, 0, out, 0, 128)]
        hal.command_buffer_dispatch(cb, exe, ordinal, x, y, z, 0, [], bindings)
        source = out
    hal.command_buffer_finalize(cb)
    _execute(hal, device, cb)
    return outs


def test_unobserved_command_buffer_is_one_submission_equal_to_split_replay(vulkan_target):
    from engine.runtime.hal.vulkan_hal_device import VulkanHalDevice

    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = (rng.standard_normal((4, 8)) * 0.5).astype(np.float32)
    vulkan = _CountingVulkanDevice.create()
    batched = VulkanHalDevice(vulkan_device=vulkan)
    before = type(vulkan).submits
    outs = _chain(HalModule([batched]), batched, vulkan_target, a, b, links=4)
    assert type(vulkan).submits - before == 1  # uploads, 4 dispatches and 3 barriers in one submission
    assert batched.dispatch_count == 4
    batched_bytes = [np.array(o.read_view(0, 128)) for o in outs]

    observed = VulkanHalDevice(vulkan_device=vulkan)
    seen = _FirstDispatch()
    observed.observers.append(seen)
    before = type(vulkan).submits
    outs = _chain(HalModule([observed]), observed, vulkan_target, a, b, links=4)
    assert type(vulkan).submits - before == 4  # one per dispatch, so observers see each one alone
    for got, expected in zip(outs, batched_bytes):
        assert np.array_equal(np.array(got.read_view(0, 128)), expected)


class _Counter(DispatchObserver):
    """Counts dispatches; with ``read``, reads each dispatch's first input before it runs."""

    def __init__(self, read: bool) -> None:
        self.read = read
        self.records: list[DispatchRecord] = []
        self.inputs: list[np.ndarray] = []

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.records.append(record)
        if self.read:
            self.inputs.append(np.array(record.bindings[0].data))


def test_bindings_read_back_only_when_an_observer_reads(vulkan_target):
    from support.hal_conformance import _check, _read

    from engine.runtime.hal.vulkan_hal_device import VulkanHalDevice

    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
    for read in (False, True):
        vulkan = _CountingVulkanDevice.create()
        device = VulkanHalDevice(vulkan_device=vulkan)
        counter = _Counter(read)
        device.observers.append(counter)
        outs = _chain(HalModule([device]), device, vulkan_target, a, b, links=3)
        assert len(counter.records) == 3
        # Without reads nothing comes back from the device; reading dispatch i's input (output i-1, written
        # on the device) downloads it: two downloads for three dispatches (the first input is the host's).
        assert type(vulkan).reads == (2 if read else 0)
        if read:
            np.testing.assert_array_equal(counter.inputs[0].view(np.float32).reshape(4, 8), a)
            _check(counter.inputs[1].view(np.float32).reshape(4, 8), a, b)
        final = _read(outs[-1], np.float32)  # a host read downloads it now
        assert type(vulkan).reads == (3 if read else 1)
        _check(final, _read(outs[-2], np.float32).reshape(4, 8), b)
