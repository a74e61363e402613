"""One dispatch-snapshot observer per device: a dispatch's bindings copied at most once, whoever watches.

The HAL tells its observers before and after each dispatch (``engine.runtime.hal.device``). Several
features want the bytes a dispatch reads and writes: the session's dispatch gate (what an "after" stop
wrote, NaN/Inf written), tensor capture, the divergence finder, live substitution (rerun from saved
inputs), time travel. Each used to copy every binding before and after every dispatch. Here one
``DispatchSnapshots`` observer sits on the device, and features subscribe to it (``SnapshotSubscriber``):

* before a dispatch it asks each subscriber whether it needs the bytes as they were before the dispatch
  (``wants_before``); if one does, each binding's bytes are copied once (``DispatchSnapshot.before``);
* subscribers are told ``before(snapshot)`` and ``after(snapshot)`` with the same ``DispatchSnapshot``,
  which answers, computed once and cached: the bytes after (``after``: views, valid until the device runs
  again; ``after_copy``: a copy kept), which bindings the dispatch changed (``observed_access``), the
  byte ranges it wrote (``written_ranges``), the non-finite values it wrote (``nonfinite_written``) and
  its typed tensors (``tensors``, ``engine.dispatch.typed_tensors``: from the executable sources the
  observer was given, else exactly the bound bytes).

Subscribers: the session's dispatch gate, tensor capture (``DispatchRecorder``), the divergence finder's
two runs (``lockstep``; run B changes the bindings in ``before_copy``, before they are copied, to run on A's
inputs) and its reproducer, live substitution. Time travel's dispatch memo (a kernel hook, not a
subscriber) takes its copies after the kernel from the snapshot of the dispatch running (``pending``).
``tests/test_dispatch_snapshot_copies.py`` counts the copies with all of them watching one run.

A subscriber that only needs records (timing) needs nothing copied: a dispatch none wants bytes of costs
one ``wants_before`` call per subscriber.

Native batches: when the device plans a command buffer it asks the observer whether it ``watches`` each
dispatch, and the observer asks its subscribers (``SnapshotSubscriber.watches``, default True). A dispatch
no subscriber watches runs inside a native batch with no snapshot at all; each subscriber is told of it
afterwards through ``batch_ran(records)``.

Subscribing::

    class Mine(SnapshotSubscriber):
        def wants_before(self, record):           # True: keep this dispatch's inputs
            return True
        def after(self, snapshot):                # the same snapshot every subscriber sees
            inputs = snapshot.before              # copies, made once
            snapshot.keep_written()               # copies of what it wrote, made once
            tensors = snapshot.tensors()          # typed once (sources) or the bound bytes; outputs are
                                                  # views of the copies after

    DispatchSnapshots.for_device(device).subscribe(Mine())   # first=True: told before the others (a gate
                                                              # may park the run inside ``before``)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from engine.dispatch.typed_tensors import (
    NO_SOURCES,
    ExecutableSources,
    Provenance,
    Role,
    TypedTensor,
    dispatch_tensors,
)
from engine.runtime.hal.buffers import allocation_span
from engine.runtime.hal.commands import DispatchCommand
from engine.runtime.hal.device import Device, DispatchObserver, DispatchRecord, HalExecutable


class DispatchSnapshot:
    """One dispatch as its subscribers see it; ``ran`` once the kernel returned."""

    # One per dispatch, on the run's hot path: slots make it cheap to build.
    __slots__ = ("record", "before", "_sources", "ran", "failed", "_after_copies", "_access", "_written", "_tensors",
                 "_ambiguous")

    def __init__(
        self, record: DispatchRecord, before: tuple[np.ndarray | None, ...], sources: Callable[[], ExecutableSources]
    ):
        self.record = record
        self.before = before  # copies of each binding's bytes before the dispatch (None: nobody asked)
        self._sources = sources  # the observer's sources now (they may arrive later: a rebuild)
        self.ran = False
        self.failed: Exception | None = None
        self._after_copies: dict[int, np.ndarray] = {}
        self._access: tuple[str, ...] | None = None
        self._written: dict[int, tuple[tuple[int, int], ...]] = {}
        self._ambiguous: dict[int, tuple[int, ...]] | None = None
        self._tensors: tuple[ExecutableSources, list[TypedTensor]] | None = None

    @property
    def sources(self) -> ExecutableSources:
        return self._sources()

    @property
    def sequence(self) -> int:
        return self.record.sequence

    @property
    def has_before(self) -> bool:
        return bool(self.before) and all(b is not None for b in self.before)

    def current(self, index: int) -> np.ndarray:
        """Binding ``index``'s bytes now (a view of device memory on host devices: copy to keep)."""
        return self.record.bindings[index].data

    def after(self, index: int) -> np.ndarray:
        """Binding ``index``'s bytes after the dispatch ran (a view; ``after_copy`` keeps them)."""
        return self._after_copies.get(index) if index in self._after_copies else self.current(index)

    def after_copy(self, index: int) -> np.ndarray:
        """A copy of binding ``index``'s bytes after the dispatch ran, made once for all subscribers."""
        found = self._after_copies.get(index)
        if found is None:
            found = self._after_copies[index] = np.array(self.current(index), copy=True)
            self._tensors = None  # typed from the copy from now on (views of it outlive the dispatch)
        return found

    @property
    def after_copied(self) -> frozenset[int]:
        """The bindings whose bytes after the dispatch have been copied (``after_copy``)."""
        return frozenset(self._after_copies)

    def keep_written(self) -> None:
        """Copy the bytes after the dispatch of every binding it changed (a subscriber that keeps its
        outputs: the typed tensors are views of these copies, shared by every subscriber)."""
        for k, access in enumerate(self.observed_access()):
            if access != "read":
                self.after_copy(k)

    def keep_after(self) -> None:
        """Copy every binding's bytes after the dispatch (a subscriber that keeps the snapshot past the
        moment, e.g. to rerun or compare later)."""
        for k in range(len(self.record.bindings)):
            self.after_copy(k)

    def observed_access(self) -> tuple[str, ...]:
        """Per binding, ``write`` if the dispatch changed its bytes (``readwrite`` if they held what an earlier
        dispatch wrote: ``WrittenRanges``), ``read`` otherwise (``unknown`` without the bytes before, or
        before the dispatch ran)."""
        if self._access is None:
            if not self.ran or not self.has_before:
                return tuple("unknown" for _ in self.record.bindings)
            self._access = tuple(
                "read" if np.array_equal(b, self.after(k)) else "write" for k, b in enumerate(self.before)
            )
        return self._access

    def refine_access(self, written) -> None:
        """Tell ``write`` from ``readwrite`` with what earlier dispatches wrote (a ``WrittenRanges``)."""
        self._access = written.refine(self.record, self.observed_access())

    def written_ranges(self, index: int) -> tuple[tuple[int, int], ...]:
        """The byte ranges ``[start, end)`` of binding ``index`` the dispatch changed (merged runs)."""
        found = self._written.get(index)
        if found is None:
            before = self.before[index] if self.before else None
            found = changed_ranges(before, self.after(index)) if self.ran and before is not None else ()
            self._written[index] = found
        return found

    def ambiguous_writers(self) -> dict[int, tuple[int, ...]]:
        """Bindings whose bytes changed only where other bindings that changed too cover the same memory (IREE
        binds one buffer twice, e.g. an input and the output that overwrites it), each with those others:
        which of them the dispatch wrote through cannot be told from the bytes."""
        if self._ambiguous is None:
            access = self.observed_access()
            changed = [k for k, a in enumerate(access) if a in ("write", "readwrite")]
            spans = {k: _span_of(self.record.bindings[k]) for k in changed}
            found: dict[int, tuple[int, ...]] = {}
            for k in changed:
                allocation, start, end = spans[k]
                others = [j for j in changed if j != k and spans[j][0] is allocation
                          and spans[j][1] < end and start < spans[j][2]]  # fmt: skip
                if others and all(_covered(start + a, start + b, [spans[j][1:] for j in others])
                                  for a, b in self.written_ranges(k)):  # fmt: skip
                    found[k] = tuple(others)
            self._ambiguous = found
        return self._ambiguous

    def attributed_access(self) -> tuple[str, ...]:
        """``observed_access`` as far as the bytes tell it per binding: ``unknown`` for an ambiguous writer
        (``ambiguous_writers``), never the access of the binding that aliases it."""
        ambiguous = self.ambiguous_writers()
        return tuple("unknown" if k in ambiguous else a for k, a in enumerate(self.observed_access()))

    def shown_tensors(self) -> list[TypedTensor]:
        """``tensors`` as reports show them: an untyped binding that is an ambiguous writer is one binding of
        access unknown (its bytes after the dispatch), not an output; the typed ones as the sources say."""
        tensors = self.tensors()
        ambiguous = self.ambiguous_writers() if self.ran else {}
        if not ambiguous:
            return tensors
        shown: list[TypedTensor] = []
        position = sum(t.role == Role.BINDING for t in tensors)
        for t in tensors:
            if t.provenance != Provenance.UNTYPED or t.binding not in ambiguous:
                shown.append(t)
            elif t.role == Role.OUTPUT:  # (its bytes before, a readwrite input, go: one entry per binding)
                others = " and ".join(f"binding {j}" for j in ambiguous[t.binding])
                why = (f"its bytes changed, but {others} cover{'s' if len(ambiguous[t.binding]) == 1 else ''} the "
                       "same memory and changed too: which binding the dispatch wrote through is not known")  # fmt: skip
                shown.append(replace(t, role=Role.BINDING, position=position, access="unknown",
                                     note=f"{t.note}; {why}" if t.note else why))  # fmt: skip
                position += 1
        return shown

    def tensors(self) -> list[TypedTensor]:
        """The dispatch's typed tensors (inputs from the bytes before, outputs from the bytes after; before
        it ran, everything from the current bytes). Views: copy what you keep."""
        sources = self.sources
        if self._tensors is not None and self._tensors[0] is sources:
            return self._tensors[1]
        n = len(self.record.bindings)
        if self.ran:
            before: Sequence[np.ndarray | None] = self.before if self.before else (None,) * n
            result = dispatch_tensors(
                self.record.export_name,
                self.record.constants,
                before,
                [self.after(k) for k in range(n)],
                sources,
                self.observed_access(),
            )
            self._tensors = (sources, result)
            return result
        return dispatch_tensors(
            self.record.export_name, self.record.constants, [self.current(k) for k in range(n)], None, sources
        )


def changed_ranges(before: np.ndarray, after: np.ndarray) -> tuple[tuple[int, int], ...]:
    """The byte ranges ``[start, end)`` where ``after`` differs from ``before`` (merged runs)."""
    return true_runs(before != after)


def true_runs(mask: np.ndarray) -> tuple[tuple[int, int], ...]:
    """The index ranges ``[start, end)`` of ``mask``'s runs of True."""
    at = np.flatnonzero(mask)
    if not at.size:
        return ()
    breaks = np.flatnonzero(np.diff(at) > 1)
    starts = np.concatenate(([at[0]], at[breaks + 1]))
    ends = np.concatenate((at[breaks], [at[-1]])) + 1
    return tuple((int(s), int(e)) for s, e in zip(starts, ends))


class WrittenRanges:
    """The byte ranges of each allocation that dispatches have written (weakly keyed: forgotten with it).

    A dispatch that changes a binding holding bytes an earlier dispatch wrote works in place on a buffer
    IREE shares (a tensor updated in place, a slab packing several tensors): it may read them too, so its
    access is ``readwrite`` and its bytes before are an input as well."""

    def __init__(self):
        self._ranges: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def refine(self, record: DispatchRecord, changed: Sequence[str]) -> tuple[str, ...]:
        """``changed`` (read/write per binding) with ``readwrite`` where a written binding overlaps earlier
        writes; then remembers this dispatch's writes."""
        access = []
        for binding, acc in zip(record.bindings, changed):
            if acc == "write":
                key, start, end = _span_of(binding)
                try:
                    earlier = self._ranges.get(key, ())
                except TypeError:  # not weak-referenceable
                    earlier = ()
                acc = "readwrite" if any(s < end and start < e for s, e in earlier) else "write"
            access.append(acc)
        for binding, acc in zip(record.bindings, access):
            if acc != "read":
                mark_range(self._ranges, *_span_of(binding))
        return tuple(access)


def mark_range(ranges: weakref.WeakKeyDictionary, key: object, start: int, end: int) -> None:
    """Add ``[start, end)`` to ``key``'s sorted byte ranges in ``ranges``, merged with those it overlaps or
    touches; a key that cannot be weakly referenced is not kept."""
    try:
        earlier = ranges.get(key, ())
    except TypeError:
        return
    merged = []
    for s, e in earlier:
        if s <= end and start <= e:
            start, end = min(s, start), max(e, end)
        else:
            merged.append((s, e))
    merged.append((start, end))
    ranges[key] = sorted(merged)


class SnapshotSubscriber:
    """Told about each dispatch through its ``DispatchSnapshot``; override what you need. May block."""

    def before_copy(self, record: DispatchRecord) -> None:
        """Called before the bindings are copied, with the bytes still the program's: a subscriber may
        change them here (the divergence finder gives run B run A's inputs) and every subscriber's
        snapshot holds the changed bytes."""

    def wants_before(self, record: DispatchRecord) -> bool:
        """Whether this dispatch's bytes before it runs must be kept (asked once, before it runs)."""
        return False

    def before(self, snapshot: DispatchSnapshot) -> None:
        pass

    def after(self, snapshot: DispatchSnapshot) -> None:
        pass

    def failed(self, snapshot: DispatchSnapshot, error: Exception) -> None:
        pass

    def watches(self, sequence: int, executable: HalExecutable, ordinal: int) -> bool:
        """Whether this subscriber must see dispatch ``sequence`` (export ``ordinal`` of ``executable``) through
        a snapshot of its own; asked when a command buffer is planned, so it must be cheap. False lets the
        device run it inside a native batch: the subscriber then learns of it only through ``batch_ran``.
        The default watches every dispatch."""
        return True

    def batch_ran(self, records: list[DispatchRecord]) -> None:
        """Dispatches that ran in a batch, none watched by this subscriber, in order (their bytes now are
        those after the whole batch)."""

    def batch_starting(self, dispatches: Sequence[DispatchCommand], first_sequence: int) -> None:
        """A batch of these dispatch commands is about to run (``DispatchObserver.batch_starting``)."""

    def first_watched(self, dispatches: Sequence[DispatchCommand], start: int, end: int, first_sequence: int) -> int:
        """The index in ``[start, end)`` of the first dispatch this subscriber ``watches`` (``end``: none);
        ``DispatchObserver.first_watched``. Override to answer for a whole stretch at once."""
        sequence = first_sequence
        for i in range(start, end):
            command = dispatches[i]
            if self.watches(sequence, command.executable, command.ordinal):
                return i
            sequence += 1
        return end


class DispatchSnapshots(DispatchObserver):
    """The one snapshot observer of a device (``for_device``); features ``subscribe`` to it."""

    _installed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, device: Device | None = None, sources: ExecutableSources = NO_SOURCES):
        self.device = device
        self.sources = sources
        self.subscribers: list[SnapshotSubscriber] = []  # change with subscribe/unsubscribe
        self._told: tuple[SnapshotSubscriber, ...] = ()
        self._preparing: tuple[SnapshotSubscriber, ...] = ()  # those that override ``before_copy``
        self.current: DispatchSnapshot | None = None
        self.written = WrittenRanges()
        self._pending: dict[int, DispatchSnapshot] = {}

    def _current_sources(self) -> ExecutableSources:
        return self.sources

    @classmethod
    def for_device(cls, device: Device) -> DispatchSnapshots:
        """The device's snapshot observer, installed among its observers on first use."""
        found = cls._installed.get(device)
        if found is None:
            found = cls._installed[device] = cls(device)
        device.add_observer(found)
        return found

    @classmethod
    def installed_on(cls, device: Device) -> DispatchSnapshots | None:
        """The device's snapshot observer if one was installed (none is installed by asking)."""
        return cls._installed.get(device)

    def subscribe(self, subscriber: SnapshotSubscriber, first: bool = False) -> None:
        if subscriber not in self.subscribers:
            if first:
                self.subscribers.insert(0, subscriber)
            else:
                self.subscribers.append(subscriber)
        self._changed()

    def unsubscribe(self, subscriber: SnapshotSubscriber) -> None:
        if subscriber in self.subscribers:
            self.subscribers.remove(subscriber)
        self._changed()

    def _changed(self) -> None:
        self._told = tuple(self.subscribers)
        # Only the subscribers that override ``before_copy`` are called there (on the hot path).
        self._preparing = tuple(
            s for s in self._told if type(s).before_copy is not SnapshotSubscriber.before_copy
        )

    def pending(self, sequence: int) -> DispatchSnapshot | None:
        """The snapshot of dispatch ``sequence`` while it runs (between its before and after), if this
        observer is watching it: a device hook (time travel's dispatch memo) takes its copies from it."""
        return self._pending.get(sequence)

    # -- the observer

    def watches(self, sequence: int, executable: HalExecutable, ordinal: int) -> bool:
        """A dispatch is watched iff a subscriber watches it."""
        for s in self._told:
            if s.watches(sequence, executable, ordinal):
                return True
        return False

    def first_watched(self, dispatches: Sequence[DispatchCommand], start: int, end: int, first_sequence: int) -> int:
        for s in self._told:
            if end == start:
                break
            end = s.first_watched(dispatches, start, end, first_sequence)
        return end

    def dispatch_batch(self, records: list[DispatchRecord], start_ns: int, end_ns: int) -> None:
        for s in self._told:
            s.batch_ran(records)

    def batch_starting(self, dispatches: Sequence[DispatchCommand], first_sequence: int) -> None:
        for s in self._told:
            s.batch_starting(dispatches, first_sequence)

    def before_dispatch(self, record: DispatchRecord) -> None:
        subscribers = self._told  # a tuple: subscribing during a dispatch does not change this one's
        if not subscribers:
            return
        for s in self._preparing:
            s.before_copy(record)
        before: tuple[np.ndarray | None, ...] = ()
        for s in subscribers:
            if s.wants_before(record):
                before = tuple(np.array(b.data, copy=True) for b in record.bindings)
                break
        snapshot = DispatchSnapshot(record, before, self._current_sources)
        self._pending[record.sequence] = snapshot
        self.current = snapshot
        for s in subscribers:
            s.before(snapshot)

    def after_dispatch(self, record: DispatchRecord) -> None:
        snapshot = self._pending.pop(record.sequence, None)
        if snapshot is None:
            return
        snapshot.ran = True
        if snapshot.before:
            snapshot.refine_access(self.written)
        self.current = snapshot
        try:
            for s in self._told:
                s.after(snapshot)
        finally:
            self.current = None

    def dispatch_failed(self, record: DispatchRecord, error: Exception) -> None:
        snapshot = self._pending.pop(record.sequence, None)
        if snapshot is None:
            if not self._told:
                return
            # It failed inside a batch: nobody was told before it, but a failure report names it.
            snapshot = DispatchSnapshot(record, (), self._current_sources)
        snapshot.failed = error
        for s in self._told:
            s.failed(snapshot, error)
        self.current = None


def _span_of(binding) -> tuple[object, int, int]:
    """(allocation, start, end) of the bytes ``binding`` binds, so bindings of different buffers compare."""
    return allocation_span(binding.buffer, binding.offset, binding.length)


def _covered(start: int, end: int, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether ``[start, end)`` lies inside the union of ``spans``."""
    for s, e in sorted(spans):
        if s > start:
            return False
        start = max(start, e)
        if start >= end:
            return True
    return start >= end
