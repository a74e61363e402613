"""What a Vulkan device hands out: buffers in device memory, executables built into compute pipelines,
and submissions still running on the queue. Each keeps its device alive and releases its handles once."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.errors import HalError, VulkanError
from engine.runtime.hal.vulkan.vk_constants import (
    BDA_ROOT_V1,
    WHOLE_SIZE,
)
from engine.runtime.vmfb.vke1 import (
    BDA_ENTRY_ADDRESS64,
    DISPATCH_ABI_BDA_V1,
    DISPATCH_ABI_DESCRIPTOR,
    ExecutableDef,
)

if TYPE_CHECKING:
    from engine.runtime.hal.vulkan.device import VulkanDevice


class VulkanBuffer:
    """A buffer in device memory. Host access goes through the device's staging buffer."""

    def __init__(self, device: VulkanDevice, size: int, label: str):
        self.device = device
        self.size = size
        self.label = label
        self.handle, self.memory = device.create_buffer(max(size, 4), host_visible=False)
        # Device memory goes back when the buffer does (an allocation of a finished call is collected, its
        # mirror with it), or at release(), once. Work using a buffer holds it until it finished.
        self._finalizer = weakref.finalize(self, _destroy_buffer, device, self.handle, self.memory)
        self._finalizer.atexit = False  # at exit the device goes as a whole

    @property
    def released(self) -> bool:
        return self.handle is None

    @property
    def device_address(self) -> int:
        """The buffer's ``VkDeviceAddress`` (devices with buffer device addresses only)."""
        if self.handle is None:
            raise VulkanError(f"{self.label}: the buffer is released")
        return self.device.buffer_address(self.handle)

    def release(self) -> None:
        self._finalizer()  # destroys the handles once (not again when the buffer is collected)
        self.handle = self.memory = None

    def __repr__(self) -> str:
        return f"VulkanBuffer({self.label!r}, {self.size} bytes)"


def _destroy_buffer(device: VulkanDevice, handle, memory) -> None:
    if device.handle is not None:
        device.destroy_buffer(handle, memory)
        device.buffers_destroyed += 1


class VulkanPipeline:
    """One entry point of an executable, built as a ``VkPipeline``."""

    def __init__(self, executable: VulkanExecutable, ordinal: int):
        d = executable.definition
        p = d.pipelines[ordinal]
        if p.dispatch_abi not in (DISPATCH_ABI_DESCRIPTOR, DISPATCH_ABI_BDA_V1):
            raise VulkanError(f"{p.entry_point}: unknown dispatch ABI {p.dispatch_abi}")
        self.bda_layout = p.bda_layout if p.dispatch_abi == DISPATCH_ABI_BDA_V1 else None
        if self.bda_layout is not None:
            if not executable.device.buffer_device_address:
                raise VulkanError(
                    f"{p.entry_point}: the BDA dispatch ABI needs buffer device addresses, which "
                    f"{executable.device.info.name} does not support; compile for vulkan-spirv-fb"
                )
            if self.bda_layout.binding_table_entry_type != BDA_ENTRY_ADDRESS64:
                raise VulkanError(
                    f"{p.entry_point}: BDA binding table entry type "
                    f"{self.bda_layout.binding_table_entry_type} is not supported (only ADDRESS64)"
                )
            if self.bda_layout.root_push_constant_length < BDA_ROOT_V1.itemsize:
                raise VulkanError(
                    f"{p.entry_point}: BDA root push constants of "
                    f"{self.bda_layout.root_push_constant_length} bytes, need {BDA_ROOT_V1.itemsize}"
                )
        self.executable = executable
        self.ordinal = ordinal
        self.entry_point = p.entry_point
        layout = d.pipeline_layouts[p.pipeline_layout_ordinal]
        self.push_constant_bytes = layout.push_constant_bytes
        self.layout, self.set_layouts = executable.pipeline_layout(p.pipeline_layout_ordinal)
        # HAL binding i → (set number, binding number, array element), in declaration order.
        self.descriptor_slots: list[tuple[int, int, int]] = [
            (set_no, b.binding, e)
            for set_no, s in enumerate(layout.descriptor_set_layout_ordinals)
            for b in d.descriptor_set_layouts[s].bindings
            for e in range(b.descriptor_count)
        ]
        self.descriptor_types = [
            b.descriptor_type
            for s in layout.descriptor_set_layout_ordinals
            for b in d.descriptor_set_layouts[s].bindings
            for _ in range(b.descriptor_count)
        ]
        # A BDA pipeline has no descriptor sets: its bindings are entries of the binding table.
        self.binding_count = (
            self.bda_layout.binding_count if self.bda_layout is not None else len(self.descriptor_slots)
        )
        self.handle = executable.device.create_compute_pipeline(
            executable.shader_module(p.shader_module_ordinal),
            p.entry_point,
            self.layout,
            executable.constants,
            p.subgroup_size,
        )

    def __repr__(self) -> str:
        return f"VulkanPipeline({self.entry_point!r}, {self.binding_count} bindings)"


class VulkanExecutable:
    """A loaded ``VKE1`` executable; its pipelines are built on first use and kept."""

    def __init__(self, device: VulkanDevice, definition: ExecutableDef, constants: Sequence[int]):
        self.device = device
        self.definition = definition
        self.constants = tuple(int(c) & 0xFFFFFFFF for c in constants)
        self._modules: dict[int, object] = {}
        self._set_layouts: dict[int, object] = {}
        self._layouts: dict[int, tuple[object, list]] = {}
        self._pipelines: dict[int, VulkanPipeline] = {}

    @property
    def entry_points(self) -> tuple[str, ...]:
        return self.definition.entry_points

    def pipeline(self, export: int | str) -> VulkanPipeline:
        """The pipeline of an export, by ordinal or entry-point name (built once)."""
        ordinal = self.definition.pipeline_index(export) if isinstance(export, str) else int(export)
        if not 0 <= ordinal < len(self.definition.pipelines):
            raise HalError(
                f"export ordinal {ordinal} out of range ({len(self.definition.pipelines)} exports)"
            )
        if ordinal not in self._pipelines:
            self._pipelines[ordinal] = VulkanPipeline(self, ordinal)
        return self._pipelines[ordinal]

    def shader_module(self, ordinal: int):
        """The ``VkShaderModule`` of the executable's shader module ``ordinal`` (created once, on first use)."""
        if ordinal not in self._modules:
            self._modules[ordinal] = self.device.create_shader_module(
                self.definition.shader_modules[ordinal].spirv
            )
        return self._modules[ordinal]

    def _set_layout(self, ordinal: int):
        if ordinal not in self._set_layouts:
            self._set_layouts[ordinal] = self.device.create_set_layout(
                self.definition.descriptor_set_layouts[ordinal]
            )
        return self._set_layouts[ordinal]

    def pipeline_layout(self, ordinal: int):
        """The ``VkPipelineLayout`` of pipeline layout ``ordinal`` and its descriptor set layouts (created once)."""
        if ordinal not in self._layouts:
            layout_def = self.definition.pipeline_layouts[ordinal]
            sets = [self._set_layout(s) for s in layout_def.descriptor_set_layout_ordinals]
            self._layouts[ordinal] = (self.device.create_pipeline_layout(sets, layout_def), sets)
        return self._layouts[ordinal]

    def release(self) -> None:
        dev = self.device
        if dev.handle is None:
            return
        vk = dev.vk
        for p in self._pipelines.values():
            vk.vkDestroyPipeline(dev.handle, p.handle, None)
        for layout, _ in self._layouts.values():
            vk.vkDestroyPipelineLayout(dev.handle, layout, None)
        for s in self._set_layouts.values():
            vk.vkDestroyDescriptorSetLayout(dev.handle, s, None)
        for m in self._modules.values():
            vk.vkDestroyShaderModule(dev.handle, m, None)
        self._pipelines.clear()
        self._layouts.clear()
        self._set_layouts.clear()
        self._modules.clear()


class Submission:
    """Work handed to the queue; :meth:`wait` blocks until it finished and frees its resources."""

    def __init__(self, device: VulkanDevice, fence, resources: list):
        self.device = device
        self._fence = fence
        self._resources = resources

    @property
    def done(self) -> bool:
        if self._fence is None:
            return True
        return self.device.vk.lib.vkGetFenceStatus(self.device.handle, self._fence) == 0

    def wait(self, timeout_s: float | None = None) -> None:
        if self._fence is None:
            return
        dev = self.device
        vk = dev.vk
        timeout = WHOLE_SIZE if timeout_s is None else int(timeout_s * 1e9)
        rc = vk.lib.vkWaitForFences(dev.handle, 1, [self._fence], 1, timeout)
        if rc == vk.VK_TIMEOUT:
            raise VulkanError(f"submission did not finish within {timeout_s} s", "VK_TIMEOUT")
        if rc != 0:
            raise VulkanError("waiting for a submission failed", dev.result_str(rc))
        dev.release_encoding(self._fence, self._resources)
        self._fence = None
        self._resources = []
