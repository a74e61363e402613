"""Zones of a debug run: VM function calls, import calls, command-buffer execution and dispatches.

``ZoneRecorder`` is both the interpreter's ``zone_hook`` (calls, returns, imports) and a HAL
``DispatchObserver`` (every dispatch with its executable, export and workgroup count). Recording appends
a few integers to Python lists per event (``perf_counter_ns`` and an interned name id); the trace model
is built once at the end with numpy. Zones left open by a trap are closed at ``finish`` and marked.

Tracks: ``VM`` (function calls and import calls, nested as the VM stack) and ``device <name>`` (command
buffers executed by ``hal.device.queue.execute*`` and the dispatches inside them), both on one clock.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.trace.model import StringTable, Trace, TraceBuilder

CAT_CALL, CAT_IMPORT, CAT_QUEUE, CAT_DISPATCH = 1, 2, 3, 4
CATEGORIES = ("", "vm call", "import", "queue", "dispatch")
_EXECUTE_IMPORTS = frozenset({"hal.device.queue.execute", "hal.device.queue.execute.indirect"})


class ZoneRecorder(DispatchObserver):
    """Records zones; attach with ``attach(interpreter, device)`` before a run, ``trace()`` after."""

    def __init__(self, clock=time.perf_counter_ns) -> None:
        self.clock = clock
        self.names = StringTable()
        self._fn_names: dict[tuple[int, int], int] = {}
        self._stack: list[tuple[int, int, int]] = []  # (start, name id, category) of the open VM zones
        # Finished zones as (start, end, track (0 VM, 1 device), name id, category, payload) rows: one append
        # per zone on the hot path, turned into columns once in ``trace()``.
        self.rows: list[tuple[int, int, int, int, int, int]] = []
        self.payloads: list[dict] = []
        self._dispatch_start: dict[int, int] = {}
        self._queue_open: list[int] = []
        self.device_name = "device"
        self.aborted = 0
        self._device: Any = None  # the attached device, when it times each dispatch of a batch
        self._hal_device: Any = None  # the attached device (its dispatch count starts each call's numbering)
        self._call_first = 0  # the device's sequence of the current top-level call's first dispatch

    # -- wiring

    def attach(self, interpreter: Any, device: Any) -> None:
        interpreter.zone_hook = self
        if self not in device.observers:
            device.observers.append(self)
        self.device_name = getattr(device, "name", "device")
        self._device = device if getattr(device, "times_batch_dispatches", False) else None
        self._hal_device = device

    def detach(self, interpreter: Any, device: Any) -> None:
        if getattr(interpreter, "zone_hook", None) is self:
            interpreter.zone_hook = None
        if self in device.observers:
            device.observers.remove(self)
        self._device = None

    # -- the interpreter's hook (keep these short: they run per VM call)

    def call(self, instance: Any, ordinal: int) -> None:
        key = (id(instance), ordinal)
        nid = self._fn_names.get(key)
        if nid is None:
            nid = self._fn_names[key] = self.names.intern(instance.function_name(ordinal))
        if not self._stack and self._hal_device is not None:
            # A top-level call: its dispatches are numbered from its first, as break dispatch N counts.
            self._call_first = getattr(self._hal_device, "dispatch_count", 0)
        self._stack.append((self.clock(), nid, CAT_CALL))

    def ret(self) -> None:
        if self._stack:
            s, nid, cat = self._stack.pop()
            self.rows.append((s, self.clock(), 0, nid, cat, -1))

    def import_begin(self, name: str) -> None:
        now = self.clock()
        self._stack.append((now, self.names.intern(name), CAT_IMPORT))
        if name in _EXECUTE_IMPORTS:
            self._queue_open.append(now)

    def import_end(self, name: str) -> None:
        now = self.clock()
        if self._stack:
            s, nid, cat = self._stack.pop()
            self._close(s, now, 0, nid, cat, -1)
        if name in _EXECUTE_IMPORTS and self._queue_open:
            self._close(self._queue_open.pop(), now, 1, self.names.intern("command buffer"), CAT_QUEUE, -1)

    # -- the HAL's observer

    def before_dispatch(self, record: DispatchRecord) -> None:
        self._dispatch_start[record.sequence] = self.clock()

    def after_dispatch(self, record: DispatchRecord, failed: str | None = None) -> None:
        end = self.clock()
        start = self._dispatch_start.pop(record.sequence, end)
        args = self._args(record)
        if failed:
            args["error"] = failed
        self.payloads.append(args)
        self._close(
            start, end, 1, self.names.intern(record.export_name), CAT_DISPATCH, len(self.payloads) - 1
        )

    def dispatch_failed(self, record: DispatchRecord, error: Exception) -> None:
        self.after_dispatch(record, failed=str(error))

    # Zones need times and records only, so a Vulkan device keeps batching command buffers for us.
    reads_bindings = False
    wants_dispatch_times = True  # one measured zone per dispatch of a CPU batch (``batch_dispatch_ends``)

    def watches(self, sequence: int, executable: Any, ordinal: int) -> bool:
        """A device that times each dispatch of a batch (the CPU device's native loop) needs no dispatch run
        on its own for a zone of its own."""
        return self._device is None

    def first_watched(self, dispatches: Any, start: int, end: int, first_sequence: int) -> int:
        return end if self._device is not None else start

    def dispatch_batch(self, records: list[DispatchRecord], start_ns: int, end_ns: int) -> None:
        """Dispatches that ran in one batch. Where the device timed each (``batch_dispatch_ends``) a zone runs
        from the previous dispatch's end (the batch's start for the first) to its own end, transfers between
        them included. Otherwise (a Vulkan submission) the host saw only the batch's start and end, so its
        time is split among its dispatches in proportion to their workgroup counts (marked ``"timing": "batch
        share"`` in each zone's args, with the batch's size)."""
        if not records:
            return
        ends = self._device.batch_dispatch_ends if self._device is not None else ()
        if len(ends) >= len(records):
            at = start_ns
            for r, end in zip(records, ends):
                args = self._args(r)
                self.payloads.append(args)
                at = min(at, end)  # a failed batch's survivors are told with start = end = now
                self._close(
                    at, end, 1, self.names.intern(r.export_name), CAT_DISPATCH, len(self.payloads) - 1
                )
                at = end
            return
        weights = [
            max(r.workgroup_count[0] * r.workgroup_count[1] * r.workgroup_count[2], 1) for r in records
        ]
        total = sum(weights)
        span = max(end_ns - start_ns, 0)
        at, acc = start_ns, 0
        for r, w in zip(records, weights):
            acc += w
            end = start_ns + span * acc // total
            args = self._args(r)
            args["timing"] = "batch share"
            args["batch_dispatches"] = len(records)
            self.payloads.append(args)
            self._close(at, end, 1, self.names.intern(r.export_name), CAT_DISPATCH, len(self.payloads) - 1)
            at = end

    def _args(self, record: DispatchRecord) -> dict:
        return {
            "ordinal": record.sequence - self._call_first,
            "executable": record.executable_id or record.executable,
            "executable_label": record.executable,
            "export_ordinal": record.export_ordinal,
            "workgroup_count": list(record.workgroup_count),
            "device": record.device,
        }

    # -- results

    def _close(self, start: int, end: int, track: int, nid: int, cat: int, payload: int) -> None:
        self.rows.append((start, end, track, nid, cat, payload))

    def finish(self) -> None:
        """Close zones a trap left open (the VM unwound without returning)."""
        now = self.clock()
        while self._stack:
            s, nid, cat = self._stack.pop()
            self.aborted += 1
            self._close(s, now, 0, nid, cat, -1)
        while self._queue_open:
            self._close(self._queue_open.pop(), now, 1, self.names.intern("command buffer"), CAT_QUEUE, -1)

    @property
    def dispatch_count(self) -> int:
        return sum(1 for r in self.rows if r[4] == CAT_DISPATCH)

    def trace(self, source: str = "debug run") -> Trace:
        """The recorded zones as a trace (times rebased so the first zone starts at 0)."""
        self.finish()
        b = TraceBuilder(source)
        b.names = self.names
        for c in CATEGORIES[1:]:
            b.categories.intern(c)
        b.track(("vm",), "VM", "vm", "debug run")
        b.track(("device",), f"device {self.device_name}", "device", "debug run")
        b.payloads = list(self.payloads)
        cols = np.array(self.rows, dtype=np.int64).reshape(-1, 6).T
        b.add_zone_arrays(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
        b.metadata["kind"] = "debug-run"
        b.metadata["aborted_zones"] = self.aborted
        return b.build(rebase=True)
