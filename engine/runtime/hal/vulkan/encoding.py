"""Recording the emulated HAL's commands into ``VkCommandBuffer``s: copies, fills, updates, barriers and
dispatches (descriptor sets or IREE's buffer-device-address ABI), then one fenced submission.

``CommandEncoding`` is a part of :class:`~engine.runtime.hal.vulkan.device.VulkanDevice`: it uses the
device's handles, command pool and buffer helpers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.errors import HalError, VulkanError
from engine.runtime.hal.vulkan.commands import (
    AnyDispatch,
    BarrierOp,
    BufferRange,
    CopyOp,
    DispatchIndirectOp,
    DispatchOp,
    FillOp,
    Op,
    UpdateOp,
)
from engine.runtime.hal.vulkan.resources import Submission
from engine.runtime.hal.vulkan.vk_constants import (
    BDA_ROOT_V1,
    COMPUTE,
    DST_ACCESS,
    SRC_ACCESS,
    STAGES,
    STORAGE_BUFFER,
    UPDATE_INLINE_LIMIT,
    WHOLE_SIZE,
)


class CommandEncoding:
    """Command recording and submission of a :class:`VulkanDevice`."""

    def cmd_copy(self, cb, src, src_offset: int, dst, dst_offset: int, n: int) -> None:
        region = self.ffi.new("VkBufferCopy*", {"srcOffset": src_offset, "dstOffset": dst_offset, "size": n})
        self.vk.lib.vkCmdCopyBuffer(cb, src, dst, 1, region)

    def _begin_cb(self):
        vk, ffi = self.vk, self.ffi
        alloc = ffi.new(
            "VkCommandBufferAllocateInfo*",
            {
                "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                "commandPool": self.command_pool,
                "level": vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                "commandBufferCount": 1,
            },
        )
        out = ffi.new("VkCommandBuffer*")
        rc = vk.lib.vkAllocateCommandBuffers(self.handle, alloc, out)
        if rc != 0:
            raise VulkanError("vkAllocateCommandBuffers failed", self.result_str(rc))
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
            raise VulkanError("vkEndCommandBuffer failed", self.result_str(rc))
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
            raise VulkanError("vkQueueSubmit failed", self.result_str(rc))
        return Submission(self, fence[0], [("cb", cb), *resources])

    def release_encoding(self, fence, resources: list) -> None:
        vk, ffi = self.vk, self.ffi
        vk.lib.vkDestroyFence(self.handle, fence, ffi.NULL)
        for kind, obj in resources:
            if kind == "cb":
                vk.lib.vkFreeCommandBuffers(self.handle, self.command_pool, 1, ffi.new("VkCommandBuffer[]", [obj]))
            elif kind == "pool":
                vk.lib.vkDestroyDescriptorPool(self.handle, obj, ffi.NULL)
            elif kind == "buffer":
                self.destroy_buffer(*obj)

    def run_now(self, record) -> None:
        cb = self._begin_cb()
        record(cb)
        self._submit_cb(cb, []).wait()

    def encode_commands(self, ops: Sequence[Op]) -> Submission:
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
                    [{"type": t, "descriptorCount": max(n_desc, 1)} for t in (STORAGE_BUFFER, 6)],
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
                    raise VulkanError("vkCreateDescriptorPool failed", self.result_str(rc))
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
                            "srcAccessMask": SRC_ACCESS,
                            "dstAccessMask": DST_ACCESS,
                        },
                    )
                    vk.lib.vkCmdPipelineBarrier(cb, STAGES, STAGES, 0, 1, barrier, 0, ffi.NULL, 0, ffi.NULL)
                elif isinstance(op, CopyOp):
                    s, t = op.source, op.target
                    if s.byte_length:
                        self.cmd_copy(
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
            self.release_encoding(fence[0], resources)
            raise
        return self._submit_cb(cb, resources)

    def _encode_update(self, cb, target: BufferRange, data: bytes, resources: list) -> None:
        n = len(data)
        if n == 0:
            return
        if n <= UPDATE_INLINE_LIMIT and n % 4 == 0 and target.offset % 4 == 0:
            self.vk.lib.vkCmdUpdateBuffer(
                cb, target.buffer.handle, target.offset, n, self.ffi.from_buffer(data)
            )
            return
        # Unaligned or large: a host-visible upload buffer of its own, copied on the queue.
        buf, mem = self.create_buffer(n, host_visible=True)
        resources.append(("buffer", (buf, mem)))
        mapped = self.vk_call("vkMapMemory", self.vk.vkMapMemory, self.handle, mem, 0, n, 0)
        mapped[0:n] = data
        self.vk.vkUnmapMemory(self.handle, mem)
        self.cmd_copy(cb, buf, 0, target.buffer.handle, target.offset, n)

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
        root = np.zeros(1, BDA_ROOT_V1)
        if p.binding_count:
            table = np.array(
                [r.buffer.device_address + r.offset for r in op.bindings[: p.binding_count]], dtype="<u8"
            )
            buf, mem = self.create_buffer(table.nbytes, host_visible=True)
            resources.append(("buffer", (buf, mem)))
            mapped = self.vk_call("vkMapMemory", vk.vkMapMemory, self.handle, mem, 0, table.nbytes, 0)
            mapped[0 : table.nbytes] = table.tobytes()
            vk.vkUnmapMemory(self.handle, mem)  # host writes before vkQueueSubmit are visible to the queue
            root["binding_table_address"] = self.buffer_address(buf)
        vk.lib.vkCmdBindPipeline(cb, vk.VK_PIPELINE_BIND_POINT_COMPUTE, p.handle)
        root_bytes = root.tobytes()
        vk.lib.vkCmdPushConstants(
            cb,
            p.layout,
            COMPUTE,
            bda.root_push_constant_offset,
            len(root_bytes),
            ffi.from_buffer(root_bytes),
        )
        if op.constants:
            data = ffi.new("uint32_t[]", list(op.constants))
            vk.lib.vkCmdPushConstants(
                cb, p.layout, COMPUTE, bda.constant_push_constant_offset, 4 * len(op.constants), data
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
                raise VulkanError("vkAllocateDescriptorSets failed", self.result_str(rc))
        n = p.binding_count
        if n:
            infos = ffi.new("VkDescriptorBufferInfo[]", n)
            writes = ffi.new("VkWriteDescriptorSet[]", n)
            for i, ((set_no, binding, element), r) in enumerate(zip(p.descriptor_slots, op.bindings)):
                infos[i].buffer = r.buffer.handle
                infos[i].offset = r.offset
                infos[i].range = WHOLE_SIZE if r.length is None or r.length == 0 else r.length
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
            vk.lib.vkCmdPushConstants(cb, p.layout, COMPUTE, 0, 4 * len(op.constants), data)
        if isinstance(op, DispatchOp):
            x, y, z = op.workgroup_count
            vk.lib.vkCmdDispatch(cb, x, y, z)
        else:
            wc = op.workgroup_count_range
            vk.lib.vkCmdDispatchIndirect(cb, wc.buffer.handle, wc.offset)


def ranges_of(op: Op) -> list[BufferRange]:
    if isinstance(op, DispatchOp):
        return list(op.bindings)
    if isinstance(op, DispatchIndirectOp):
        return [*op.bindings, op.workgroup_count_range]
    if isinstance(op, CopyOp):
        return [op.source, op.target]
    if isinstance(op, (FillOp, UpdateOp)):
        return [op.target]
    return []
