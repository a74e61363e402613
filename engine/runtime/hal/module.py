"""The ``hal`` native module (version 7) for our VM: the 60 exports of IREE 3.13 with their exact cconvs.

Each export follows ``runtime/src/iree/modules/hal/module.c``: the same argument order, the same checks, and
the same status codes and messages where a program can observe them (``buffer_view.assert`` failures read
exactly like IREE's, so a bad input shape fails the same way in both engines). Collectives and channels
raise UNIMPLEMENTED, as on IREE's CPU devices.

Queue operations run synchronously on the device (see ``device.Device.submit``); command buffers are
recorded as plain data (``commands``) and replayed at submission with the submission's binding table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.runtime import element_types as et
from engine.runtime.hal import commands as cmd
from engine.runtime.hal import constants as c
from engine.runtime.hal.buffers import HalAllocator, HalBuffer, HalBufferView, HalFile
from engine.runtime.hal.commands import BindingTableEntry, BufferRef, HalCommandBuffer, ResolvedRange
from engine.runtime.hal.cpu_device import CpuDevice
from engine.runtime.hal.device import Device, HalExecutable
from engine.runtime.hal.sync import HalFence, HalSemaphore
from engine.runtime.vm.native import NativeModule, StatusCode, VmStatusError, export
from engine.runtime.vm.values import KeepsNothing, VmBuffer, ref_type_name

MAX_DESCRIPTOR_BINDING_COUNT = 32  # IREE_HAL_MODULE_MAX_DESCRIPTOR_BINDING_COUNT

BufferViewTraceSink = Callable[[str, list[HalBufferView]], None]


def _deref(ref: Any, cls: type, type_name: str) -> Any:
    if ref is None:
        raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"ref is null; expected {type_name}")
    if not isinstance(ref, cls):
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT,
            f"ref type mismatch; expected {type_name} but have {ref_type_name(ref)}",
        )
    return ref


def _deref_or_null(ref: Any, cls: type, type_name: str) -> Any:
    return None if ref is None else _deref(ref, cls, type_name)


def _device(ref: Any) -> Device:
    return _deref(ref, Device, "hal.device")


def _buffer(ref: Any) -> HalBuffer:
    return _deref(ref, HalBuffer, "hal.buffer")


def _buffer_or_null(ref: Any) -> HalBuffer | None:
    return _deref_or_null(ref, HalBuffer, "hal.buffer")


def _buffer_view(ref: Any) -> HalBufferView:
    return _deref(ref, HalBufferView, "hal.buffer_view")


def _vm_buffer(ref: Any) -> VmBuffer:
    return _deref(ref, VmBuffer, "vm.buffer")


def _command_buffer(ref: Any) -> HalCommandBuffer:
    return _deref(ref, HalCommandBuffer, "hal.command_buffer")


def _fence_or_null(ref: Any) -> HalFence | None:
    return _deref_or_null(ref, HalFence, "hal.fence")


def _queue(device: Any, wait_fence: Any, signal_fence: Any) -> tuple[Device, HalFence | None, HalFence | None]:
    """A queue operation's device and the fences it waits on and signals (either may be null)."""
    return _device(device), _fence_or_null(wait_fence), _fence_or_null(signal_fence)


def _vm_buffer_range(buffer: VmBuffer, offset: int, length: int) -> np.ndarray:
    """``iree_vm_buffer_map_ro`` with alignment 1."""
    if offset < 0 or length < 0 or offset + length > buffer.length:
        raise VmStatusError(
            StatusCode.OUT_OF_RANGE,
            f"out-of-bounds access detected (offset={offset}, length={length}, alignment=1, "
            f"buffer length={buffer.length})",
        )
    return buffer.data[offset : offset + length]


def _pattern_bytes(pattern: int, pattern_length: int) -> bytes:
    if pattern_length not in (1, 2, 4, 8):
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT, f"fill patterns must be 1, 2, or 4 bytes (got {pattern_length})"
        )
    return (pattern & ((1 << (8 * pattern_length)) - 1)).to_bytes(pattern_length, "little")


def _element_types_compatible(actual: int, expected: int) -> bool:
    """``iree_hal_element_types_are_compatible``: opaque passes, same-width integers pass, else exact."""
    actual_nt, expected_nt = (actual >> 24) & 0xFF, (expected >> 24) & 0xFF
    if actual_nt == et.UNKNOWN:
        return True
    if actual_nt & et.INTEGER == et.INTEGER and expected_nt & et.INTEGER == et.INTEGER:
        if actual & 0xFF == expected & 0xFF:
            return True
    return actual == expected


def buffer_view_assert(
    view: HalBufferView, message: str, element_type: int, encoding_type: int, shape: Sequence[int]
) -> None:
    """``iree_hal_modules_buffer_view_assert`` with the release build's messages and annotations."""
    element_type &= 0xFFFFFFFF
    encoding_type &= 0xFFFFFFFF
    if view.encoding_type != c.ENCODING_TYPE_OPAQUE and view.encoding_type != encoding_type:
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT,
            f"{message} encoding mismatch; expected {encoding_type:08X} but have {view.encoding_type:08X}",
        )
    if not _element_types_compatible(view.element_type, element_type):
        expected_name = et.ElementType(element_type).name
        actual_name = et.ElementType(view.element_type).name
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT,
            f"{message} element type mismatch; expected {expected_name} ({element_type:08X}) but have "
            f"{actual_name} ({view.element_type:08X})",
        )
    problem = None
    if len(view.shape) != len(shape):
        problem = (
            f"{message} shape rank mismatch; expected {len(shape)}{' (scalar)' if not shape else ''} "
            f"but have {len(view.shape)}{' (scalar)' if not view.shape else ''}"
        )
    else:
        for i, (actual, expected) in enumerate(zip(view.shape, shape)):
            if actual != expected:
                problem = f"{message} shape dimension {i} mismatch; expected {expected} but have {actual}"
                break
    if problem is not None:
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT,
            f"{problem}; expected shape `{c.format_shape(shape)}`, actual shape `{c.format_shape(view.shape)}`",
        )


def buffer_assert(
    buffer: HalBuffer, message: str, minimum_length: int, memory_types: int, usage: int
) -> None:
    """``iree_hal_modules_buffer_assert`` with the release build's messages."""
    memory_types &= 0xFFFFFFFF
    usage &= 0xFFFFFFFF
    if buffer.byte_length < minimum_length:
        raise VmStatusError(
            StatusCode.INVALID_ARGUMENT,
            f"{message} buffer byte length {buffer.byte_length} less than expected minimum {minimum_length}",
        )
    if buffer.memory_type & memory_types != memory_types:
        raise VmStatusError(
            StatusCode.PERMISSION_DENIED,
            f"{message} buffer memory type is not compatible; buffer has "
            f"{c.format_memory_type(buffer.memory_type)}, operation requires {c.format_memory_type(memory_types)}",
        )
    if buffer.allowed_usage & usage != usage:
        raise VmStatusError(
            StatusCode.PERMISSION_DENIED,
            f"{message} requested usage was not specified when the buffer was allocated; buffer allows "
            f"{c.format_buffer_usage(buffer.allowed_usage)}, operation requires {c.format_buffer_usage(usage)}",
        )


def _check_file_range(file: HalFile, offset: int, length: int, what: str) -> None:
    """OUT_OF_RANGE unless ``length`` bytes at ``offset`` lie within ``file`` (``what``: read or write)."""
    if offset < 0 or length < 0 or offset + length > file.length:
        raise VmStatusError(
            StatusCode.OUT_OF_RANGE,
            f"file {what} out of range (offset={offset}, length={length}, file length={file.length})",
        )


class HalChannel(KeepsNothing):
    """``!hal.channel`` (collectives); never created on the devices we emulate."""

    vm_type_name = "hal.channel"


class HalModule(NativeModule):
    """IREE's ``hal`` module over our devices. ``devices[0]`` is what ``devices.get(0)`` returns.

    ``trace_sink(key, buffer_views)`` receives ``hal.buffer_view.trace`` calls (modules compiled with
    ``--iree-flow-trace-dispatch-tensors``), like IREE's ``HalModuleDebugSink``.
    """

    name = "hal"
    version = 7

    def __init__(
        self,
        devices: Device | Sequence[Device] | None = None,
        *,
        trace_sink: BufferViewTraceSink | None = None,
    ) -> None:
        super().__init__()
        if devices is None:
            devices = [CpuDevice()]
        elif isinstance(devices, Device):
            devices = [devices]
        self.devices: list[Device] = list(devices)
        self.trace_sink = trace_sink

    # ------------------------------------------------------------------ allocators

    @export("allocator.allocate", "0rIiiI_r")
    def allocator_allocate(self, allocator, queue_affinity, memory_types, buffer_usage, allocation_size):
        allocator = _deref(allocator, HalAllocator, "hal.allocator")
        try:
            return allocator.allocate(memory_types, buffer_usage, allocation_size, "allocate")
        except VmStatusError as e:
            raise VmStatusError(
                e.code, f"{e.message}; failed to allocate buffer of length {allocation_size}"
            ) from None

    @export("allocator.import", "0riIiirII_r")
    def allocator_import(
        self, allocator, is_try, queue_affinity, memory_types, buffer_usage, source, offset, length
    ):
        allocator = _deref(allocator, HalAllocator, "hal.allocator")
        source = _vm_buffer(source)
        buffer_usage &= 0xFFFFFFFF
        available = source.length
        if length == -1:
            length = available
        if length < 0 or offset < 0 or offset > available or offset + length > available:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT,
                f"byte range out of bounds (requested {offset}-{offset + length - 1} of available {available})",
            )
        access = c.MEMORY_ACCESS_READ
        if not source.mutable:
            if not buffer_usage & c.BUFFER_USAGE_SHARING_IMMUTABLE:
                raise VmStatusError(
                    StatusCode.PERMISSION_DENIED,
                    "source buffer is immutable and can only be imported for constant usage",
                )
        elif not buffer_usage & c.BUFFER_USAGE_SHARING_IMMUTABLE:
            access |= c.MEMORY_ACCESS_WRITE
        data = source.data[offset : offset + length]
        buffer = allocator.wrap(data, memory_types, buffer_usage, access, f"import {source.origin}".strip())
        if buffer is None and not is_try:
            raise VmStatusError(StatusCode.UNAVAILABLE, "the device cannot import this host memory in place")
        if buffer is not None:
            buffer.allocation.vm_writable = source.mutable  # the VM's buffer ops may write a mutable source
        return buffer

    @export("allocator.select", "0iiICrID_rI")
    def allocator_select(self, memory_types, buffer_usage, flags, pairs):
        if not pairs:
            raise VmStatusError(
                StatusCode.INVALID_ARGUMENT, "at least one device/queue affinity pair must be provided"
            )
        device, affinity = pairs[0]
        return _device(device), affinity

    # ------------------------------------------------------------------ buffers

    @export("buffer.assert", "0rrrIii_v")
    def buffer_assert(self, buffer, message, allocator, minimum_length, memory_types, buffer_usage):
        buffer = _buffer(buffer)
        text = _vm_buffer(message).as_text()
        buffer_assert(buffer, text, minimum_length, memory_types, buffer_usage)
        _deref(allocator, HalAllocator, "hal.allocator")

    @export("buffer.allocation.preserve", "0r_v")
    def buffer_allocation_preserve(self, buffer):
        _buffer(buffer).allocation.owners += 1

    @export("buffer.allocation.discard", "0r_i")
    def buffer_allocation_discard(self, buffer):
        allocation = _buffer(buffer).allocation
        allocation.owners = max(0, allocation.owners - 1)
        return 1 if allocation.owners == 0 else 0

    @export("buffer.allocation.is_terminal", "0r_i")
    def buffer_allocation_is_terminal(self, buffer):
        return 1 if _buffer(buffer).allocation.owners == 1 else 0

    @export("buffer.subspan", "0rII_r")
    def buffer_subspan(self, source_buffer, source_offset, length):
        source = _buffer(source_buffer)
        try:
            return source.subspan(source_offset, length)
        except VmStatusError as e:
            raise VmStatusError(
                e.code,
                f"{e.message}; invalid subspan of an existing buffer (source_offset={source_offset}, length={length})",
            ) from None

    @export("buffer.length", "0r_I")
    def buffer_length(self, buffer):
        return _buffer(buffer).byte_length

    @export("buffer.load", "0rIi_i")
    def buffer_load(self, source_buffer, source_offset, length):
        buffer = _buffer(source_buffer)
        if length > 4:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"load length byte count {length} exceeds max")
        data = buffer.read_view(source_offset, length)
        return int.from_bytes(data.tobytes(), "little")

    @export("buffer.store", "0irIi_v")
    def buffer_store(self, value, target_buffer, target_offset, length):
        buffer = _buffer(target_buffer)
        if length > 4:
            raise VmStatusError(StatusCode.INVALID_ARGUMENT, f"store length byte count {length} exceeds max")
        if target_offset + length > buffer.byte_length:
            raise VmStatusError(
                StatusCode.OUT_OF_RANGE,
                f"store out of bounds (target_offset={target_offset}, length={length} into max {buffer.byte_length})",
            )
        view = buffer.write_view(target_offset, length)
        view[:] = np.frombuffer((value & 0xFFFFFFFF).to_bytes(4, "little")[:length], dtype=np.uint8)

    # ------------------------------------------------------------------ buffer views

    @export("buffer_view.create", "0rIIiiCID_r")
    def buffer_view_create(self, buffer, source_offset, source_length, element_type, encoding_type, shape):
        source = _buffer(buffer)
        if source_offset != 0 or source_length != source.byte_length:
            source = self.buffer_subspan(source, source_offset, source_length)
        return HalBufferView(source, tuple(shape), element_type, encoding_type)

    @export("buffer_view.assert", "0rriiCID_v")
    def buffer_view_assert(self, buffer_view, message, element_type, encoding_type, shape):
        view = _buffer_view(buffer_view)
        text = _vm_buffer(message).as_text()
        buffer_view_assert(view, text, element_type, encoding_type, shape)

    @export("buffer_view.buffer", "0r_r")
    def buffer_view_buffer(self, buffer_view):
        return _buffer_view(buffer_view).buffer

    @export("buffer_view.element_type", "0r_i")
    def buffer_view_element_type(self, buffer_view):
        return _buffer_view(buffer_view).element_type

    @export("buffer_view.encoding_type", "0r_i")
    def buffer_view_encoding_type(self, buffer_view):
        return _buffer_view(buffer_view).encoding_type

    @export("buffer_view.rank", "0r_i")
    def buffer_view_rank(self, buffer_view):
        return _buffer_view(buffer_view).rank

    @export("buffer_view.dim", "0ri_I")
    def buffer_view_dim(self, buffer_view, index):
        view = _buffer_view(buffer_view)
        # iree_hal_buffer_view_shape_dim returns 0 for an index past the rank.
        return view.shape[index] if 0 <= index < view.rank else 0

    @export("buffer_view.trace", "0rCrD_v")
    def buffer_view_trace(self, key, operands):
        if self.trace_sink is None:
            return
        text = _vm_buffer(key).as_text()
        if len(operands) > 128:
            raise VmStatusError(
                StatusCode.RESOURCE_EXHAUSTED, "too many buffer views for a single trace call"
            )
        self.trace_sink(text, [_buffer_view(v) for v in operands])

    # ------------------------------------------------------------------ channels (not on local devices)

    @export("channel.create", "0rIIrrii_r")
    def channel_create(self, device, queue_affinity, flags, id, group, rank, count):
        _device(device)
        raise VmStatusError(StatusCode.UNIMPLEMENTED, "collectives not implemented on the emulated devices")

    @export("channel.split", "0riiI_r")
    def channel_split(self, channel, color, key, flags):
        _deref(channel, HalChannel, "hal.channel")
        raise VmStatusError(StatusCode.UNIMPLEMENTED, "collectives not implemented on the emulated devices")

    @export("channel.rank_and_count", "0r_ii")
    def channel_rank_and_count(self, channel):
        _deref(channel, HalChannel, "hal.channel")
        raise VmStatusError(StatusCode.UNIMPLEMENTED, "collectives not implemented on the emulated devices")

    # ------------------------------------------------------------------ command buffers

    @export("command_buffer.create", "0riiIi_r")
    def command_buffer_create(self, device, modes, command_categories, queue_affinity, binding_capacity):
        return HalCommandBuffer(_device(device), modes, command_categories, queue_affinity, binding_capacity)

    @export("command_buffer.finalize", "0r_v")
    def command_buffer_finalize(self, command_buffer):
        _command_buffer(command_buffer).finalize()

    @export("command_buffer.begin_debug_group", "0rr_v")
    def command_buffer_begin_debug_group(self, command_buffer, label):
        cb = _command_buffer(command_buffer)
        cb.record(cmd.BeginDebugGroupCommand(_vm_buffer(label).as_text()))

    @export("command_buffer.end_debug_group", "0r_v")
    def command_buffer_end_debug_group(self, command_buffer):
        _command_buffer(command_buffer).record(cmd.EndDebugGroupCommand())

    @export("command_buffer.execution_barrier", "0riiI_v")
    def command_buffer_execution_barrier(self, command_buffer, source_stage_mask, target_stage_mask, flags):
        cb = _command_buffer(command_buffer)
        cb.record(cmd.BarrierCommand(source_stage_mask & 0xFFFFFFFF, target_stage_mask & 0xFFFFFFFF, flags))

    @export("command_buffer.advise_buffer", "0rrIIIi_v")
    def command_buffer_advise_buffer(self, command_buffer, buffer, flags, arg0, arg1, buffer_slot):
        cb = _command_buffer(command_buffer)
        ref = BufferRef(buffer_slot, _buffer_or_null(buffer), 0, c.WHOLE_BUFFER)
        cb.record(cmd.AdviseBufferCommand(ref, flags, arg0, arg1))

    @export("command_buffer.fill_buffer", "0rrIIiIiI_v")
    def command_buffer_fill_buffer(
        self,
        command_buffer,
        target_buffer,
        target_offset,
        length,
        target_buffer_slot,
        pattern,
        pattern_length,
        flags,
    ):
        cb = _command_buffer(command_buffer)
        ref = BufferRef(target_buffer_slot, _buffer_or_null(target_buffer), target_offset, length)
        cb.record(cmd.FillCommand(ref, _pattern_bytes(pattern, pattern_length), flags))

    @export("command_buffer.update_buffer", "0rrIrIIiI_v")
    def command_buffer_update_buffer(
        self,
        command_buffer,
        source_buffer,
        source_offset,
        target_buffer,
        target_offset,
        length,
        target_buffer_slot,
        flags,
    ):
        cb = _command_buffer(command_buffer)
        source = _vm_buffer(source_buffer)
        ref = BufferRef(target_buffer_slot, _buffer_or_null(target_buffer), target_offset, length)
        data = _vm_buffer_range(source, source_offset, length).tobytes()  # captured at record time, like IREE
        cb.record(cmd.UpdateCommand(data, ref, flags))

    @export("command_buffer.copy_buffer", "0riirIrIII_v")
    def command_buffer_copy_buffer(
        self,
        command_buffer,
        source_buffer_slot,
        target_buffer_slot,
        source_buffer,
        source_offset,
        target_buffer,
        target_offset,
        length,
        flags,
    ):
        cb = _command_buffer(command_buffer)
        source = BufferRef(source_buffer_slot, _buffer_or_null(source_buffer), source_offset, length)
        target = BufferRef(target_buffer_slot, _buffer_or_null(target_buffer), target_offset, length)
        cb.record(cmd.CopyCommand(source, target, flags))

    @export("command_buffer.collective", "0rriiiirrIIIII_v")
    def command_buffer_collective(self, command_buffer, channel, *args):
        _command_buffer(command_buffer)
        raise VmStatusError(StatusCode.UNIMPLEMENTED, "collectives not yet implemented on CPU")

    def _binding_refs(self, bindings: list[tuple]) -> tuple[BufferRef, ...]:
        if len(bindings) > MAX_DESCRIPTOR_BINDING_COUNT:
            raise VmStatusError(
                StatusCode.OUT_OF_RANGE, f"binding count {len(bindings)} > {MAX_DESCRIPTOR_BINDING_COUNT}"
            )
        return tuple(
            BufferRef(slot & 0xFFFFFF, _buffer_or_null(buffer), offset, length)
            for _reserved, slot, buffer, offset, length in bindings
        )

    @export("command_buffer.dispatch", "0rrIiiiICiDCiirIID_v")
    def command_buffer_dispatch(
        self,
        command_buffer,
        executable,
        function_id,
        workgroup_x,
        workgroup_y,
        workgroup_z,
        flags,
        constants,
        bindings,
    ):
        cb = _command_buffer(command_buffer)
        exe = _deref(executable, HalExecutable, "hal.executable")
        refs = self._binding_refs(bindings)
        count = (workgroup_x & 0xFFFFFFFF, workgroup_y & 0xFFFFFFFF, workgroup_z & 0xFFFFFFFF)
        consts = tuple(v & 0xFFFFFFFF for v in constants)
        cb.record(cmd.DispatchCommand(exe, function_id, count, None, consts, refs, flags))

    @export("command_buffer.dispatch.indirect", "0rrIirIICiDCiirIID_v")
    def command_buffer_dispatch_indirect(
        self,
        command_buffer,
        executable,
        function_id,
        workgroups_buffer_slot,
        workgroups_buffer,
        workgroups_offset,
        flags,
        constants,
        bindings,
    ):
        cb = _command_buffer(command_buffer)
        exe = _deref(executable, HalExecutable, "hal.executable")
        workgroups = BufferRef(
            workgroups_buffer_slot, _buffer_or_null(workgroups_buffer), workgroups_offset, 12
        )
        refs = self._binding_refs(bindings)
        if not flags & c.DISPATCH_FLAG_STATIC_INDIRECT_PARAMETERS:
            flags |= c.DISPATCH_FLAG_DYNAMIC_INDIRECT_PARAMETERS
        consts = tuple(v & 0xFFFFFFFF for v in constants)
        cb.record(cmd.DispatchCommand(exe, function_id, None, workgroups, consts, refs, flags))

    @export("command_buffer.flush_buffer", "0rirII_v")
    def command_buffer_flush_buffer(
        self, command_buffer, target_buffer_slot, target_buffer, target_offset, length
    ):
        cb = _command_buffer(command_buffer)
        ref = BufferRef(target_buffer_slot, _buffer_or_null(target_buffer), target_offset, length)
        cb.record(cmd.FlushBufferCommand(ref))

    @export("command_buffer.invalidate_buffer", "0rirII_v")
    def command_buffer_invalidate_buffer(
        self, command_buffer, target_buffer_slot, target_buffer, target_offset, length
    ):
        cb = _command_buffer(command_buffer)
        ref = BufferRef(target_buffer_slot, _buffer_or_null(target_buffer), target_offset, length)
        cb.record(cmd.InvalidateBufferCommand(ref))

    # ------------------------------------------------------------------ devices

    @export("device.allocator", "0r_r")
    def device_allocator(self, device):
        return _device(device).allocator

    @export("device.query.i64", "0rrr_iI")
    def device_query_i64(self, device, category, key):
        dev = _device(device)
        value = dev.query_i64(_vm_buffer(category).as_text(), _vm_buffer(key).as_text())
        return (0, 0) if value is None else (1, value)

    @export("device.queue.alloca", "0rIrrIiiII_r")
    def device_queue_alloca(
        self,
        device,
        queue_affinity,
        wait_fence,
        signal_fence,
        pool,
        memory_types,
        buffer_usage,
        allocation_size,
        flags,
    ):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        if pool != 0:
            raise VmStatusError(StatusCode.UNIMPLEMENTED, "VM queue allocation pools are not supported")
        buffer = dev.allocator.allocate(memory_types, buffer_usage, allocation_size, "alloca")
        dev.submit(wait, signal, lambda: None, "queue.alloca")
        return buffer

    @export("device.queue.dealloca", "0rIrrrI_v")
    def device_queue_dealloca(self, device, queue_affinity, wait_fence, signal_fence, buffer, flags):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        _buffer(buffer)
        dev.submit(wait, signal, lambda: None, "queue.dealloca")

    @export("device.queue.fill", "0rIrrrIIIiI_v")
    def device_queue_fill(
        self,
        device,
        queue_affinity,
        wait_fence,
        signal_fence,
        target_buffer,
        target_offset,
        length,
        pattern,
        pattern_length,
        flags,
    ):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        target = _buffer(target_buffer)
        data = _pattern_bytes(pattern, pattern_length)
        dev.submit(wait, signal, lambda: dev.queue_fill(_range(target, target_offset, length), data), "queue.fill")

    @export("device.queue.update", "0rIrrrIrIII_v")
    def device_queue_update(
        self,
        device,
        queue_affinity,
        wait_fence,
        signal_fence,
        source_buffer,
        source_offset,
        target_buffer,
        target_offset,
        length,
        flags,
    ):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        source = _vm_buffer(source_buffer)
        target = _buffer(target_buffer)
        data = _vm_buffer_range(source, source_offset, length).tobytes()
        dev.submit(
            wait, signal, lambda: dev.queue_update(data, _range(target, target_offset, length)), "queue.update"
        )

    @export("device.queue.copy", "0rIrrrIrIII_v")
    def device_queue_copy(
        self,
        device,
        queue_affinity,
        wait_fence,
        signal_fence,
        source_buffer,
        source_offset,
        target_buffer,
        target_offset,
        length,
        flags,
    ):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        source, target = _buffer(source_buffer), _buffer(target_buffer)

        def run() -> None:
            dev.queue_copy(_range(source, source_offset, length), _range(target, target_offset, length))

        dev.submit(wait, signal, run, "queue.copy")

    @export("device.queue.read", "0rIrrrIrIII_v")
    def device_queue_read(
        self,
        device,
        queue_affinity,
        wait_fence,
        signal_fence,
        source_file,
        source_offset,
        target_buffer,
        target_offset,
        length,
        flags,
    ):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        file = _deref(source_file, HalFile, "hal.file")
        target = _buffer(target_buffer)

        def run() -> None:
            _check_file_range(file, source_offset, length, "read")
            dev.queue_update(
                file.data[source_offset : source_offset + length], _range(target, target_offset, length)
            )

        dev.submit(wait, signal, run, "queue.read")

    @export("device.queue.write", "0rIrrrIrIII_v")
    def device_queue_write(
        self,
        device,
        queue_affinity,
        wait_fence,
        signal_fence,
        source_buffer,
        source_offset,
        target_file,
        target_offset,
        length,
        flags,
    ):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        source = _buffer(source_buffer)
        file = _deref(target_file, HalFile, "hal.file")

        def run() -> None:
            if not file.access & c.MEMORY_ACCESS_WRITE or not file.data.flags.writeable:
                raise VmStatusError(StatusCode.PERMISSION_DENIED, "file does not allow write access")
            _check_file_range(file, target_offset, length, "write")
            file.data[target_offset : target_offset + length] = source.read_view(source_offset, length)

        dev.submit(wait, signal, run, "queue.write")

    @export("device.queue.barrier", "0rIrrI_v")
    def device_queue_barrier(self, device, queue_affinity, wait_fence, signal_fence, flags):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        dev.submit(wait, signal, lambda: None, "queue.barrier")

    @export("device.queue.execute", "0rIrrrI_v")
    def device_queue_execute(self, device, queue_affinity, wait_fence, signal_fence, command_buffer, flags):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        cb = _command_buffer(command_buffer)
        dev.submit(wait, signal, lambda: dev.queue_execute(cb, []), "queue.execute")

    @export("device.queue.execute.indirect", "0rIrrrICrIID_v")
    def device_queue_execute_indirect(
        self, device, queue_affinity, wait_fence, signal_fence, command_buffer, flags, binding_table
    ):
        dev, wait, signal = _queue(device, wait_fence, signal_fence)
        cb = _command_buffer(command_buffer)
        # The table is copied at submission (IREE copies it too), so later VM changes do not affect it.
        table = [BindingTableEntry(_buffer_or_null(b), offset, length) for b, offset, length in binding_table]
        dev.submit(wait, signal, lambda: dev.queue_execute(cb, table), "queue.execute.indirect")

    @export("device.queue.flush", "0rI_v")
    def device_queue_flush(self, device, queue_affinity):
        _device(device)

    @export("devices.count", "0v_i")
    def devices_count(self):
        return len(self.devices)

    @export("devices.get", "0i_r")
    def devices_get(self, index):
        return self.devices[index] if 0 <= index < len(self.devices) else None

    # ------------------------------------------------------------------ files

    @export("ex.file.from_memory", "0rIirIIi_r")
    def ex_file_from_memory(self, device, queue_affinity, access, buffer, offset, length, flags):
        _device(device)
        source = _vm_buffer(buffer)
        if access & ~c.MEMORY_ACCESS_READ:
            raise VmStatusError(
                StatusCode.PERMISSION_DENIED,
                "only read-only memory can be accessed via a file handle (today)",
            )
        data = _vm_buffer_range(source, offset, length)
        return HalFile(data, access, source.origin)

    # ------------------------------------------------------------------ executables

    @export("executable.create", "0rIrrr_r")
    def executable_create(self, device, queue_affinity, executable_format, executable_data, constants):
        dev = _device(device)
        fmt = _vm_buffer(executable_format).as_text()
        data = _vm_buffer(executable_data)
        values: tuple[int, ...] = ()
        if constants is not None:
            const_buffer = _vm_buffer(constants)
            if const_buffer.length % 4:
                raise VmStatusError(
                    StatusCode.INVALID_ARGUMENT,
                    f"constant buffer data must contain 4-byte elements but data length is {const_buffer.length}",
                )
            values = tuple(int(v) for v in const_buffer.data.view("<u4"))
        if not dev.supports_format(fmt):
            raise VmStatusError(
                StatusCode.NOT_FOUND,
                f"no executable loader registered for the format '{fmt}' on device {dev.name}",
            )
        label = data.origin or "executable"
        try:
            return dev.create_executable(fmt, data.data, values, label)
        except VmStatusError as e:
            if not data.name or data.name in e.message:
                raise
            # Said as the module names it (inspect lists it so), not only by its rodata ordinal.
            raise VmStatusError(e.code, e.message.replace(label, f"{label} ({data.name})", 1)) from None

    @export("executable.lookup.function", "0rr_I")
    def executable_lookup_function(self, executable, function_name):
        exe = _deref(executable, HalExecutable, "hal.executable")
        return exe.lookup(_vm_buffer(function_name).as_text())

    # ------------------------------------------------------------------ fences

    @export("fence.create", "0rI_r")
    def fence_create(self, device, flags):
        _device(device)
        return HalFence.new()

    @export("fence.join", "0ICrD_r")
    def fence_join(self, flags, fences):
        timepoints: list[tuple[HalSemaphore, int]] = []
        for f in fences:
            fence = _fence_or_null(f)
            if fence is not None:
                timepoints.extend(fence.timepoints)
        return HalFence(timepoints) if timepoints else None

    @export("fence.query", "0r_i")
    def fence_query(self, fence):
        return _deref(fence, HalFence, "hal.fence").query()

    @export("fence.signal", "0r_v")
    def fence_signal(self, fence):
        _deref(fence, HalFence, "hal.fence").signal()

    @export("fence.fail", "0ri_v")
    def fence_fail(self, fence, status):
        try:
            code = StatusCode(status & 0x1F)
        except ValueError:  # a code IREE does not define
            code = StatusCode.UNKNOWN
        _deref(fence, HalFence, "hal.fence").fail(VmStatusError(code, ""))

    @export("fence.await", "0iICrD_i")
    def fence_await(self, timeout_millis, flags, fences):
        pending = [f for f in (_fence_or_null(f) for f in fences) if f is not None]
        for fence in pending:
            failure = fence.failure
            if failure is not None:
                raise failure
        pending = [f for f in pending if not f.reached]
        if not pending:
            return 0
        if timeout_millis & 0xFFFFFFFF == c.INFINITE_TIMEOUT_MS:
            # Queue work runs synchronously, so nothing is left that could signal these fences: IREE would
            # wait forever here. Say so instead of hanging the debugger.
            raise VmStatusError(
                StatusCode.DEADLINE_EXCEEDED,
                "fence.await would wait forever: the fence is not signaled and no queued work can signal it",
            )
        return int(StatusCode.DEADLINE_EXCEEDED)


def _range(buffer: HalBuffer, offset: int, length: int) -> ResolvedRange:
    length = buffer.byte_length - offset if length == c.WHOLE_BUFFER else length
    return ResolvedRange(buffer, offset, length)
