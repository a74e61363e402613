"""The Vulkan device plugged into the emulated HAL: ``VulkanHalDevice`` runs ``vulkan-spirv-fb`` dispatches
on a ``engine.runtime.hal.vulkan.VulkanDevice`` (a GPU or Mesa's lavapipe).

Memory: each allocation keeps its host numpy array (what the HAL's host operations and the tensor inspector
read) and a mirror ``VulkanBuffer`` in device memory, created on the first dispatch that binds it. Two
flags say which side is newer: a dispatch uploads an allocation the host wrote since the last upload, and
marks every bound allocation as written on the device; the next host read downloads it. Transfers (fill,
copy, update) run on the host side, so only dispatches touch the GPU, and a run that never reads back a
buffer between dispatches never copies it.

It answers ``hal.device.id`` as ``vulkan`` and supports ``vulkan-spirv-fb``, like IREE's Vulkan driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.errors import HalError
from engine.runtime.hal.buffers import Allocation
from engine.runtime.hal.commands import ResolvedRange
from engine.runtime.hal.device import Device, HalExecutable, aligned_zeros
from engine.runtime.vm.native import StatusCode, VmStatusError

FORMAT_VULKAN_SPIRV = "vulkan-spirv-fb"


class MirroredAllocation(Allocation):
    """Host memory with a device copy; ``host_newer``/``device_newer`` say which side to copy from."""

    def __init__(self, data: np.ndarray, device: VulkanHalDevice, origin: str):
        super().__init__(data, device, origin)
        self.host_newer = True
        self.device_newer = False

    def _download(self) -> None:
        if self.device_newer:
            hal_device: VulkanHalDevice = self.device  # type: ignore[assignment]
            self.data[:] = hal_device.vulkan.read(self.device_state, 0, self.size)
            self.device_newer = False

    def read_view(self, offset: int, length: int) -> np.ndarray:
        self._download()
        return self.data[offset : offset + length]

    def write_view(self, offset: int, length: int) -> np.ndarray:
        self._download()
        self.host_newer = True
        return self.data[offset : offset + length]

    def device_buffer(self) -> Any:
        """The up-to-date device copy (created and uploaded as needed)."""
        hal_device: VulkanHalDevice = self.device  # type: ignore[assignment]
        if self.device_state is None:
            self.device_state = hal_device.vulkan.allocate(max(self.size, 4), self.origin)
            self.host_newer = True
        if self.host_newer:
            if self.size:
                hal_device.vulkan.write(self.device_state, 0, self.data)
            self.host_newer = False
        return self.device_state


class VulkanHalDevice(Device):
    """The HAL device over a Vulkan physical device (``selector`` as ``VulkanDevice`` takes it)."""

    identifier = "vulkan"

    def __init__(self, selector: int | str | None = None, name: str | None = None, vulkan_device: Any = None):
        if vulkan_device is None:
            from engine.runtime.hal.vulkan import VulkanDevice

            vulkan_device = VulkanDevice(selector)
        self.vulkan = vulkan_device
        super().__init__(name or f"vulkan ({getattr(vulkan_device.info, 'name', 'device')})")

    def supports_format(self, executable_format: str) -> bool:
        return executable_format == FORMAT_VULKAN_SPIRV

    def new_allocation(self, size: int, origin: str) -> Allocation:
        return MirroredAllocation(aligned_zeros(size), self, origin)

    def import_allocation(self, data: np.ndarray, origin: str) -> Allocation | None:
        return None  # device memory cannot alias host memory: programs fall back to allocate + copy

    def create_executable(
        self, executable_format: str, data: np.ndarray, constants: tuple[int, ...], label: str
    ) -> HalExecutable:
        if executable_format != FORMAT_VULKAN_SPIRV:
            return super().create_executable(executable_format, data, constants, label)
        try:
            executable = self.vulkan.load_executable(np.array(data, dtype=np.uint8), constants)
        except HalError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"cannot load executable {label}: {e}") from None
        return HalExecutable(self, executable_format, label, list(executable.entry_points), executable)

    def run_dispatch(
        self,
        executable: HalExecutable,
        ordinal: int,
        workgroup_count: tuple[int, int, int],
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
    ) -> None:
        try:
            pipeline = executable.impl.pipeline(ordinal)
        except HalError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, str(e)) from None
        if len(bindings) != pipeline.binding_count:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"binding count mismatch, expected {pipeline.binding_count} but was provided {len(bindings)}",
            )
        if len(constants) * 4 > pipeline.push_constant_bytes:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"constant count mismatch, expected {pipeline.push_constant_bytes // 4} but was provided "
                f"{len(constants)}",
            )
        ranges = []
        touched: list[MirroredAllocation] = []
        for b in bindings:
            allocation = b.buffer.allocation  # type: ignore[union-attr]
            if not isinstance(allocation, MirroredAllocation):
                raise VmStatusError(
                    StatusCode.INVALID_ARGUMENT, f"binding buffer {b.buffer!r} does not belong to {self.name}"
                )
            start, length = b.buffer.resolve(b.offset, b.length)  # type: ignore[union-attr]
            ranges.append((allocation.device_buffer(), start, length))
            touched.append(allocation)
        try:
            cb = self.vulkan.create_command_buffer(executable.export_name(ordinal))
            cb.begin()
            cb.dispatch(pipeline, workgroup_count, list(constants), ranges)
            cb.end()
            self.vulkan.submit(cb).wait()
        except HalError as e:
            raise VmStatusError(StatusCode.INTERNAL, str(e)) from None
        for allocation in touched:
            allocation.device_newer = True  # the kernel may have written any binding
