"""The Vulkan device plugged into the emulated HAL: ``VulkanHalDevice`` runs ``vulkan-spirv-fb`` dispatches
on a ``engine.runtime.hal.vulkan.VulkanDevice`` (a GPU or Mesa's lavapipe).

Memory: each allocation keeps its host numpy array (what the HAL's host operations and the tensor inspector
read) and a mirror ``VulkanBuffer`` in device memory, created on the first dispatch that binds it. Two
flags say which side is newer: a dispatch uploads an allocation the host wrote since the last upload, and
marks every bound allocation as written on the device; the next host read downloads it. Transfers (fill,
copy, update) run on the host side, so only dispatches touch the GPU, and a run that never reads back a
buffer between dispatches never copies it.

It answers ``hal.device.id`` as ``vulkan`` and supports ``vulkan-spirv-fb`` (and ``vulkan-spirv-bda-v1`` on
devices with buffer device addresses), like IREE's Vulkan driver.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engine.errors import HalError
from engine.runtime.hal import commands as cmd
from engine.runtime.hal.buffers import Allocation
from engine.runtime.hal.commands import BindingTableEntry, HalCommandBuffer, ResolvedRange, resolve_ref
from engine.runtime.hal.device import (
    Device,
    DispatchRecord,
    HalExecutable,
    aligned_zeros,
)
from engine.runtime.vm.native import StatusCode, VmStatusError

FORMAT_VULKAN_SPIRV = "vulkan-spirv-fb"
# The buffer-device-address dispatch ABI (``--iree-vulkan-dispatch-abi=bda``): same VKE1 container, pipelines
# with ``dispatch_abi=BDA_V1``. Offered only by devices with the bufferDeviceAddress feature.
FORMAT_VULKAN_SPIRV_BDA = "vulkan-spirv-bda-v1"


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

    def restore_checkpoint(self, state: tuple[int, np.ndarray | None]) -> None:
        if state[1] is not None:
            self.device_newer = False  # the restored bytes replace the device's: no read-back first
        super().restore_checkpoint(state)

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
        return executable_format in self._formats()

    def _formats(self) -> tuple[str, ...]:
        if getattr(self.vulkan, "buffer_device_address", False):
            return (FORMAT_VULKAN_SPIRV, FORMAT_VULKAN_SPIRV_BDA)
        return (FORMAT_VULKAN_SPIRV,)

    def new_allocation(self, size: int, origin: str) -> Allocation:
        return MirroredAllocation(aligned_zeros(size), self, origin)

    def import_allocation(self, data: np.ndarray, origin: str) -> Allocation | None:
        return None  # device memory cannot alias host memory: programs fall back to allocate + copy

    def load_executable_binary(
        self, executable_format: str, data: np.ndarray, constants: tuple[int, ...], label: str
    ) -> HalExecutable:
        """Load an executable without telling the registry (what a substitution loads its replacement with)."""
        if executable_format not in self._formats():
            return super().load_executable_binary(executable_format, data, constants, label)
        try:
            executable = self.vulkan.load_executable(np.array(data, dtype=np.uint8), constants)
        except HalError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"cannot load executable {label}: {e}") from None
        return HalExecutable(self, executable_format, label, list(executable.entry_points), executable)

    # -- dispatch: one Vulkan submission per dispatch (observed or a command buffer that mixes in transfers)

    def _dispatch_op(
        self,
        executable: HalExecutable,
        ordinal: int,
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
    ) -> tuple[Any, list[tuple[Any, int, int]], list[MirroredAllocation]]:
        """The pipeline, the device ranges and the allocations of one dispatch (validated like IREE)."""
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
            if not isinstance(allocation, MirroredAllocation) or allocation.device is not self:
                raise VmStatusError(
                    StatusCode.INVALID_ARGUMENT, f"binding buffer {b.buffer!r} does not belong to {self.name}"
                )
            start, length = b.buffer.resolve(b.offset, b.length)  # type: ignore[union-attr]
            ranges.append((allocation, start, length))
            touched.append(allocation)
        return pipeline, ranges, touched

    def _record_uploads(self, cb: Any, allocations: list[MirroredAllocation]) -> None:
        """Record the host → device copies of the allocations whose host side is newer, then a barrier.

        The bytes travel inside the command buffer (``vkCmdUpdateBuffer``, or an upload buffer of their own
        when large), so uploads cost no submission of their own.
        """
        uploaded = False
        seen: set[int] = set()
        for allocation in allocations:
            if id(allocation) in seen:
                continue
            seen.add(id(allocation))
            if allocation.device_state is None:
                allocation.device_state = self.vulkan.allocate(max(allocation.size, 4), allocation.origin)
                allocation.host_newer = True
            if allocation.host_newer:
                if allocation.size:
                    cb.update((allocation.device_state, 0, allocation.size), allocation.data)
                    uploaded = True
                allocation.host_newer = False
        if uploaded:
            cb.execution_barrier()

    def _run_vulkan(self, cb: Any, touched: list[MirroredAllocation]) -> None:
        try:
            cb.end()
            self.vulkan.submit(cb).wait()
        except HalError as e:
            for allocation in touched:  # what was recorded as uploaded may not have arrived
                allocation.host_newer = True
            raise VmStatusError(StatusCode.INTERNAL, str(e)) from None
        for allocation in touched:
            allocation.device_newer = True  # the kernels may have written any binding

    def run_dispatch(
        self,
        executable: HalExecutable,
        ordinal: int,
        workgroup_count: tuple[int, int, int],
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
    ) -> None:
        pipeline, ranges, touched = self._dispatch_op(executable, ordinal, constants, bindings)
        cb = self.vulkan.create_command_buffer(executable.export_name(ordinal))
        cb.begin()
        self._record_uploads(cb, touched)
        try:
            cb.dispatch(
                pipeline, workgroup_count, list(constants), [(a.device_state, s, n) for a, s, n in ranges]
            )
        except HalError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, str(e)) from None
        self._run_vulkan(cb, touched)

    # -- command buffers: one Vulkan submission for a whole HAL command buffer unless an observer reads bindings

    def execute(self, command_buffer: HalCommandBuffer, table: list[BindingTableEntry]) -> None:
        """Replay a HAL command buffer as one ``VulkanCommandBuffer``: its dispatches, with a pipeline barrier
        at each execution barrier, in one submission waited on with a fence.

        Runs observed by an observer that reads bindings, indirect workgroup counts and command buffers with
        transfers replay command by command (the base class), so observers see every dispatch alone and
        transfers keep the host's exact checks. Timing-only observers (``reads_bindings = False``) keep the
        batch and are told ``dispatch_batch(records, start_ns, end_ns)`` once it has finished: the
        submission's host-measured time, not per-dispatch device times (no timestamp queries here).
        """
        if self.observers_read_bindings or not all(
            _batchable(k) for k in command_buffer.commands
        ):
            super().execute(command_buffer, table)
            return
        self.check_submittable(command_buffer, table)
        # Resolve and validate everything before recording anything, like the command-by-command replay.
        steps: list[Any] = []
        touched: list[MirroredAllocation] = []
        records: list[DispatchRecord] = []
        for command in command_buffer.commands:
            if isinstance(command, cmd.BarrierCommand):
                steps.append(None)
            elif isinstance(command, cmd.DispatchCommand):
                executable = command.executable
                bindings = [resolve_ref(b, table) for b in command.bindings]
                self.check_dispatch(executable, command.ordinal, bindings)
                pipeline, ranges, used = self._dispatch_op(
                    executable, command.ordinal, command.constants, bindings
                )
                steps.append((pipeline, command.workgroup_count, list(command.constants), ranges))
                touched += used
                if self.observers:  # timing-only observers: told the whole batch after it ran
                    records.append(
                        self.dispatch_record(
                            executable,
                            command.ordinal,
                            command.workgroup_count,
                            command.constants,
                            bindings,
                            self.dispatch_count + len(records),
                        )
                    )
        command_buffer.submissions += 1
        cb = self.vulkan.create_command_buffer(f"command buffer ({len(steps)} commands)")
        cb.begin()
        self._record_uploads(cb, touched)
        try:
            for step in steps:
                if step is None:
                    cb.execution_barrier()
                    continue
                pipeline, workgroup_count, constants, ranges = step
                cb.dispatch(
                    pipeline, workgroup_count, constants, [(a.device_state, s, n) for a, s, n in ranges]
                )
                self.count_dispatch()
        except HalError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, str(e)) from None
        started = time.perf_counter_ns()
        self._run_vulkan(cb, touched)
        if records:
            ended = time.perf_counter_ns()
            for observer in list(self.observers):
                observer.dispatch_batch(records, started, ended)


def _batchable(command: cmd.Command) -> bool:
    """Whether a whole-command-buffer submission handles ``command`` (indirect workgroup counts are read
    on the host, so they replay command by command)."""
    if isinstance(command, cmd.DispatchCommand):
        return command.workgroups_ref is None
    return isinstance(command, _BATCHABLE)


# Commands a whole-command-buffer submission handles; the rest change nothing on coherent memory.
_BATCHABLE = (
    cmd.DispatchCommand,
    cmd.BarrierCommand,
    cmd.BeginDebugGroupCommand,
    cmd.EndDebugGroupCommand,
    cmd.AdviseBufferCommand,
    cmd.FlushBufferCommand,
    cmd.InvalidateBufferCommand,
)
