"""A Vulkan device for the emulated HAL: buffers, IREE ``VKE1`` executables as compute pipelines, and
submission of recorded command buffers, through the ``vulkan`` package (cffi).

Not thread-safe: one thread drives a device at a time (the debug session's worker).

cffi lifetimes: a struct built by the ``vulkan`` package owns the memory of its strings and arrays, and
frees it when the Python struct dies, even if a copy was put into another struct. Every struct whose
pointers Vulkan reads is therefore kept in a local variable until the call that reads it returns.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from engine.errors import HalError, VulkanError
from engine.runtime.hal.vulkan.commands import (
    AnyDispatch,
    BarrierOp,
    BindingLike,
    BufferRange,
    CopyOp,
    DispatchEvent,
    DispatchIndirectOp,
    DispatchOp,
    FillOp,
    Op,
    UpdateOp,
    VulkanCommandBuffer,
    as_range,
)
from engine.runtime.hal.vulkan.loader import (
    Instance,
    PhysicalDeviceInfo,
    describe_physical_device,
    result_name,
)
from engine.runtime.vmfb.vke1 import (
    BDA_ENTRY_ADDRESS64,
    DISPATCH_ABI_BDA_V1,
    DISPATCH_ABI_DESCRIPTOR,
    ExecutableDef,
    read_vke1,
)

_WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
_COMPUTE = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT
_STORAGE_BUFFER = 7
_UPDATE_INLINE_LIMIT = 65536  # vkCmdUpdateBuffer's maximum

# Buffer device addresses (Vulkan 1.2 core), spelled out: the ``vulkan`` package only names the KHR aliases.
_BUFFER_USAGE_SHADER_DEVICE_ADDRESS = 0x20000
_MEMORY_ALLOCATE_DEVICE_ADDRESS = 0x2
_STYPE_MEMORY_ALLOCATE_FLAGS_INFO = 1000060000
_STYPE_BUFFER_DEVICE_ADDRESS_INFO = 1000244001
# iree_hal_vulkan_bda_dispatch_root_v1_t: binding_table_address, constants_address (u64, zero),
# binding_base, constant_base, flags, reserved0 (u32, zero): 32 bytes.
_BDA_ROOT_V1 = np.dtype(
    [
        ("binding_table_address", "<u8"),
        ("constants_address", "<u8"),
        ("binding_base", "<u4"),
        ("constant_base", "<u4"),
        ("flags", "<u4"),
        ("reserved0", "<u4"),
    ]
)

# execution_barrier: compute and transfer writes → compute, transfer and indirect-argument reads.
_STAGES = 0x800 | 0x1000 | 0x2  # COMPUTE_SHADER | TRANSFER | DRAW_INDIRECT
_SRC_ACCESS = 0x40 | 0x1000  # SHADER_WRITE | TRANSFER_WRITE
_DST_ACCESS = (
    0x20 | 0x40 | 0x800 | 0x1000 | 0x1
)  # SHADER_READ|WRITE, TRANSFER_READ|WRITE, INDIRECT_COMMAND_READ


class VulkanBuffer:
    """A buffer in device memory. Host access goes through the device's staging buffer."""

    def __init__(self, device: VulkanDevice, size: int, label: str):
        self.device = device
        self.size = size
        self.label = label
        self.handle, self.memory = device._create_buffer(max(size, 4), host_visible=False)

    @property
    def released(self) -> bool:
        return self.handle is None

    @property
    def device_address(self) -> int:
        """The buffer's ``VkDeviceAddress`` (devices with buffer device addresses only)."""
        if self.handle is None:
            raise VulkanError(f"{self.label}: the buffer is released")
        return self.device._buffer_address(self.handle)

    def release(self) -> None:
        if self.handle is not None and self.device.handle is not None:
            self.device._destroy_buffer(self.handle, self.memory)
        self.handle = self.memory = None

    def __repr__(self) -> str:
        return f"VulkanBuffer({self.label!r}, {self.size} bytes)"


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
            if self.bda_layout.root_push_constant_length < _BDA_ROOT_V1.itemsize:
                raise VulkanError(
                    f"{p.entry_point}: BDA root push constants of "
                    f"{self.bda_layout.root_push_constant_length} bytes, need {_BDA_ROOT_V1.itemsize}"
                )
        self.executable = executable
        self.ordinal = ordinal
        self.entry_point = p.entry_point
        layout = d.pipeline_layouts[p.pipeline_layout_ordinal]
        self.push_constant_bytes = layout.push_constant_bytes
        self.layout, self.set_layouts = executable._pipeline_layout(p.pipeline_layout_ordinal)
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
        self.handle = executable.device._create_compute_pipeline(
            executable._shader_module(p.shader_module_ordinal),
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

    def _shader_module(self, ordinal: int):
        if ordinal not in self._modules:
            self._modules[ordinal] = self.device._create_shader_module(
                self.definition.shader_modules[ordinal].spirv
            )
        return self._modules[ordinal]

    def _set_layout(self, ordinal: int):
        if ordinal not in self._set_layouts:
            self._set_layouts[ordinal] = self.device._create_set_layout(
                self.definition.descriptor_set_layouts[ordinal]
            )
        return self._set_layouts[ordinal]

    def _pipeline_layout(self, ordinal: int):
        if ordinal not in self._layouts:
            layout_def = self.definition.pipeline_layouts[ordinal]
            sets = [self._set_layout(s) for s in layout_def.descriptor_set_layout_ordinals]
            self._layouts[ordinal] = (self.device._create_pipeline_layout(sets, layout_def), sets)
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
        timeout = _WHOLE_SIZE if timeout_s is None else int(timeout_s * 1e9)
        rc = vk.lib.vkWaitForFences(dev.handle, 1, [self._fence], 1, timeout)
        if rc == vk.VK_TIMEOUT:
            raise VulkanError(f"submission did not finish within {timeout_s} s", "VK_TIMEOUT")
        if rc != 0:
            raise VulkanError("waiting for a submission failed", dev._result_str(rc))
        dev._release_encoding(self._fence, self._resources)
        self._fence = None
        self._resources = []


class VulkanDevice:
    """One Vulkan physical device opened for compute.

    ``selector``: an index into :func:`list_physical_devices`, a substring of a device name (case-insensitive),
    or ``None`` for the first GPU (else the first device).
    """

    def __init__(self, selector: int | str | None = None):
        self.handle = None
        self._instance = Instance()
        vk = self.vk = self._instance.vk
        self.ffi = vk.ffi
        physical = self._instance.physical_devices()
        index = self._select(vk, physical, selector)
        self.physical = physical[index]
        self.info: PhysicalDeviceInfo = describe_physical_device(vk, self.physical, index)
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        compute = [i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
        if not compute:
            raise VulkanError(f"{self.info.name} has no compute queue")
        self.queue_family = compute[0]
        self._create_device()
        self.queue = vk.vkGetDeviceQueue(self.handle, self.queue_family, 0)
        self._memory_props = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        pool_info = vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=self.queue_family
        )
        self._pool = self._call("vkCreateCommandPool", vk.vkCreateCommandPool, self.handle, pool_info, None)
        self._staging = None  # (buffer, memory, size, mapped ffi.buffer)
        self._buffers: weakref.WeakSet[VulkanBuffer] = weakref.WeakSet()
        self._executables: list[VulkanExecutable] = []
        self._live_submissions: list[Submission] = []

    # ----------------------------------------------------------------- set-up and tear-down

    @staticmethod
    def _select(vk, physical: list, selector: int | str | None) -> int:
        if isinstance(selector, int):
            if not 0 <= selector < len(physical):
                raise VulkanError(f"Vulkan device index {selector} out of range ({len(physical)} devices)")
            return selector
        names = [str(vk.vkGetPhysicalDeviceProperties(p).deviceName) for p in physical]
        if selector is None:
            types = [int(vk.vkGetPhysicalDeviceProperties(p).deviceType) for p in physical]
            gpus = [i for i, t in enumerate(types) if t in (1, 2, 3)]
            return gpus[0] if gpus else 0
        matches = [i for i, n in enumerate(names) if selector.lower() in n.lower()]
        if not matches:
            raise VulkanError(f"no Vulkan device name contains {selector!r}; devices: {'; '.join(names)}")
        return matches[0]

    def _create_device(self) -> None:
        vk, ffi = self.vk, self.ffi
        # Enable every core feature the device has: IREE's SPIR-V may declare Int64, Float16, 8/16-bit
        # storage, subgroup size control... and a feature it uses must be enabled at device creation.
        api = vk.vkGetPhysicalDeviceProperties(self.physical).apiVersion
        chain = []
        if api >= vk.VK_MAKE_VERSION(1, 3, 0):
            chain.append(ffi.new("VkPhysicalDeviceVulkan13Features*", {"sType": 53}))
        if api >= vk.VK_MAKE_VERSION(1, 2, 0):
            chain.append(ffi.new("VkPhysicalDeviceVulkan12Features*", {"sType": 51}))
            chain.append(ffi.new("VkPhysicalDeviceVulkan11Features*", {"sType": 49}))
        features2 = ffi.new(
            "VkPhysicalDeviceFeatures2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2}
        )
        nxt = ffi.NULL
        for s in chain:
            s.pNext = nxt
            nxt = s
        features2.pNext = nxt
        if api >= vk.VK_MAKE_VERSION(1, 1, 0):
            vk.lib.vkGetPhysicalDeviceFeatures2(self.physical, features2)
        else:
            features2.features = vk.vkGetPhysicalDeviceFeatures(self.physical)
        self.subgroup_size_control = bool(
            chain and api >= vk.VK_MAKE_VERSION(1, 3, 0) and chain[0].subgroupSizeControl
        )
        # Every supported feature is enabled (features2 goes into the create info as queried), so
        # bufferDeviceAddress is on exactly when the device has it; BDA executables need it.
        v12 = [c for c in chain if ffi.typeof(c) is ffi.typeof("VkPhysicalDeviceVulkan12Features*")]
        self.buffer_device_address = bool(v12 and v12[0].bufferDeviceAddress)
        priorities = ffi.new("float[]", [1.0])
        queue_info = ffi.new(
            "VkDeviceQueueCreateInfo*",
            {
                "sType": vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                "queueFamilyIndex": self.queue_family,
                "queueCount": 1,
                "pQueuePriorities": priorities,
            },
        )
        info = ffi.new(
            "VkDeviceCreateInfo*",
            {
                "sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                "pNext": features2,
                "queueCreateInfoCount": 1,
                "pQueueCreateInfos": queue_info,
            },
        )
        handle = ffi.new("VkDevice*")
        rc = vk.lib.vkCreateDevice(self.physical, info, ffi.NULL, handle)
        if rc != 0:
            raise VulkanError(f"vkCreateDevice on {self.info.name} failed", self._result_str(rc))
        self.handle = handle[0]

    def close(self) -> None:
        """Wait for the queue, then destroy everything this device created."""
        if self.handle is None:
            return
        vk = self.vk
        vk.vkDeviceWaitIdle(self.handle)
        for e in self._executables:
            e.release()
        for b in list(self._buffers):
            b.release()
        if self._staging is not None:
            vk.vkUnmapMemory(self.handle, self._staging[1])
            self._destroy_buffer(self._staging[0], self._staging[1])
            self._staging = None
        vk.vkDestroyCommandPool(self.handle, self._pool, None)
        vk.vkDestroyDevice(self.handle, None)
        self.handle = None
        self._instance.close()

    def __enter__(self) -> VulkanDevice:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def _result_str(self, rc: int) -> str:
        exc = self.vk.exception_codes.get(rc)
        return exc.__name__ if exc is not None else f"VkResult {rc}"

    def _call(self, what: str, fn, *args):
        if self.handle is None and what != "vkCreateDevice":
            raise VulkanError(f"{what}: the device is closed")
        vk = self.vk
        try:
            return fn(*args)
        except (vk.VkError, vk.VkException) as e:
            raise VulkanError(f"{what} failed on {self.info.name}", result_name(e)) from e

    # ----------------------------------------------------------------- memory

    def _memory_type(self, type_bits: int, required: int, preferred: int) -> int:
        m = self._memory_props
        candidates = [
            i
            for i in range(m.memoryTypeCount)
            if type_bits & (1 << i) and (m.memoryTypes[i].propertyFlags & required) == required
        ]
        if not candidates:
            raise VulkanError(f"{self.info.name} has no memory type with flags {required:#x}")
        best = [i for i in candidates if (m.memoryTypes[i].propertyFlags & preferred) == preferred]
        return (best or candidates)[0]

    def _create_buffer(self, size: int, host_visible: bool):
        vk = self.vk
        usage = (
            vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
            | vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT
        )
        if self.buffer_device_address:
            usage |= _BUFFER_USAGE_SHADER_DEVICE_ADDRESS
        info = vk.VkBufferCreateInfo(size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        buf = self._call("vkCreateBuffer", vk.vkCreateBuffer, self.handle, info, None)
        req = vk.vkGetBufferMemoryRequirements(self.handle, buf)
        if host_visible:
            required = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
            preferred = required | vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
        else:
            required = 0
            preferred = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        # ``flags_info`` stays referenced until vkAllocateMemory returns (cffi lifetimes).
        flags_info = None
        if self.buffer_device_address:
            flags_info = self.ffi.new(
                "VkMemoryAllocateFlagsInfo*",
                {"sType": _STYPE_MEMORY_ALLOCATE_FLAGS_INFO, "flags": _MEMORY_ALLOCATE_DEVICE_ADDRESS},
            )
        alloc = vk.VkMemoryAllocateInfo(
            allocationSize=req.size,
            memoryTypeIndex=self._memory_type(req.memoryTypeBits, required, preferred),
            **({"pNext": flags_info} if flags_info is not None else {}),
        )
        try:
            mem = self._call(f"vkAllocateMemory({size} bytes)", vk.vkAllocateMemory, self.handle, alloc, None)
        except VulkanError:
            vk.vkDestroyBuffer(self.handle, buf, None)
            raise
        vk.vkBindBufferMemory(self.handle, buf, mem, 0)
        return buf, mem

    def _buffer_address(self, buf) -> int:
        info = self.ffi.new(
            "VkBufferDeviceAddressInfo*", {"sType": _STYPE_BUFFER_DEVICE_ADDRESS_INFO, "buffer": buf}
        )
        return int(self.vk.lib.vkGetBufferDeviceAddress(self.handle, info))

    def _destroy_buffer(self, buf, mem) -> None:
        self.vk.vkDestroyBuffer(self.handle, buf, None)
        self.vk.vkFreeMemory(self.handle, mem, None)

    def allocate(self, size: int, label: str = "") -> VulkanBuffer:
        """A device-local buffer of ``size`` bytes (contents undefined until written or filled)."""
        if size < 0:
            raise HalError(f"cannot allocate a buffer of {size} bytes")
        if self.handle is None:
            raise VulkanError("allocate: the device is closed")
        b = VulkanBuffer(self, int(size), label or f"buffer{len(self._buffers)}")
        self._buffers.add(b)
        return b

    def _staging_buffer(self, size: int):
        if self._staging is None or self._staging[2] < size:
            if self._staging is not None:
                self.vk.vkUnmapMemory(self.handle, self._staging[1])
                self._destroy_buffer(self._staging[0], self._staging[1])
                self._staging = None
            cap = max(1 << 16, 1 << (max(size, 4) - 1).bit_length())
            buf, mem = self._create_buffer(cap, host_visible=True)
            mapped = self._call("vkMapMemory", self.vk.vkMapMemory, self.handle, mem, 0, cap, 0)
            self._staging = (buf, mem, cap, mapped)
        return self._staging

    def write(
        self, buffer: VulkanBuffer, offset: int, data: bytes | bytearray | memoryview | np.ndarray
    ) -> None:
        """Copy host ``data`` into ``buffer`` at ``offset`` now (through the staging buffer; waits)."""
        raw = memoryview(np.ascontiguousarray(data) if isinstance(data, np.ndarray) else data).cast("B")
        n = len(raw)
        BufferRange(buffer, offset, n).validate("write")
        if n == 0:
            return
        staging = self._staging_buffer(n)
        staging[3][0:n] = raw
        self._run_now(lambda cb: self._cmd_copy(cb, staging[0], 0, buffer.handle, offset, n))

    def read(self, buffer: VulkanBuffer, offset: int = 0, length: int | None = None) -> np.ndarray:
        """A host copy of ``length`` bytes of ``buffer`` from ``offset`` (``None``: to the end), as uint8."""
        r = BufferRange(buffer, offset, length)
        r.validate("read")
        n = r.byte_length
        if n == 0:
            return np.zeros(0, np.uint8)
        staging = self._staging_buffer(n)
        self._run_now(lambda cb: self._cmd_copy(cb, buffer.handle, offset, staging[0], 0, n))
        return np.frombuffer(staging[3], dtype=np.uint8, count=n).copy()

    def read_binding(self, binding: BindingLike) -> np.ndarray:
        """:meth:`read` of a dispatch binding (a :class:`BufferRange` or ``(buffer, offset, length)``)."""
        r = as_range(binding, "read_binding")
        return self.read(r.buffer, r.offset, r.byte_length)

    def fill(
        self,
        buffer: VulkanBuffer,
        offset: int,
        length: int | None,
        pattern: bytes | int,
        pattern_length: int = 4,
    ):
        """Fill a range now (waits). See :meth:`VulkanCommandBuffer.fill`."""
        cb = VulkanCommandBuffer("fill")
        cb.begin()
        cb.fill(BufferRange(buffer, offset, length), pattern, pattern_length)
        cb.end()
        self.submit(cb).wait()

    def copy(
        self, source: VulkanBuffer, source_offset: int, target: VulkanBuffer, target_offset: int, length: int
    ):
        """Copy between buffers now (waits)."""
        cb = VulkanCommandBuffer("copy")
        cb.begin()
        cb.copy(BufferRange(source, source_offset, length), BufferRange(target, target_offset, length))
        cb.end()
        self.submit(cb).wait()

    # ----------------------------------------------------------------- executables

    def load_executable(
        self, data: bytes | bytearray | memoryview | np.ndarray | ExecutableDef, constants: Sequence[int] = ()
    ) -> VulkanExecutable:
        """Load a ``VKE1`` executable (bytes or parsed). ``constants`` are the executable-level constants
        (specialization constants ``constantID = i``)."""
        definition = data if isinstance(data, ExecutableDef) else read_vke1(data)
        exe = VulkanExecutable(self, definition, constants)
        self._executables.append(exe)
        return exe

    def _create_shader_module(self, words: np.ndarray):
        vk = self.vk
        code = np.ascontiguousarray(words, dtype=np.uint32)
        ffi = self.ffi
        words_ptr = ffi.cast("uint32_t*", ffi.from_buffer(code))  # ``code`` stays alive across the call
        info = ffi.new(
            "VkShaderModuleCreateInfo*",
            {
                "sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                "codeSize": code.nbytes,
                "pCode": words_ptr,
            },
        )
        out = ffi.new("VkShaderModule*")
        rc = vk.lib.vkCreateShaderModule(self.handle, info, ffi.NULL, out)
        if rc != 0:
            raise VulkanError("vkCreateShaderModule failed", self._result_str(rc))
        return out[0]

    def _create_set_layout(self, layout_def):
        vk = self.vk
        bindings = [
            vk.VkDescriptorSetLayoutBinding(
                binding=b.binding,
                descriptorType=b.descriptor_type,
                descriptorCount=b.descriptor_count,
                stageFlags=b.stage_flags or _COMPUTE,
            )
            for b in layout_def.bindings
        ]
        info = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=len(bindings), pBindings=bindings or None)
        return self._call(
            "vkCreateDescriptorSetLayout", vk.vkCreateDescriptorSetLayout, self.handle, info, None
        )

    def _create_pipeline_layout(self, set_layouts: list, layout_def):
        vk = self.vk
        ranges = [
            vk.VkPushConstantRange(stageFlags=r.stage_flags or _COMPUTE, offset=r.offset, size=r.size)
            for r in layout_def.push_constant_ranges
        ]
        if sum(r.size for r in layout_def.push_constant_ranges) > self.info.max_push_constants_size:
            raise VulkanError(
                f"the executable needs {layout_def.push_constant_bytes} bytes of push constants; "
                f"{self.info.name} allows {self.info.max_push_constants_size}"
            )
        info = vk.VkPipelineLayoutCreateInfo(
            setLayoutCount=len(set_layouts),
            pSetLayouts=set_layouts or None,
            pushConstantRangeCount=len(ranges),
            pPushConstantRanges=ranges or None,
        )
        return self._call("vkCreatePipelineLayout", vk.vkCreatePipelineLayout, self.handle, info, None)

    def _create_compute_pipeline(
        self, module, entry_point: str, layout, constants: tuple, subgroup_size: int
    ):
        vk, ffi = self.vk, self.ffi
        name = ffi.new("char[]", entry_point.encode())
        spec = ffi.NULL
        if constants:
            entries = ffi.new("VkSpecializationMapEntry[]", len(constants))
            for i in range(len(constants)):
                entries[i].constantID, entries[i].offset, entries[i].size = i, 4 * i, 4
            data = ffi.new("uint32_t[]", list(constants))
            spec = ffi.new(
                "VkSpecializationInfo*",
                {
                    "mapEntryCount": len(constants),
                    "pMapEntries": entries,
                    "dataSize": 4 * len(constants),
                    "pData": data,
                },
            )
        stage_next = ffi.NULL
        if subgroup_size and subgroup_size != self.info.subgroup_size:
            if not self.subgroup_size_control:
                raise VulkanError(
                    f"{entry_point} requires subgroup size {subgroup_size}; {self.info.name} runs "
                    f"{self.info.subgroup_size} and cannot change it (no subgroupSizeControl)"
                )
            stage_next = ffi.new(
                "VkPipelineShaderStageRequiredSubgroupSizeCreateInfo*",
                {
                    "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
                    "requiredSubgroupSize": subgroup_size,
                },
            )
        info = ffi.new(
            "VkComputePipelineCreateInfo*",
            {
                "sType": vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                "stage": {
                    "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                    "pNext": stage_next,
                    "stage": _COMPUTE,
                    "module": module,
                    "pName": name,
                    "pSpecializationInfo": spec,
                },
                "layout": layout,
                "basePipelineIndex": -1,
            },
        )
        out = ffi.new("VkPipeline*")
        rc = vk.lib.vkCreateComputePipelines(self.handle, ffi.NULL, 1, info, ffi.NULL, out)
        if rc != 0:
            raise VulkanError(f"vkCreateComputePipelines for {entry_point} failed", self._result_str(rc))
        return out[0]

    # ----------------------------------------------------------------- command encoding

    def _cmd_copy(self, cb, src, src_offset: int, dst, dst_offset: int, n: int) -> None:
        region = self.ffi.new("VkBufferCopy*", {"srcOffset": src_offset, "dstOffset": dst_offset, "size": n})
        self.vk.lib.vkCmdCopyBuffer(cb, src, dst, 1, region)

    def _begin_cb(self):
        vk, ffi = self.vk, self.ffi
        alloc = ffi.new(
            "VkCommandBufferAllocateInfo*",
            {
                "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                "commandPool": self._pool,
                "level": vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                "commandBufferCount": 1,
            },
        )
        out = ffi.new("VkCommandBuffer*")
        rc = vk.lib.vkAllocateCommandBuffers(self.handle, alloc, out)
        if rc != 0:
            raise VulkanError("vkAllocateCommandBuffers failed", self._result_str(rc))
        begin = ffi.new(
            "VkCommandBufferBeginInfo*",
            {
                "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                "flags": vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
            },
        )
        vk.lib.vkBeginCommandBuffer(out[0], begin)
        return out[0]

    def _submit_cb(self, cb, resources: list) -> Submission:
        vk, ffi = self.vk, self.ffi
        rc = vk.lib.vkEndCommandBuffer(cb)
        if rc != 0:
            raise VulkanError("vkEndCommandBuffer failed", self._result_str(rc))
        fence_info = ffi.new("VkFenceCreateInfo*", {"sType": vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
        fence = ffi.new("VkFence*")
        vk.lib.vkCreateFence(self.handle, fence_info, ffi.NULL, fence)
        cbs = ffi.new("VkCommandBuffer[]", [cb])
        submit = ffi.new(
            "VkSubmitInfo*",
            {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1, "pCommandBuffers": cbs},
        )
        rc = vk.lib.vkQueueSubmit(self.queue, 1, submit, fence[0])
        if rc != 0:
            vk.lib.vkDestroyFence(self.handle, fence[0], ffi.NULL)
            raise VulkanError("vkQueueSubmit failed", self._result_str(rc))
        return Submission(self, fence[0], [("cb", cb), *resources])

    def _release_encoding(self, fence, resources: list) -> None:
        vk, ffi = self.vk, self.ffi
        vk.lib.vkDestroyFence(self.handle, fence, ffi.NULL)
        for kind, obj in resources:
            if kind == "cb":
                vk.lib.vkFreeCommandBuffers(self.handle, self._pool, 1, ffi.new("VkCommandBuffer[]", [obj]))
            elif kind == "pool":
                vk.lib.vkDestroyDescriptorPool(self.handle, obj, ffi.NULL)
            elif kind == "buffer":
                self._destroy_buffer(*obj)

    def _run_now(self, record) -> None:
        cb = self._begin_cb()
        record(cb)
        self._submit_cb(cb, []).wait()

    def _encode(self, ops: Sequence[Op]) -> Submission:
        """Record ``ops`` into one ``VkCommandBuffer`` and submit it."""
        vk, ffi = self.vk, self.ffi
        resources: list = []
        cb = self._begin_cb()
        try:
            dispatches = [op for op in ops if isinstance(op, (DispatchOp, DispatchIndirectOp))]
            pool = None
            if dispatches:
                n_sets = sum(len(op.pipeline.set_layouts) for op in dispatches)
                n_desc = sum(op.pipeline.binding_count for op in dispatches)
                sizes = ffi.new(
                    "VkDescriptorPoolSize[]",
                    [{"type": t, "descriptorCount": max(n_desc, 1)} for t in (_STORAGE_BUFFER, 6)],
                )
                pool_info = ffi.new(
                    "VkDescriptorPoolCreateInfo*",
                    {
                        "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                        "maxSets": max(n_sets, 1),
                        "poolSizeCount": 2,
                        "pPoolSizes": sizes,
                    },
                )
                out = ffi.new("VkDescriptorPool*")
                rc = vk.lib.vkCreateDescriptorPool(self.handle, pool_info, ffi.NULL, out)
                if rc != 0:
                    raise VulkanError("vkCreateDescriptorPool failed", self._result_str(rc))
                pool = out[0]
                resources.append(("pool", pool))
            for op in ops:
                if isinstance(op, (DispatchOp, DispatchIndirectOp)) and op.pipeline.bda_layout is not None:
                    self._encode_dispatch_bda(cb, op, resources)
                elif isinstance(op, (DispatchOp, DispatchIndirectOp)):
                    self._encode_dispatch(cb, pool, op)
                elif isinstance(op, BarrierOp):
                    barrier = ffi.new(
                        "VkMemoryBarrier*",
                        {
                            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            "srcAccessMask": _SRC_ACCESS,
                            "dstAccessMask": _DST_ACCESS,
                        },
                    )
                    vk.lib.vkCmdPipelineBarrier(cb, _STAGES, _STAGES, 0, 1, barrier, 0, ffi.NULL, 0, ffi.NULL)
                elif isinstance(op, CopyOp):
                    s, t = op.source, op.target
                    if s.byte_length:
                        self._cmd_copy(
                            cb, s.buffer.handle, s.offset, t.buffer.handle, t.offset, s.byte_length
                        )
                elif isinstance(op, FillOp):
                    self._encode_fill(cb, op, resources)
                elif isinstance(op, UpdateOp):
                    self._encode_update(cb, op.target, op.data, resources)
        except BaseException:
            vk.lib.vkEndCommandBuffer(cb)
            resources.insert(0, ("cb", cb))
            fence = ffi.new("VkFence*")
            vk.lib.vkCreateFence(
                self.handle,
                ffi.new("VkFenceCreateInfo*", {"sType": vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO}),
                ffi.NULL,
                fence,
            )
            self._release_encoding(fence[0], resources)
            raise
        return self._submit_cb(cb, resources)

    def _encode_update(self, cb, target: BufferRange, data: bytes, resources: list) -> None:
        n = len(data)
        if n == 0:
            return
        if n <= _UPDATE_INLINE_LIMIT and n % 4 == 0 and target.offset % 4 == 0:
            self.vk.lib.vkCmdUpdateBuffer(
                cb, target.buffer.handle, target.offset, n, self.ffi.from_buffer(data)
            )
            return
        # Unaligned or large: a host-visible upload buffer of its own, copied on the queue.
        buf, mem = self._create_buffer(n, host_visible=True)
        resources.append(("buffer", (buf, mem)))
        mapped = self._call("vkMapMemory", self.vk.vkMapMemory, self.handle, mem, 0, n, 0)
        mapped[0:n] = data
        self.vk.vkUnmapMemory(self.handle, mem)
        self._cmd_copy(cb, buf, 0, target.buffer.handle, target.offset, n)

    def _encode_fill(self, cb, op: FillOp, resources: list) -> None:
        t = op.target
        n = t.byte_length
        if n == 0:
            return
        word = (op.pattern * (4 // len(op.pattern)))[:4]
        if t.offset % 4 == 0 and n % 4 == 0:
            self.vk.lib.vkCmdFillBuffer(cb, t.buffer.handle, t.offset, n, int.from_bytes(word, "little"))
        else:  # vkCmdFillBuffer needs 4-byte alignment; IREE allows 1- and 2-byte patterns anywhere
            self._encode_update(cb, t, op.pattern * (n // len(op.pattern)), resources)

    def _encode_dispatch_bda(self, cb, op: AnyDispatch, resources: list) -> None:
        """A ``BDA_V1`` dispatch: a binding table of device addresses (buffer address + binding offset),
        its address in the 32-byte push-constant root, the dispatch constants after it (IREE's
        ``record_dispatch_bda_native``)."""
        vk, ffi = self.vk, self.ffi
        p = op.pipeline
        bda = p.bda_layout
        if len(op.bindings) < p.binding_count:
            raise HalError(
                f"{p.entry_point} takes {p.binding_count} bindings; the dispatch gives {len(op.bindings)}"
            )
        root = np.zeros(1, _BDA_ROOT_V1)
        if p.binding_count:
            table = np.array(
                [r.buffer.device_address + r.offset for r in op.bindings[: p.binding_count]], dtype="<u8"
            )
            buf, mem = self._create_buffer(table.nbytes, host_visible=True)
            resources.append(("buffer", (buf, mem)))
            mapped = self._call("vkMapMemory", vk.vkMapMemory, self.handle, mem, 0, table.nbytes, 0)
            mapped[0 : table.nbytes] = table.tobytes()
            vk.vkUnmapMemory(self.handle, mem)  # host writes before vkQueueSubmit are visible to the queue
            root["binding_table_address"] = self._buffer_address(buf)
        vk.lib.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, p.handle)
        root_bytes = root.tobytes()
        vk.lib.vkCmdPushConstants(
            cb,
            p.layout,
            _COMPUTE,
            bda.root_push_constant_offset,
            len(root_bytes),
            ffi.from_buffer(root_bytes),
        )
        if op.constants:
            data = ffi.new("uint32_t[]", list(op.constants))
            vk.lib.vkCmdPushConstants(
                cb, p.layout, _COMPUTE, bda.constant_push_constant_offset, 4 * len(op.constants), data
            )
        self._cmd_dispatch(cb, op)

    def _cmd_dispatch(self, cb, op: AnyDispatch) -> None:
        if isinstance(op, DispatchOp):
            x, y, z = op.workgroup_count
            self.vk.lib.vkCmdDispatch(cb, x, y, z)
        else:
            wc = op.workgroup_count_range
            self.vk.lib.vkCmdDispatchIndirect(cb, wc.buffer.handle, wc.offset)

    def _encode_dispatch(self, cb, pool, op: AnyDispatch) -> None:
        vk, ffi = self.vk, self.ffi
        p = op.pipeline
        sets = ffi.NULL
        n_sets = len(p.set_layouts)
        if n_sets:
            layouts = ffi.new("VkDescriptorSetLayout[]", p.set_layouts)
            alloc = ffi.new(
                "VkDescriptorSetAllocateInfo*",
                {
                    "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                    "descriptorPool": pool,
                    "descriptorSetCount": n_sets,
                    "pSetLayouts": layouts,
                },
            )
            sets = ffi.new("VkDescriptorSet[]", n_sets)
            rc = vk.lib.vkAllocateDescriptorSets(self.handle, alloc, sets)
            if rc != 0:
                raise VulkanError("vkAllocateDescriptorSets failed", self._result_str(rc))
        n = p.binding_count
        if n:
            infos = ffi.new("VkDescriptorBufferInfo[]", n)
            writes = ffi.new("VkWriteDescriptorSet[]", n)
            for i, ((set_no, binding, element), r) in enumerate(zip(p.descriptor_slots, op.bindings)):
                infos[i].buffer = r.buffer.handle
                infos[i].offset = r.offset
                infos[i].range = _WHOLE_SIZE if r.length is None or r.length == 0 else r.length
                w = writes[i]
                w.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
                w.dstSet = sets[set_no]
                w.dstBinding = binding
                w.dstArrayElement = element
                w.descriptorCount = 1
                w.descriptorType = p.descriptor_types[i]
                w.pBufferInfo = infos + i
            vk.lib.vkUpdateDescriptorSets(self.handle, n, writes, 0, ffi.NULL)
        vk.lib.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, p.handle)
        if n_sets:
            vk.lib.vkCmdBindDescriptorSets(
                cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, n_sets, sets, 0, ffi.NULL
            )
        if op.constants:
            data = ffi.new("uint32_t[]", list(op.constants))
            vk.lib.vkCmdPushConstants(cb, p.layout, _COMPUTE, 0, 4 * len(op.constants), data)
        if isinstance(op, DispatchOp):
            x, y, z = op.workgroup_count
            vk.lib.vkCmdDispatch(cb, x, y, z)
        else:
            wc = op.workgroup_count_range
            vk.lib.vkCmdDispatchIndirect(cb, wc.buffer.handle, wc.offset)

    # ----------------------------------------------------------------- submission

    def create_command_buffer(self, label: str = "") -> VulkanCommandBuffer:
        return VulkanCommandBuffer(label)

    def submit(self, command_buffer: VulkanCommandBuffer, observer=None) -> Submission:
        """Run a recorded command buffer on the queue.

        Without ``observer`` every command goes into one ``VkCommandBuffer`` and the returned
        :class:`Submission` is still running (``wait()`` it). With an observer (see
        :class:`~engine.runtime.hal.vulkan.commands.DispatchObserver`) the submission is split at each
        observed dispatch: the commands before it run and finish, ``observer.before(event)`` is called,
        the dispatch runs alone and finishes, ``observer.after(event)`` is called; the returned
        submission has already finished.
        """
        if command_buffer.state != "executable":
            raise HalError(f"submit: command buffer is {command_buffer.state}; call end() first")
        if self.handle is None:
            raise VulkanError("submit: the device is closed")
        for op in command_buffer.ops:
            for r in _ranges_of(op):
                if r.buffer.released or r.buffer.device is not self:
                    raise HalError(
                        f"submit: buffer {r.buffer.label!r} is released or belongs to another device"
                    )
        if observer is None:
            return self._encode(command_buffer.ops)
        wants = getattr(observer, "wants", None)
        pending: list[Op] = []
        index = 0
        for op in command_buffer.ops:
            if isinstance(op, (DispatchOp, DispatchIndirectOp)) and (wants is None or wants(index, op)):
                if pending:
                    self._encode(pending).wait()
                    pending = []
                observer.before(DispatchEvent("before", index, op))
                self._encode([op]).wait()
                observer.after(DispatchEvent("after", index, op))
            else:
                pending.append(op)
            if isinstance(op, (DispatchOp, DispatchIndirectOp)):
                index += 1
        if pending:
            self._encode(pending).wait()
        return Submission(self, None, [])

    def wait_idle(self) -> None:
        if self.handle is not None:
            rc = self.vk.lib.vkDeviceWaitIdle(self.handle)
            if rc != 0:
                raise VulkanError("vkDeviceWaitIdle failed", self._result_str(rc))


def _ranges_of(op: Op) -> list[BufferRange]:
    if isinstance(op, DispatchOp):
        return list(op.bindings)
    if isinstance(op, DispatchIndirectOp):
        return [*op.bindings, op.workgroup_count_range]
    if isinstance(op, CopyOp):
        return [op.source, op.target]
    if isinstance(op, (FillOp, UpdateOp)):
        return [op.target]
    return []
