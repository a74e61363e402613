""""When did this change?": the last instruction (and dispatch) before now that changed a watched value.

The search replays the history one instruction at a time, from the latest checkpoint before the current
position backwards segment by segment, reading the watch at every instruction boundary; the last
boundary where the value differs from the one before names the instruction. When that instruction ran
dispatches, it is replayed once more with an observer reading the watch before and after each, to name
the dispatch that wrote it. Like gdb's software watchpoints, a write of the same value is not a change.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from engine.runtime.hal.buffers import Allocation
from engine.runtime.hal.device import DispatchRecord
from engine.timetravel.snapshot import Snapshot
from engine.timetravel.watch import Change, Watch, read_watch, serial_of

if TYPE_CHECKING:
    from engine.timetravel.engine import TimeTravel


def last_change(travel: TimeTravel, watch: Watch) -> Change | None:
    """See ``TimeTravel.last_change``."""
    here = travel.position
    t = travel.interpreter
    travel.controller.clear_pause()
    try:
        for start, end in travel.segments(here):
            # prev: the value at the last boundary, and where that boundary's instruction is
            prev: list[Any] = [None, None]
            last: list[tuple] = []

            def visit(p: int, start: int = start, prev: list = prev, last: list = last) -> None:
                value = read_watch(watch, t, travel.instances, travel.allocations)
                count = travel.dispatch_count
                if p > start and value != prev[0]:
                    last[:] = [(p - 1, prev[0], value, prev[1], count)]
                top = t.top
                prev[0] = value
                prev[1] = (top.instance, top.ordinal, top.pc, count) if top is not None else (None, -1, -1, count)

            travel.allocations = allocations_of(travel.checkpoints[start])
            travel.scan(start, end, visit)
            if last:
                p, before, after, (instance, ordinal, pc, d_before), d_after = last[0]
                module = instance.name if instance is not None else ""
                function = instance.function_name(ordinal) if instance is not None else ""
                dispatch = dispatch_that_wrote(travel, watch, p) if d_after > d_before else None
                return Change(watch, p, module, function, pc, before, after, dispatch)
        return None
    finally:
        travel.controller.clear_pause()
        travel.invalidate()
        travel.goto(here)


def allocations_of(snap: Snapshot) -> dict[int, Allocation]:
    """The numbered allocations a checkpoint holds, by serial (the objects a restore brings back)."""
    out = {}
    for obj, _ in snap.objects:
        if isinstance(obj, Allocation) and serial_of(obj) is not None:
            out[obj.lens_serial] = obj  # type: ignore[attr-defined]
    return out


def dispatch_that_wrote(travel: TimeTravel, watch: Watch, position: int) -> int | None:
    """Replays the instruction at ``position``; the last of its dispatches that changed the watched value."""
    k = bisect.bisect_right(travel.positions, position) - 1
    travel.restore(travel.positions[k])
    travel.allocations = allocations_of(travel.checkpoints[travel.positions[k]])
    travel.run_to(position)
    changed: list[int] = []
    before: dict[int, Any] = {}

    def hook(record: DispatchRecord, when: str) -> None:
        value = read_watch(watch, travel.interpreter, travel.instances, travel.allocations)
        if when == "before":
            before[record.sequence] = value
        elif value != before.get(record.sequence):
            changed.append(record.sequence)

    travel.marks_observer.hook = hook
    saved = travel.aside()
    try:
        travel.interpreter.run(1, ignore_breakpoints=True)
    finally:
        travel.back(saved)
        travel.marks_observer.hook = None
    return changed[-1] if changed else None
