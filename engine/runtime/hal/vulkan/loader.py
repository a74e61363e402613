"""Finding Vulkan: the ``vulkan`` package (cffi over ``libvulkan.so.1``), an instance, the physical devices.

Importing this module never fails: ``vulkan`` raises ``OSError`` at import when the loader library is
missing, so it is imported on first use and every way Vulkan can be absent (no loader, no driver, no
device) ends in one :class:`VulkanUnavailableError` whose message says what to install.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from engine.errors import VulkanError, VulkanUnavailableError

INSTALL_HINT = (
    "install a Vulkan loader and driver, e.g. on Debian/Ubuntu: sudo apt-get install libvulkan1 mesa-vulkan-drivers "
    "(Mesa's lavapipe runs Vulkan on the CPU)"
)

_vk: types.ModuleType | None = None


def vulkan_module() -> types.ModuleType:
    """The imported ``vulkan`` package, or :class:`VulkanUnavailableError` if the loader is missing."""
    global _vk
    if _vk is None:
        try:
            import vulkan
        except OSError as e:  # the package could not dlopen libvulkan.so.1
            raise VulkanUnavailableError(
                f"the Vulkan loader (libvulkan.so.1) was not found ({e}); {INSTALL_HINT}"
            ) from e
        except ImportError as e:
            raise VulkanUnavailableError(f"the Python package 'vulkan' is not installed ({e})") from e
        _vk = vulkan
    return _vk


def result_name(exc: BaseException) -> str:
    """The ``VkResult``-like name of an exception raised by the ``vulkan`` package."""
    return type(exc).__name__


def call(what: str, fn, *args):
    """Call a ``vulkan`` function and turn its exceptions into :class:`VulkanError`."""
    vk = vulkan_module()
    try:
        return fn(*args)
    except (vk.VkError, vk.VkException) as e:
        raise VulkanError(f"{what} failed", result_name(e)) from e


class Instance:
    """A ``VkInstance`` owned by Python; destroyed by :meth:`close` (or when collected)."""

    def __init__(self, api_version: tuple[int, int] = (1, 3)):
        vk = vulkan_module()
        self.vk = vk
        # cffi frees strings owned by a struct when the struct dies: keep both alive across the call.
        self._app = vk.VkApplicationInfo(
            pApplicationName="iree-lens",
            applicationVersion=1,
            pEngineName="iree-lens",
            engineVersion=1,
            apiVersion=vk.VK_MAKE_VERSION(api_version[0], api_version[1], 0),
        )
        self._info = vk.VkInstanceCreateInfo(pApplicationInfo=self._app)
        try:
            self.handle = vk.vkCreateInstance(self._info, None)
        except (vk.VkError, vk.VkException) as e:
            raise VulkanUnavailableError(
                f"no Vulkan driver could be loaded: vkCreateInstance returned {result_name(e)}; {INSTALL_HINT}"
            ) from e

    def physical_devices(self) -> list:
        vk = self.vk
        try:
            devices = list(vk.vkEnumeratePhysicalDevices(self.handle))
        except (vk.VkError, vk.VkException) as e:
            raise VulkanUnavailableError(
                f"vkEnumeratePhysicalDevices returned {result_name(e)}; {INSTALL_HINT}"
            ) from e
        if not devices:
            raise VulkanUnavailableError(f"the Vulkan loader found no device; {INSTALL_HINT}")
        return devices

    def close(self) -> None:
        if getattr(self, "handle", None) is not None:
            self.vk.vkDestroyInstance(self.handle, None)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing useful to do
            pass


@dataclass(frozen=True)
class MemoryHeapInfo:
    size: int
    device_local: bool


@dataclass(frozen=True)
class MemoryTypeInfo:
    heap_index: int
    property_flags: int
    flag_names: tuple[str, ...]  # DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT, HOST_CACHED, LAZILY_ALLOCATED


@dataclass(frozen=True)
class PhysicalDeviceInfo:
    """What a debugger user wants to know about one Vulkan physical device. Plain, picklable data."""

    index: int
    name: str
    device_type: str  # integrated-gpu, discrete-gpu, virtual-gpu, cpu, other
    vendor_id: int
    device_id: int
    driver_version: int
    api_version: str  # "1.3.255"
    max_compute_workgroup_count: tuple[int, int, int]
    max_compute_workgroup_size: tuple[int, int, int]
    max_compute_workgroup_invocations: int
    max_compute_shared_memory_size: int
    max_push_constants_size: int
    max_storage_buffer_range: int
    max_bound_descriptor_sets: int
    max_per_stage_descriptor_storage_buffers: int
    min_storage_buffer_offset_alignment: int
    timestamp_period_ns: float
    subgroup_size: int  # 0 when the device does not report it (Vulkan 1.0)
    memory_heaps: tuple[MemoryHeapInfo, ...]
    memory_types: tuple[MemoryTypeInfo, ...]
    queue_families: tuple[tuple[int, int], ...]  # (queue flags, queue count) per family
    extensions: tuple[str, ...]


_DEVICE_TYPES = {0: "other", 1: "integrated-gpu", 2: "discrete-gpu", 3: "virtual-gpu", 4: "cpu"}
_MEMORY_FLAGS = (
    (0x1, "DEVICE_LOCAL"),
    (0x2, "HOST_VISIBLE"),
    (0x4, "HOST_COHERENT"),
    (0x8, "HOST_CACHED"),
    (0x10, "LAZILY_ALLOCATED"),
    (0x20, "PROTECTED"),
)


def _version_str(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def describe_physical_device(vk, physical_device, index: int) -> PhysicalDeviceInfo:
    ffi = vk.ffi
    props = vk.vkGetPhysicalDeviceProperties(physical_device)
    subgroup_size = 0
    if props.apiVersion >= vk.VK_MAKE_VERSION(1, 1, 0):
        sub = ffi.new(
            "VkPhysicalDeviceSubgroupProperties*",
            {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES},
        )
        p2 = ffi.new(
            "VkPhysicalDeviceProperties2*",
            {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": sub},
        )
        vk.lib.vkGetPhysicalDeviceProperties2(physical_device, p2)
        subgroup_size = int(sub.subgroupSize)
    mem = vk.vkGetPhysicalDeviceMemoryProperties(physical_device)
    heaps = tuple(
        MemoryHeapInfo(int(mem.memoryHeaps[i].size), bool(mem.memoryHeaps[i].flags & 1))
        for i in range(mem.memoryHeapCount)
    )
    types_ = tuple(
        MemoryTypeInfo(
            int(mem.memoryTypes[i].heapIndex),
            int(mem.memoryTypes[i].propertyFlags),
            tuple(n for bit, n in _MEMORY_FLAGS if mem.memoryTypes[i].propertyFlags & bit),
        )
        for i in range(mem.memoryTypeCount)
    )
    families = tuple(
        (int(q.queueFlags), int(q.queueCount))
        for q in vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_device)
    )
    exts = tuple(
        sorted(e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical_device, None))
    )
    lim = props.limits
    return PhysicalDeviceInfo(
        index=index,
        name=str(props.deviceName),
        device_type=_DEVICE_TYPES.get(int(props.deviceType), "other"),
        vendor_id=int(props.vendorID),
        device_id=int(props.deviceID),
        driver_version=int(props.driverVersion),
        api_version=_version_str(int(props.apiVersion)),
        max_compute_workgroup_count=tuple(int(x) for x in lim.maxComputeWorkGroupCount),
        max_compute_workgroup_size=tuple(int(x) for x in lim.maxComputeWorkGroupSize),
        max_compute_workgroup_invocations=int(lim.maxComputeWorkGroupInvocations),
        max_compute_shared_memory_size=int(lim.maxComputeSharedMemorySize),
        max_push_constants_size=int(lim.maxPushConstantsSize),
        max_storage_buffer_range=int(lim.maxStorageBufferRange),
        max_bound_descriptor_sets=int(lim.maxBoundDescriptorSets),
        max_per_stage_descriptor_storage_buffers=int(lim.maxPerStageDescriptorStorageBuffers),
        min_storage_buffer_offset_alignment=int(lim.minStorageBufferOffsetAlignment),
        timestamp_period_ns=float(lim.timestampPeriod),
        subgroup_size=subgroup_size,
        memory_heaps=heaps,
        memory_types=types_,
        queue_families=families,
        extensions=exts,
    )


def list_physical_devices() -> list[PhysicalDeviceInfo]:
    """Every Vulkan physical device, described. Raises :class:`VulkanUnavailableError` if there is none."""
    instance = Instance()
    try:
        return [
            describe_physical_device(instance.vk, pd, i) for i, pd in enumerate(instance.physical_devices())
        ]
    finally:
        instance.close()


def vulkan_available() -> str | None:
    """``None`` when a Vulkan device can be opened, else the reason it cannot (the error's message)."""
    try:
        list_physical_devices()
    except VulkanUnavailableError as e:
        return str(e)
    return None
