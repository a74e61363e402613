"""Two debug runs in lockstep, compared dispatch by dispatch as they go: the divergence finder's engine.

Run A (the reference) runs on a worker thread and hands each dispatch it finishes to run B through a
channel bounded by ``AHEAD_BYTES`` of binding bytes (and ``AHEAD_STEPS`` dispatches); run B compares its own dispatch of the same ordinal with it.
Nothing is written to disk and no full tensor outlives its dispatch (only the culprit's bindings are
kept for the reproducer), so memory stays bounded by a few dispatches' bindings whatever the model size,
and the time is about that of the two plain debug runs.

**Same inputs.** Before B's dispatch runs it is given A's bytes of every binding (when both runs bind the
same number of ranges of the same lengths: same program, another target or device), so each dispatch's
outputs are compared *given the same inputs*: a dispatch's own rounding, never drift accumulated through
the network, and a broken dispatch cannot hide behind (or blame) the ones before it. B's own inputs, before
they are replaced, are compared with A's too: where the runs' dataflow would have gone apart.

**Defined bytes.** Inputs are compared only where the program defined them: whole allocations from the
host (program inputs, module constants), and within the program's own allocations (allocate, queue.alloca's
transients) the ranges that dispatches wrote or transfers filled, copied or updated
(``Device.transfer_listeners``); padding and untouched transients are garbage that differs between devices
and means nothing.

Each dispatch gets a verdict (``exact``, ``within_rounding``, ``within_tolerance`` or ``diverged``; see
``numerics``) and a fingerprint of each side's outputs (CRC32 and a few statistics, no tensors).
"""

from __future__ import annotations

import math
import re
import threading
import weakref
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.dispatch.bundle import DispatchEntry
from engine.dispatch.debug_capture import DispatchRecorder
from engine.dispatch.numerics import (
    Comparison,
    Tolerance,
    Verdict,
    compare,
    finite_scale,
    reduction_length_from_name,
    worst_verdict,
)
from engine.dispatch.snapshot import DispatchSnapshot, DispatchSnapshots, mark_range
from engine.dispatch.tensor_types import BindingInterface, element_dtype, name_candidates
from engine.dispatch.typed_tensors import ExecutableSources
from engine.errors import LensError
from engine.runtime.hal.buffers import allocation_span
from engine.runtime.hal.device import Device, DispatchRecord, Transfer

AHEAD_BYTES = 64 << 20  # binding bytes of A's dispatches waiting for B, at most (one may exceed it alone)
AHEAD_STEPS = 256  # and dispatches: small ones pass in batches, sparing a thread switch each
INPUT_SAMPLE = 1 << 18  # elements of each input binding compared when B runs on A's bytes (informational)
LOOKAHEAD = 8  # A's dispatches searched for the counterpart of a B dispatch whose name differs
AS_A = "as A"  # run_lockstep's interfaces_b: B's dispatches typed by A's interfaces
MAX_UNMATCHED = 16  # B dispatches in a row without a counterpart before the comparison stops
# Where IREE's dispatch-creation put a dispatch (``main$async_dispatch_12``), then the description that the
# optimization level may word otherwise (``matmul`` / ``matmul_like``) around the shapes and element types.
_DISPATCH_PLACE = re.compile(r"^(.*_dispatch_\d+)_(.*)$")
# The program's own allocations (hal.allocator.allocate, queue.alloca's transients): defined only where written.
HOST_DEFINED_ORIGINS_EXCLUDED = ("allocate", "alloca")


def _place_and_shapes(name: str) -> tuple[str, tuple[str, ...]] | None:
    """(place, the description's words holding a digit: ``8x4x16``, ``f16``), or None when it has none."""
    m = _DISPATCH_PLACE.match(name)
    if m is None:
        return None
    shapes = tuple(word for word in m.group(2).split("_") if any(ch.isdigit() for ch in word))
    return (m.group(1), shapes) if shapes else None


class LockstepError(LensError):
    """The two runs could not be made or compared."""


# ------------------------------------------------------------------------------------ defined bytes


class DefinedBytes:
    """Which byte ranges of each allocation the program has defined so far (see the module doc)."""

    def __init__(self):
        self._ranges: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._device = None

    @staticmethod
    def _locate(buffer, offset: int, length: int) -> tuple[object, int, int]:
        return allocation_span(buffer, offset, length)

    def mark(self, buffer, offset: int, length: int) -> None:
        if buffer is None or length <= 0:
            return
        allocation, start, end = self._locate(buffer, offset, length)
        mark_range(self._ranges, allocation, start, end)

    def ranges(self, buffer, offset: int, length: int) -> list[tuple[int, int]]:
        """The defined ranges of ``[offset, offset + length)`` of ``buffer``, relative to ``offset``."""
        allocation, start, end = self._locate(buffer, offset, length)
        if getattr(allocation, "origin", "allocate") not in HOST_DEFINED_ORIGINS_EXCLUDED:
            return [(0, end - start)]  # program inputs, constants, imported host memory
        try:
            found = self._ranges.get(allocation, [])
        except TypeError:
            return []
        out = []
        for s, e in found:
            lo, hi = max(s, start), min(e, end)
            if lo < hi:
                out.append((lo - start, hi - start))
        return out

    def attach(self, device: Device) -> None:
        """Follow the device's transfers (``Device.transfer_listeners``: fills, copies, updates define their
        targets; a copy only where its source was defined)."""
        self.detach()
        self._device = device
        device.transfer_listeners.append(self._transferred)

    def _transferred(self, transfer: Transfer) -> None:
        target, source = transfer.target, transfer.source
        if source is None:
            self.mark(target.buffer, target.offset, target.length)
        elif source.buffer is not None and target.buffer is not None:
            for s, e in self.ranges(source.buffer, source.offset, min(source.length, target.length)):
                self.mark(target.buffer, target.offset + s, e - s)

    def detach(self) -> None:
        if self._device is not None:
            if self._transferred in self._device.transfer_listeners:
                self._device.transfer_listeners.remove(self._transferred)
            self._device = None


def follow_locations(device, locations: dict[str, str]) -> None:
    """Fill ``locations`` (export name -> ``file:line``) as ``device`` creates executables: the source
    location IREE records for each export (the frontend's line: the PyTorch/ONNX-imported op the dispatch
    came from) in the CPU library's export table or the Vulkan executable's pipelines."""

    def on_create(executable, data, constants) -> None:
        try:
            for export in getattr(executable.impl, "exports", ()) or ():
                loc = getattr(export, "source_location", None)
                if loc is not None and getattr(loc, "path", None):
                    locations.setdefault(export.name, f"{loc.path}:{loc.line}")
            from engine.runtime.vmfb.vke1 import is_vke1, read_vke1

            raw = memoryview(np.ascontiguousarray(data)).cast("B")
            if is_vke1(raw):
                for pipeline in read_vke1(raw).pipelines:
                    if pipeline.location is not None and pipeline.location.filename:
                        locations.setdefault(
                            pipeline.entry_point, f"{pipeline.location.filename}:{pipeline.location.line}"
                        )
        except (LensError, ValueError, TypeError, AttributeError):
            pass  # a location is a courtesy: never fail the run for it

    device.executable_listeners.append(on_create)


# ------------------------------------------------------------------------------------ one side


@dataclass
class Step:
    """Run A's dispatch as run B needs it: typed tensors, raw binding bytes, defined ranges."""

    entry: DispatchEntry
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    before: list[np.ndarray]  # every binding's bytes before the dispatch
    after: dict[int, np.ndarray]  # written bindings' bytes after it
    defined: list[list[tuple[int, int]]]  # per binding, the defined ranges before the dispatch
    lengths: list[int]
    call: int = 1  # which call of the run (``run_lockstep``'s ``calls``) ran it, from 1


class _MemoryWriter:
    """The ``BundleWriter`` surface ``DispatchRecorder`` writes to, kept in memory for one dispatch."""

    def __init__(self):
        self.tensors: dict[str, np.ndarray] = {}
        self.entry: DispatchEntry | None = None

    def write_tensor(self, stem: str, array: np.ndarray, tensor_type=None) -> tuple[str, str]:
        self.tensors[stem] = array
        return stem, str(tensor_type) if tensor_type is not None else str(array.dtype)

    def add_dispatch(self, entry: DispatchEntry) -> None:
        self.entry = entry

    def wait_written(self) -> None:
        pass

    def take(self) -> tuple[DispatchEntry | None, list[np.ndarray], list[np.ndarray]]:
        entry, tensors = self.entry, self.tensors
        self.entry, self.tensors = None, {}
        if entry is None:
            return None, [], []
        return entry, [tensors[n] for n in entry.inputs], [tensors[n] for n in entry.outputs]


class _SideObserver(DispatchRecorder):
    """A ``DispatchRecorder`` (typing, access) writing to memory, with defined bytes and two hooks."""

    keep_after = True  # copy the written bindings' bytes after the dispatch (A's, for the reproducer)

    def __init__(self, interfaces, spirv, defined: DefinedBytes):
        self.sink = _MemoryWriter()
        super().__init__(self.sink, interfaces, None, spirv)  # type: ignore[arg-type]
        self.defined = defined
        self._defined_before: list[list[tuple[int, int]]] = []
        self.call = 1

    def start_numbered_call(self, call: int, first_sequence: int) -> None:
        """Call ``call`` (from 1) starts: its dispatches are numbered from the device's ``first_sequence``."""
        self.call = call
        self.start_call(first_sequence)

    def prepare(self, record: DispatchRecord) -> None:
        """Called before the bindings are copied (run B gives them A's bytes here)."""

    def finished(self, record: DispatchRecord, step: Step) -> None:
        """Called after each dispatch with this side's view of it."""

    def before_copy(self, record: DispatchRecord) -> None:
        if not self.recording:
            return  # an initializer's dispatch: not compared, nothing to prepare
        self._defined_before = [self.defined.ranges(b.buffer, b.offset, b.length) for b in record.bindings]
        self.prepare(record)

    def after(self, snapshot: DispatchSnapshot) -> None:
        record = snapshot.record
        if not self.recording:
            # The module's initializer: not compared (the runs are compared from the call on, numbered as the
            # debugger numbers them), but what it wrote is defined for the call's dispatches that read it.
            super().after(snapshot)
            for b, access in zip(record.bindings, snapshot.observed_access()):
                if access != "read":
                    self.defined.mark(b.buffer, b.offset, b.length)
            return
        before = list(snapshot.before)  # the device's snapshot observer's copies, shared
        super().after(snapshot)
        entry, ins, outs = self.sink.take()
        if entry is None:  # a trace-point module: tensors come later (not used here)
            return
        ins, outs = typed_by_name(ins, entry.name), typed_by_name(outs, entry.name)
        after = {}
        for i, info in enumerate(entry.bindings):
            if info.get("access") != "read":
                b = record.bindings[i]
                self.defined.mark(b.buffer, b.offset, b.length)
                if self.keep_after:
                    after[i] = snapshot.after_copy(i)  # the copy the capture's outputs are views of
        step = Step(entry, ins, outs, before, after, self._defined_before, [int(b.length) for b in record.bindings],
                    self.call)  # fmt: skip
        self.finished(record, step)


# ------------------------------------------------------------------------------------ the report


@dataclass(frozen=True)
class Fingerprint:
    """A tensor summarised without keeping it: the CRC32 of its bytes and its size (the comparison's own
    metrics say how far apart two differing tensors are)."""

    crc32: int
    count: int

    @classmethod
    def of(cls, array: np.ndarray) -> Fingerprint:
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        return cls(zlib.crc32(raw.data), int(array.size))

    def to_json(self) -> dict:
        return {"crc32": f"{self.crc32:08x}", "count": self.count}


@dataclass
class DispatchReport:
    """One dispatch of the two runs compared."""

    ordinal: int
    name: str
    executable: str | None
    workgroups: list[int] | None
    verdict: Verdict  # of its outputs
    inputs_verdict: Verdict  # of B's own inputs against A's, defined bytes only
    fed: bool  # B's dispatch ran on A's bytes
    worst_output: int | None = None
    comparison: Comparison | None = None  # of the worst output
    input_comparison: Comparison | None = None
    undefined_input_bytes: int = 0  # read bytes no one defined (not compared)
    fingerprints: list[tuple[Fingerprint, Fingerprint]] = field(default_factory=list)
    note: str = ""
    # Its outputs are bytes of no known element type (no sources, nothing in IREE's name): compared byte for
    # byte, a rounding difference cannot be told from a divergence, so bytes that differ are not named one.
    untyped_bytes: bool = False
    # Its outputs are typed otherwise in A and B (another build formed the dispatch otherwise): not compared,
    # and not named a divergence (``note`` says the two layouts).
    layout_differs: bool = False
    # It diverged after the runs' dispatch sequences went apart, on inputs that already differed: not named a
    # divergence (a shared executable matched by name may run on other slices there).
    after_apart: bool = False
    # Why its diverged outputs may be the builds' structure rather than arithmetic (A's values in another
    # arrangement; other binding ranges in B): a layout another build chose when the runs' dispatch sequences
    # went apart somewhere (then ``layout_differs``), else a divergence (a kernel storing out of place).
    structural: str = ""
    call: int = 1  # which call of the run, from 1 (``ordinal`` counts from that call's first dispatch)

    @property
    def judged(self) -> bool:
        """Whether its verdict judges the kernel's arithmetic (not outputs laid out otherwise, a divergence
        after the runs went apart, or untyped bytes that differ)."""
        return not (self.layout_differs or self.after_apart or (self.untyped_bytes and self.verdict is Verdict.DIVERGED))

    @property
    def label(self) -> str:
        """What the comparison says, in words (``bytes differ`` where the bytes' type is not known, ``layout
        differs`` where the outputs could not be paired)."""
        if self.layout_differs:
            return "layout differs"
        if self.after_apart:
            return "apart"
        return "bytes differ" if self.untyped_bytes and self.verdict is Verdict.DIVERGED else self.verdict.label

    def to_json(self, full: bool = False) -> dict:
        out = {
            "call": self.call,
            "ordinal": self.ordinal,
            "name": self.name,
            "verdict": str(self.verdict),
            "inputs": str(self.inputs_verdict),
            "fed": self.fed,
        }
        if self.untyped_bytes:
            out["untyped_bytes"] = True
        if self.layout_differs:
            out["layout_differs"] = True
        if self.after_apart:
            out["after_apart"] = True
        if self.comparison is not None and self.verdict is not Verdict.EXACT:
            c = self.comparison
            out.update(
                output=self.worst_output,
                max_abs_error=_num(c.max_abs_error),
                max_scaled_error=_num(c.max_scaled_error),
                max_ulps=_num(c.max_ulps) if c.max_ulps is not None else None,
                sqnr_db=_num(c.sqnr_db),
                mismatches=c.mismatches,
            )
        if self.undefined_input_bytes:
            out["undefined_input_bytes"] = self.undefined_input_bytes
        if self.note:
            out["note"] = self.note
        if full:
            out["fingerprints"] = [[a.to_json(), b.to_json()] for a, b in self.fingerprints]
            if self.comparison is not None:
                out["comparison"] = self.comparison.to_json()
            if self.input_comparison is not None:
                out["input_comparison"] = self.input_comparison.to_json()
        return out


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


@dataclass
class LockstepResult:
    dispatches: list[DispatchReport]
    culprit: DispatchReport | None
    culprit_step: Step | None  # A's bindings at the culprit (for the reproducer)
    culprit_record: tuple | None  # (workgroups, constants) of B's culprit dispatch
    outputs: list[Comparison]  # the program's results, B against A
    results_a: list
    results_b: list
    notes: list[str] = field(default_factory=list)
    first_input_difference: int | None = None
    count_a: int = 0
    count_b: int = 0
    locations: dict[str, str] = field(default_factory=dict)  # export name -> source file:line
    untyped_differences: list[int] = field(default_factory=list)  # ordinals whose untyped output bytes differ
    layout_differences: list[int] = field(default_factory=list)  # ordinals whose outputs could not be paired
    apart_differences: list[int] = field(default_factory=list)  # diverged after the sequences went apart

    def unjudged_notes(self) -> list[str]:
        """Why the dispatches that were not judged (``DispatchReport.judged``) are not named a divergence."""
        return [note for note in (self.untyped_note(), self.layout_note(), self.apart_note()) if note]

    def _first_of(self, ordinals: list[int]) -> str:
        first = next(d for d in self.dispatches if d.ordinal == ordinals[0])
        return f"#{first.ordinal} {first.name}" + (f" ({first.note})" if first.note else "")

    def layout_note(self) -> str | None:
        """What the dispatches whose outputs A and B lay out otherwise mean, or None when there are none."""
        if not self.layout_differences:
            return None
        return (
            f"{len(self.layout_differences)} dispatches' outputs are laid out otherwise in A and B (typed "
            f"otherwise, A's values in another arrangement, or other binding ranges), first "
            f"{self._first_of(self.layout_differences)}: the builds formed those dispatches otherwise (another "
            "optimization level or fusion; their dispatch sequences went apart), so none of them is named a "
            "divergence; the function's results are compared"
        )

    def apart_note(self) -> str | None:
        """What the dispatches that diverged after the runs' dispatch sequences went apart mean, or None."""
        if not self.apart_differences:
            return None
        return (
            f"{len(self.apart_differences)} dispatches diverged after the runs' dispatches went apart, on inputs "
            f"that already differed, first {self._first_of(self.apart_differences)}: where the builds run other "
            "dispatches, one matched by name may be another run of a shared executable (other slices), so none "
            "of them is named a divergence; the function's results are compared"
        )

    def untyped_note(self) -> str | None:
        """What the untyped dispatches whose bytes differ mean, or None when there are none."""
        if not self.untyped_differences:
            return None
        return (
            f"{len(self.untyped_differences)} dispatches' outputs are bytes of no known element type (no "
            f"executable sources, and IREE's name gives none) and differ, first "
            f"{self._first_of(self.untyped_differences)}: compared byte for byte, rounding cannot be told from a "
            "divergence, so none of them is named one; give --sources (a --iree-hal-dump-executable-sources-to "
            "folder) to judge them"
        )


# ------------------------------------------------------------------------------------ the runs


class _Channel:
    """A FIFO from run A's thread to run B's, bounded by bytes (``AHEAD_BYTES``) and count
    (``AHEAD_STEPS``): big dispatches go one at a time, small ones in batches."""

    def __init__(self):
        self._items: deque = deque()
        self._bytes = 0
        self._cv = threading.Condition()

    @staticmethod
    def _size(item) -> int:
        if isinstance(item, Step):
            return sum(int(b.nbytes) for b in item.before) + sum(int(a.nbytes) for a in item.after.values())
        return 0

    def put(self, item, timeout: float) -> bool:
        size = self._size(item)
        with self._cv:
            full = lambda: self._items and (  # noqa: E731
                self._bytes + size > AHEAD_BYTES or len(self._items) >= AHEAD_STEPS
            )
            if full() and not self._cv.wait_for(lambda: not full(), timeout):
                return False
            self._items.append((item, size))
            self._bytes += size
            self._cv.notify_all()
            return True

    def get(self):
        with self._cv:
            self._cv.wait_for(lambda: bool(self._items))
            item, size = self._items.popleft()
            self._bytes -= size
            self._cv.notify_all()
            return item


_END = object()


class _Producer(_SideObserver):
    def __init__(self, interfaces, spirv, defined, channel: _Channel, cancel: threading.Event):
        super().__init__(interfaces, spirv, defined)
        self.channel, self.cancel = channel, cancel
        self.count = 0

    def finished(self, record, step):
        self.count += 1
        while not self.cancel.is_set():
            if self.channel.put(step, timeout=0.2):
                return


class _Consumer(_SideObserver):
    keep_after = False
    def __init__(self, interfaces, spirv, defined, channel: _Channel, tolerance: Tolerance, feed: bool,
                 keep: Callable[[DispatchReport], None] | None = None, interfaces_a=None):  # fmt: skip
        super().__init__(interfaces, spirv, defined)
        # B formed its dispatches otherwise than A (``interfaces_a`` given: ``interfaces`` are B's own, or none):
        # A's interface types a B dispatch its own do not only where it binds the same ranges as its counterpart
        # in A (the same dispatch, fed A's bytes); elsewhere an export of A's name may bind other tensors.
        self._own_sources = self.sources
        self._a_sources = ExecutableSources(interfaces_a, "A's") if interfaces_a else None
        self._snapshots: DispatchSnapshots | None = None
        self.channel = channel
        self.tolerance = tolerance
        self.feed = feed
        self.reports: list[DispatchReport] = []
        self.notes: list[str] = []
        self.a_ended = False
        self.stopped = False
        self.count = 0
        self._current: Step | None = None
        self._input: tuple[Verdict, Comparison | None, int] = (Verdict.EXACT, None, 0)
        self._fed = False
        self.on_report = keep
        self.culprit: DispatchReport | None = None
        self.culprit_step: Step | None = None
        self.culprit_record: tuple | None = None
        self.first_input_difference: int | None = None
        self.untyped_differences: list[int] = []  # dispatches whose untyped output bytes differ
        self.layout_differences: list[int] = []  # dispatches whose outputs A and B type otherwise
        # Where the dispatch sequences went apart (B's count), and the dispatches after it that diverged on inputs
        # that already differed: a repeated executable matched by name may run on other slices there.
        self.apart_at: int | None = None
        self.apart_differences: list[int] = []
        self._structural_first: tuple | None = None
        self._ranges_differ = False  # the current dispatch binds ranges of other lengths in B than in A
        self.error_a: BaseException | None = None
        self._ahead: deque[Step] = deque()  # A's steps taken while looking for a counterpart
        self._unmatched = 0
        # Where the dispatch sequences differ: B's dispatches without a counterpart in A (not compared), as the
        # reports number them, and A's passed over to reach a later counterpart (said once, in ranges).
        self.unpaired_b: list[str] = []
        self.skipped_a: list[int] = []
        self.calls = 1  # how many calls each run makes (``run_lockstep``)

    def settle(self) -> None:
        """Once both runs ended: dispatches whose outputs may differ by structure (``DispatchReport.structural``)
        are a layout the other build chose where the dispatch sequences went apart somewhere (another
        optimization level, fusion); where they never did (the same program, one kernel edited, another
        device), the first is the divergence (a kernel storing out of place)."""
        if self.apart_at is not None:
            for report in self.reports:
                if report.structural:
                    report.layout_differs = True
            self.layout_differences = [r.ordinal for r in self.reports if r.layout_differs]
        elif self._structural_first is not None:
            self.culprit, self.culprit_step, self.culprit_record = self._structural_first

    def _counterpart(self, record: DispatchRecord) -> Step | None:
        """A's next dispatch named as ``record`` is, within ``LOOKAHEAD`` of the next one, else one of the same
        place in the program (``half_dispatch_0``) binding ranges of the same lengths: another optimization
        level may name the same kernel otherwise (``matmul`` vs ``matmul_like``). A's dispatches skipped on the
        way (ones B does not run there: another target may split or merge work) are noted."""
        name = record.export_name
        i = 0
        while True:
            if i < len(self._ahead):
                step = self._ahead[i]
            else:
                step = self._next() if len(self._ahead) < LOOKAHEAD else None
                if step is None:
                    return self._counterpart_by_place(record)
                self._ahead.append(step)
            if step.entry.name == name:
                return self._take(i)
            i += 1

    def _counterpart_by_place(self, record: DispatchRecord) -> Step | None:
        """A's dispatch ahead at the same place in the program, with the same shapes and element types in its
        name and binding ranges of the same lengths, named otherwise (the op word: ``matmul`` vs
        ``matmul_like``). A place alone is not enough: where fusion differs, the builds number their dispatches
        otherwise, and the same place holds another kernel."""
        mine = _place_and_shapes(record.export_name)
        if mine is None:
            return None
        lengths = [int(b.length) for b in record.bindings]
        for i, step in enumerate(self._ahead):
            if _place_and_shapes(step.entry.name) == mine and step.lengths == lengths:
                self.notes.append(
                    f"B's dispatch {self._numbered(record)} {record.export_name} compared with A's "
                    f"{step.entry.ordinal} {step.entry.name}: the same place in the program, shapes and binding "
                    "lengths, another name"
                )
                return self._take(i)
        return None

    def _take(self, i: int) -> Step:
        """A's ``i``-th dispatch ahead, the ones before it noted as skipped."""
        skipped = [self._ahead.popleft() for _ in range(i)]
        step = self._ahead.popleft()
        if skipped:
            self.skipped_a.extend(s.entry.ordinal for s in skipped)
            self._went_apart()
        return step

    def _next(self) -> Step | None:
        if self.a_ended:
            return None
        item = self.channel.get()
        if item is _END or isinstance(item, BaseException):
            self.a_ended = True
            if isinstance(item, BaseException):
                self.error_a = item
            return None
        return item

    def attach(self, device: Device) -> DispatchSnapshots:
        self._snapshots = super().attach(device)
        return self._snapshots

    def _typed_by_a(self, yes: bool) -> None:
        """Type the dispatch about to run by A's interfaces (``yes``) or B's own; only where B formed its
        dispatches otherwise (``_a_sources`` set: else B's own are A's already)."""
        if self._a_sources is not None and self._snapshots is not None:
            self._snapshots.sources = self._a_sources if yes else self._own_sources

    def prepare(self, record: DispatchRecord) -> None:
        self.count += 1
        self._current = None
        self._typed_by_a(False)
        if self.stopped:
            return
        step = self._counterpart(record)
        if step is None and self.a_ended and not self._ahead:
            self.notes.append(f"run A ended before dispatch {self._numbered(record)} ({record.export_name}) of run B")
            self.stopped = True
            return
        if step is None:
            self._unmatched += 1
            self._went_apart()
            self.unpaired_b.append(self._numbered(record))
            if self._unmatched >= MAX_UNMATCHED:
                self.notes.append("the runs went too far apart; compared up to there")
                self.stopped = True
            return
        self._unmatched = 0  # counted in a row: the sequences came together again
        self._current = step
        self._input = self._compare_inputs(step, record)
        lengths = [int(b.length) for b in record.bindings]
        self._fed = self.feed and lengths == step.lengths
        self._ranges_differ = lengths != step.lengths
        self._typed_by_a(lengths == step.lengths and record.export_name not in self._own_sources.interfaces)
        if self.feed and not self._fed:
            self.notes.append(
                f"dispatch {self._numbered(record)} ({record.export_name}) binds other ranges in B "
                f"({lengths} bytes vs {step.lengths}): compared on its own inputs"
            )
        if self._fed:
            for b, data in zip(record.bindings, step.before):
                b.buffer.write_view(b.offset, b.length)[...] = data

    def _went_apart(self) -> None:
        """The runs' dispatch sequences differ from here (one has dispatches the other has not)."""
        if self.apart_at is None:
            self.apart_at = self.count - 1

    def _numbered(self, record: DispatchRecord) -> str:
        """B's dispatch as the reports number it: from its call's first dispatch, naming the call if several."""
        ordinal = record.sequence - (self.first_sequence or 0)
        return f"{ordinal} of call {self.call}" if self.calls > 1 else str(ordinal)

    def _compare_inputs(self, step: Step, record: DispatchRecord) -> tuple[Verdict, Comparison | None, int]:
        """B's own bytes of the bindings A read, against A's, where both runs defined them."""
        verdicts, worst, undefined = [], None, 0
        read = [i for i, info in enumerate(step.entry.bindings) if info.get("access") in ("read", "readwrite")]
        for i in read:
            if i >= len(record.bindings) or int(record.bindings[i].length) != step.lengths[i]:
                verdicts.append(Verdict.DIVERGED)
                continue
            mine = self._defined_before[i]
            ranges = _intersect(step.defined[i], mine)
            undefined += step.lengths[i] - sum(e - s for s, e in ranges)
            if not ranges:
                continue
            dtype = _binding_dtype(step, i)
            a = _gather(step.before[i], ranges, dtype)
            b = _gather(record.bindings[i].data, ranges, dtype)
            if self.feed and a.size > INPUT_SAMPLE:
                # B runs on A's bytes anyway: its own inputs only say where the dataflow would have gone
                # apart (the previous dispatch's outputs, already judged), so a strided sample does.
                step_size = -(-a.size // INPUT_SAMPLE)
                a, b = a[::step_size], b[::step_size]
            c = compare(b, a, tolerance=self.tolerance, exact_stats=False)
            if dtype == np.uint8 and not c.ok and not self.tolerance.explicit:
                continue  # bytes of unknown type (a slow_memcpy's floats): no verdict rather than a guess
            verdicts.append(c.verdict)
            if worst is None or _rank(c.verdict) > _rank(worst.verdict):
                worst = c
        return worst_verdict(verdicts), worst, undefined

    def after(self, snapshot: DispatchSnapshot) -> None:
        record = snapshot.record
        step = self._current
        if step is not None and self._fed and _same_bindings(record, step):
            # Every binding holds A's bytes after it ran too: exact, no tensors to type or compare.
            for i, info in enumerate(step.entry.bindings):
                if info.get("access") != "read":
                    b = record.bindings[i]
                    self.defined.mark(b.buffer, b.offset, b.length)
            self._record(record, step, self._new_report(step))
            return
        super().after(snapshot)

    def _new_report(self, step_a: Step) -> DispatchReport:
        in_verdict, in_cmp, undefined = self._input
        return DispatchReport(
            step_a.entry.ordinal, step_a.entry.name, step_a.entry.executable, step_a.entry.workgroups,
            Verdict.EXACT, in_verdict, self._fed, input_comparison=in_cmp, undefined_input_bytes=undefined,
            call=step_a.call,
        )  # fmt: skip

    def _record(self, record: DispatchRecord, step_a: Step, report: DispatchReport) -> None:
        in_verdict = report.inputs_verdict
        if in_verdict is Verdict.DIVERGED and self.first_input_difference is None:
            self.first_input_difference = report.ordinal
        own_inputs_agreed = self._fed or in_verdict is not Verdict.DIVERGED
        if report.layout_differs:
            self.layout_differences.append(report.ordinal)
        elif self.apart_at is not None and report.verdict is Verdict.DIVERGED and in_verdict is Verdict.DIVERGED:
            self.apart_differences.append(report.ordinal)
            report.after_apart = True
        elif report.untyped_bytes and report.verdict is Verdict.DIVERGED:
            self.untyped_differences.append(report.ordinal)
        elif self.culprit is None and report.verdict is Verdict.DIVERGED and own_inputs_agreed:
            found = (report, step_a, (list(record.workgroup_count), [int(c) for c in record.constants]))
            if not report.structural:
                self.culprit, self.culprit_step, self.culprit_record = found
            elif self._structural_first is None:
                self._structural_first = found  # the culprit unless the runs go apart (``settle``)
        self.reports.append(report)
        if self.on_report is not None:
            self.on_report(report)

    def finished(self, record, step_b: Step) -> None:
        step_a = self._current
        if step_a is None:
            return
        pairs = pair_tensors(step_a.outputs, step_b.outputs)
        if pairs is not None and step_a.entry.tensors_from == "bindings":  # typed by the name: maybe wrongly
            name = step_a.entry.name
            pairs = [(as_integers(a), as_integers(b)) if integers_read_as_floats(a, b, name) else (a, b)
                     for a, b in pairs]
        tolerance = self.tolerance
        if not tolerance.explicit:
            length = reduction_length_from_name(step_a.entry.name)
            # Both runs summed the same inputs (B was fed A's): their scale bounds a reassociated sum's error.
            needs_scale = length and pairs is not None and any(not np.array_equal(a, b) for a, b in pairs)
            tolerance = Tolerance(reduction_length=length,
                                  input_scale=finite_scale(step_a.inputs) if needs_scale else None)  # fmt: skip
        comparisons = (
            [compare(b, a, tolerance=tolerance, exact_stats=False) for a, b in pairs]
            if pairs is not None
            else None
        )
        report = self._new_report(step_a)
        report.untyped_bytes = step_a.entry.tensors_from == "bindings" and name_element(step_a.entry.name) is None
        if comparisons is None:
            report.verdict, report.layout_differs = Verdict.DIVERGED, True
            report.note = (
                f"outputs differ in layout: {[o.nbytes for o in step_a.outputs]} bytes in A, "
                f"{[o.nbytes for o in step_b.outputs]} in B"
            )
        else:
            report.verdict = worst_verdict(c.verdict for c in comparisons)
            if comparisons:
                k = max(range(len(comparisons)), key=lambda j: (_rank(comparisons[j].verdict), comparisons[j].max_scaled_error))
                report.worst_output, report.comparison = k, comparisons[k]
            if report.verdict is Verdict.DIVERGED and self._ranges_differ:
                report.structural = report.note = "B's dispatch binds other ranges"
            elif report.verdict is Verdict.DIVERGED and _rearranged(pairs, comparisons, tolerance):
                report.structural = report.note = "B's outputs hold A's values in another arrangement"
        if report.verdict is not Verdict.EXACT:  # an exact pair's fingerprints are equal: not worth a CRC
            report.fingerprints = [(Fingerprint.of(a), Fingerprint.of(b)) for a, b in zip(step_a.outputs, step_b.outputs)]
        self._record(record, step_a, report)

    def drain(self) -> None:
        """Take what run A still sends (so its thread can finish)."""
        self._ahead.clear()
        while not self.a_ended:
            self._next()


def name_element(export_name: str) -> str | None:
    """The element type IREE's dispatch name ends with (``…_matmul_4x8x16_f16xf16xf32``: the result's, listed
    last; ``…_softmax_8x8xf32_dispatch_tensor_store``), or None when it names none (``…_attention_4x16x8``)."""
    m = re.search(r"_(?:[a-z]+\d+x)*((?:b?f|u?i)\d+)$", export_name)
    found = name_candidates(export_name)
    return m[1] if m else (found[1] if found else None)


def typed_by_name(arrays: list[np.ndarray], export_name: str) -> list[np.ndarray]:
    """Untyped (raw-byte) tensors read as the element type IREE's dispatch name ends with, flat: without the
    executables' sources a binding is only bytes, but comparing floats needs their type (``…_D_f32``:
    a dynamic shape gives no sizes, the element still says how to compare). No such suffix: bytes,
    compared exactly."""
    if not any(a.dtype == np.uint8 for a in arrays):
        return arrays
    element = name_element(export_name)
    if element is None:
        return arrays
    try:
        dtype = element_dtype(element)
    except (KeyError, ValueError):
        return arrays
    out = []
    for a in arrays:
        if a.dtype == np.uint8 and a.nbytes % dtype.itemsize == 0 and dtype != np.uint8:
            a = np.ascontiguousarray(a).reshape(-1).view(dtype)
        out.append(a)
    return out


# Dispatches whose results include indices although IREE names them by their float operands
# (``…_arg_compare_4x32xf32_dispatch_tensor_store`` stores an argmax's i32 indices).
_INDEX_RESULTS = re.compile(r"_(?:arg_compare|argmax|argmin|topk|sort)(?:_|$)")


def integers_read_as_floats(a: np.ndarray, b: np.ndarray, export_name: str) -> bool:
    """Whether untyped bytes read as the name's float type hold integers where A and B differ: a dispatch
    that computes indices, and every differing element subnormal or zero in both (small integers read as
    floats are: index 27 reads as 3.8e-44). Compared as floats, different indices would pass as rounding."""
    if not _INDEX_RESULTS.search(export_name) or a.dtype.kind != "f" or b.dtype != a.dtype or a.shape != b.shape:
        return False
    differ = a != b
    if not differ.any():
        return False
    values = np.concatenate([a[differ], b[differ]])
    return bool((np.abs(values) < np.finfo(a.dtype).tiny).all())  # NaN compares False: stays a float


def as_integers(a: np.ndarray) -> np.ndarray:
    """The same bytes as signed integers of the same width (compared exactly)."""
    return np.ascontiguousarray(a).view(np.dtype(f"i{a.dtype.itemsize}"))


def _same_bindings(record: DispatchRecord, step: Step) -> bool:
    """B's bindings after its dispatch hold exactly A's bytes (those A wrote, and the rest as A left them)."""
    for i, b in enumerate(record.bindings):
        expected = step.after.get(i)
        if expected is None:
            expected = step.before[i]
        got = b.data
        if got.size != expected.size or not np.array_equal(got, expected.reshape(-1).view(np.uint8)):
            return False
    return True


def _rearranged(pairs: list, comparisons: list[Comparison], tolerance: Tolerance) -> bool:
    """Whether every diverged output of B holds A's values in another order (their sorted values agree within
    the rule): a layout another build chose, not arithmetic gone wrong. Only floats and integers of the same
    size are sorted; a NaN anywhere says nothing about arrangement."""
    for (a, b), c in zip(pairs, comparisons):
        if c.verdict is not Verdict.DIVERGED:
            continue
        if a.shape != b.shape or a.dtype != b.dtype or a.dtype.kind not in "fiu" or a.size < 2:
            return False
        if a.dtype.kind == "f" and (np.isnan(a).any() or np.isnan(b).any()):
            return False
        flat_a, flat_b = np.sort(a, axis=None), np.sort(b, axis=None)
        if compare(flat_b, flat_a, tolerance=tolerance, exact_stats=False).verdict is Verdict.DIVERGED:
            return False
    return True


def _rank(v: Verdict) -> int:
    return [Verdict.EXACT, Verdict.WITHIN_ROUNDING, Verdict.WITHIN_TOLERANCE, Verdict.DIVERGED].index(v)


def _intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for s1, e1 in a:
        for s2, e2 in b:
            lo, hi = max(s1, s2), min(e1, e2)
            if lo < hi:
                out.append((lo, hi))
    return sorted(out)


def _binding_dtype(step: Step, index: int) -> np.dtype:
    """The element type A's capture gave binding ``index`` (its input tensor when it fills the binding)."""
    read = [i for i, info in enumerate(step.entry.bindings) if info.get("access") in ("read", "readwrite")]
    if step.entry.tensors_from == "bindings" and index in read:
        k = read.index(index)
        if k < len(step.inputs) and step.inputs[k].nbytes == step.lengths[index]:
            return step.inputs[k].dtype
    sizes = {t.dtype for t in step.inputs if t.dtype.kind == "f" or t.dtype.name == "bfloat16"}
    if len(sizes) == 1:
        return sizes.pop()
    return np.dtype(np.uint8)


def _gather(raw: np.ndarray, ranges: list[tuple[int, int]], dtype: np.dtype) -> np.ndarray:
    """The elements of ``raw`` (bytes) wholly inside ``ranges``, as one flat array of ``dtype``."""
    size = np.dtype(dtype).itemsize
    parts = []
    for s, e in ranges:
        s2, e2 = -(-s // size) * size, (e // size) * size
        if s2 < e2:
            parts.append(np.asarray(raw[s2:e2]))
    if not parts:
        return np.zeros(0, dtype)
    joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return np.ascontiguousarray(joined).view(dtype)


def pair_tensors(a: list[np.ndarray], b: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """A's and B's output tensors side by side, B's bytes read as A's types where the two typed them
    differently (a SPIR-V ``i32`` against a name's ``f32``); one concatenation when both cut their bytes
    differently; None when the byte counts differ."""
    if len(a) == len(b) and all(x.nbytes == y.nbytes for x, y in zip(a, b)):
        out = []
        for x, y in zip(a, b):
            if x.dtype != y.dtype or x.shape != y.shape:
                y = np.ascontiguousarray(y).reshape(-1).view(np.uint8).view(x.dtype).reshape(x.shape)
            out.append((x, y))
        return out
    ra = [np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in a]
    rb = [np.ascontiguousarray(y).reshape(-1).view(np.uint8) for y in b]
    ca = np.concatenate(ra) if ra else np.zeros(0, np.uint8)
    cb = np.concatenate(rb) if rb else np.zeros(0, np.uint8)
    if ca.size != cb.size:
        return None
    dtype = a[0].dtype if a and all(x.dtype == a[0].dtype for x in a) else np.dtype(np.uint8)
    if ca.size % dtype.itemsize:
        dtype = np.dtype(np.uint8)
    return [(ca.view(dtype), cb.view(dtype))]


def run_lockstep(
    module_a: str,
    module_b: str,
    function: str,
    inputs: list[str],
    *,
    device_a: str = "local-sync",
    device_b: str = "local-sync",
    tolerance: Tolerance | None = None,
    feed: bool = True,
    interfaces: dict[str, dict[int, BindingInterface]] | None = None,
    on_report: Callable[[DispatchReport], None] | None = None,
    parameters: Any = None,
    calls: int = 1,
    interfaces_b: dict[str, dict[int, BindingInterface]] | None | str = AS_A,
) -> LockstepResult:
    """Run A (worker thread) and B (this thread) together and compare every dispatch (see the module doc);
    ``parameters``: the ``ParameterArchives`` both builds load their weights from. ``calls``: each run calls
    ``function`` that many times on its module instance, with the same inputs (a program that keeps state
    between calls, a KV cache or a counter, meets call N with what the N-1 before left); dispatches are
    compared call by call, each numbered from its call's start, and the results compared are the last call's.
    ``interfaces`` type A's dispatches; ``interfaces_b`` B's (``rebuild_sources.other_build_sources``), by
    default the same."""
    from engine.dispatch.spirv_types import module_binding_elements

    tolerance = tolerance or Tolerance()
    channel = _Channel()
    cancel = threading.Event()
    producer = _Producer(interfaces, module_binding_elements(module_a), DefinedBytes(), channel, cancel)
    consumer = _Consumer(
        interfaces if interfaces_b == AS_A else interfaces_b, module_binding_elements(module_b), DefinedBytes(),
        channel, tolerance, feed, on_report, None if interfaces_b == AS_A else interfaces,
    )  # fmt: skip
    consumer.calls = calls
    results_a: list = []
    locations: dict[str, dict[str, str]] = {"a": {}, "b": {}}

    def run(module, device_uri, observer):
        where = locations["a" if observer is producer else "b"]
        return _run_side(module, device_uri, observer, where, function, inputs, parameters, calls)

    def run_a():
        try:
            results_a.extend(run(module_a, device_a, producer))
            channel_put(_END)
        except BaseException as e:  # handed to run B's thread, raised there
            channel_put(e)

    def channel_put(item):
        while not cancel.is_set():
            if channel.put(item, timeout=0.2):
                return

    worker = threading.Thread(target=run_a, name="lens-diverge-a", daemon=True)
    worker.start()
    try:
        try:
            results_b = run(module_b, device_b, consumer)
        finally:
            consumer.stopped = True
            consumer.drain()
    finally:
        cancel.set()
        worker.join()
    consumer.settle()
    if consumer.error_a is not None:
        e = consumer.error_a
        raise LockstepError(f"run A ({module_a} on {device_a}) failed: {e}") from e
    notes = _run_notes(producer, consumer, function, calls)
    outputs = _compare_results(results_a, results_b, tolerance, notes)
    return LockstepResult(
        consumer.reports, consumer.culprit, consumer.culprit_step, consumer.culprit_record, outputs,
        results_a, results_b, notes, consumer.first_input_difference, producer.count, consumer.count,
        {**locations["b"], **locations["a"]},  # A's first: the reference build names the model's line
        consumer.untyped_differences, consumer.layout_differences, consumer.apart_differences,
    )  # fmt: skip


def _run_side(module: str, device_uri: str, observer: _SideObserver, locations: dict[str, str], function: str,
              inputs: list[str], parameters: Any, calls: int) -> list:
    """One run of the lockstep on its own device, ``observer`` told of every dispatch: ``function``'s results
    after ``calls`` calls (dispatches numbered from each call's start); ``locations`` gets its dispatches'."""
    from engine.runtime.debug_runner import INITIALIZER, DebugRunner
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.hal.devices import create_device
    from engine.runtime.hal.module import HalModule

    hal_device = create_device(device_uri)
    observer.defined.attach(hal_device)
    follow_locations(hal_device, locations)
    snapshots = observer.attach(hal_device)  # the device's one snapshot observer copies the bindings
    try:
        observer.in_initializer()
        runner = DebugRunner(module, device_uri, hal_module=HalModule(hal_device), parameters=parameters,
                             run_init=function != INITIALIZER)  # fmt: skip
        args = parse_inputs(inputs, split_cconv(runner.cconv(function))[0])
        results: list = []
        for call in range(1, calls + 1):
            observer.start_numbered_call(call, hal_device.dispatch_count)
            results = runner.invoke(function, args)
        return results
    finally:
        snapshots.unsubscribe(observer)
        observer.defined.detach()
        hal_device.__dict__.pop("create_executable", None)


def _run_notes(producer: _Producer, consumer: _Consumer, function: str, calls: int) -> list[str]:
    """What the report says besides the dispatches: the consumer's notes, the initializers' dispatches, counts
    that differ, several calls."""
    notes = []
    if consumer.unpaired_b:
        notes.append(f"{len(consumer.unpaired_b)} of B's dispatches have no counterpart in A where they run, not "
                     f"compared: {numbers_in_runs(consumer.unpaired_b)}")  # fmt: skip
    if consumer.skipped_a:
        notes.append(f"{len(consumer.skipped_a)} of A's dispatches have no counterpart in B, passed over: "
                     f"{numbers_in_runs([str(n) for n in consumer.skipped_a])}")  # fmt: skip
    notes += consumer.notes
    if producer.initializer_dispatches or consumer.initializer_dispatches:
        notes.append(
            f"the modules' initializers ran {producer.initializer_dispatches} dispatches in A and "
            f"{consumer.initializer_dispatches} in B before the call: not compared (dispatches are numbered from "
            "the call, as break dispatch N counts; a difference they made shows in the inputs of the call's "
            "dispatches that read it)"
        )
    if producer.count != consumer.count:
        notes.append(f"dispatch counts differ: {producer.count} in A, {consumer.count} in B")
    if calls > 1:
        notes.append(f"each run called {function} {calls} times with the same inputs; the results compared are "
                     f"call {calls}'s")  # fmt: skip
    return notes


def numbers_in_runs(labels: list[str]) -> str:
    """``18, 20-22, 25``: dispatch numbers, consecutive ones as a run (labels that are not plain numbers, as
    ``3 of call 2``, listed as they are)."""
    parts: list[str] = []
    start = previous = None
    for label in [*labels, None]:
        number = int(label) if label is not None and label.isdigit() else None
        if number is not None and previous is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = number
        if number is None and label is not None:
            parts.append(label)
    return ", ".join(parts)


def _compare_results(results_a: list, results_b: list, tolerance: Tolerance, notes: list[str]) -> list[Comparison]:
    from engine.runtime.function_io import Tensor

    ta = [r for r in results_a if isinstance(r, Tensor)]
    tb = [r for r in results_b if isinstance(r, Tensor)]
    if len(ta) != len(tb):
        notes.append(f"the runs return {len(ta)} and {len(tb)} tensors")
    return [compare(b.array, a.array, tolerance=tolerance) for a, b in zip(ta, tb)]
