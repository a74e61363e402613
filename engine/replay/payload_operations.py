"""Typed payloads of the work a program queued: dispatches, queue operations (each with the semaphores it
waits on and signals, read when asked) and the commands recorded into command buffers. Field names and
order are ``iree-dump-replay --format=jsonl``'s."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from engine.replay import format as f
from engine.replay.payload_base import Payload, PayloadBytes, buffer_ref, payload, replay_field
from engine.replay.reader import BufferRef, FileRange, Timepoint

if TYPE_CHECKING:
    from engine.replay.reader import ReplayFile

T = f.PayloadType
TIMEPOINT = f.TIMEPOINT.size


class QueueSemaphores:
    """The wait and signal lists of a queue operation, read from the replay when asked."""

    replay: ReplayFile
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange

    @property
    def wait_semaphores(self) -> list[Timepoint]:
        return self.replay.timepoints(self.wait_semaphores_range)

    @property
    def signal_semaphores(self) -> list[Timepoint]:
        return self.replay.timepoints(self.signal_semaphores_range)


@payload(T.DISPATCH)
@dataclass(frozen=True)
class Dispatch(Payload, QueueSemaphores):
    """``command_buffer.dispatch`` or ``device.queue_dispatch``: function ``function_ordinal`` of executable
    ``executable_id`` over a workgroup grid (or the one ``workgroup_count_ref`` holds), with its constants
    and bindings (read when asked)."""

    executable_id: int
    queue_affinity: int
    function_ordinal: int
    flags: int
    workgroup_count: tuple[int, int, int]
    workgroup_size: tuple[int, int, int]
    dynamic_workgroup_local_memory: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    constants_length: int
    binding_count: int
    workgroup_count_ref: BufferRef
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    constants_range: FileRange
    bindings_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> Dispatch:
        (executable_id, affinity, ordinal, flags, sx, sy, sz, cx, cy, cz, rb, ro, rl, rs, _rr, local_memory,
         _r0, waits, signals, constants_length, bindings) = raw.fixed(f.DISPATCH, exact=False, what="dispatch payload")  # fmt: skip
        parts = raw.parts(
            f.DISPATCH.size, waits * TIMEPOINT, signals * TIMEPOINT, constants_length, bindings * f.BUFFER_REF.size,
            what="dispatch",
        )  # fmt: skip
        return cls(
            executable_id, affinity, ordinal, flags, (cx, cy, cz), (sx, sy, sz), local_memory, waits, signals,
            constants_length, bindings, BufferRef(rb, ro, rl, rs), *parts, replay=raw.replay,
        )  # fmt: skip

    @property
    def indirect(self) -> bool:
        """The workgroup count is read from a buffer when the dispatch runs."""
        ref = self.workgroup_count_ref
        return ref.buffer_id != 0 or ref.length != 0

    @cached_property
    def constants(self) -> tuple[int, ...]:
        return self.replay.u32s(self.constants_range)

    @cached_property
    def bindings(self) -> tuple[BufferRef, ...]:
        """As recorded: buffer 0 is a slot of the binding table the queue execute supplies."""
        return tuple(self.replay.buffer_refs(self.bindings_range))


@payload(T.DEVICE_QUEUE_EXECUTE)
@dataclass(frozen=True)
class QueueExecute(Payload, QueueSemaphores):
    """``device.queue_execute``: command buffer ``command_buffer_id`` (0: none, a barrier) run with a
    binding table."""

    JSON_EXTRA = ("wait_semaphores", "signal_semaphores", "bindings")

    command_buffer_id: int
    queue_affinity: int
    flags: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    binding_count: int
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    bindings_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> QueueExecute:
        cb, affinity, flags, waits, signals, bindings = raw.fixed(f.QUEUE_EXECUTE, exact=False)
        parts = raw.parts(
            f.QUEUE_EXECUTE.size, waits * TIMEPOINT, signals * TIMEPOINT, bindings * f.BUFFER_REF.size,
            what="queue execute",
        )  # fmt: skip
        return cls(cb, affinity, flags, waits, signals, bindings, *parts, replay=raw.replay)

    @cached_property
    def bindings(self) -> tuple[BufferRef, ...]:
        """The binding table (buffer 0: a null entry)."""
        return tuple(self.replay.buffer_refs(self.bindings_range))


@payload(T.DEVICE_QUEUE_ALLOCA)
@dataclass(frozen=True)
class QueueAlloca(Payload, QueueSemaphores):
    allocation_size: int
    allocation_queue_affinity: int
    min_alignment: int
    usage: int
    type: int
    access: int
    queue_affinity: int
    flags: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> QueueAlloca:
        size, alloc_affinity, alignment, usage, mtype, access, _r0, _r1, affinity, flags, waits, signals = (
            raw.fixed(f.QUEUE_ALLOCA, exact=False)
        )
        parts = raw.parts(f.QUEUE_ALLOCA.size, waits * TIMEPOINT, signals * TIMEPOINT, what="queue alloca")
        return cls(
            size, alloc_affinity, alignment, usage, mtype, access, affinity, flags, waits, signals, *parts,
            replay=raw.replay,
        )  # fmt: skip


@payload(T.DEVICE_QUEUE_DEALLOCA)
@dataclass(frozen=True)
class QueueDealloca(Payload, QueueSemaphores):
    queue_affinity: int
    flags: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    buffer_ref: BufferRef
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> QueueDealloca:
        v = raw.fixed(f.QUEUE_DEALLOCA, exact=False)
        waits, signals = v[7], v[8]
        parts = raw.parts(f.QUEUE_DEALLOCA.size, waits * TIMEPOINT, signals * TIMEPOINT, what="queue")
        return cls(v[5], v[6], waits, signals, buffer_ref(v[:5]), *parts, replay=raw.replay)


@payload(T.DEVICE_QUEUE_FILL)
@dataclass(frozen=True)
class QueueFill(Payload, QueueSemaphores):
    queue_affinity: int
    flags: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    pattern_length: int
    target_ref: BufferRef
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    pattern_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> QueueFill:
        v = raw.fixed(f.QUEUE_FILL, exact=False)
        waits, signals, pattern = v[7], v[8], v[9]
        parts = raw.parts(f.QUEUE_FILL.size, waits * TIMEPOINT, signals * TIMEPOINT, pattern, what="queue")
        return cls(v[5], v[6], waits, signals, pattern, buffer_ref(v[:5]), *parts, replay=raw.replay)


@payload(T.DEVICE_QUEUE_UPDATE)
@dataclass(frozen=True)
class QueueUpdate(Payload, QueueSemaphores):
    queue_affinity: int
    flags: int
    source_offset: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    data_length: int
    target_ref: BufferRef
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    data_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> QueueUpdate:
        v = raw.fixed(f.QUEUE_UPDATE, exact=False)
        source_offset, data_length, waits, signals = v[7], v[8], v[9], v[10]
        parts = raw.parts(
            f.QUEUE_UPDATE.size, waits * TIMEPOINT, signals * TIMEPOINT, data_length, what="queue"
        )
        return cls(
            v[5],
            v[6],
            source_offset,
            waits,
            signals,
            data_length,
            buffer_ref(v[:5]),
            *parts,
            replay=raw.replay,
        )


@payload(T.DEVICE_QUEUE_COPY)
@dataclass(frozen=True)
class QueueCopy(Payload, QueueSemaphores):
    queue_affinity: int
    flags: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    source_ref: BufferRef
    target_ref: BufferRef
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> QueueCopy:
        v = raw.fixed(f.QUEUE_COPY, exact=False)
        affinity, flags, waits, signals = v[10:14]
        wait_r, signal_r, _ = raw.parts(
            f.QUEUE_COPY.size, waits * TIMEPOINT, signals * TIMEPOINT, 0, what="queue"
        )
        return cls(
            affinity, flags, waits, signals, buffer_ref(v[0:5]), buffer_ref(v[5:10]), wait_r, signal_r,
            replay=raw.replay,
        )  # fmt: skip


@payload(T.DEVICE_QUEUE_READ)
@dataclass(frozen=True)
class QueueRead(Payload, QueueSemaphores):
    """``device.queue_read`` from a file; ``captured_data_range`` holds the bytes read when the capture
    kept them (a file captured as ranges)."""

    source_file_id: int
    source_offset: int
    queue_affinity: int
    flags: int
    captured_data_length: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    target_ref: BufferRef
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    captured_data_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> QueueRead:
        v = raw.fixed(f.QUEUE_READ, exact=False)
        affinity, flags, captured, waits, signals = v[7:12]
        parts = raw.parts(f.QUEUE_READ.size, waits * TIMEPOINT, signals * TIMEPOINT, captured, what="queue")
        return cls(
            v[0],
            v[1],
            affinity,
            flags,
            captured,
            waits,
            signals,
            buffer_ref(v[2:7]),
            *parts,
            replay=raw.replay,
        )


@payload(T.DEVICE_QUEUE_WRITE)
@dataclass(frozen=True)
class QueueWrite(Payload, QueueSemaphores):
    target_file_id: int
    target_offset: int
    queue_affinity: int
    flags: int
    wait_semaphore_count: int
    signal_semaphore_count: int
    source_ref: BufferRef
    wait_semaphores_range: FileRange
    signal_semaphores_range: FileRange
    replay: ReplayFile = replay_field()

    @classmethod
    def read(cls, raw: PayloadBytes) -> QueueWrite:
        v = raw.fixed(f.QUEUE_WRITE, exact=False)
        file_id, target_offset, affinity, flags, waits, signals = v[5:11]
        wait_r, signal_r, _ = raw.parts(
            f.QUEUE_WRITE.size, waits * TIMEPOINT, signals * TIMEPOINT, 0, what="queue"
        )
        return cls(
            file_id, target_offset, affinity, flags, waits, signals, buffer_ref(v[0:5]), wait_r, signal_r,
            replay=raw.replay,
        )  # fmt: skip


@payload(T.COMMAND_BUFFER_EXECUTION_BARRIER)
@dataclass(frozen=True)
class ExecutionBarrier(Payload):
    source_stage_mask: int
    target_stage_mask: int
    flags: int
    memory_barrier_count: int
    buffer_barrier_count: int
    memory_barriers_range: FileRange
    buffer_barriers_range: FileRange

    @classmethod
    def read(cls, raw: PayloadBytes) -> ExecutionBarrier:
        source, target, flags, memory, buffers = raw.fixed(f.EXECUTION_BARRIER, exact=False)
        parts = raw.parts(
            f.EXECUTION_BARRIER.size, memory * f.MEMORY_BARRIER.size, buffers * f.BUFFER_BARRIER_SIZE,
            what="execution barrier",
        )  # fmt: skip
        return cls(source, target, flags, memory, buffers, *parts)


@payload(T.COMMAND_BUFFER_EVENT)
@dataclass(frozen=True)
class CommandBufferEvent(Payload):
    event_id: int
    source_stage_mask: int

    @classmethod
    def read(cls, raw: PayloadBytes) -> CommandBufferEvent:
        return cls(*raw.fixed(f.COMMAND_BUFFER_EVENT))


@payload(T.COMMAND_BUFFER_WAIT_EVENTS)
@dataclass(frozen=True)
class WaitEvents(Payload):
    source_stage_mask: int
    target_stage_mask: int
    event_count: int
    memory_barrier_count: int
    buffer_barrier_count: int
    events_range: FileRange
    memory_barriers_range: FileRange
    buffer_barriers_range: FileRange

    @classmethod
    def read(cls, raw: PayloadBytes) -> WaitEvents:
        source, target, events, memory, buffers, _ = raw.fixed(f.WAIT_EVENTS, exact=False)
        parts = raw.parts(
            f.WAIT_EVENTS.size, events * 8, memory * f.MEMORY_BARRIER.size, buffers * f.BUFFER_BARRIER_SIZE,
            what="wait events",
        )  # fmt: skip
        return cls(source, target, events, memory, buffers, *parts)


@payload(T.COMMAND_BUFFER_FILL_BUFFER)
@dataclass(frozen=True)
class CommandBufferFill(Payload):
    flags: int
    pattern_length: int
    target: BufferRef
    pattern_range: FileRange

    @classmethod
    def read(cls, raw: PayloadBytes) -> CommandBufferFill:
        v = raw.fixed(f.CB_FILL, exact=False)
        (pattern,) = raw.parts(f.CB_FILL.size, v[7], what="command buffer fill")
        return cls(v[5], v[7], buffer_ref(v[0:5]), pattern)


@payload(T.COMMAND_BUFFER_UPDATE_BUFFER)
@dataclass(frozen=True)
class CommandBufferUpdate(Payload):
    flags: int
    source_offset: int
    data_length: int
    target: BufferRef
    data_range: FileRange

    @classmethod
    def read(cls, raw: PayloadBytes) -> CommandBufferUpdate:
        v = raw.fixed(f.CB_UPDATE, exact=False)
        (data,) = raw.parts(f.CB_UPDATE.size, v[8], what="command buffer update")
        return cls(v[5], v[7], v[8], buffer_ref(v[0:5]), data)


@payload(T.COMMAND_BUFFER_COPY_BUFFER)
@dataclass(frozen=True)
class CommandBufferCopy(Payload):
    flags: int
    source: BufferRef
    target: BufferRef

    @classmethod
    def read(cls, raw: PayloadBytes) -> CommandBufferCopy:
        v = raw.fixed(f.CB_COPY)
        return cls(v[10], buffer_ref(v[0:5]), buffer_ref(v[5:10]))


__all__ = [
    "CommandBufferCopy",
    "CommandBufferEvent",
    "CommandBufferFill",
    "CommandBufferUpdate",
    "Dispatch",
    "ExecutionBarrier",
    "QueueAlloca",
    "QueueCopy",
    "QueueDealloca",
    "QueueExecute",
    "QueueFill",
    "QueueRead",
    "QueueSemaphores",
    "QueueUpdate",
    "QueueWrite",
    "WaitEvents",
]
