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
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.errors import HalError
from engine.runtime.hal import commands as cmd
from engine.runtime.hal.buffers import MirroredAllocation, owned_allocation
from engine.runtime.hal.commands import BindingTableEntry, HalCommandBuffer, ResolvedRange, resolve_ref
from engine.runtime.hal.device import BatchRecords, HalExecutable, MirroredMemoryDevice
from engine.runtime.vm.native import StatusCode, VmStatusError

FORMAT_VULKAN_SPIRV = "vulkan-spirv-fb"
# The buffer-device-address dispatch ABI (``--iree-vulkan-dispatch-abi=bda``): same VKE1 container, pipelines
# with ``dispatch_abi=BDA_V1``. Offered only by devices with the bufferDeviceAddress feature.
FORMAT_VULKAN_SPIRV_BDA = "vulkan-spirv-bda-v1"


class VulkanAllocation(MirroredAllocation):
    """Host memory with a ``VulkanBuffer`` copy (``device_state``)."""

    def sync_host(self) -> None:
        if self.device_newer:
            hal_device: VulkanHalDevice = self.device  # type: ignore[assignment]
            self.data[:] = hal_device.vulkan.read(self.device_state, 0, self.size)
            self.device_newer = False

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


class VulkanHalDevice(MirroredMemoryDevice):
    """The HAL device over a Vulkan physical device (``selector`` as ``VulkanDevice`` takes it)."""

    identifier = "vulkan"
    allocation_type = VulkanAllocation

    def __init__(self, selector: int | str | None = None, name: str | None = None, vulkan_device: Any = None):
        if vulkan_device is None:
            from engine.runtime.hal.vulkan import VulkanDevice

            vulkan_device = VulkanDevice(selector)
        self.vulkan = vulkan_device
        super().__init__(name or f"vulkan ({getattr(vulkan_device.info, 'name', 'device')})")

    @property
    def subgroup_size(self) -> int:  # type: ignore[override]
        return int(getattr(self.vulkan.info, "subgroup_size", 0) or 0)

    def supports_format(self, executable_format: str) -> bool:
        return executable_format in self._formats()

    def _formats(self) -> tuple[str, ...]:
        if getattr(self.vulkan, "buffer_device_address", False):
            return (FORMAT_VULKAN_SPIRV, FORMAT_VULKAN_SPIRV_BDA)
        return (FORMAT_VULKAN_SPIRV,)

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

    # -- dispatch: a watched dispatch (or an indirect one) runs in a Vulkan submission of its own

    def _dispatch_op(
        self,
        executable: HalExecutable,
        ordinal: int,
        constants: tuple[int, ...],
        bindings: list[ResolvedRange],
    ) -> tuple[Any, list[tuple[Any, int, int]], list[VulkanAllocation]]:
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
        touched: list[VulkanAllocation] = []
        for b in bindings:
            allocation = owned_allocation(self, b.buffer, VulkanAllocation)  # type: ignore[arg-type]
            start, length = b.buffer.resolve(b.offset, b.length)  # type: ignore[union-attr]
            ranges.append((allocation, start, length))
            touched.append(allocation)
        return pipeline, ranges, touched

    def _record_uploads(self, cb: Any, allocations: list[VulkanAllocation]) -> None:
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

    def _run_vulkan(self, cb: Any, touched: list[VulkanAllocation]) -> None:
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

    # -- batches: what Device.execute plans between watched dispatches runs as one Vulkan submission

    def next_watched(self, commands: Sequence[cmd.Command], start: int) -> int:
        """As ``Device.next_watched``, except that observers reading no bindings (timing only,
        ``reads_bindings = False``) never split a Vulkan submission: they are told ``dispatch_batch``."""
        everyone = self.observers
        self.observers = [o for o in everyone if getattr(o, "reads_bindings", True)]
        try:
            return super().next_watched(commands, start)
        finally:
            self.observers = everyone

    def run_batch(
        self, command_buffer: HalCommandBuffer, start: int, end: int, table: list[BindingTableEntry]
    ) -> None:
        """Run commands ``[start, end)`` (no watched dispatch among them) as one ``VulkanCommandBuffer``: the
        uploads of what the host wrote, the dispatches with a pipeline barrier at each execution barrier, one
        submission and one wait. Transfers (fill, copy, update) and indirect dispatches run on the host side,
        each between two submissions, so they keep the host's exact checks and the transfer listeners.
        Observers are told ``dispatch_batch`` afterwards: host-measured time of the whole stretch (no
        timestamp queries here)."""
        records = BatchRecords(self, table) if self.observers else None
        started = time.perf_counter_ns()
        try:
            stretch: list[cmd.Command] = []
            for command in command_buffer.commands[start:end]:
                if _batchable(command):
                    stretch.append(command)
                    continue
                self._submit_stretch(stretch, table, records)
                stretch = []
                self.run_unwatched(command, table, records)
            self._submit_stretch(stretch, table, records)
        except Exception as e:
            self.batch_failed(records, e)
            raise
        self.batch_ran(records, started, time.perf_counter_ns())

    def _submit_stretch(
        self, commands: list[cmd.Command], table: list[BindingTableEntry], records: BatchRecords | None
    ) -> None:
        """Dispatches and barriers in one submission (resolved and validated before anything is recorded)."""
        steps: list[Any] = []
        touched: list[VulkanAllocation] = []
        dispatches = 0
        for command in commands:
            if isinstance(command, cmd.BarrierCommand):
                if steps:  # a barrier before any dispatch orders nothing of this submission
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
                if records is not None:
                    records.append(
                        self.dispatch_record(
                            executable, command.ordinal, command.workgroup_count, command.constants, bindings,
                            self.dispatch_count + dispatches,
                        )
                    )  # fmt: skip
                dispatches += 1
        if not dispatches:
            return
        cb = self.vulkan.create_command_buffer(f"batch of {dispatches} dispatches")
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
        except HalError as e:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, str(e)) from None
        self.count_dispatches(dispatches)
        self._run_vulkan(cb, touched)


def _batchable(command: cmd.Command) -> bool:
    """Whether a submission of a batch handles ``command`` (indirect workgroup counts are read on the host,
    transfers run there: they split the batch's submissions)."""
    if isinstance(command, cmd.DispatchCommand):
        return command.workgroups_ref is None
    return isinstance(command, _BATCHABLE)


# Commands a batch's submission handles (the no-ops among them change nothing on coherent memory).
_BATCHABLE = (
    cmd.DispatchCommand,
    cmd.BarrierCommand,
    cmd.BeginDebugGroupCommand,
    cmd.EndDebugGroupCommand,
    cmd.AdviseBufferCommand,
    cmd.FlushBufferCommand,
    cmd.InvalidateBufferCommand,
)
