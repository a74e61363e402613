"""Reissuing a replay's HAL operations on the emulated HAL (``engine/runtime/hal``), as ``iree-run-replay``
does on IREE's: so every dispatch of the capture goes through ``Device.dispatch`` and its observers
(breakpoints, tensor capture, zones, substitution snapshots).

The rules are those of IREE's executor (``runtime/src/iree/hal/replay/execute.c``): operations run in
record order and each queue operation completes before the next record (``flush_and_wait``); records of
calls that failed at capture are skipped (the host's fallback calls follow them); objects are created
by the operation whose ``related_object_id`` names them; buffer bytes come from unmap/flush records with
captured data, imports, files and queue updates; a substituted executable's functions are mapped to the
captured ones by name (the capture's ABI metadata), and their interface must match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import HalError, ReplayFormatError
from engine.replay import format as f
from engine.replay.payloads import (
    AllocateBuffer,
    BufferRangeData,
    CommandBufferCopy,
    CommandBufferFill,
    CommandBufferObject,
    CommandBufferUpdate,
    Dispatch,
    ExecutablePrepare,
    ExecutionBarrier,
    FileObject,
    ImportBuffer,
    QueueAlloca,
    QueueCopy,
    QueueDealloca,
    QueueExecute,
    QueueFill,
    QueueRead,
    QueueSemaphores,
    QueueUpdate,
    ScopePayload,
    SemaphoreObject,
)
from engine.replay.reader import BufferRef, FunctionMetadata, Record, ReplayFile
from engine.runtime.hal import commands as cmd
from engine.runtime.hal import constants as c
from engine.runtime.hal.buffers import HalBuffer, HalFile
from engine.runtime.hal.commands import BindingTableEntry, HalCommandBuffer, ResolvedRange
from engine.runtime.hal.device import Device, HalExecutable
from engine.runtime.hal.formats import EMBEDDED_ELF_X86_64, is_cpu_elf

P = f.PayloadType
WHOLE = (1 << 64) - 1  # IREE_HAL_WHOLE_BUFFER as stored in a replay (an unsigned device size)


class ReplayExecutionError(HalError):
    """A replay cannot be reissued on this device: an operation it does not support, an object it lacks."""

    def __init__(self, message: str, record: Record | None = None):
        self.record = record
        where = f"record #{record.sequence_ordinal} ({record.operation}): " if record is not None else ""
        super().__init__(where + message)


@dataclass
class Substitution:
    """A replacement for captured executable ``executable_id`` (``None`` = all), as
    ``--replay_executable_substitution=ID[@FORMAT]=PATH`` names it."""

    executable_id: int | None
    data: bytes
    format: str | None = None
    source: str = ""

    @classmethod
    def parse(cls, spec: str) -> Substitution:
        """``ID=PATH``, ``ID@FORMAT=PATH``, ``all=PATH`` or ``all@FORMAT=PATH``."""
        selector, sep, path = spec.partition("=")
        if not sep or not path:
            raise HalError(f"bad substitution {spec!r}: expected EXECUTABLE_ID[@FORMAT]=PATH")
        ident, _, fmt = selector.partition("@")
        if ident != "all" and not ident.isdigit():
            raise HalError(f"bad substitution {spec!r}: the executable is an object id or 'all'")
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise HalError(f"cannot read substitution {path}: {e.strerror or e}") from None
        return cls(None if ident == "all" else int(ident), data, fmt or None, path)

    def to_flag(self) -> str:
        selector = "all" if self.executable_id is None else str(self.executable_id)
        if self.format:
            selector += f"@{self.format}"
        return f"--replay_executable_substitution={selector}={self.source}"


@dataclass
class ReplayedExecutable:
    object_id: int
    executable: HalExecutable
    function_map: list[int]  # captured function ordinal -> ordinal in ``executable``
    functions: list[FunctionMetadata]
    substituted: bool = False


@dataclass
class ReplayState:
    """The objects a replay created so far, by session-local object id."""

    buffers: dict[int, HalBuffer] = field(default_factory=dict)
    executables: dict[int, ReplayedExecutable] = field(default_factory=dict)
    command_buffers: dict[int, HalCommandBuffer] = field(default_factory=dict)
    files: dict[int, HalFile] = field(default_factory=dict)
    semaphores: dict[int, int] = field(default_factory=dict)  # id -> last value reached
    scopes: list[str] = field(default_factory=list)


def _infer_format(data: bytes, captured: str) -> str:
    """What IREE's executable caches infer from a replacement's bytes (ELF, a VMVX module, a VKE1)."""
    if data[:4] == b"\x7fELF":
        return captured if is_cpu_elf(captured) else EMBEDDED_ELF_X86_64
    if data[4:8] == b"IREE":
        return "vmvx-bytecode-fb"
    if data[4:8] == b"VKE1":
        return captured if captured.startswith("vulkan-spirv") else "vulkan-spirv-fb"
    return captured


class ReplayExecutor:
    """Reissues ``replay`` on ``device``; ``on_record`` (if given) is told each record before it runs."""

    def __init__(
        self,
        replay: ReplayFile,
        device: Device,
        *,
        substitutions: list[Substitution] | None = None,
        file_remap: list[tuple[str, str]] | None = None,
        on_record: Callable[[Record], None] | None = None,
    ):
        self.replay = replay
        self.device = device
        self.substitutions = list(substitutions or [])
        self.file_remap = list(file_remap or [])
        self.on_record = on_record
        self.state = ReplayState()
        self.records_run = 0

    # -- the walk

    def run(self) -> ReplayState:
        for record in self.replay.records():
            if self.on_record is not None:
                self.on_record(record)
            self.step(record)
        return self.state

    def step(self, r: Record) -> None:
        self.records_run += 1
        if r.record_type == f.RecordType.UNSUPPORTED and r.status_code == 0:
            raise ReplayExecutionError("the capture holds an operation IREE could not record", r)
        if r.record_type != f.RecordType.OPERATION or r.status_code != 0:
            return  # objects are created by their operations; failed calls created nothing
        handler = _HANDLERS.get(r.operation_code)
        if handler is None:
            if r.operation_code in _NOTHING_TO_DO:
                return
            raise ReplayExecutionError("this operation is not supported by the debug engine's replay", r)
        handler(self, r)

    # -- lookups

    def buffer(self, buffer_id: int, r: Record) -> HalBuffer:
        try:
            return self.state.buffers[buffer_id]
        except KeyError:
            raise ReplayExecutionError(f"buffer {buffer_id} was never created", r) from None

    def ref(self, ref: BufferRef, r: Record) -> cmd.BufferRef:
        length = -1 if ref.length == WHOLE else ref.length
        if ref.buffer_id == 0:
            return cmd.BufferRef(ref.slot, None, ref.offset, length)
        return cmd.BufferRef(0, self.buffer(ref.buffer_id, r), ref.offset, length)

    def direct(self, ref: BufferRef, r: Record) -> ResolvedRange:
        if ref.buffer_id == 0:
            raise ReplayExecutionError("a queue operation needs a direct buffer reference", r)
        buffer = self.buffer(ref.buffer_id, r)
        length = buffer.byte_length - ref.offset if ref.length == WHOLE else ref.length
        return ResolvedRange(buffer, ref.offset, length)

    def command_buffer(self, object_id: int, r: Record) -> HalCommandBuffer:
        try:
            return self.state.command_buffers[object_id]
        except KeyError:
            raise ReplayExecutionError(f"command buffer {object_id} was never created", r) from None

    def signal(self, p: QueueSemaphores) -> None:
        for t in p.signal_semaphores:
            self.state.semaphores[t.semaphore_id] = max(self.state.semaphores.get(t.semaphore_id, 0), t.value)

    def write(self, buffer: HalBuffer, offset: int, data) -> None:
        if len(data):
            self.device.update(np.frombuffer(data, dtype=np.uint8), ResolvedRange(buffer, offset, len(data)))

    def file_bytes(self, file_id: int, r: Record) -> HalFile:
        try:
            return self.state.files[file_id]
        except KeyError:
            raise ReplayExecutionError(f"file {file_id} was never imported", r) from None


# -- operation handlers (one per operation code)


def _scope_begin(x: ReplayExecutor, r: Record) -> None:
    x.state.scopes.append(x.replay.decode_as(r, ScopePayload).name)


def _scope_end(x: ReplayExecutor, r: Record) -> None:
    if x.state.scopes:
        x.state.scopes.pop()


def _allocate(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, AllocateBuffer)
    x.state.buffers[r.related_object_id] = x.device.allocator.allocate(
        p.type, p.usage, p.allocation_size, origin=f"replay buffer {r.related_object_id}"
    )


def _import_buffer(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, ImportBuffer)
    if p.external_type != 1:  # IREE_HAL_EXTERNAL_BUFFER_TYPE_HOST_ALLOCATION
        raise ReplayExecutionError(
            f"imported buffers of external type {p.external_type} are not supported", r
        )
    data = x.replay.range_bytes(p.data_range)
    if len(data) > p.allocation_size:
        raise ReplayFormatError("replay import buffer data overflows allocation", path=x.replay.source)
    buffer = x.device.allocator.allocate(
        p.type | c.MEMORY_TYPE_HOST_VISIBLE,
        p.usage,
        p.allocation_size,
        origin=f"replay import {r.related_object_id}",
    )
    x.write(buffer, 0, data)
    x.state.buffers[r.related_object_id] = buffer


def _buffer_data(x: ReplayExecutor, r: Record) -> None:
    if r.payload_type != P.BUFFER_RANGE_DATA:
        return  # a read mapping: nothing was written
    p = x.replay.decode_as(r, BufferRangeData)
    data = x.replay.range_bytes(p.data_range)
    if len(data) > p.byte_length:
        raise ReplayFormatError("replay buffer data overflows target range", path=x.replay.source)
    buffer = x.buffer(r.object_id, r)
    # The offset is within the underlying allocation (what the driver saw).
    x.write(buffer.allocated_buffer, p.byte_offset, data)


def _queue_alloca(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, QueueAlloca)
    x.state.buffers[r.related_object_id] = x.device.allocator.allocate(
        p.type, p.usage, p.allocation_size, origin=f"replay queue buffer {r.related_object_id}"
    )
    x.signal(p)


def _queue_dealloca(x: ReplayExecutor, r: Record) -> None:
    x.signal(x.replay.decode_as(r, QueueDealloca))  # the buffer stays readable for inspection


def _queue_fill(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, QueueFill)
    x.device.queue_fill(x.direct(p.target_ref, r), bytes(x.replay.range_bytes(p.pattern_range)))
    x.signal(p)


def _queue_update(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, QueueUpdate)
    x.device.queue_update(
        np.frombuffer(x.replay.range_bytes(p.data_range), np.uint8), x.direct(p.target_ref, r)
    )
    x.signal(p)


def _queue_copy(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, QueueCopy)
    x.device.queue_copy(x.direct(p.source_ref, r), x.direct(p.target_ref, r))
    x.signal(p)


def _import_file(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, FileObject)
    reference = x.replay.range_bytes(p.reference_range)
    kind = p.reference_type
    if kind == 2:  # inline bytes: the file is in the replay
        data = np.frombuffer(reference, dtype=np.uint8)
    elif kind == 1:  # external path (remapped like --replay_file_remap)
        path = bytes(reference).decode("utf-8", errors="replace")
        for old, new in x.file_remap:
            if path.startswith(old):
                path = new + path[len(old) :]
                break
        try:
            data = np.fromfile(path, dtype=np.uint8)
        except OSError as e:
            raise ReplayExecutionError(
                f"cannot read the referenced file {path}: {e.strerror or e}", r
            ) from None
        if len(data) < p.file_length:
            raise ReplayExecutionError(f"the referenced file {path} is shorter than at capture", r)
    elif kind == 3:  # captured ranges: each queue_read carries its bytes
        data = np.zeros(0, np.uint8)
    else:
        raise ReplayExecutionError(f"file reference type {kind} is not supported", r)
    x.state.files[r.related_object_id] = HalFile(
        data, p.access, origin=f"replay file {r.related_object_id}"
    )


def _queue_read(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, QueueRead)
    target = x.direct(p.target_ref, r)
    if p.captured_data_length:
        if p.captured_data_length != target.length:
            raise ReplayFormatError("replay queue read captured data length does not match target length")
        data = np.frombuffer(x.replay.range_bytes(p.captured_data_range), np.uint8)
    else:
        file = x.file_bytes(p.source_file_id, r)
        start = p.source_offset
        if start + target.length > file.length:
            raise ReplayExecutionError("queue read past the end of its file", r)
        data = file.data[start : start + target.length]
    x.device.queue_update(data, target)
    x.signal(p)


def _create_command_buffer(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, CommandBufferObject)
    x.state.command_buffers[r.related_object_id] = HalCommandBuffer(
        x.device, p.mode, p.command_categories, p.queue_affinity, p.binding_capacity
    )


def _begin(x: ReplayExecutor, r: Record) -> None:
    buffer = x.command_buffer(r.object_id, r)
    buffer.commands = []
    buffer.finalized = False


def _end(x: ReplayExecutor, r: Record) -> None:
    x.command_buffer(r.object_id, r).finalize()


def _barrier(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, ExecutionBarrier)
    x.command_buffer(r.object_id, r).record(
        cmd.BarrierCommand(p.source_stage_mask, p.target_stage_mask, p.flags)
    )


def _events(x: ReplayExecutor, r: Record) -> None:
    x.command_buffer(r.object_id, r)  # in-order host execution: events order nothing more


def _cb_fill(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, CommandBufferFill)
    pattern = bytes(x.replay.range_bytes(p.pattern_range))
    x.command_buffer(r.object_id, r).record(cmd.FillCommand(x.ref(p.target, r), pattern, p.flags))


def _cb_update(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, CommandBufferUpdate)
    data = bytes(x.replay.range_bytes(p.data_range))
    x.command_buffer(r.object_id, r).record(cmd.UpdateCommand(data, x.ref(p.target, r), p.flags))


def _cb_copy(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, CommandBufferCopy)
    x.command_buffer(r.object_id, r).record(
        cmd.CopyCommand(x.ref(p.source, r), x.ref(p.target, r), p.flags)
    )


def _dispatch_command(x: ReplayExecutor, r: Record, p: Dispatch) -> cmd.DispatchCommand:
    try:
        replayed = x.state.executables[p.executable_id]
    except KeyError:
        raise ReplayExecutionError(f"executable {p.executable_id} was never prepared", r) from None
    ordinal = p.function_ordinal
    if not 0 <= ordinal < len(replayed.function_map):
        raise ReplayExecutionError(f"function {ordinal} is not in executable {p.executable_id}", r)
    wg_ref = p.workgroup_count_ref
    indirect = p.indirect
    return cmd.DispatchCommand(
        replayed.executable,
        replayed.function_map[ordinal],
        None if indirect else p.workgroup_count,
        x.ref(wg_ref, r) if indirect else None,
        p.constants,
        tuple(x.ref(b, r) for b in p.bindings),
        p.flags,
    )


def _cb_dispatch(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, Dispatch)
    x.command_buffer(r.object_id, r).record(_dispatch_command(x, r, p))


def _queue_dispatch(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, Dispatch)
    command = _dispatch_command(x, r, p)
    x.device.execute_command(command, [])
    x.signal(p)


def _queue_execute(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, QueueExecute)
    table = []
    for b in p.bindings:
        if b.buffer_id == 0:
            table.append(BindingTableEntry(None, b.offset, b.length))
        else:
            table.append(
                BindingTableEntry(x.buffer(b.buffer_id, r), b.offset, -1 if b.length == WHOLE else b.length)
            )
    if p.command_buffer_id:
        x.device.queue_execute(x.command_buffer(p.command_buffer_id, r), table)
    x.signal(p)


def _prepare_executable(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, ExecutablePrepare)
    functions = list(p.functions)
    if not functions:
        raise ReplayFormatError(
            "replay executable prepare records require function metadata", path=x.replay.source
        )
    captured_format = p.format
    constants = p.constants
    object_id = r.related_object_id
    label = f"replay executable {object_id}"
    substitution = next(
        (s for s in x.substitutions if s.executable_id == object_id),
        next((s for s in x.substitutions if s.executable_id is None), None),
    )
    if substitution is not None:
        fmt = substitution.format or _infer_format(substitution.data, captured_format)
        executable = x.device.create_executable(
            fmt, np.frombuffer(substitution.data, np.uint8).copy(), constants, f"{label} (substituted)"
        )
    else:
        data = np.frombuffer(x.replay.range_bytes(p.data_range), np.uint8).copy()
        executable = x.device.create_executable(captured_format, data, constants, label)
    function_map = []
    for fn in functions:
        if fn.name not in executable.export_names:
            raise ReplayExecutionError(
                f"executable {object_id} has no function named {fn.name!r} (it exports {list(executable.export_names)})",
                r,
            )
        function_map.append(executable.export_names.index(fn.name))
    x.state.executables[object_id] = ReplayedExecutable(
        object_id, executable, function_map, functions, substituted=substitution is not None
    )


def _create_semaphore(x: ReplayExecutor, r: Record) -> None:
    p = x.replay.decode_as(r, SemaphoreObject)
    x.state.semaphores[r.related_object_id] = p.initial_value


def _nothing(x: ReplayExecutor, r: Record) -> None:
    pass


OP = f.OP
_HANDLERS: dict[int, Callable[[ReplayExecutor, Record], None]] = {
    OP["replay.scope_begin"]: _scope_begin,
    OP["replay.scope_end"]: _scope_end,
    OP["allocator.allocate_buffer"]: _allocate,
    OP["allocator.import_buffer"]: _import_buffer,
    OP["buffer.unmap_range"]: _buffer_data,
    OP["buffer.flush_range"]: _buffer_data,
    OP["device.queue_alloca"]: _queue_alloca,
    OP["device.queue_dealloca"]: _queue_dealloca,
    OP["device.queue_fill"]: _queue_fill,
    OP["device.queue_update"]: _queue_update,
    OP["device.queue_copy"]: _queue_copy,
    OP["device.queue_read"]: _queue_read,
    OP["device.import_file"]: _import_file,
    OP["device.create_command_buffer"]: _create_command_buffer,
    OP["device.create_semaphore"]: _create_semaphore,
    OP["device.create_executable_cache"]: _nothing,
    OP["device.create_event"]: _nothing,
    OP["device.queue_flush"]: _nothing,
    OP["command_buffer.begin"]: _begin,
    OP["command_buffer.end"]: _end,
    OP["command_buffer.execution_barrier"]: _barrier,
    OP["command_buffer.signal_event"]: _events,
    OP["command_buffer.reset_event"]: _events,
    OP["command_buffer.wait_events"]: _events,
    OP["command_buffer.fill_buffer"]: _cb_fill,
    OP["command_buffer.update_buffer"]: _cb_update,
    OP["command_buffer.copy_buffer"]: _cb_copy,
    OP["command_buffer.dispatch"]: _cb_dispatch,
    OP["device.queue_dispatch"]: _queue_dispatch,
    OP["device.queue_execute"]: _queue_execute,
    OP["executable_cache.prepare_executable"]: _prepare_executable,
}
# What IREE's executor does nothing for (queries, hints, profiling markers, map calls).
_NOTHING_TO_DO = {
    OP[name]
    for name in (
        "device.trim",
        "device.assign_topology_info",
        "device.query_i64",
        "device.query_capabilities",
        "device.query_queue_pool_backend",
        "device.profiling_begin",
        "device.profiling_flush",
        "device.profiling_end",
        "device.external_capture_begin",
        "device.external_capture_end",
        "allocator.trim",
        "allocator.query_memory_heaps",
        "buffer.invalidate_range",
        "buffer.map_range",
        "command_buffer.begin_debug_group",
        "command_buffer.end_debug_group",
        "command_buffer.advise_buffer",
        "executable.function_count",
        "executable.function_info",
        "executable.function_parameters",
        "executable.lookup_function_by_name",
    )
}
