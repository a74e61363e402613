"""A stretch of a command buffer run natively on the CPU device: prepared once, reused call after call.

IREE 3.13 memoizes a program's command buffers: they are recorded once (reusable, indirect) and each call
submits the same one with a new binding table (``queue.execute.indirect``). So the work of a dispatch that
does not depend on the table is done once per command buffer: ``CpuBatchPlan`` lays out, for every
dispatch of a stretch, IREE's dispatch state and workgroup state (``cpu_abi``: workgroup size and count,
constants, binding pointer and length arrays, local memory) in one arena, and a descriptor array that the
native loop (``native_loop``) walks. Per submission only the binding pointers and lengths change: they are
worked out from the binding table in a few whole-array numpy operations (no Python per dispatch) and
written into the arena, then one native call runs every dispatch.

A stretch is cut into segments: runs of native dispatches (``CpuBatchPlan``), and the commands between
them that run through the device one at a time (VMVX executables, a substituted executable, an indirect
workgroup count). Fills, copies and updates run inside the plan (the native loop's transfer descriptors)
unless someone listens to the device's transfers (``Device.transfer_listeners``): then they cut it too.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import HalError
from engine.runtime.hal import commands as cmd
from engine.runtime.hal import constants as c
from engine.runtime.hal.commands import BindingTableEntry, BufferRef
from engine.runtime.hal.cpu_abi import BINDING_ALIGNMENT, LOCAL_MEMORY_PAGE_SIZE
from engine.runtime.hal.cpu_library import CpuExecutableLibrary
from engine.runtime.hal.machine_code import MXCSR_FLUSH_DENORMALS, machine_code
from engine.runtime.hal.native_loop import (
    BATCH_OK,
    DESCRIPTOR_WORDS,
    TRANSFER_COPY,
    TRANSFER_FILL,
    TRANSFER_WORDS,
    native_loop,
)

_DS_SIZE, _WS_SIZE = 48, 32  # DispatchStateStruct, WorkgroupStateStruct (cpu_abi checks the sizes)
_WHOLE = c.WHOLE_BUFFER
_DIRECT = -1  # BufferRef.slot of a direct buffer in the plan's source list

# The dispatch state and workgroup state packed together (the layouts of cpu_abi's structs, checked below).
_STATE_FORMAT = "<IIHHIIHBBQQQ" + "IIHHIQI4x"
if struct.calcsize(_STATE_FORMAT) != _DS_SIZE + _WS_SIZE:  # pragma: no cover
    raise ImportError("dispatch/workgroup state pack format does not match the structs")
_WORKGROUP_ID = struct.Struct("<IIH")


def native_dispatch(command: cmd.Command) -> bool:
    """Whether a command can run inside a native batch: a dispatch of a loaded CPU library (not a
    substitution's overlay, not VMVX) with a workgroup count known when it was recorded."""
    return (
        type(command) is cmd.DispatchCommand
        and command.workgroups_ref is None
        and type(command.executable.impl) is CpuExecutableLibrary
    )


# Transfers on host memory that a plan can run in its native loop.
_TRANSFERS = (cmd.FillCommand, cmd.CopyCommand, cmd.UpdateCommand)

# Commands that change nothing on coherent host memory: they do not cut a native segment.
_NOTHING_TO_DO = (
    cmd.BarrierCommand,
    cmd.BeginDebugGroupCommand,
    cmd.EndDebugGroupCommand,
    cmd.AdviseBufferCommand,
    cmd.FlushBufferCommand,
    cmd.InvalidateBufferCommand,
)


@dataclass(frozen=True)
class BindingFailure:
    """Why a plan could not run with a binding table (the device then runs the stretch one dispatch at a
    time, whose checks raise IREE's error)."""

    reason: str


def _checked_exports(
    dispatches: Sequence[cmd.DispatchCommand], impls: Sequence[CpuExecutableLibrary]
) -> tuple:
    """Each dispatch's export; ValueError (run it one dispatch at a time, whose checks raise IREE's error)
    when its counts differ from the export's or its workgroup count is out of range."""
    exports = tuple(impl.export(d.ordinal) for impl, d in zip(impls, dispatches))
    for d, export in zip(dispatches, exports):
        attrs = export.attributes
        if len(d.constants) != attrs.constant_count or len(d.bindings) != attrs.binding_count:
            raise ValueError("counts differ from the export's: run it one dispatch at a time")
        x, y, z = d.workgroup_count  # type: ignore[misc]
        if not (0 <= x <= 0xFFFFFFFF and 0 <= y <= 0xFFFFFFFF and 0 <= z <= 0xFFFF):
            raise ValueError("workgroup count out of range: run it one dispatch at a time")
    return exports


@dataclass(frozen=True)
class _ArenaLayout:
    """Where things go in a plan's arena: per dispatch [dispatch state][workgroup state][constants,
    8-aligned][binding pointers][binding lengths], 64-byte aligned; then one record per transfer."""

    dispatches: tuple[tuple[int, int, int], ...]  # (offset, constant count, binding count) per dispatch
    transfers_at: int
    size: int  # bytes before the empty binding and the scratch word
    local: int  # bytes of local memory the largest export needs

    @staticmethod
    def of(dispatches: Sequence[cmd.DispatchCommand], transfers: int, exports: Sequence) -> _ArenaLayout:
        sizes, at = [], 0
        for d in dispatches:
            m, b = len(d.constants), len(d.bindings)
            sizes.append((at, m, b))
            at += (_DS_SIZE + _WS_SIZE + ((4 * m + 7) & ~7) + 16 * b + 63) & ~63
        transfers_at = at
        at += (8 * TRANSFER_WORDS * transfers + 63) & ~63  # the empty binding after them stays aligned
        local = max((e.attributes.local_memory_pages for e in exports), default=0) * LOCAL_MEMORY_PAGE_SIZE
        return _ArenaLayout(tuple(sizes), transfers_at, at, local)


@dataclass(frozen=True)
class _TransferRow:
    """What ``bind`` checks of one transfer: its kind, the ref index of its target and of a copy's source
    (-1 otherwise), a fill's pattern size (1 otherwise) and an update's length (-1 otherwise)."""

    kind: int
    target_ref: int
    source_ref: int
    pattern_size: int
    fixed_length: int


class CpuBatchPlan:
    """Consecutive native dispatches and host transfers of one command buffer, prepared to run in one
    native call."""

    def __init__(
        self, commands: Sequence[cmd.DispatchCommand | cmd.FillCommand | cmd.CopyCommand | cmd.UpdateCommand]
    ):
        self.commands = tuple(commands)
        self.dispatches = tuple(c for c in self.commands if type(c) is cmd.DispatchCommand)
        transfers = tuple(c for c in self.commands if type(c) is not cmd.DispatchCommand)
        self.impls = tuple(d.executable.impl for d in self.dispatches)
        self._executables = tuple({id(d.executable): d.executable for d in self.dispatches}.values())
        self._executable_impls = tuple(e.impl for e in self._executables)
        self.exports = _checked_exports(self.dispatches, self.impls)
        layout = _ArenaLayout.of(self.dispatches, len(transfers), self.exports)
        self._allocate(layout)
        # One descriptor per command; each dispatch's descriptor index (transfers sit between them).
        self._descriptors = np.zeros(len(self.commands) * DESCRIPTOR_WORDS, np.uint64)
        self._descriptors_address = self._descriptors.ctypes.data
        self._dispatch_slot = [i for i, c in enumerate(self.commands) if type(c) is cmd.DispatchCommand]
        # Each binding's (then each transfer range's) pointer and length word in the arena, and its ref.
        ptr_at: list[int] = []
        len_at: list[int] = []
        self._write_dispatch_states(layout, ptr_at, len_at)
        refs: list[BufferRef] = [ref for d in self.dispatches for ref in d.bindings]
        dispatch_refs = len(refs)
        self._record_transfers(transfers, layout, refs, ptr_at, len_at)
        # Only a dispatch's bindings must be aligned (a transfer's ranges need not be).
        self._aligned = np.arange(len(refs)) < dispatch_refs
        # The clock after each dispatch (``run(timed=True)``; the native loop writes it).
        self._ends = np.zeros(max(len(self.dispatches), 1), np.int64)
        self._ends_address = self._ends.ctypes.data
        self._ptr_at = np.asarray(ptr_at, np.int64)
        self._len_at = np.asarray(len_at, np.int64)
        self._plan_sources(refs)
        # A zero-length binding still gets an aligned pointer (the kernel reads nothing there).
        self._empty_address = self._arena.ctypes.data + layout.size
        self._fast = self._fast_binding(transfers)
        self.lock = threading.Lock()  # one submission at a time uses the arena

    def _allocate(self, layout: _ArenaLayout) -> None:
        """The arena (64-byte aligned, + an empty binding's 64 bytes + a scratch word) and local memory."""
        raw = np.zeros(layout.size + 128 + BINDING_ALIGNMENT, np.uint8)
        start = (-raw.ctypes.data) % 64
        self._arena = raw[start : start + layout.size + 128]
        self._local = np.zeros(layout.local + BINDING_ALIGNMENT, np.uint8) if layout.local else None
        self._local_address = 0
        if self._local is not None:
            self._local_address = self._local.ctypes.data + (-self._local.ctypes.data) % BINDING_ALIGNMENT
        self._words = self._arena[: (len(self._arena) // 8) * 8].view("<u8")

    def _write_dispatch_states(self, layout: _ArenaLayout, ptr_at: list[int], len_at: list[int]) -> None:
        """Each dispatch's dispatch and workgroup state and constants in the arena, its descriptor, and where
        its binding pointers and lengths go (appended to ``ptr_at``/``len_at``, in binding order)."""
        arena, base, descriptors = self._arena, self._arena.ctypes.data, self._descriptors
        for k, d, export, impl, (offset, m, b) in zip(
            self._dispatch_slot, self.dispatches, self.exports, self.impls, layout.dispatches
        ):
            constants_at = offset + _DS_SIZE + _WS_SIZE
            ptrs_at = constants_at + ((4 * m + 7) & ~7)
            lengths_at = ptrs_at + 8 * b
            x, y, z = d.workgroup_count  # type: ignore[misc]
            export_local = export.attributes.local_memory_size
            struct.pack_into(
                f"{_STATE_FORMAT}{m}I",
                arena,
                offset,
                1, 1, 1, m, x, y, z, 1, b,  # workgroup size (1,1,1) and max_concurrency 1, like local-sync
                base + constants_at, base + ptrs_at, base + lengths_at,
                0, 0, 0, 0, 0, self._local_address if export_local else 0, export_local,
                *(int(v) & 0xFFFFFFFF for v in d.constants),
            )  # fmt: skip
            ptr_at.extend(range(ptrs_at // 8, ptrs_at // 8 + b))
            len_at.extend(range(lengths_at // 8, lengths_at // 8 + b))
            descriptors[k * 4 : k * 4 + 4] = (
                impl.export_address(d.ordinal), impl.environment_address, base + offset, base + offset + _DS_SIZE,
            )  # fmt: skip

    def _record_transfers(
        self,
        transfers: Sequence[cmd.Command],
        layout: _ArenaLayout,
        refs: list[BufferRef],
        ptr_at: list[int],
        len_at: list[int],
    ) -> None:
        """Each transfer's record (``TRANSFER_WORDS`` words) and descriptor: its target's pointer and length
        words are refs like a binding's (appended to ``refs``, ``ptr_at``, ``len_at``); what else it needs
        comes from its kind's recorder (``TRANSFER_RECORDERS``)."""
        self._update_data: list[np.ndarray] = []  # an update's bytes (copied at record time, like IREE)
        rows: list[_TransferRow] = []
        base = self._arena.ctypes.data
        transfer_slots = [i for i, c in enumerate(self.commands) if type(c) is not cmd.DispatchCommand]
        for t, (slot, command) in enumerate(zip(transfer_slots, transfers)):
            record = layout.transfers_at + 8 * TRANSFER_WORDS * t
            target_ref = len(refs)
            ptr_at.append(record // 8)
            len_at.append(record // 8 + 1)
            refs.append(command.target)  # type: ignore[attr-defined]
            row = self.TRANSFER_RECORDERS[type(command)](self, command, record // 8, target_ref, refs, ptr_at, len_at)
            rows.append(row)
            self._descriptors[slot * 4 : slot * 4 + 4] = (0, row.kind, base + record, 0)
        # Per transfer: the index of its target ref, its kind, fill pattern size, an update's length.
        self._target_ref = np.asarray([r.target_ref for r in rows], np.int64)
        self._copy_source_ref = np.asarray([r.source_ref for r in rows], np.int64)
        self._transfer_kind = np.asarray([r.kind for r in rows], np.int64)
        self._pattern_size = np.asarray([r.pattern_size for r in rows], np.int64)
        self._fixed_length = np.asarray([r.fixed_length for r in rows], np.int64)
        self._is_fill = self._transfer_kind == TRANSFER_FILL
        self._is_update = self._fixed_length >= 0
        self._is_copy = self._copy_source_ref >= 0

    def _record_copy(
        self, command: cmd.CopyCommand, word: int, target_ref: int, refs: list, ptr_at: list, len_at: list
    ) -> _TransferRow:
        # The source pointer is a ref too; its length goes to a scratch word (``bind`` checks it equals the
        # target's).
        ptr_at.append(word + 2)
        len_at.append(len(self._words) - 1)
        refs.append(command.source)
        return _TransferRow(TRANSFER_COPY, target_ref, len(refs) - 1, 1, -1)

    def _record_update(
        self, command: cmd.UpdateCommand, word: int, target_ref: int, refs: list, ptr_at: list, len_at: list
    ) -> _TransferRow:
        data = np.frombuffer(bytes(command.data), np.uint8).copy()
        self._update_data.append(data)
        self._words[word + 2] = data.ctypes.data if len(data) else self._arena.ctypes.data
        return _TransferRow(TRANSFER_COPY, target_ref, -1, 1, len(data))

    def _record_fill(
        self, command: cmd.FillCommand, word: int, target_ref: int, refs: list, ptr_at: list, len_at: list
    ) -> _TransferRow:
        pattern = bytes(command.pattern)
        uniform = len(pattern) > 0 and pattern == pattern[:1] * len(pattern)
        # A pattern of one repeated byte is a memset whatever its size.
        self._words[word + 2] = pattern[0] if uniform else int.from_bytes(pattern, "little")
        self._words[word + 3] = 1 if uniform else len(pattern)
        return _TransferRow(TRANSFER_FILL, target_ref, -1, len(pattern), -1)

    def _plan_sources(self, refs: list[BufferRef]) -> None:
        """Where each binding's bytes come from: a slot of the binding table, or a direct buffer (the plan's
        own list, ``direct``): ``_source`` indexes [table slots..., direct buffers...] once a table is known."""
        self.direct = tuple({id(r.buffer): r.buffer for r in refs if r.buffer is not None}.values())
        direct_index = {id(buf): i for i, buf in enumerate(self.direct)}
        self._slots = np.asarray([r.slot if r.buffer is None else _DIRECT for r in refs], np.int64)
        self._direct_of = np.asarray(
            [direct_index[id(r.buffer)] if r.buffer is not None else 0 for r in refs], np.int64
        )
        self._is_direct = self._slots == _DIRECT
        self._ref_offset = np.asarray([r.offset for r in refs], np.int64)
        self._ref_whole = np.asarray([r.length == _WHOLE for r in refs], bool)
        self._ref_length = np.asarray([0 if r.length == _WHOLE else r.length for r in refs], np.int64)
        self._max_slot = int(self._slots.max(initial=-1))
        # Each binding's index into [table slots..., direct buffers...] (fixed: the plan knows both counts).
        self._source = np.where(self._is_direct, self._max_slot + 1 + self._direct_of, self._slots)

    def _fast_binding(self, transfers: Sequence[cmd.Command]) -> _FastBinding | None:
        """What ``bind`` needs per submission when every range is fixed at record time (no transfer, no
        whole-buffer length, offsets 64-byte aligned): the lengths and empty bindings' pointers are
        written here once; per call only each source's room and alignment is checked and the non-empty
        bindings' pointers written. None: ``bind`` does the whole-array checks every time."""
        offset, length = self._ref_offset, self._ref_length
        if transfers or self._ref_whole.any() or (offset < 0).any() or (length < 0).any():
            return None
        if ((offset % BINDING_ALIGNMENT != 0) & self._aligned).any():
            return None
        sources = self._max_slot + 1 + len(self.direct)
        need = np.full(sources, -1, np.int64)  # -1: no binding reads this source
        np.maximum.at(need, self._source, offset + length)
        used = np.flatnonzero(need >= 0)
        nonempty = length != 0
        words = self._words
        words[self._len_at] = length.astype(np.uint64)
        words[self._ptr_at[~nonempty]] = np.uint64(self._empty_address)
        word_at = np.ascontiguousarray(self._ptr_at[nonempty], np.int64)
        source = np.ascontiguousarray(self._source[nonempty], np.int64)
        offsets = np.ascontiguousarray(offset[nonempty], np.int64)
        addresses = np.zeros(max(sources, 1), np.int64)
        return _FastBinding(
            need=[(int(s), int(need[s])) for s in used],
            aligned=[int(s) for s in np.unique(self._source[nonempty & self._aligned])],
            count=len(word_at),
            arrays=(word_at, source, offsets, addresses),
            addresses=addresses,
            pointers=(word_at.ctypes.data, source.ctypes.data, offsets.ctypes.data, addresses.ctypes.data,
                      words.ctypes.data),
        )  # fmt: skip

    @property
    def count(self) -> int:
        return len(self.dispatches)

    def still_valid(self) -> bool:
        """Whether every executable still runs the code the plan points at (a substitution swaps ``impl``) and
        none was closed."""
        for e, impl in zip(self._executables, self._executable_impls):
            if e.impl is not impl or impl.closed:
                return False
        return True

    def bind(self, table: list[BindingTableEntry]) -> BindingFailure | None:
        """Write the binding pointers and lengths for ``table`` into the arena (IREE's
        ``iree_hal_buffer_binding_table_resolve_ref`` and the dispatch's checks, as whole-array operations);
        a ``BindingFailure`` (nothing run) when one would fail: the one-at-a-time path raises its error."""
        slots = self._max_slot + 1
        if slots > len(table) and slots > 0:
            return BindingFailure("binding table too small")
        # Per source (table slot or direct buffer): the address of its first byte and how many bytes follow.
        fast = self._fast
        if fast is not None:
            if self._bind_fixed(table, slots, fast):
                return None
            # A check failed: the whole-array path below finds which (and refuses the same way).
        sources = slots + len(self.direct)
        address = np.zeros(sources, np.int64)
        available = np.zeros(sources, np.int64)
        transfers = len(self._target_ref) > 0
        if transfers:  # a fill's alignment is of its offset in the buffer; a transfer target must be writable
            entry_offset = np.zeros(sources, np.int64)
            writable = np.zeros(sources, bool)
        for i in range(slots):
            entry = table[i]
            buffer = entry.buffer
            if buffer is None:
                available[i] = -1  # NULL: any binding of this slot fails
                continue
            room = buffer.byte_length - entry.offset
            length = room if entry.length == _WHOLE else entry.length
            if entry.offset < 0 or length < 0 or length > room:
                available[i] = -1
                continue
            address[i] = buffer.allocation.address + buffer.byte_offset + entry.offset
            available[i] = length
            if transfers:
                entry_offset[i] = entry.offset
                writable[i] = buffer.allocation.data.flags.writeable
        for k, buffer in enumerate(self.direct):
            address[slots + k] = buffer.allocation.address + buffer.byte_offset
            available[slots + k] = buffer.byte_length
            if transfers:
                writable[slots + k] = buffer.allocation.data.flags.writeable
        source = self._source
        room = available[source]
        offset = self._ref_offset
        length = np.where(self._ref_whole, room - offset, self._ref_length)
        ok = (room >= 0) & (offset >= 0) & (offset <= room) & (length >= 0) & (offset + length <= room)
        pointers = address[source] + offset
        empty = length == 0
        pointers = np.where(empty, self._empty_address, pointers)
        if not ok.all() or ((pointers % BINDING_ALIGNMENT != 0) & self._aligned).any():
            return BindingFailure("a binding is NULL, out of range or misaligned")
        if transfers and not self._transfers_allowed(source, offset, length, entry_offset, writable):
            return BindingFailure("a transfer IREE's checks refuse or the one-at-a-time path does otherwise")
        words = self._words
        if fast is not None:
            fast.bound = None  # written here, not by ``_bind_fixed``
        words[self._ptr_at] = pointers.astype(np.uint64)
        words[self._len_at] = length.astype(np.uint64)
        return None

    def _bind_fixed(self, table: list[BindingTableEntry], slots: int, fast: _FastBinding) -> bool:
        """``bind`` for a plan whose ranges are fixed (``_fast_binding``): each source's room is checked
        against the furthest byte a binding of it reaches and its address against the alignment; then the
        pointers are written. False (nothing written) when a check fails."""
        address = []
        available = []
        for i in range(slots):
            entry = table[i]
            buffer = entry.buffer
            if buffer is None:
                address.append(0)
                available.append(-1)
                continue
            room = buffer.byte_length - entry.offset
            length = room if entry.length == _WHOLE else entry.length
            if entry.offset < 0 or length < 0 or length > room:
                address.append(0)
                available.append(-1)
                continue
            address.append(buffer.allocation.address + buffer.byte_offset + entry.offset)
            available.append(length)
        for buffer in self.direct:
            address.append(buffer.allocation.address + buffer.byte_offset)
            available.append(buffer.byte_length)
        for s, furthest in fast.need:
            if available[s] < furthest:
                return False
        for s in fast.aligned:
            if address[s] % BINDING_ALIGNMENT:
                return False
        if address != fast.bound:
            fast.addresses[: len(address)] = address
            native_loop().relocate(fast.count, *fast.pointers)
            fast.bound = address
        return True

    def _transfers_allowed(
        self,
        source: np.ndarray,
        offset: np.ndarray,
        length: np.ndarray,
        entry_offset: np.ndarray,
        writable: np.ndarray,
    ) -> bool:
        """Whether every transfer does what ``Device.fill``/``copy``/``update`` would (else the one-at-a-time
        path runs them: it raises IREE's error, or does the unusual thing, e.g. a copy longer than its
        target range, exactly as before)."""
        target = self._target_ref
        target_length = length[target]
        if not writable[source[target]].all():
            return False
        copies = self._is_copy
        if copies.any() and (length[self._copy_source_ref[copies]] != target_length[copies]).any():
            return False
        updates = self._is_update
        if (target_length[updates] != self._fixed_length[updates]).any():
            return False
        fills = self._is_fill
        if fills.any():
            n = self._pattern_size[fills]
            if not np.isin(n, (1, 2, 4)).all():
                return False
            at = (entry_offset[source[target]] + offset[target])[fills]
            filled = target_length[fills]
            if ((filled != 0) & (((at % n) != 0) | ((filled % n) != 0))).any():
                return False
        return True

    def run(self, progress_address: int, timed: bool = False) -> tuple[int, int] | None:
        """Run every dispatch (after ``bind``), writing the index of each into the u64 at ``progress_address``
        before it runs; ``(index, code)`` of the first that returned non-zero. ``timed``: read the clock after
        each dispatch (``dispatch_ends``)."""
        result = native_loop().run_batch(
            self._descriptors_address,
            len(self.commands),
            MXCSR_FLUSH_DENORMALS,
            machine_code().run_workgroups_address,
            progress_address,
            self._ends_address if timed else None,
        )
        if result == BATCH_OK:
            return None
        return int(result) >> 32, int(result) & 0xFFFFFFFF

    def dispatch_ends(self, count: int) -> list[int]:
        """The ``time.perf_counter_ns`` at which each of the first ``count`` dispatches of the last timed
        ``run`` ended."""
        return self._ends[:count].tolist()

    def failed_workgroup(self, index: int) -> tuple[int, int, int]:
        """The workgroup dispatch ``index`` stopped at (its workgroup state after the run)."""
        slot = self._dispatch_slot[index]
        at = int(self._descriptors[slot * 4 + 3]) - self._arena.ctypes.data
        return _WORKGROUP_ID.unpack_from(self._arena, at)

    # How each kind of transfer is recorded in a plan (``_record_transfers``).
    TRANSFER_RECORDERS = {
        cmd.CopyCommand: _record_copy,
        cmd.UpdateCommand: _record_update,
        cmd.FillCommand: _record_fill,
    }


@dataclass
class _FastBinding:
    """A plan's bindings when their ranges were fixed at record time (``CpuBatchPlan._fast_binding``)."""

    need: list[tuple[int, int]]  # (source, the furthest byte a binding reaches in it) per source read
    aligned: list[int]  # the sources a non-empty dispatch binding reads (their address must be aligned)
    count: int  # how many non-empty bindings (pointers to write)
    # Each non-empty binding's pointer word in the arena, its source (table slots, then direct buffers) and
    # offset in it; and each source's address, written before ``relocate``.
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    addresses: np.ndarray
    pointers: tuple[int, int, int, int, int]  # the arrays' addresses and the arena's words', for ``relocate``
    bound: list[int] | None = None  # the source addresses the pointers were last written for


@dataclass(frozen=True)
class BatchSegments:
    """A stretch of a command buffer cut into native plans and commands run one at a time."""

    version: int  # the command buffer's ``version`` it was planned from
    segments: tuple[CpuBatchPlan | cmd.Command, ...]
    dispatches: tuple[cmd.DispatchCommand, ...]  # every dispatch of the stretch, in order

    def still_valid(self, version: int) -> bool:
        """Planned from this version of the command buffer, and every plan still points at the code its
        executables run (a substitution swaps it: the stretch is planned again)."""
        return self.version == version and all(
            s.still_valid() for s in self.segments if type(s) is CpuBatchPlan
        )


def plan_stretch(commands: Sequence[cmd.Command], version: int, transfers: bool = True) -> BatchSegments:
    """Cut ``commands`` (no watched dispatch among them) into native plans and one-at-a-time commands;
    ``transfers``: fills, copies and updates run inside the plans (False while someone listens to them)."""
    segments: list[CpuBatchPlan | cmd.Command] = []
    run: list[cmd.DispatchCommand] = []

    def close_run() -> None:
        if run:
            try:
                segments.append(CpuBatchPlan(run))
            except (
                ValueError,
                HalError,
            ):  # a count IREE's checks refuse: the one-at-a-time path raises its error
                segments.extend(run)
            run.clear()

    for command in commands:
        if native_dispatch(command) or (transfers and type(command) in _TRANSFERS):
            run.append(command)  # type: ignore[arg-type]
        elif isinstance(command, _NOTHING_TO_DO):
            continue
        else:
            close_run()
            segments.append(command)
    close_run()
    dispatches = tuple(c for c in commands if type(c) is cmd.DispatchCommand)
    return BatchSegments(version, tuple(segments), dispatches)
