"""Command buffers as plain data: what a program recorded, replayed by a device at queue submission.

Each recorded command is a frozen dataclass. Buffers are referenced by ``BufferRef``: a direct buffer, or
(buffer ``None``) a slot of the binding table given to ``queue.execute.indirect``; ``resolve_ref`` combines
them exactly like ``iree_hal_buffer_binding_table_resolve_ref``. A reusable command buffer recorded once in
``__init`` is replayed with a new table on every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.runtime.hal import constants as c
from engine.runtime.hal.buffers import HalBuffer, calculate_range
from engine.runtime.vm.native import StatusCode, VmStatusError


@dataclass(frozen=True)
class BufferRef:
    """``iree_hal_buffer_ref_t``: a buffer (or ``None`` = binding-table ``slot``), an offset and a length."""

    slot: int
    buffer: HalBuffer | None
    offset: int
    length: int


@dataclass(frozen=True)
class BindingTableEntry:
    """One entry of a binding table (``queue.execute.indirect``'s ``(buffer, offset, length)`` tuples)."""

    buffer: HalBuffer | None
    offset: int
    length: int


@dataclass(frozen=True)
class ResolvedRange:
    """A concrete range of a buffer: ``offset``/``length`` are relative to ``buffer`` (``None`` = null)."""

    buffer: HalBuffer | None
    offset: int
    length: int


def resolve_ref(ref: BufferRef, table: list[BindingTableEntry]) -> ResolvedRange:
    """Resolve a recorded buffer reference against the submission's binding table."""
    if ref.buffer is not None:
        length = ref.buffer.byte_length - ref.offset if ref.length == c.WHOLE_BUFFER else ref.length
        return ResolvedRange(ref.buffer, ref.offset, length)
    if not table:
        return ResolvedRange(None, ref.offset, ref.length)
    if ref.slot >= len(table) or ref.slot < 0:
        raise VmStatusError(
            StatusCode.OUT_OF_RANGE,
            f"buffer binding {ref.slot} out of range of binding table with capacity {len(table)}",
        )
    entry = table[ref.slot]
    if entry.buffer is None:
        return ResolvedRange(None, ref.offset, ref.length)
    max_length = entry.length if entry.length != c.WHOLE_BUFFER else entry.buffer.byte_length - entry.offset
    offset, length = calculate_range(entry.offset, max_length, ref.offset, ref.length)
    return ResolvedRange(entry.buffer, offset, length)


# -- recorded commands


@dataclass(frozen=True)
class FillCommand:
    target: BufferRef
    pattern: bytes  # 1, 2 or 4 bytes (little endian), as the VM passed the low bytes of an i64
    flags: int = 0


@dataclass(frozen=True)
class UpdateCommand:
    data: bytes  # copied from the vm.buffer at record time, like IREE
    target: BufferRef
    flags: int = 0


@dataclass(frozen=True)
class CopyCommand:
    source: BufferRef
    target: BufferRef
    flags: int = 0


@dataclass(frozen=True)
class DispatchCommand:
    """A dispatch of export ``ordinal``: a static ``workgroup_count`` or one read from ``workgroups_ref``."""

    executable: Any  # HalExecutable
    ordinal: int
    workgroup_count: tuple[int, int, int] | None
    workgroups_ref: BufferRef | None
    constants: tuple[int, ...]  # u32 values
    bindings: tuple[BufferRef, ...]
    flags: int = 0


@dataclass(frozen=True)
class BarrierCommand:
    source_stage_mask: int
    target_stage_mask: int
    flags: int = 0


@dataclass(frozen=True)
class BeginDebugGroupCommand:
    label: str


@dataclass(frozen=True)
class EndDebugGroupCommand:
    pass


@dataclass(frozen=True)
class AdviseBufferCommand:
    buffer: BufferRef
    flags: int
    arg0: int
    arg1: int


@dataclass(frozen=True)
class FlushBufferCommand:
    target: BufferRef


@dataclass(frozen=True)
class InvalidateBufferCommand:
    target: BufferRef


Command = (
    FillCommand
    | UpdateCommand
    | CopyCommand
    | DispatchCommand
    | BarrierCommand
    | BeginDebugGroupCommand
    | EndDebugGroupCommand
    | AdviseBufferCommand
    | FlushBufferCommand
    | InvalidateBufferCommand
)


class HalCommandBuffer:
    """A ``!hal.command_buffer``: created recording (like ``command_buffer.create``), finalized, replayable."""

    vm_type_name = "hal.command_buffer"

    def __init__(self, device: Any, mode: int, categories: int, queue_affinity: int, binding_capacity: int):
        self.device = device
        self.mode = mode
        self.categories = categories
        self.queue_affinity = queue_affinity
        self.binding_capacity = binding_capacity
        self.commands: list[Command] = []
        self.finalized = False
        self.submissions = 0  # how many times a queue ran it
        self.version = 0  # changes whenever ``commands`` does (a device's prepared plans follow it)

    @property
    def one_shot(self) -> bool:
        return bool(self.mode & c.COMMAND_BUFFER_MODE_ONE_SHOT)

    def record(self, command: Command) -> None:
        if self.finalized:
            raise VmStatusError(StatusCode.FAILED_PRECONDITION, "command buffer is not in a recording state")
        for ref in _refs_of(command):
            if ref.buffer is None and ref.slot >= self.binding_capacity and self.binding_capacity > 0:
                raise VmStatusError(
                    StatusCode.OUT_OF_RANGE,
                    f"indirect buffer reference slot {ref.slot} is out of range of the declared binding "
                    f"capacity of the command buffer {self.binding_capacity}",
                )
        self.commands.append(command)
        self.version += 1

    def finalize(self) -> None:
        if self.finalized:
            raise VmStatusError(StatusCode.FAILED_PRECONDITION, "command buffer is not in a recording state")
        self.finalized = True

    # -- checkpoints (``engine.runtime.vm.values.Checkpointable``)

    def checkpoint(self, keep: Any) -> tuple:
        return tuple(self.commands), self.finalized, self.submissions

    def restore_checkpoint(self, state: tuple) -> None:
        commands, self.finalized, self.submissions = state
        self.commands[:] = commands
        self.version += 1

    def checkpoint_refs(self) -> list:
        """The buffers its commands name (their bytes matter when it runs) and its device."""
        return [self.device, *(r.buffer for c in self.commands for r in _refs_of(c) if r.buffer is not None)]

    def __repr__(self) -> str:
        kind = "one-shot" if self.one_shot else "reusable"
        return f"HalCommandBuffer({kind}, {len(self.commands)} commands, capacity {self.binding_capacity})"


def _refs_of(command: Command) -> list[BufferRef]:
    if isinstance(command, FillCommand | UpdateCommand | FlushBufferCommand | InvalidateBufferCommand):
        return [command.target]
    if isinstance(command, CopyCommand):
        return [command.source, command.target]
    if isinstance(command, DispatchCommand):
        refs = list(command.bindings)
        if command.workgroups_ref is not None:
            refs.append(command.workgroups_ref)
        return refs
    if isinstance(command, AdviseBufferCommand):
        return [command.buffer]
    return []
