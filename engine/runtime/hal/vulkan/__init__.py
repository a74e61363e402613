"""The Vulkan device of the emulated HAL: IREE's ``vulkan-spirv-fb`` executables on any Vulkan device
(a GPU, or Mesa's lavapipe on the CPU) through the ``vulkan`` package.

Importing this package never needs Vulkan; opening a device without one raises
:class:`~engine.errors.VulkanUnavailableError` naming the packages to install.
"""

from engine.runtime.hal.vulkan.commands import (
    BufferRange,
    DispatchEvent,
    VulkanCommandBuffer,
)
from engine.runtime.hal.vulkan.device import VulkanDevice
from engine.runtime.hal.vulkan.loader import (
    INSTALL_HINT,
    MemoryHeapInfo,
    MemoryTypeInfo,
    PhysicalDeviceInfo,
    list_physical_devices,
    vulkan_available,
)
from engine.runtime.hal.vulkan.resources import Submission, VulkanBuffer, VulkanExecutable, VulkanPipeline

__all__ = [
    "INSTALL_HINT",
    "BufferRange",
    "DispatchEvent",
    "MemoryHeapInfo",
    "MemoryTypeInfo",
    "PhysicalDeviceInfo",
    "Submission",
    "VulkanBuffer",
    "VulkanCommandBuffer",
    "VulkanDevice",
    "VulkanExecutable",
    "VulkanPipeline",
    "list_physical_devices",
    "vulkan_available",
]
