"""The shared HAL conformance suite (``hal_conformance.py``) on the Vulkan device (lavapipe where no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from hal_conformance import CASES, ConformanceTarget, DispatchCase, case_id

from engine.runtime.hal.convert import buffer_view_from_numpy
from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.runtime.hal.module import HalModule
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.runtime.vm.context import VmContext
from engine.runtime.vmfb.module import open_vmfb

_NO_VULKAN = vulkan_available()
pytestmark = pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}")


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
