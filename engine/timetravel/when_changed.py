""""When did this change?": the last instruction (and dispatch) before now that changed a watched value.

The search replays the history one instruction at a time, from the latest checkpoint before the current
position backwards segment by segment, reading the watch at every instruction boundary (a buffer's bytes only
after the instructions that can change them: calls of imports, see ``_bytes_unchanged_by``); the last
boundary where the value differs from the one before names the instruction. For a buffer's bytes, that
instruction is replayed once more with the device's dispatches and transfers observed, to name the
operation that wrote them; a copy is followed back to what wrote its source (``origin``): a global's
buffer filled by a copy of a dispatch's output names that dispatch. Like gdb's software watchpoints, a
write of the same value is not a change.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.runtime.hal.buffers import Allocation
from engine.runtime.hal.device import DispatchRecord, Transfer
from engine.timetravel.snapshot import Snapshot
from engine.timetravel.watch import ABSENT, BufferWatch, Change, Watch, Write, read_watch, serial_of

if TYPE_CHECKING:
    from engine.timetravel.engine import TimeTravel


MAX_HOPS = 8  # copies followed back from a buffer's bytes towards the operation that made them


def last_change(travel: TimeTravel, watch: Watch) -> Change | None:
    """See ``TimeTravel.last_change``."""
    here = travel.position
    travel.controller.clear_pause()
    try:
        found = _last_change_before(travel, watch, here)
        if found is None:
            return None
        p, before, after, where = found
        if not isinstance(watch, BufferWatch):
            return Change(watch, p, *_named(where), before, after)
        return _buffer_change(travel, watch, p, where, before, after, origin(travel, watch, p))
    finally:
        travel.controller.clear_pause()
        travel.invalidate()
        travel.goto(here)


def _last_change_before(travel: TimeTravel, watch: Watch, end: int) -> tuple | None:
    """(position, before, after, (instance, function ordinal, pc)) of the last instruction before ``end``
    that changed ``watch``, searched segment by segment backwards; None when none did."""
    t = travel.interpreter
    unchanged_by = _bytes_unchanged_by(travel, watch) if isinstance(watch, BufferWatch) else None
    for start, stop in travel.segments(end):
        # prev: the value at the last boundary, and where that boundary's instruction is
        prev: list[Any] = [None, None]
        last: list[tuple] = []

        def visit(p: int, start: int = start, prev: list = prev, last: list = last) -> None:
            if p > start and unchanged_by is not None and unchanged_by(prev[1]):
                prev[1] = _place(t.top)
                return
            value = read_watch(watch, t, travel.instances, travel.allocations)
            if p > start and value != prev[0]:
                last[:] = [(p - 1, prev[0], value, prev[1])]
            prev[0] = value
            prev[1] = _place(t.top)

        travel.allocations = allocations_of(travel.checkpoints[start])
        travel.scan(start, stop, visit)
        if last:
            return last[0]
    return None


def _bytes_unchanged_by(travel: TimeTravel, watch: BufferWatch) -> Callable[[tuple], bool]:
    """Whether the instruction at a place (``_place``) certainly leaves ``watch``'s bytes as they were, so the
    search need not read them after it: device memory changes only in calls of imports (the hal module's
    dispatches, copies, fills, updates and reads, run when a command buffer or queue operation executes),
    unless the VM's own buffer ops can write it too (``Allocation.vm_writable``). Reading a large buffer
    (a KV cache) after every instruction would cost its size times the instructions searched."""
    calls_import: dict[tuple, bool] = {}

    def unchanged_by(where: tuple) -> bool:
        instance, ordinal, pc = where
        if instance is None:
            return False
        allocation = travel.allocations.get(watch.serial)
        if allocation is not None and allocation.vm_writable:
            return False
        key = (id(instance), ordinal, pc)
        found = calls_import.get(key)
        if found is None:
            found = calls_import[key] = instance.instruction_at(ordinal, pc).called_import is not None
        return not found

    return unchanged_by


def _place(top: Any) -> tuple:
    """(instance, function ordinal, pc) of the instruction a frame is at ((None, -1, -1) without one)."""
    return (top.instance, top.ordinal, top.pc) if top is not None else (None, -1, -1)


def allocations_of(snap: Snapshot) -> dict[int, Allocation]:
    """The numbered allocations a checkpoint holds, by serial (the objects a restore brings back)."""
    out = {}
    for obj, _ in snap.objects:
        if isinstance(obj, Allocation) and serial_of(obj) is not None:
            out[obj.lens_serial] = obj  # type: ignore[attr-defined]
    return out


@dataclass(frozen=True)
class _Found:
    """A device operation that changed a watched range: the ``index``-th of its instruction's operations,
    and the range's value ``before`` and ``after`` it; ``first``: no operation of the instruction changed
    it before (``before`` is its value when the instruction began); ``where`` the instruction."""

    write: Write
    index: int
    before: Any
    after: Any
    first: bool = True
    where: tuple = (None, -1, -1)  # the instruction's place: (instance, function ordinal, pc)


def origin(travel: TimeTravel, watch: BufferWatch, position: int) -> tuple[Write, ...]:
    """The device operations that put ``watch``'s bytes there, from the one in the instruction at
    ``position`` that wrote them last, back through copies (a command buffer's copy of a dispatch's output
    into a global's buffer) to the dispatch, fill or update that made them, or to a copy whose source did
    not change in the recorded history (a call's input, a constant)."""
    return _followed(travel, last_write(travel, watch, position))


def _followed(travel: TimeTravel, found: _Found | None) -> tuple[Write, ...]:
    """``found`` and, while it is a copy, what wrote the copy's source before it (see ``origin``)."""
    via: list[Write] = []
    while found is not None and len(via) < MAX_HOPS:
        write = found.write
        via.append(write)
        if write.kind != "copy" or write.source is None:
            break
        # The copy's source was written earlier in the same instruction (the same command buffer), or by
        # an earlier instruction.
        source = write.source
        found = last_write(travel, source, write.position, before=found.index)
        if found is None:
            earlier = _last_change_before(travel, source, write.position)
            found = last_write(travel, source, earlier[0]) if earlier is not None else None
    return tuple(via)


def change_before_dispatch(travel: TimeTravel, watch: BufferWatch, position: int, sequence: int) -> Change | None:
    """The last change of ``watch``'s bytes before dispatch ``sequence`` ran (in the instruction at
    ``position``): by an operation of the same instruction before it (a command buffer's earlier dispatch or
    copy), else by an earlier instruction; with the operations that made them (``Change.via``). The state
    is left anywhere (the caller goes back where it was)."""
    travel.controller.clear_pause()
    found = last_write(travel, watch, position, before_dispatch=sequence)
    if found is not None:
        via = _followed(travel, found)
        return _buffer_change(travel, watch, position, found.where, found.before, found.after, via, found.first)
    earlier = _last_change_before(travel, watch, position)
    if earlier is None:
        return None
    at, before, after, where = earlier
    return _buffer_change(travel, watch, at, where, before, after, origin(travel, watch, at))


def _named(where: tuple) -> tuple[str, str, int]:
    """(module, function, pc) of an instruction's place (instance, function ordinal, pc)."""
    instance, ordinal, pc = where
    if instance is None:
        return "", "", pc
    return instance.name, instance.function_name(ordinal), pc


def _buffer_change(
    travel: TimeTravel, watch: BufferWatch, at: int, where: tuple, before: Any, after: Any,
    via: tuple[Write, ...], first: bool = True,
) -> Change:  # fmt: skip
    """The change of a buffer's bytes by the instruction at ``at``, with the writes that made them; when
    ``before`` is the value the instruction began with (``first``), whether it was the allocation's."""
    dispatch = via[0].dispatch if via and via[0].kind == "dispatch" else None
    prior = _last_change_before(travel, watch, at) if before is not ABSENT and first else None
    allocated_at = prior[0] if prior is not None and prior[1] is ABSENT else None
    return Change(watch, at, *_named(where), before, after, dispatch, via, allocated_at)


def last_write(
    travel: TimeTravel, watch: BufferWatch, position: int, before: int | None = None, before_dispatch: int | None = None
) -> _Found | None:
    """Replays the instruction at ``position``: the last of its device operations (dispatches, fills,
    updates, copies; only those before its ``before``-th, or before dispatch ``before_dispatch`` runs, when
    given) that changed ``watch``'s bytes; None when none did (a host write, an allocation)."""
    k = bisect.bisect_right(travel.positions, position) - 1
    travel.restore(travel.positions[k])
    travel.allocations = allocations_of(travel.checkpoints[travel.positions[k]])
    travel.run_to(position)
    where = _place(travel.interpreter.top)

    def read() -> Any:
        return read_watch(watch, travel.interpreter, travel.instances, travel.allocations)

    value = [read()]
    count = [0]
    done = [False]
    last: list[_Found] = []

    def seen(write: Write) -> None:
        index = count[0]
        count[0] += 1
        if done[0] or before is not None and index >= before:
            return
        now = read()
        if now != value[0]:
            last[:] = [_Found(write, index, value[0], now, not last, where)]
            value[0] = now

    def hook(record: DispatchRecord, when: str) -> None:
        if record.sequence == before_dispatch:
            done[0] = True
        elif when == "after":
            seen(Write("dispatch", position, record.sequence, record.export_name))

    def transferred(transfer: Transfer) -> None:
        source = _copied_from(transfer, watch) if transfer.kind == "copy" else None
        seen(Write(transfer.kind, position, source=source))

    travel.marks_observer.hook = hook
    for device in travel.devices:
        device.transfer_listeners.append(transferred)
    saved = travel.aside()
    try:
        travel.interpreter.run(1, ignore_breakpoints=True)
    finally:
        travel.back(saved)
        travel.marks_observer.hook = None
        for device in travel.devices:
            device.transfer_listeners.remove(transferred)
    return last[0] if last else None


def _copied_from(transfer: Transfer, watch: BufferWatch) -> BufferWatch | None:
    """The bytes of a copy's source that landed in ``watch``'s part of its target (None: not numbered)."""
    target, source = transfer.target, transfer.source
    if source is None or source.buffer is None or target.buffer is None:
        return None
    serial = serial_of(source.buffer.allocation)
    if serial is None:
        return None
    t0, n = target.buffer.resolve(target.offset, target.length)
    s0, _ = source.buffer.resolve(source.offset, source.length)
    lo, hi = max(t0, watch.offset), min(t0 + n, watch.offset + watch.length)
    if serial_of(target.buffer.allocation) != watch.serial or hi <= lo:
        return None  # a copy elsewhere: it cannot be what wrote the watched bytes
    return BufferWatch(serial, s0 + lo - t0, hi - lo)
