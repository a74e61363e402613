"""Which bytes of the stopped dispatch's in-place tensors the program never defined, for the session's
answers (``DispatchTensor.undefined``), by the same rule as a capture's (``InPlaceTensors``).

IREE packs transient tensors into reused slabs and concatenates in place: a tensor read and written in
place holds, where no dispatch wrote it yet, the leftovers of the tensors that used its memory before
(IREE's traced build gives each tensor fresh zeroed memory instead). The rule needs every dispatch of the
run seen with its executable's sources (a write-only output defines its tensor whole) and, for a dispatch
that works in place, its bytes before (what it changed): ``wants_before`` asks for them only for those.
A dispatch seen without sources makes the answer unknown (``None``) from then on: what it defined is not
known, and calling its bytes undefined would be a guess. Fills, updates and copies write too
(``follow_transfers``: IREE zero-fills a padded tensor before copying its interior in place); they are followed
until the watch is blind, since a listener takes the device's transfers out of its native batches."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import numpy as np

from engine.dispatch.debug_capture import InPlaceTensors
from engine.dispatch.snapshot import DispatchSnapshot, SnapshotSubscriber
from engine.dispatch.typed_tensors import (
    ExecutableSources,
    Provenance,
    Role,
    spans_by_mode,
)
from engine.runtime.hal.commands import DispatchCommand
from engine.runtime.hal.device import DispatchRecord, HalExecutable

Ranges = tuple[tuple[int, int], ...]
Spans = list[tuple[int, int, int]]  # (binding, byte offset, byte length) of tensors


class UndefinedBytesWatch(SnapshotSubscriber):
    """Subscribed before the session's gate (told first: the gate parks the run in ``after``)."""

    def __init__(self, sources: Callable[[], ExecutableSources]):
        self._sources = sources
        self._in_place = InPlaceTensors()
        self.blind = False  # a dispatch ran untyped: what the program defined is not known from then on
        self._in_place_exports: tuple[ExecutableSources, dict[str, bool]] | None = None
        self._none_in_place_for: tuple[ExecutableSources, bool] | None = None  # (sources, no export works in place)
        self._spans: tuple[ExecutableSources, dict[tuple, list[tuple[int, int, int]] | None]] | None = None
        self._after: tuple[int, dict[str, list[list[int]]]] | None = None  # the last dispatch's (sequence, answer)
        self._in_place_at: tuple | None = None  # (dispatches, sources, indices of those that work in place)
        # The in-place tensors' bytes before the dispatch running now: (sequence, [(binding, offset, bytes)]).
        self._before: tuple[int, list[tuple[int, int, np.ndarray]]] | None = None

    def _works_in_place(self, export: str) -> bool:
        sources = self._sources()
        if self._in_place_exports is None or self._in_place_exports[0] is not sources:
            self._in_place_exports = (sources, {})
        known = self._in_place_exports[1]
        found = known.get(export)
        if found is None:
            interface = sources.interfaces.get(export) or {}
            found = known[export] = any(
                (bi.modes[k] if k < len(bi.modes) else ("readonly" if bi.read_only else "readwrite")) == "readwrite"
                for bi in interface.values()
                for k in range(len(bi.tensors))
            )
        return found

    def _none_in_place(self) -> bool:
        """Whether the sources are here and none of their exports works in place (the 96-layer transformer):
        then no tensor can be undefined, and nothing need be followed (11 us a dispatch: 10x its plain run)."""
        sources = self._sources()
        if self._none_in_place_for is None or self._none_in_place_for[0] is not sources:
            none = sources.found and not any(self._works_in_place(e) for e in sources.interfaces)
            self._none_in_place_for = (sources, none)
        return self._none_in_place_for[1]

    def _spans_of(self, record: DispatchRecord) -> tuple[Spans | None, Spans | None]:
        """The write-only and in-place spans of the dispatch (``spans_by_mode``), remembered by (export, push constants,
        binding lengths): a model's dispatches repeat them call after call."""
        sources = self._sources()
        if self._spans is None or self._spans[0] is not sources:
            self._spans = (sources, {})
        key = (record.export_name, tuple(int(c) for c in record.constants), tuple(int(b.length) for b in record.bindings))
        known = self._spans[1]
        if key not in known:
            if len(known) > 4096:  # dynamic shapes: a bound on what is remembered
                known.clear()
            found = spans_by_mode(*key, sources)
            known[key] = (None, None) if found is None else (found["writeonly"], found["readwrite"])
        return known[key]

    def _write_only_spans(self, record: DispatchRecord) -> Spans | None:
        return self._spans_of(record)[0]

    def follow_transfers(self, device, sources_may_come: bool = False) -> None:
        """Count ``device``'s fills, updates and copies as writes (``InPlaceTensors.follow_transfers``): with
        sources, or while a rebuild may bring them (``SessionSources.may_come``: the session rebuilds them
        at the first stop, after the fills before it ran; not followed, the padding a fill zeroed read as
        undefined). Not when none can come: the first dispatch would make the watch blind anyway."""
        if not self.blind and (sources_may_come or self._sources().found) and not self._none_in_place():
            self._in_place.follow_transfers(device)

    def begin_call(self, device, sources_may_come: bool) -> None:
        """A call after one the watch was blind in (a dispatch ran before the sources' rebuild was done) is
        followed again, from nothing: what the blind call wrote is not known, so a tensor no dispatch of
        this call has written yet is "not known" (None), never called undefined (a global it updated in
        place is program data). A watch that saw every dispatch keeps what it knows across calls."""
        if self.blind:
            self._in_place.stop_following()
            self._in_place = InPlaceTensors(unrecorded_known=False)
            self._after = None
            self.blind = False
        self.follow_transfers(device, sources_may_come)

    def _go_blind(self) -> None:
        self.blind = True
        self._after = None
        self._in_place.stop_following()  # nothing to follow now: the device's transfers run natively again

    def watches(self, sequence: int, executable: HalExecutable, ordinal: int) -> bool:
        # Only a dispatch that works in place needs its bytes before (``before``: its in-place tensors' own,
        # not every binding's, which the snapshots would copy whole: slabs of megabytes, at every such
        # dispatch, made a typed EfficientViT run 7x slower); the rest are told in ``batch_ran``.
        return not self.blind and self._works_in_place(executable.export_name(ordinal))

    def first_watched(self, dispatches: Sequence[DispatchCommand], start: int, end: int, first_sequence: int) -> int:
        # Which of a command buffer's dispatches work in place, worked out once per (dispatches, sources): the
        # device plans with the same dispatch tuple call after call.
        if self.blind:
            return end
        sources = self._sources()
        found = self._in_place_at
        if found is None or found[0] is not dispatches or found[1] is not sources:
            at = [i for i, d in enumerate(dispatches) if self._works_in_place(d.executable.export_name(d.ordinal))]
            found = self._in_place_at = (dispatches, sources, at)
        at = found[2]
        k = bisect.bisect_left(at, start)
        return at[k] if k < len(at) and at[k] < end else end

    def batch_ran(self, records: list[DispatchRecord]) -> None:
        if self._none_in_place():
            return
        for record in records:
            if self.blind:
                return
            self._defined_whole(record)
        self._after = None

    def _defined_whole(self, record: DispatchRecord) -> bool:
        """A dispatch that works nowhere in place: its write-only outputs define their tensors whole. Their
        spans come from the source alone (typing the tensors would copy every binding after every dispatch
        of the run). False (and blind from now on) when the source does not say."""
        spans = self._write_only_spans(record)
        if spans is None and record.bindings:
            self._go_blind()
            return False
        for binding, offset, length in spans or ():
            self._in_place.define_whole(record.bindings[binding], offset, length)
        return True

    def before(self, snapshot: DispatchSnapshot) -> None:
        """Copies the bytes of the dispatch's in-place tensors (what it changed is told from them after)."""
        self._before = None
        record = snapshot.record
        if self.blind or not self._works_in_place(record.export_name):
            return
        spans = self._spans_of(record)[1]
        if spans is not None:
            self._before = (snapshot.sequence, [
                (binding, offset, np.array(record.bindings[binding].data[offset : offset + length], copy=True))
                for binding, offset, length in spans
            ])  # fmt: skip

    def after(self, snapshot: DispatchSnapshot) -> None:
        if self.blind:
            return
        record = snapshot.record
        if not self._works_in_place(record.export_name):
            if self._defined_whole(record):
                self._after = (snapshot.sequence, {})
            return
        before, self._before = self._before, None
        tensors = snapshot.tensors()
        if (snapshot.record.bindings and any(t.provenance != Provenance.SOURCES for t in tensors)) or (
            before is None or before[0] != snapshot.sequence
        ):  # untyped, or its bytes before were not copied (the sources came while it ran): not known
            self._go_blind()
            return
        copies = before[1]

        def changed(binding: int, offset: int, length: int) -> np.ndarray | None:
            for b, at, old in copies:
                if b == binding and at == offset and old.size == length:
                    return old != record.bindings[b].data[at : at + length]
            return None

        ins = [t for t in tensors if t.role == Role.INPUT]
        outs = [t for t in tensors if t.role == Role.OUTPUT]
        self._after = (snapshot.sequence, self._in_place.undefined(snapshot, ins, outs, changed))

    def at(self, snapshot: DispatchSnapshot) -> dict[str, Ranges | None] | None:
        """``"input1"``/``"output0"`` -> the undefined byte ranges (relative to the tensor) of the dispatch's
        in-place tensors at this stop (before it ran: what the memory holds; after: inputs before, outputs
        after), None for a tensor whose are not known; None when none are (a dispatch ran untyped)."""
        if self.blind:
            return None
        if snapshot.ran:
            if self._after is None or self._after[0] != snapshot.sequence:
                return None
            found = self._after[1]
        else:
            found = self._in_place.undefined_before(snapshot, snapshot.tensors())
        return {k: None if v is None else tuple((int(s), int(e)) for s, e in v) for k, v in found.items()}
