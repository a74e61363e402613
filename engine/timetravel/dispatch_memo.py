"""Costly dispatches are not run again by a replay: their results are kept and written back instead.

Time travel rebuilds a past state by replaying from a checkpoint, and checkpoints are only taken between
VM instructions. A whole command buffer runs inside one instruction (``hal.device.queue.execute``), so a
travel to a dispatch inside it replays every dispatch before it. On a device where a kernel is slow (a
3x3 convolution of SqueezeNet takes 40-90 s on lavapipe) that is minutes for one step back.

``DispatchMemo`` is the devices' ``kernel_hook`` (a public HAL seam): the first time a dispatch runs and
its kernel takes at least ``min_seconds``, it keeps a copy of the bytes of every binding after the kernel
(bindings only read are unchanged, so writing them back changes nothing). When the same dispatch runs
again (same sequence number in the recorded call, same executable and code, export, workgroups, constants
and binding ranges of the same allocations by their recording serials) it writes the kept bytes into the
bindings instead of running the kernel. The replay is deterministic, so those are the bytes the kernel
would write. Observers still see the dispatch before and after, as for a kernel that ran.

The copies are the device's snapshot observer's when it watches the dispatch (``engine.dispatch.snapshot``:
a dispatch's bindings are copied at most once whoever keeps them), else the memo's own.
A binding whose bytes equal those last kept for the same range (the constant pool every dispatch binds,
an input read by several) shares that copy. Memory is bounded by ``budget_bytes``; past it, dispatches
are simply run again. ``kernels_run`` and
``kernels_written`` count what the hook did (a test or a benchmark reads them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.dispatch.snapshot import DispatchSnapshots
from engine.runtime.hal.device import DispatchRecord, HalExecutable
from engine.runtime.hal.formats import runs_natively
from engine.timetravel.watch import serial_of

MEMO_SECONDS = 0.05  # a kernel at least this slow is kept (CPU kernels rarely are)
MEMO_BUDGET = 512 << 20  # bytes of kept results


@dataclass(frozen=True)
class _Kept:
    key: tuple
    impl: Any  # the code that ran (a substitution swaps an executable's impl: then the dispatch runs)
    results: tuple[np.ndarray, ...]  # each binding's bytes after the kernel (shared when unchanged)


def _key(executable: HalExecutable, record: DispatchRecord) -> tuple | None:
    bindings = []
    for b in record.bindings:
        serial = serial_of(b.buffer.allocation)
        if serial is None:
            return None  # a buffer time travel does not know: cannot tell it is the same one
        start, length = b.buffer.resolve(b.offset, b.length)
        bindings.append((serial, start, length))
    return (
        record.sequence,
        record.executable,
        record.executable_id,
        record.export_ordinal,
        tuple(record.workgroup_count),
        tuple(record.constants),
        tuple(bindings),
    )


class DispatchMemo:
    """A device's ``kernel_hook`` (see the module docstring)."""

    def __init__(self, min_seconds: float = MEMO_SECONDS, budget_bytes: int = MEMO_BUDGET):
        self.min_seconds = min_seconds
        self.budget_bytes = budget_bytes
        self.kept: dict[int, _Kept] = {}  # by dispatch sequence
        self._last: dict[tuple, np.ndarray] = {}  # (allocation serial, start, length) -> bytes last kept
        self.nbytes = 0
        self.kernels_run = 0
        self.kernels_written = 0

    def clear(self) -> None:
        """A new call is recorded: nothing kept applies to it."""
        self.kept.clear()
        self._last.clear()
        self.nbytes = 0

    def watches(self, sequence: int, executable: HalExecutable, ordinal: int) -> bool:
        """Whether the device must run this dispatch through the hook (``Device.next_watched``): one whose
        results are kept, and every dispatch of an executable whose kernels can be slow (all but native CPU
        code, whose kernels are rarely ``min_seconds`` slow and run in native batches instead, unless
        ``min_seconds`` is 0: then every dispatch is kept, native CPU ones too)."""
        return sequence in self.kept or not runs_natively(executable.format) or self.min_seconds <= 0

    def __call__(self, executable: HalExecutable, record: DispatchRecord, run: Callable[[], None]) -> None:
        key = _key(executable, record) if record.bindings else None
        kept = self.kept.get(record.sequence)
        if kept is not None and key is not None and kept.key == key and kept.impl is executable.impl:
            for b, data in zip(record.bindings, kept.results):
                b.buffer.write_view(b.offset, b.length)[:] = data
            self.kernels_written += 1
            return
        start = time.perf_counter()
        run()
        self.kernels_run += 1
        if key is None or time.perf_counter() - start < self.min_seconds:
            return
        if kept is not None:  # the dispatch changed (a substitution): keep the new results
            del self.kept[record.sequence]
        size = sum(length for _, _, length in key[-1])
        if self.nbytes + size > self.budget_bytes:
            return  # (a bound: bytes shared with earlier dispatches' are counted as new here)
        # When the device's snapshot observer watches this dispatch (a gate, a capture...), its copies after
        # the kernel are shared: the bindings are copied once whoever keeps them.
        snapshots = DispatchSnapshots.installed_on(executable.device)
        snapshot = snapshots.pending(record.sequence) if snapshots is not None else None
        results = []
        added = 0
        for k, (b, where) in enumerate(zip(record.bindings, key[-1])):
            now = b.data
            last = self._last.get(where)
            if last is not None and np.array_equal(last, now):
                results.append(last)  # e.g. the constant pool every dispatch binds: kept once
                continue
            if snapshot is not None:
                data = snapshot.after_copy(k)
            else:
                data = np.array(now, dtype=np.uint8, copy=True)
                data.flags.writeable = False
            self._last[where] = data
            results.append(data)
            added += data.nbytes
        self.kept[record.sequence] = _Kept(key, executable.impl, tuple(results))
        self.nbytes += added
