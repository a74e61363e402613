"""Capture of every dispatch's tensors during a debug-engine run (our VM and emulated HAL).

``DispatchRecorder`` subscribes to the device's dispatch snapshots (``engine.dispatch.snapshot``: the
bindings' bytes before the dispatch are copied once, whoever else watches); after each dispatch it writes
the dispatch's tensors to a ``BundleWriter``:

* the tensors are ``engine.dispatch.typed_tensors.dispatch_tensors``: typed by the executables' sources
  when they are known (each subspan cut from its binding at its offset, inputs and outputs by the source's
  access), else exactly each binding's bytes, an input if the dispatch left it unchanged, an output if it
  changed it;
* when the module has trace points (``--iree-flow-trace-dispatch-tensors``), the ``hal.buffer_view.trace``
  calls around a dispatch give its tensors with their types; those are what the bundle keeps, as IREE's
  runtime sees them, so a debug capture and a reference capture agree bit for bit.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.dispatch.bundle import BUNDLE_PROVENANCE, BundleWriter, DispatchEntry, executable_of
from engine.dispatch.snapshot import DispatchSnapshot, DispatchSnapshots, SnapshotSubscriber, true_runs
from engine.dispatch.statistics import tensor_stats
from engine.dispatch.tensor_types import BindingInterface, TensorType, view_bytes
from engine.dispatch.typed_tensors import NO_SOURCES, ExecutableSources, Provenance, Role
from engine.runtime.hal.buffers import allocation_span
from engine.runtime.hal.device import DispatchRecord


@dataclass(frozen=True)
class TracePoint:
    key: str  # IREE's trace key: "<executable>::<export> inputs|outputs"
    export: str
    kind: str  # "inputs" | "outputs"
    tensors: tuple[np.ndarray, ...]
    types: tuple[TensorType, ...]


def parse_trace_key(key: str) -> tuple[str, str, str]:
    """``exe::export inputs`` -> (exe, export, "inputs"); ``exe::export::2 outputs`` keeps the export."""
    head, _, kind = key.rpartition(" ")
    parts = head.split("::")
    executable = parts[0]
    export = parts[1] if len(parts) > 1 else parts[0]
    return executable, export, kind


def entry_for(record: DispatchRecord, first_sequence: int = 0) -> DispatchEntry:
    """A bundle entry for the dispatch ``record`` describes, before its bindings and tensors are added. Its
    ordinal counts from ``first_sequence``: the call's first dispatch, as ``break dispatch N`` counts."""
    return DispatchEntry(
        ordinal=record.sequence - first_sequence,
        name=record.export_name,
        executable=executable_of(record.export_name),
        workgroups=list(record.workgroup_count),
        constants=[int(c) for c in record.constants],
    )


def health_of(arrays: list[np.ndarray]) -> str:
    """``ok`` or the NaN/Inf counts over ``arrays`` (float tensors only)."""
    nan = inf = 0
    for a in arrays:
        if a.dtype.kind == "c":  # an element is NaN (or Inf) when either part is
            nan += int(np.count_nonzero(np.isnan(a)))
            inf += int(np.count_nonzero(np.isinf(a) & ~np.isnan(a)))
        elif a.dtype.kind == "f" or a.dtype.name in ("bfloat16",):
            s = tensor_stats(a)
            nan += s.nan
            inf += s.posinf + s.neginf
    if not nan and not inf:
        return "ok"
    return ", ".join(p for p in (f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else "") if p)


class DispatchRecorder(SnapshotSubscriber):
    """Writes each dispatch's tensors to ``writer`` as the run goes; also a ``trace_sink`` for the HAL
    module. ``sources``: the module's executable sources (``typed_tensors.find_sources``; parsed
    interfaces are taken too), which type the tensors; without them each binding is captured as exactly its
    bytes. Subscribe it to the device's ``DispatchSnapshots`` (``attach``: the bindings are copied once for
    every subscriber, and the observer tells write from readwrite)."""

    def __init__(
        self,
        writer: BundleWriter,
        sources: ExecutableSources | dict[str, dict[int, BindingInterface]] | None = NO_SOURCES,
        overrides: dict[tuple[int, str, int], TensorType] | None = None,
        spirv: object = None,  # (SPIR-V element types no longer type tensors: accepted, unused)
    ):
        self.writer = writer
        if not isinstance(sources, ExecutableSources):
            sources = ExecutableSources(sources, "given") if sources else NO_SOURCES
        self.sources = sources
        self.overrides = overrides or {}  # (ordinal, "input"|"output", position) -> type
        self._overrides_met: set[tuple[int, str, int]] = set()
        self.override_problems: list[str] = []  # overrides that did not fit their tensor's bytes
        self._in_place = InPlaceTensors()
        self._pending_inputs: TracePoint | None = None
        self._awaiting_outputs: DispatchEntry | None = None
        self._buffer_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._next_buffer_id = 0
        self.traced = 0
        # Dispatches are written from the call on and numbered from its first (``start_call``), as the debugger
        # numbers them; what the module's initializer ran before (``in_initializer``: None here) is only counted.
        self.first_sequence: int | None = 0
        self.initializer_dispatches = 0

    def in_initializer(self) -> None:
        """The module's initializer is about to run: its dispatches are followed (what they define) but not
        written."""
        self.first_sequence = None

    def start_call(self, first_sequence: int) -> None:
        """The call starts: its dispatches are written, numbered from the device's dispatch ``first_sequence``."""
        self.first_sequence = first_sequence

    @property
    def recording(self) -> bool:
        """Whether dispatches are written (the call's), not only followed (the initializer's)."""
        return self.first_sequence is not None

    def attach(self, device) -> DispatchSnapshots:
        """Subscribe to ``device``'s snapshot observer, typing with this recorder's sources."""
        snapshots = DispatchSnapshots.for_device(device)
        snapshots.sources = self.sources
        snapshots.subscribe(self)
        self._in_place.follow_transfers(device)
        return snapshots

    # -- the HAL module's trace sink

    def trace(self, key: str, buffer_views) -> None:
        from engine.runtime.hal.convert import tensor_from_buffer_view

        _, export, kind = parse_trace_key(key)
        tensors, types = [], []
        for bv in buffer_views:
            t = tensor_from_buffer_view(bv)
            tt = TensorType(tuple(t.shape), t.element_type.name, Provenance.RUNTIME)
            array, tt = view_bytes(t.array, tt)
            tensors.append(np.array(array, copy=True))
            types.append(tt)
        if not self.recording:
            return  # an initializer's trace point
        point = TracePoint(key, export, kind, tuple(tensors), tuple(types))
        self.traced += 1
        if kind == "inputs":
            self._pending_inputs = point
        elif (
            kind == "outputs" and self._awaiting_outputs is not None and self._awaiting_outputs.name == export
        ):
            entry = self._awaiting_outputs
            self._awaiting_outputs = None
            entry.outputs, entry.output_types = self._write(
                entry.ordinal, "output", point.tensors, point.types
            )
            entry.health = health_of(list(point.tensors))
            self.writer.add_dispatch(entry)

    def flush(self) -> None:
        """Write a traced dispatch still waiting for its outputs trace point (call at the end of a run)."""
        entry, self._awaiting_outputs = self._awaiting_outputs, None
        if entry is not None:
            self.writer.add_dispatch(entry)

    # -- the subscriber

    def wants_before(self, record: DispatchRecord) -> bool:
        return True  # inputs are the bytes before the dispatch

    def after(self, snapshot: DispatchSnapshot) -> None:
        record = snapshot.record
        if not self.recording:
            # An initializer's dispatch: not written, but what it defines is followed (a call's in-place
            # tensor may be a global the initializer filled).
            self.initializer_dispatches += 1
            tensors = snapshot.tensors()
            self._in_place.undefined(
                snapshot, [t for t in tensors if t.role == Role.INPUT], [t for t in tensors if t.role == Role.OUTPUT]
            )
            return
        # Outputs outlive the dispatch (the next one may change the memory): they are views of the copies
        # after it, made once for every subscriber.
        snapshot.keep_written()
        tensors = snapshot.tensors()
        for t in tensors:
            if t.role == Role.OUTPUT and t.binding not in snapshot.after_copied:
                snapshot.after_copy(t.binding)  # the sources say written, though the bytes did not change
                tensors = snapshot.tensors()
        entry = entry_for(record, self.first_sequence or 0)
        # Each binding's access: the source's, else what the dispatch was seen to change.
        access = list(snapshot.observed_access())
        for t in tensors:
            if t.provenance == Provenance.SOURCES:
                access[t.binding] = t.access
        for b, acc in zip(record.bindings, access):
            # Identity and offset within the allocation, so overlapping ranges of subspans can be matched.
            allocation, start, _ = allocation_span(b.buffer, b.offset, b.length)
            entry.bindings.append(
                {
                    "index": b.index,
                    "buffer": self._buffer_id(allocation),
                    "offset": start,
                    "length": int(b.length),
                    "access": acc,
                }
            )
        pending, self._pending_inputs = self._pending_inputs, None
        if pending is not None and pending.export == record.export_name:
            entry.tensors_from = BUNDLE_PROVENANCE[Provenance.RUNTIME]
            entry.inputs, entry.input_types = self._write(
                entry.ordinal, "input", pending.tensors, pending.types
            )
            self.flush()
            self._awaiting_outputs = entry  # the outputs trace point follows the dispatch; written then
            return
        self.flush()
        ins = [t for t in tensors if t.role == Role.INPUT]
        outs = [t for t in tensors if t.role == Role.OUTPUT]
        entry.tensors_from = BUNDLE_PROVENANCE[tensors[0].provenance if tensors else Provenance.UNTYPED]
        entry.inputs, entry.input_types = self._write(
            entry.ordinal, "input", [t.array for t in ins], [t.type for t in ins]
        )
        entry.outputs, entry.output_types = self._write(
            entry.ordinal, "output", [t.array for t in outs], [t.type for t in outs]
        )
        entry.undefined = self._in_place.undefined(snapshot, ins, outs)
        entry.labels = {f"{t.role}{t.position}": t.binding_label for t in (*ins, *outs)}
        if tensors and tensors[0].provenance == Provenance.SOURCES:
            entry.health = health_of([t.array for t in outs])
        else:
            entry.health = "-"  # untyped bytes: no values to judge
        self.writer.add_dispatch(entry)

    def override_notes(self) -> list[str]:
        """What became of ``overrides``: those that did not fit, and those no captured tensor had."""
        unmet = [
            f"--type {o}:{k}:{p}={t}: the capture has no dispatch {o} with an {k} {p}; nothing was typed"
            for (o, k, p), t in sorted(self.overrides.items())
            if (o, k, p) not in self._overrides_met
        ]
        return self.override_problems + unmet

    # -- helpers

    def _buffer_id(self, allocation) -> int:
        try:
            found = self._buffer_ids.get(allocation)
        except TypeError:  # not weak-referenceable: identity only for this dispatch
            return -1
        if found is None:
            found = self._next_buffer_id
            self._next_buffer_id += 1
            self._buffer_ids[allocation] = found
        return found

    def _write(self, ordinal: int, kind: str, arrays, types) -> tuple[list[str], list[str]]:
        names, texts = [], []
        for position, (array, tt) in enumerate(zip(arrays, types)):
            override = self.overrides.get((ordinal, kind, position))
            if override is not None:
                self._overrides_met.add((ordinal, kind, position))
                nbytes = np.asarray(array).nbytes
                array, tt = view_bytes(array, override)
                if tt != override:
                    self.override_problems.append(
                        f"--type {ordinal}:{kind}:{position}={override}: the type needs {override.byte_length} "
                        f"bytes, the tensor has {nbytes}; kept as its bytes ({tt})"
                    )
            name, text = self.writer.write_tensor(f"d{ordinal:05d}_{kind}{position}", array, tt)
            names.append(name)
            texts.append(text)
        return names, texts


WORD = 4  # bytes: what a dispatch changed is counted in words (a float written over one sharing a byte)


class InPlaceTensors:
    """Which bytes of each tensor read and written in place (IREE's concatenation into slices of one buffer)
    the program has defined, so a capture marks the rest undefined (``DispatchEntry.undefined``).

    A tensor is its exact byte range of an allocation. A dispatch's write-only output defines it whole; a
    dispatch that reads and writes it in place defines the bytes it changed (in ``WORD``s: an element
    written with the value it already held cannot be told from one left alone, and stays undefined). An
    in-place tensor no earlier dispatch defined starts undefined: what its memory holds are the leftovers
    of the tensors that used it before (IREE packs transient tensors into reused slabs; IREE's traced build
    gives each tensor fresh zeroed memory instead), never the program's data.

    What is defined of a span is ``WHOLE`` or a mask of its bytes (numpy: a convolution's changes over a
    padded tensor make tens of thousands of runs, which as Python ranges cost 10x the run itself)."""

    def __init__(self, unrecorded_known: bool = True):
        self._defined: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # allocation -> {(start, length): Defined}
        self._device = None  # whose transfers are followed (``follow_transfers``)
        # False: followed from the middle of a run (earlier writes not seen), so a span no write was recorded
        # for is not known (None in the answers) rather than undefined.
        self.unrecorded_known = unrecorded_known

    def undefined(
        self, snapshot: DispatchSnapshot, ins, outs,
        changed_bytes: Callable[[int, int, int], np.ndarray | None] | None = None,
    ) -> dict[str, list[list[int]] | None]:  # fmt: skip
        """``"input1"``/``"output0"`` -> the undefined byte ranges of the dispatch's in-place tensors (inputs
        as they were before it, outputs after it; None: not known, see ``unrecorded_known``); records what it
        defined. A write-only output needs no
        bytes; what an in-place dispatch changed needs the bytes before it: ``changed_bytes(binding, offset,
        length)`` (a bool per byte of that tensor: changed by the dispatch; None: not known), by default from
        the snapshot (``snapshot.has_before``: every binding copied)."""
        bindings = snapshot.record.bindings
        for t in outs:
            if t.access == "write" and t.provenance == Provenance.SOURCES:
                self._set_span(bindings[t.binding], t.offset, t.length, WHOLE)
        if changed_bytes is None:
            if not snapshot.has_before:
                return {}
            changed_bytes = lambda b, offset, n: snapshot.before[b][offset : offset + n] != snapshot.after(b)[offset : offset + n]  # noqa: E731
        found: dict[str, list[list[int]] | None] = {}
        done: dict[tuple[int, int], Defined] = {}
        for role, tensors in (("input", ins), ("output", outs)):
            for k, t in enumerate(tensors):
                if t.access != "readwrite" or t.provenance != Provenance.SOURCES:
                    continue
                b = bindings[t.binding]
                defined = self._get(b, t)
                if role == "output":
                    key = (t.binding, t.offset)
                    if key not in done:
                        changed = changed_bytes(t.binding, t.offset, t.length)
                        if changed is not None:
                            defined = self._union(defined, _in_words(np.asarray(changed, bool), t.offset % WORD))
                        done[key] = defined
                        self._set_span(b, t.offset, t.length, defined)
                    defined = done[key]
                gaps = self._gaps(defined, t.length)
                if gaps != []:
                    found[f"{role}{k}"] = gaps
        return found

    def undefined_before(self, snapshot: DispatchSnapshot, tensors) -> dict[str, list[list[int]] | None]:
        """The same keys and rule at a stop before the dispatch runs: each in-place tensor's bytes (input or
        output alike, both what the memory holds now) that no earlier dispatch defined. Records nothing."""
        found: dict[str, list[list[int]] | None] = {}
        for t in tensors:
            if t.access == "readwrite" and t.provenance == Provenance.SOURCES:
                gaps = self._gaps(self._get(snapshot.record.bindings[t.binding], t), t.length)
                if gaps != []:
                    found[f"{t.role}{t.position}"] = gaps
        return found

    def _gaps(self, defined: Defined, length: int) -> list[list[int]] | None:
        """``_gaps``, or None where the rest is not known: a span nothing was recorded for, when that is not
        known (``unrecorded_known``), or one only partly written since (``_Unseen``)."""
        if isinstance(defined, _Unseen) or (defined is None and not self.unrecorded_known):
            return None
        return _gaps(defined, length)

    def _union(self, defined: Defined, mask: np.ndarray) -> Defined:
        """``defined`` with the bytes of ``mask`` written too; over a span whose earlier writes were not seen,
        the rest stays not known (``_Unseen``) until every byte is written."""
        if defined is WHOLE:
            return WHOLE
        unseen = isinstance(defined, _Unseen) or (defined is None and not self.unrecorded_known)
        if isinstance(defined, _Unseen):
            defined = defined.mask
        merged = mask if defined is None else (defined | mask)
        if merged.all():
            return WHOLE
        return _Unseen(merged) if unseen else merged

    def define_whole(self, binding, offset: int, length: int) -> None:
        """A write-only tensor at ``offset`` of ``binding`` (``length`` bytes) is defined whole."""
        self._set_span(binding, offset, length, WHOLE)

    def follow_transfers(self, device) -> None:
        """Count the device's fills, updates and copies as writes (``Device.transfer_listeners``): IREE
        zero-fills a padded tensor with ``fill_buffer`` and then copies the interior in place, so without
        them the padding read as never written. A copy defines its target whole: its source is program data
        (an import, a constant, a tensor a dispatch wrote) in the programs IREE 3.13 builds."""
        self.stop_following()
        self._device = device
        device.transfer_listeners.append(self.transferred)

    def stop_following(self) -> None:
        device, self._device = self._device, None
        if device is not None and self.transferred in device.transfer_listeners:
            device.transfer_listeners.remove(self.transferred)

    def transferred(self, transfer) -> None:
        """``transfer`` (an ``engine.runtime.hal.device.Transfer``) wrote its target: every tensor span known
        in that memory gets the written bytes, and the written range is a defined span of its own."""
        target = transfer.target
        if target.buffer is None or target.length <= 0:
            return
        allocation, start, _ = allocation_span(target.buffer, int(target.offset), int(target.length))
        try:
            spans = self._defined.setdefault(allocation, {})
        except TypeError:  # not weak-referenceable
            return
        end = start + int(target.length)
        for (s, n), defined in list(spans.items()):
            lo, hi = max(s, start), min(s + n, end)
            if lo < hi and defined is not WHOLE:
                mask = np.zeros(n, bool)
                mask[lo - s : hi - s] = True
                spans[(s, n)] = self._union(defined, mask)
        spans[(start, int(target.length))] = WHOLE

    @staticmethod
    def _key(binding, offset: int, length: int) -> tuple[object, tuple[int, int]]:
        allocation, start, _ = allocation_span(binding.buffer, int(binding.offset) + int(offset), length)
        return allocation, (start, int(length))

    def _get(self, binding, t) -> Defined:
        allocation, key = self._key(binding, t.offset, t.length)
        try:
            return self._defined.get(allocation, {}).get(key)
        except TypeError:  # not weak-referenceable
            return None

    def _set_span(self, binding, offset: int, length: int, defined: Defined) -> None:
        allocation, key = self._key(binding, offset, length)
        try:
            self._defined.setdefault(allocation, {})[key] = defined
        except TypeError:
            pass


class _Whole:
    """Every byte of a span is defined (the common case: no mask is kept)."""

    def __repr__(self) -> str:
        return "WHOLE"


WHOLE = _Whole()


class _Unseen:
    """The bytes of a span written since the watch began mid-run (``mask``); the others are not known."""

    __slots__ = ("mask",)

    def __init__(self, mask: np.ndarray):
        self.mask = mask


# What of a span is defined: all, a mask of its bytes, a mask over earlier writes not seen, or nothing.
Defined = _Whole | np.ndarray | _Unseen | None


def _in_words(changed: np.ndarray, shift: int) -> np.ndarray:
    """``changed`` (a bool per byte of a tensor whose first byte is ``shift`` bytes into a ``WORD`` of its
    binding) widened to whole words of the binding."""
    n = changed.size
    padded = np.zeros(shift + n + (-(shift + n)) % WORD, bool)
    padded[shift : shift + n] = changed
    return np.repeat(padded.reshape(-1, WORD).any(axis=1), WORD)[shift : shift + n]


def _gaps(defined: Defined, length: int) -> list[list[int]]:
    """The byte ranges ``[start, end)`` of a span of ``length`` bytes not defined."""
    if defined is WHOLE or length <= 0:
        return []
    if defined is None:
        return [[0, length]]
    return [[s, e] for s, e in true_runs(~defined)]


def module_has_trace_points(module_path: str | Path) -> bool:
    """True when the module imports ``hal.buffer_view.trace`` (compiled with trace flags).

    The import's name is stored as a string in the module, so a byte search answers without parsing it
    (a multi-GiB module is mapped, not read).
    """
    import mmap

    try:
        f = open(module_path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as e:
        from engine.errors import LensError

        raise LensError(f"cannot open {module_path}: {e.strerror}") from None
    with f:
        try:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return data.find(b"hal.buffer_view.trace") >= 0
        except ValueError:  # an empty file cannot be mapped
            return False
