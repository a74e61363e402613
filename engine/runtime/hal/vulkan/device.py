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
    BindingLike,
    BufferRange,
    DispatchEvent,
    DispatchIndirectOp,
    DispatchOp,
    Op,
    VulkanCommandBuffer,
    as_range,
)
from engine.runtime.hal.vulkan.encoding import CommandEncoding, ranges_of
from engine.runtime.hal.vulkan.loader import (
    Instance,
    PhysicalDeviceInfo,
    describe_physical_device,
    result_name,
)
from engine.runtime.hal.vulkan.resources import Submission, VulkanBuffer, VulkanExecutable
from engine.runtime.hal.vulkan.vk_constants import (
    BUFFER_USAGE_SHADER_DEVICE_ADDRESS,
    COMPUTE,
    MEMORY_ALLOCATE_DEVICE_ADDRESS,
    STYPE_BUFFER_DEVICE_ADDRESS_INFO,
    STYPE_MEMORY_ALLOCATE_FLAGS_INFO,
)
from engine.runtime.vmfb.vke1 import (
    ExecutableDef,
    read_vke1,
)


class VulkanDevice(CommandEncoding):
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
        self.command_pool = self.vk_call("vkCreateCommandPool", vk.vkCreateCommandPool, self.handle, pool_info, None)
        self._staging = None  # (buffer, memory, size, mapped ffi.buffer)
        self._buffers: weakref.WeakSet[VulkanBuffer] = weakref.WeakSet()
        self._executables: list[VulkanExecutable] = []
        self._live_submissions: list[Submission] = []
        self.buffers_created = 0  # device buffers allocate() made, and those destroyed since (released or collected)
        self.buffers_destroyed = 0
        self.submission_count = 0  # submit() calls so far, each one VkCommandBuffer (host reads/writes not counted)

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
            raise VulkanError(f"vkCreateDevice on {self.info.name} failed", self.result_str(rc))
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
            self.destroy_buffer(self._staging[0], self._staging[1])
            self._staging = None
        vk.vkDestroyCommandPool(self.handle, self.command_pool, None)
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

    def result_str(self, rc: int) -> str:
        exc = self.vk.exception_codes.get(rc)
        return exc.__name__ if exc is not None else f"VkResult {rc}"

    def vk_call(self, what: str, fn, *args):
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

    def create_buffer(self, size: int, host_visible: bool):
        vk = self.vk
        usage = (
            vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
            | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
            | vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT
        )
        if self.buffer_device_address:
            usage |= BUFFER_USAGE_SHADER_DEVICE_ADDRESS
        info = vk.VkBufferCreateInfo(size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        buf = self.vk_call("vkCreateBuffer", vk.vkCreateBuffer, self.handle, info, None)
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
                {"sType": STYPE_MEMORY_ALLOCATE_FLAGS_INFO, "flags": MEMORY_ALLOCATE_DEVICE_ADDRESS},
            )
        alloc = vk.VkMemoryAllocateInfo(
            allocationSize=req.size,
            memoryTypeIndex=self._memory_type(req.memoryTypeBits, required, preferred),
            **({"pNext": flags_info} if flags_info is not None else {}),
        )
        try:
            mem = self.vk_call(f"vkAllocateMemory({size} bytes)", vk.vkAllocateMemory, self.handle, alloc, None)
        except VulkanError:
            vk.vkDestroyBuffer(self.handle, buf, None)
            raise
        vk.vkBindBufferMemory(self.handle, buf, mem, 0)
        return buf, mem

    def buffer_address(self, buf) -> int:
        info = self.ffi.new(
            "VkBufferDeviceAddressInfo*", {"sType": STYPE_BUFFER_DEVICE_ADDRESS_INFO, "buffer": buf}
        )
        return int(self.vk.lib.vkGetBufferDeviceAddress(self.handle, info))

    def destroy_buffer(self, buf, mem) -> None:
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
        self.buffers_created += 1
        return b

    def _staging_buffer(self, size: int):
        if self._staging is None or self._staging[2] < size:
            if self._staging is not None:
                self.vk.vkUnmapMemory(self.handle, self._staging[1])
                self.destroy_buffer(self._staging[0], self._staging[1])
                self._staging = None
            cap = max(1 << 16, 1 << (max(size, 4) - 1).bit_length())
            buf, mem = self.create_buffer(cap, host_visible=True)
            mapped = self.vk_call("vkMapMemory", self.vk.vkMapMemory, self.handle, mem, 0, cap, 0)
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
        self.run_now(lambda cb: self.cmd_copy(cb, staging[0], 0, buffer.handle, offset, n))

    def read(self, buffer: VulkanBuffer, offset: int = 0, length: int | None = None) -> np.ndarray:
        """A host copy of ``length`` bytes of ``buffer`` from ``offset`` (``None``: to the end), as uint8."""
        r = BufferRange(buffer, offset, length)
        r.validate("read")
        n = r.byte_length
        if n == 0:
            return np.zeros(0, np.uint8)
        staging = self._staging_buffer(n)
        self.run_now(lambda cb: self.cmd_copy(cb, buffer.handle, offset, staging[0], 0, n))
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

    def create_shader_module(self, words: np.ndarray):
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
            raise VulkanError("vkCreateShaderModule failed", self.result_str(rc))
        return out[0]

    def create_set_layout(self, layout_def):
        vk = self.vk
        bindings = [
            vk.VkDescriptorSetLayoutBinding(
                binding=b.binding,
                descriptorType=b.descriptor_type,
                descriptorCount=b.descriptor_count,
                stageFlags=b.stage_flags or COMPUTE,
            )
            for b in layout_def.bindings
        ]
        info = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=len(bindings), pBindings=bindings or None)
        return self.vk_call(
            "vkCreateDescriptorSetLayout", vk.vkCreateDescriptorSetLayout, self.handle, info, None
        )

    def create_pipeline_layout(self, set_layouts: list, layout_def):
        vk = self.vk
        ranges = [
            vk.VkPushConstantRange(stageFlags=r.stage_flags or COMPUTE, offset=r.offset, size=r.size)
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
        return self.vk_call("vkCreatePipelineLayout", vk.vkCreatePipelineLayout, self.handle, info, None)

    def create_compute_pipeline(
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
                    "stage": COMPUTE,
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
            raise VulkanError(f"vkCreateComputePipelines for {entry_point} failed", self.result_str(rc))
        return out[0]

    # ----------------------------------------------------------------- submission

    def create_command_buffer(self, label: str = "") -> VulkanCommandBuffer:
        return VulkanCommandBuffer(label)

    def submit(self, command_buffer: VulkanCommandBuffer, observer=None) -> Submission:
        """Run a recorded command buffer on the queue.

        Without ``observer`` every command goes into one ``VkCommandBuffer`` and the returned
        :class:`Submission` is still running (``wait()`` it). With an observer (see
        :class:`~engine.runtime.hal.device.DispatchObserver`, told a ``DispatchEvent``) the submission is
        split at each observed dispatch: the commands before it run and finish,
        ``observer.before_dispatch(event)`` is called, the dispatch runs alone and finishes,
        ``observer.after_dispatch(event)`` is called; the returned
        submission has already finished.
        """
        if command_buffer.state != "executable":
            raise HalError(f"submit: command buffer is {command_buffer.state}; call end() first")
        if self.handle is None:
            raise VulkanError("submit: the device is closed")
        for op in command_buffer.ops:
            for r in ranges_of(op):
                if r.buffer.released or r.buffer.device is not self:
                    raise HalError(
                        f"submit: buffer {r.buffer.label!r} is released or belongs to another device"
                    )
        if observer is None:
            self.submission_count += 1
            return self.encode_commands(command_buffer.ops)
        wants = getattr(observer, "wants", None)
        pending: list[Op] = []
        index = 0
        for op in command_buffer.ops:
            if isinstance(op, (DispatchOp, DispatchIndirectOp)) and (wants is None or wants(index, op)):
                if pending:
                    self.submission_count += 1
                    self.encode_commands(pending).wait()
                    pending = []
                observer.before_dispatch(DispatchEvent("before", index, op))
                self.submission_count += 1
                self.encode_commands([op]).wait()
                observer.after_dispatch(DispatchEvent("after", index, op))
            else:
                pending.append(op)
            if isinstance(op, (DispatchOp, DispatchIndirectOp)):
                index += 1
        if pending:
            self.submission_count += 1
            self.encode_commands(pending).wait()
        return Submission(self, None, [])

    def wait_idle(self) -> None:
        if self.handle is not None:
            rc = self.vk.lib.vkDeviceWaitIdle(self.handle)
            if rc != 0:
                raise VulkanError("vkDeviceWaitIdle failed", self.result_str(rc))
