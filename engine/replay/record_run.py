"""Writing a debug run as an IREE HAL replay (what our emulated HAL ran, substitutions included), for
``iree-run-replay``: how a run seen in IREE Lens is handed to someone with IREE's tools only.

``RunRecorder(device, writer)`` listens to a ``Device``'s public seams, ``executable_listeners`` (every
executable created) and ``queue_listeners`` (every command-buffer submission and queue transfer of the
``hal`` module, before and after it runs), and writes:

* an executable per ``create_executable``: the binary the device loaded (a substituted one when the run
  swapped it), with the ABI metadata IREE checks (name, constant and binding counts, workgroup size of
  each export, from the loaded library; CPU ELF executables for now);
* a buffer per allocation the run touches, allocated at its first use, and the host's writes as
  ``buffer.unmap_range`` records with the bytes: before each queue operation, every allocation it uses
  whose bytes differ from what the replay has computed so far is written whole;
* each command-buffer submission as a one-shot command buffer with direct buffer references (binding
  tables resolved), then ``device.queue_execute``; queue fill/copy/update as ``device.queue_*``; every
  queue operation signals the next value of one timeline semaphore, so ``iree-run-replay`` waits for it
  before the next host call, as the run did (IREE's recorder writes the program's own semaphores);
* the host's read-back of a call's results (``read_results``, a ``DebugRunner.result_listeners`` listener),
  as ``iree-run-module`` reads them and IREE's recorder writes it: results not in host-local memory are
  copied to staging buffers by one transfer command buffer (``iree_tooling_transfer_variants``), then each
  result's bytes are mapped for reading and unmapped (``buffer.map_range``/``buffer.unmap_range`` with a
  ``buffer_range`` payload: a read carries no bytes). ``iree-lens run OUT.ireereplay --output=`` writes
  those reads, and ``iree-run-replay`` runs them.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from engine.errors import HalError
from engine.replay import format as f
from engine.replay.writer import ANY_QUEUE, NewRecord, ReplayWriter
from engine.runtime.hal import commands as cmd
from engine.runtime.hal import constants as hc
from engine.runtime.hal.buffers import HalBuffer, HalBufferView
from engine.runtime.hal.commands import ResolvedRange, resolve_ref
from engine.runtime.hal.device import Device, HalExecutable, QueueListener, QueueOperation
from engine.runtime.hal.formats import is_native_cpu
from engine.runtime.vm.values import VmList

P = f.PayloadType
OT = f.ObjectType
DEVICE_ID, ALLOCATOR_ID, CACHE_ID, TIMELINE_ID = 1, 2, 3, 4
SEMAPHORE_FLAG_DEFAULT = 0xA  # IREE_HAL_SEMAPHORE_FLAG_DEFAULT, as IREE's recorder writes it
ONE_SHOT = 1
CATEGORIES = 3  # transfer | dispatch
# iree-run-module's results read back (run_module.c's target_params): memory the host reads as it is, else
# a staging buffer of it that a one-shot, inline-executable transfer command buffer copies the result to.
READBACK_TYPE = hc.MEMORY_TYPE_HOST_LOCAL | hc.MEMORY_TYPE_DEVICE_VISIBLE
READBACK_USAGE = hc.BUFFER_USAGE_TRANSFER | hc.BUFFER_USAGE_MAPPING
STAGING_ALLOWED_USAGE = READBACK_USAGE | hc.BUFFER_USAGE_MAPPING_PERSISTENT  # as IREE's recorded object says
READBACK_MODE = hc.COMMAND_BUFFER_MODE_ONE_SHOT | hc.COMMAND_BUFFER_MODE_ALLOW_INLINE_EXECUTION
MAPPING_MODE_SCOPED = 1


def _op(
    code: str, object_type: int, object_id: int, payload: bytes = b"", payload_type: int = 0, related: int = 0
):
    return NewRecord(
        f.RecordType.OPERATION, payload, payload_type, object_type, f.OP[code], DEVICE_ID, object_id, related
    )


def _object(
    object_type: int, object_id: int, payload: bytes = b"", payload_type: int = 0, device: int = DEVICE_ID
):
    return NewRecord(f.RecordType.OBJECT, payload, payload_type, object_type, 0, device, object_id)


def executable_metadata(executable: HalExecutable) -> bytes:
    """IREE's executable ABI metadata for a loaded executable (what ``iree-run-replay`` checks)."""
    exports = getattr(executable.impl, "exports", None)
    if is_native_cpu(executable.format) and exports is not None:
        rows, names = [], b""
        for e in exports:
            a = e.attributes
            if a.parameter_count:
                raise HalError(
                    f"writing a replay: export {e.name!r} has reflected parameters (not written yet)"
                )
            name = e.name.encode()
            size = tuple(max(int(v), 1) for v in a.workgroup_size)
            rows.append(f.FUNCTION_METADATA.pack(0, *size, a.constant_count, a.binding_count, 0, len(name)))
            names += name
        header = f.METADATA_HEADER.pack(len(rows), 0, len(names), 0)
        return header + b"".join(rows) + names
    raise HalError(f"writing a replay of executables of format {executable.format!r} is not supported yet")


class RunRecorder(QueueListener):
    """Records what ``device`` runs into ``writer`` (see the module doc); ``detach`` restores the device."""

    def __init__(self, device: Device, writer: ReplayWriter):
        self.device = device
        self.writer = writer
        self._next_id = TIMELINE_ID + 1
        self._timeline = 0  # the value the last queue operation signals on TIMELINE_ID
        self._buffers: dict[int, tuple[int, Any]] = {}  # id(allocation) -> (replay id, allocation)
        self._known: dict[int, np.ndarray] = {}  # replay buffer id -> bytes the replay holds
        self._executables: dict[int, int] = {}  # id(HalExecutable) -> replay id
        self._settling: list[list[Any]] = []  # per queue operation running: the allocations it may change
        w = writer
        w.append(NewRecord(f.RecordType.SESSION))
        w.append(_object(OT.DEVICE, DEVICE_ID, device=0))
        w.append(_object(OT.ALLOCATOR, ALLOCATOR_ID))
        cache = f.EXECUTABLE_CACHE_OBJECT.pack(0, 0)
        w.append(
            _op(
                "device.create_executable_cache",
                OT.DEVICE,
                DEVICE_ID,
                cache,
                P.EXECUTABLE_CACHE_OBJECT,
                CACHE_ID,
            )
        )
        w.append(_object(OT.EXECUTABLE_CACHE, CACHE_ID, cache, P.EXECUTABLE_CACHE_OBJECT))
        timeline = f.SEMAPHORE_OBJECT.pack(ANY_QUEUE, 0, SEMAPHORE_FLAG_DEFAULT, 0)
        w.append(
            _op("device.create_semaphore", OT.DEVICE, DEVICE_ID, timeline, P.SEMAPHORE_OBJECT, TIMELINE_ID)
        )
        w.append(_object(OT.SEMAPHORE, TIMELINE_ID, timeline, P.SEMAPHORE_OBJECT))
        device.executable_listeners.append(self._created)
        device.queue_listeners.append(self)

    def detach(self) -> None:
        if self._created in self.device.executable_listeners:
            self.device.executable_listeners.remove(self._created)
        if self in self.device.queue_listeners:
            self.device.queue_listeners.remove(self)

    def close(self):
        """Stop recording and finish the file (its final length in the header); returns its path."""
        self.detach()
        return self.writer.close()

    def discard(self) -> None:
        """Stop recording and remove the unfinished file (the run failed or was refused)."""
        self.detach()
        self.writer.discard()

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _timepoints(self) -> tuple[int, int, bytes]:
        """(wait count, signal count, their timepoints) of the next queue operation: it signals the timeline's
        next value. iree-run-replay waits for an operation's signals before the next host call, as IREE's tools
        waited for the work (with none, an asynchronous device such as local-task ran a submission while the
        one before it still wrote what it reads: the results' read-back raced the program). No waits: what
        came before has finished, and an inline-executable command buffer (the read-back's) takes none.
        """
        self._timeline += 1
        return 0, 1, f.TIMEPOINT.pack(TIMELINE_ID, self._timeline)

    # -- objects

    def executable_id(self, executable: HalExecutable) -> int:
        found = self._executables.get(id(executable))
        if found is None:
            found = self.record_executable(executable)
        return found

    def _check_not_swapped(self, executable: HalExecutable) -> None:
        from engine.runtime.hal.executable_swap import registry

        if id(executable) in registry(self.device).originals:
            raise HalError(f"{executable.label} runs a live substitution: {SUBSTITUTED_RUN}")

    def record_executable(self, executable: HalExecutable, data: bytes | None = None, constants=()) -> int:
        self._check_not_swapped(executable)
        if not data:
            raise HalError(
                f"writing a replay: the binary of {executable.label} is not known (loaded before recording)"
            )
        fmt = executable.format.encode()
        consts = struct.pack(f"<{len(constants)}I", *constants)
        metadata = executable_metadata(executable)
        head = f.EXECUTABLE_PREPARE.pack(
            ANY_QUEUE, len(data), len(constants), 0x7, len(fmt), len(metadata), 0
        )
        replay_id = self._id()
        self.writer.append(
            _op(
                "executable_cache.prepare_executable",
                OT.EXECUTABLE_CACHE,
                CACHE_ID,
                head + fmt + data + consts + metadata,
                P.EXECUTABLE_PREPARE,
                replay_id,
            )
        )
        self.writer.append(_object(OT.EXECUTABLE, replay_id))
        self._executables[id(executable)] = replay_id
        return replay_id

    def buffer_id(self, allocation) -> int:
        """The replay buffer of ``allocation``, allocated in the replay at its first use."""
        entry = self._buffers.get(id(allocation))
        if entry is not None:
            return entry[0]
        replay_id = self._id()
        size = int(allocation.size)
        request = f.ALLOCATE_BUFFER.pack(size, ANY_QUEUE, 0, 0x0B000C03, 0x32, 0x7, 0, 0)
        self.writer.append(
            _op(
                "allocator.allocate_buffer",
                OT.ALLOCATOR,
                ALLOCATOR_ID,
                request,
                P.ALLOCATOR_ALLOCATE_BUFFER,
                replay_id,
            )
        )
        obj = f.BUFFER_OBJECT.pack(size, 0, size, 0, 0, 0x32, 0x0B000C03, 0x7, 0, 0)
        self.writer.append(_object(OT.BUFFER, replay_id, obj, P.BUFFER_OBJECT))
        self._buffers[id(allocation)] = (replay_id, allocation)
        return replay_id

    def range_of(self, buffer, offset: int = 0, length: int | None = None) -> tuple[int, int, int]:
        """(replay buffer id, offset, length) of a ``HalBuffer`` range: what a read-back names."""
        allocation = buffer.allocation
        start = int(buffer.byte_offset) + offset
        return (
            self.buffer_id(allocation),
            start,
            int(buffer.byte_length) - offset if length is None else length,
        )

    def _sync_host_writes(self, allocations) -> None:
        """Write the bytes the host changed since the replay last computed them (whole allocations)."""
        for allocation in allocations:
            replay_id = self.buffer_id(allocation)
            now = allocation.read_view(0, allocation.size)
            known = self._known.get(replay_id)
            if known is not None and np.array_equal(known, now):
                continue
            data = bytes(now)
            head = f.BUFFER_RANGE_DATA.pack(0, len(data), len(data), 0, 0x6, 0, 0)
            self.writer.append(
                NewRecord(
                    f.RecordType.OPERATION,
                    head + data,
                    P.BUFFER_RANGE_DATA,
                    OT.BUFFER,
                    f.OP["buffer.unmap_range"],
                    DEVICE_ID,
                    replay_id,
                )
            )
            self._known[replay_id] = np.array(now, copy=True)

    def _settle(self, allocations) -> None:
        """After a queue operation: what the replay now holds is what ran here."""
        for allocation in allocations:
            self._known[self.buffer_id(allocation)] = np.array(
                allocation.read_view(0, allocation.size), copy=True
            )

    def computed_ranges(self) -> list[tuple[int, int, int]]:
        """(replay buffer id, 0, size) of every allocation whose bytes now are what the replay computes
        (no host write since the last queue operation): what a read-back of the replay can compare."""
        out = []
        for replay_id, allocation in self._buffers.values():
            known = self._known.get(replay_id)
            if known is not None and np.array_equal(known, allocation.read_view(0, allocation.size)):
                out.append((replay_id, 0, int(allocation.size)))
        return out

    def allocation_bytes(self, replay_id: int) -> bytes:
        for rid, allocation in self._buffers.values():
            if rid == replay_id:
                return bytes(allocation.read_view(0, allocation.size))
        raise KeyError(replay_id)

    def _ref(self, r: ResolvedRange) -> bytes:
        if r.buffer is None:
            raise HalError("writing a replay: a NULL buffer reference")
        replay_id, start, length = self.range_of(r.buffer, r.offset, r.length)
        return f.BUFFER_REF.pack(replay_id, start, length, 0, 0)

    # -- the device's public seams: executables created, queue operations

    def _created(self, executable: HalExecutable, data, constants: tuple[int, ...]) -> None:
        self.record_executable(
            executable, bytes(np.ascontiguousarray(data).reshape(-1).view(np.uint8)), tuple(constants)
        )

    def before_queue(self, operation: QueueOperation) -> None:
        """Write the operation (and the host writes it reads) before the device runs it."""
        kind = operation.kind
        if kind == "execute":
            allocations = self._before_execute(operation.command_buffer, list(operation.table))
        elif kind == "fill":
            target, pattern = operation.target, operation.pattern

            def fill():
                waits, signals, timepoints = self._timepoints()
                head = f.QUEUE_FILL.pack(*f.BUFFER_REF.unpack(self._ref(target)), ANY_QUEUE, 0, waits, signals,
                                         len(pattern))  # fmt: skip
                return _op("device.queue_fill", OT.DEVICE, DEVICE_ID, head + timepoints + bytes(pattern),
                           P.DEVICE_QUEUE_FILL)  # fmt: skip

            allocations = self._queue_transfer([target], fill)
        elif kind == "copy":
            source, target = operation.source, operation.target

            def copy():
                waits, signals, timepoints = self._timepoints()
                head = f.QUEUE_COPY.pack(*f.BUFFER_REF.unpack(self._ref(source)),
                                         *f.BUFFER_REF.unpack(self._ref(target)), ANY_QUEUE, 0, waits, signals)  # fmt: skip
                return _op("device.queue_copy", OT.DEVICE, DEVICE_ID, head + timepoints, P.DEVICE_QUEUE_COPY)

            allocations = self._queue_transfer([source, target], copy)
        else:  # update
            data, target = operation.data, operation.target
            raw = bytes(
                np.ascontiguousarray(
                    np.frombuffer(data, np.uint8) if isinstance(data, bytes | bytearray | memoryview) else data
                )
                .reshape(-1)
                .view(np.uint8)
            )

            def update():
                waits, signals, timepoints = self._timepoints()
                head = f.QUEUE_UPDATE.pack(*f.BUFFER_REF.unpack(self._ref(target)), ANY_QUEUE, 0, 0, len(raw),
                                           waits, signals)  # fmt: skip
                return _op("device.queue_update", OT.DEVICE, DEVICE_ID, head + timepoints + raw,
                           P.DEVICE_QUEUE_UPDATE)  # fmt: skip

            allocations = self._queue_transfer([target], update)
        self._settling.append(list(allocations))

    def after_queue(self, operation: QueueOperation) -> None:
        """What the operation wrote: the replay knows it from now on."""
        if self._settling:
            self._settle(self._settling.pop())

    def _before_execute(self, command_buffer, table) -> Any:
        resolved: list[tuple[Any, list[ResolvedRange], ResolvedRange | None]] = []
        for c in command_buffer.commands:
            refs: list[ResolvedRange] = []
            extra = None
            if isinstance(c, cmd.DispatchCommand):
                refs = [resolve_ref(b, table) for b in c.bindings]
                if c.workgroups_ref is not None:
                    extra = resolve_ref(c.workgroups_ref, table)
            elif isinstance(c, cmd.FillCommand | cmd.UpdateCommand):
                refs = [resolve_ref(c.target, table)]
            elif isinstance(c, cmd.CopyCommand):
                refs = [resolve_ref(c.source, table), resolve_ref(c.target, table)]
            resolved.append((c, refs, extra))
        allocations = {
            id(r.buffer.allocation): r.buffer.allocation
            for _, refs, extra in resolved
            for r in [*refs, *([extra] if extra else [])]
            if r.buffer is not None
        }
        for c, _, _ in resolved:
            if isinstance(c, cmd.DispatchCommand):
                self._check_not_swapped(c.executable)
                self.executable_id(c.executable)
        self._sync_host_writes(allocations.values())
        cb_id = self._id()
        obj = f.COMMAND_BUFFER_OBJECT.pack(ONE_SHOT, CATEGORIES, ANY_QUEUE, 0)
        w = self.writer
        w.append(
            _op("device.create_command_buffer", OT.DEVICE, DEVICE_ID, obj, P.COMMAND_BUFFER_OBJECT, cb_id)
        )
        w.append(_object(OT.COMMAND_BUFFER, cb_id, obj, P.COMMAND_BUFFER_OBJECT))
        w.append(_op("command_buffer.begin", OT.COMMAND_BUFFER, cb_id))
        for c, refs, extra in resolved:
            self._command(cb_id, c, refs, extra)
        w.append(_op("command_buffer.end", OT.COMMAND_BUFFER, cb_id))
        self._queue_execute(cb_id)
        return allocations.values()

    def _queue_execute(self, cb_id: int) -> None:
        waits, signals, timepoints = self._timepoints()
        execute = f.QUEUE_EXECUTE.pack(cb_id, ANY_QUEUE, 0, waits, signals, 0) + timepoints
        self.writer.append(
            _op("device.queue_execute", OT.DEVICE, DEVICE_ID, execute, P.DEVICE_QUEUE_EXECUTE, cb_id)
        )

    def _command(self, cb_id: int, c, refs: list[ResolvedRange], extra: ResolvedRange | None) -> None:
        w = self.writer
        if isinstance(c, cmd.DispatchCommand):
            constants = struct.pack(f"<{len(c.constants)}I", *(int(v) & 0xFFFFFFFF for v in c.constants))
            wg = c.workgroup_count or (0, 0, 0)
            ref = self._ref(extra) if extra is not None else f.BUFFER_REF.pack(0, 0, 0, 0, 0)
            head = f.DISPATCH.pack(
                self.executable_id(c.executable), 0, c.ordinal, c.flags, 0, 0, 0, *wg,
                *f.BUFFER_REF.unpack(ref), 0, 0, 0, 0, len(constants), len(refs),
            )  # fmt: skip
            payload = head + constants + b"".join(self._ref(r) for r in refs)
            w.append(_op("command_buffer.dispatch", OT.COMMAND_BUFFER, cb_id, payload, P.DISPATCH))
        elif isinstance(c, cmd.FillCommand):
            head = f.CB_FILL.pack(*f.BUFFER_REF.unpack(self._ref(refs[0])), c.flags, 0, len(c.pattern))
            w.append(
                _op(
                    "command_buffer.fill_buffer",
                    OT.COMMAND_BUFFER,
                    cb_id,
                    head + c.pattern,
                    P.COMMAND_BUFFER_FILL_BUFFER,
                )
            )
        elif isinstance(c, cmd.UpdateCommand):
            data = bytes(c.data)
            head = f.CB_UPDATE.pack(*f.BUFFER_REF.unpack(self._ref(refs[0])), c.flags, 0, 0, len(data))
            w.append(
                _op(
                    "command_buffer.update_buffer",
                    OT.COMMAND_BUFFER,
                    cb_id,
                    head + data,
                    P.COMMAND_BUFFER_UPDATE_BUFFER,
                )
            )
        elif isinstance(c, cmd.CopyCommand):
            payload = f.CB_COPY.pack(
                *f.BUFFER_REF.unpack(self._ref(refs[0])),
                *f.BUFFER_REF.unpack(self._ref(refs[1])),
                c.flags,
                0,
                0,
            )
            w.append(
                _op(
                    "command_buffer.copy_buffer",
                    OT.COMMAND_BUFFER,
                    cb_id,
                    payload,
                    P.COMMAND_BUFFER_COPY_BUFFER,
                )
            )
        elif isinstance(c, cmd.BarrierCommand):
            payload = f.EXECUTION_BARRIER.pack(c.source_stage_mask, c.target_stage_mask, c.flags, 0, 0)
            w.append(
                _op(
                    "command_buffer.execution_barrier",
                    OT.COMMAND_BUFFER,
                    cb_id,
                    payload,
                    P.COMMAND_BUFFER_EXECUTION_BARRIER,
                )
            )
        # debug groups, advice, flush and invalidate change nothing the replay computes

    # -- the host's read-back of a call's results

    def read_results(self, results: list) -> None:
        """Record the host reading ``results`` (a call's results as the VM returned them) back, as
        iree-run-module does: top-level buffer views not in host-local memory (``READBACK_TYPE`` with
        ``READBACK_USAGE``) are copied whole (their buffer's range) into staging buffers of their allocation's
        size by one transfer command buffer submitted at once (``iree_tooling_transfer_variants``); then each
        view's bytes ``[0, byte length)`` are mapped for reading and unmapped, as its ``.npy`` writer maps
        them (a view inside a list is mapped where it is, as IREE's printer maps it). Empty views read nothing."""
        views = [(v, top) for v, top in _result_views(results) if v.byte_length]
        # The bytes the reads see are what the replay computes or the host wrote (an input returned as is).
        self._sync_host_writes({id(v.buffer.allocation): v.buffer.allocation for v, _ in views}.values())
        staged = [v for v, top in views if top and not _host_local(v.buffer)]
        staging = self._stage(staged) if staged else {}
        for view, _ in views:
            if id(view) in staging:
                buffer_id, offset = staging[id(view)], 0
            else:
                buffer_id, offset, _ = self.range_of(view.buffer, 0, view.byte_length)
            length = view.byte_length
            mapped = f.BUFFER_RANGE.pack(offset, length, MAPPING_MODE_SCOPED, hc.MEMORY_ACCESS_READ, 0, 0)
            unmapped = f.BUFFER_RANGE.pack(offset, length, 0, hc.MEMORY_ACCESS_READ, 0, 0)
            self.writer.append(_op("buffer.map_range", OT.BUFFER, buffer_id, mapped, P.BUFFER_RANGE))
            self.writer.append(_op("buffer.unmap_range", OT.BUFFER, buffer_id, unmapped, P.BUFFER_RANGE))

    def _stage(self, views: list[HalBufferView]) -> dict[int, int]:
        """Copy each view's buffer into a new staging buffer (one transfer command buffer, executed);
        returns id(view) -> the staging buffer's replay id."""
        w = self.writer
        cb_id = self._id()
        obj = f.COMMAND_BUFFER_OBJECT.pack(READBACK_MODE, hc.COMMAND_CATEGORY_TRANSFER, ANY_QUEUE, 0)
        w.append(
            _op("device.create_command_buffer", OT.DEVICE, DEVICE_ID, obj, P.COMMAND_BUFFER_OBJECT, cb_id)
        )
        w.append(_object(OT.COMMAND_BUFFER, cb_id, obj, P.COMMAND_BUFFER_OBJECT))
        w.append(_op("command_buffer.begin", OT.COMMAND_BUFFER, cb_id))
        staging: dict[int, int] = {}
        for view in views:
            size = int(view.buffer.allocation.size)  # iree_hal_buffer_allocation_size of the result's buffer
            target = self._id()
            request = f.ALLOCATE_BUFFER.pack(size, ANY_QUEUE, 0, READBACK_USAGE, READBACK_TYPE, 0x7, 0, 0)
            w.append(
                _op("allocator.allocate_buffer", OT.ALLOCATOR, ALLOCATOR_ID, request,
                    P.ALLOCATOR_ALLOCATE_BUFFER, target)
            )  # fmt: skip
            made = f.BUFFER_OBJECT.pack(size, 0, size, 0, 0, READBACK_TYPE, STAGING_ALLOWED_USAGE, 0x7, 0, 0)
            w.append(_object(OT.BUFFER, target, made, P.BUFFER_OBJECT))
            length = int(view.buffer.byte_length)  # the result's buffer whole, to the staging buffer's start
            source = f.BUFFER_REF.unpack(self._ref(ResolvedRange(view.buffer, 0, length)))
            copy = f.CB_COPY.pack(*source, target, 0, length, 0, 0, 0, 0, 0)
            w.append(_op("command_buffer.copy_buffer", OT.COMMAND_BUFFER, cb_id, copy, P.COMMAND_BUFFER_COPY_BUFFER))  # fmt: skip
            staging[id(view)] = target
        w.append(_op("command_buffer.end", OT.COMMAND_BUFFER, cb_id))
        self._queue_execute(cb_id)
        return staging

    def _queue_transfer(self, ranges: list[ResolvedRange], payload_of) -> Any:
        allocations = {id(r.buffer.allocation): r.buffer.allocation for r in ranges if r.buffer is not None}
        self._sync_host_writes(allocations.values())
        self.writer.append(payload_of())
        return allocations.values()


def _result_views(values, top: bool = True):
    """(buffer view, top level) of each buffer view among a call's results, in order (lists followed)."""
    for value in values:
        if isinstance(value, HalBufferView):
            yield value, top
        elif isinstance(value, VmList):
            yield from _result_views(value.items, False)


def _host_local(buffer: HalBuffer) -> bool:
    """True when iree-run-module reads ``buffer`` as it is (``iree_tooling_requires_buffer_transfer``)."""
    return (buffer.memory_type & READBACK_TYPE) == READBACK_TYPE and (
        buffer.allowed_usage & READBACK_USAGE
    ) == READBACK_USAGE


SUBSTITUTED_RUN = (
    "a replay cannot be written of a run with substituted executables; write the run without them, then "
    "substitute in the replay (iree-lens run RUN.ireereplay --substitute=... --write-replay=...)"
)


def start_recording(device: Device, path) -> RunRecorder:
    """Record what ``device`` runs from now on into the replay ``path``; ``close()`` the recorder after.
    ``HalError`` before anything is written when substitutions are installed on ``device`` (a replay holds
    the program's own executables)."""
    from engine.runtime.hal.executable_swap import registry

    if any(getattr(hook, "substitutes", False) for hook in registry(device).hooks):
        raise HalError(SUBSTITUTED_RUN)
    return RunRecorder(device, ReplayWriter(path))
