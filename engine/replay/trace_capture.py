"""Dispatch tensors of a replay recorded from a module with trace points.

A module compiled with ``--iree-flow-trace-dispatch-tensors`` and run by ``iree-run-module`` maps each
traced tensor for reading (its ``hal.buffer_view.trace`` sink prints it) right before and after each
dispatch: the replay holds those host reads, ``buffer.map_range`` records with exactly the traced
tensor's byte range. ``TracedReplayRecorder`` turns them back into IREE's traced tensors:

* the reads between two dispatches are the earlier dispatch's outputs, then the later one's inputs.
  The split is the longest prefix that lies in bindings the earlier dispatch wrote and has no tensor
  twice (a dispatch's results are distinct tensors), leaving a suffix the later dispatch binds;
* each traced tensor is mapped the same number of times in a row (twice by iree-run-module 3.13's
  printer); ``map_repeat`` finds that number over the whole replay (the gcd of run lengths);
* the bytes are copied when the host mapped them (buffers are reused later in the run);
* IREE's scheduler may trace a dispatch's inputs after it ran (several dispatches in one submission):
  such reads, before the next dispatch's own inputs, go to the waiting dispatch whose bindings hold them
  (entries are written in execution order once their inputs are known, or after ``LATE_WINDOW``);
* a dispatch with no reads around it keeps its binding bytes, as the plain capture does.

Measured on efficientvit_m0 (336 dispatches, out-of-order traces): every output equals IREE's traced
tensors, inputs of 6 dispatches do not; squeezenet1_1, small_cnn, attention_block: all equal.

Shapes are not in a replay (the VM made the buffer views): tensors are typed by IREE's dispatch name
where its sizes fit (``type_from_name``), raw bytes otherwise; the bytes are the traced bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from engine.dispatch.bundle import BundleWriter, DispatchEntry
from engine.dispatch.debug_capture import entry_for, health_of
from engine.dispatch.tensor_types import type_from_name, view_bytes
from engine.replay import format as f
from engine.replay.payloads import BufferRange
from engine.replay.reader import ReplayFile
from engine.runtime.hal.buffers import allocation_span
from engine.runtime.hal.device import DispatchObserver, DispatchRecord

P = f.PayloadType
MAP_READ = 0x1


def host_reads(replay: ReplayFile) -> list[tuple[int, int, int, int]]:
    """(sequence ordinal, buffer id, offset, length) of every successful read-only mapping, in order."""
    out = []
    for r in replay.records():
        if (
            r.operation_code == f.OP["buffer.map_range"]
            and r.status_code == 0
            and r.payload_type == P.BUFFER_RANGE
        ):
            mapped = replay.decode_as(r, BufferRange)
            if mapped.memory_access == MAP_READ:
                out.append((r.sequence_ordinal, r.object_id, mapped.byte_offset, mapped.byte_length))
    return out


def map_repeat(reads: list[tuple[int, int, int, int]]) -> int:
    """How many times in a row the host maps one traced tensor (gcd of the runs of identical reads)."""
    runs, g = [], 0
    prev, n = None, 0
    for _, b, o, length in reads:
        key = (b, o, length)
        if key == prev:
            n += 1
        else:
            if n:
                runs.append(n)
            prev, n = key, 1
    if n:
        runs.append(n)
    for n in runs:
        g = math.gcd(g, n)
    return max(g, 1)


def is_traced(replay: ReplayFile, reads: list[tuple[int, int, int, int]]) -> bool:
    """True when the host read buffers before the last dispatch ran (trace points); a plain run reads
    its results only at the end."""
    last = -1
    for r in replay.records():
        if r.status_code == 0 and r.operation_code in (
            f.OP["device.queue_execute"],
            f.OP["device.queue_dispatch"],
        ):
            last = r.sequence_ordinal
    return any(ordinal < last for ordinal, *_ in reads)


@dataclass
class _Read:
    key: tuple[int, int, int]  # (allocation identity, start, end)
    data: np.ndarray


@dataclass
class _Dispatch:
    record: DispatchRecord
    bindings: list[tuple[int, int, int]]
    written: list[tuple[int, int, int]] = field(default_factory=list)
    access: list[str] = field(default_factory=list)
    before: list[np.ndarray] = field(default_factory=list)
    after: list[np.ndarray] = field(default_factory=list)
    inputs: list[_Read] | None = None


MAX_CANDIDATES = 256  # offsets verified per search (a tensor of zeros matches everywhere: the first do)


def _contains(hay: np.ndarray, needle: np.ndarray) -> bool:
    """True when ``needle``'s bytes appear in ``hay`` at a 4-byte aligned offset (a traced tensor is a
    copy of a binding or of a tensor inside one: the module's buffers are not the trace's buffers)."""
    hay = hay.reshape(-1).view(np.uint8)
    needle = needle.reshape(-1).view(np.uint8)
    n = needle.size
    if n > hay.size:
        return False
    if n == hay.size:
        return bool(np.array_equal(hay, needle))
    if n < 4:
        return any(np.array_equal(hay[i : i + n], needle) for i in range(0, hay.size - n + 1, 4))
    words = hay[: hay.size - hay.size % 4].view("<u4")
    first = needle[:4].view("<u4")[0]
    for start in np.flatnonzero(words[: (hay.size - n) // 4 + 1] == first)[:MAX_CANDIDATES]:
        if np.array_equal(hay[4 * start : 4 * start + n], needle):
            return True
    return False


class TracedReplayRecorder(DispatchObserver):
    """Writes each dispatch with the traced tensors the host read around it (see the module doc)."""

    def __init__(self, writer: BundleWriter, repeat: int):
        self.writer = writer
        self.repeat = repeat
        self._reads: list[_Read] = []
        self._previous: _Dispatch | None = None
        self._current: _Dispatch | None = None
        self.program_outputs: list[np.ndarray] = []
        self._buffer_ids: dict[int, int] = {}
        self._pending: list[tuple[_Dispatch, list[_Read]]] = []  # decided, waiting to be written in order

    # -- host reads (told by the executor before it runs each read mapping)

    def host_read(self, allocation, start: int, length: int, data: np.ndarray) -> None:
        self._reads.append(_Read((id(allocation), start, start + length), np.array(data, copy=True)))

    def _tensors(self) -> list[_Read]:
        """The reads so far as tensors: each run of ``repeat`` identical mappings is one."""
        out: list[_Read] = []
        run = 0
        for i, read in enumerate(self._reads):
            same = i > 0 and read.key == self._reads[i - 1].key
            run = run + 1 if same else 1
            if run % self.repeat == 1 or self.repeat == 1:
                out.append(read)
        self._reads = []
        return out

    def _split(self, previous: _Dispatch | None, tensors: list[_Read], bound: list[np.ndarray] | None):
        """(outputs of ``previous``, inputs of the next dispatch) among ``tensors``; ``bound`` are the next
        dispatch's binding bytes (None after the last dispatch)."""
        if previous is None:
            return [], tensors
        written = [a for a, acc in zip(previous.after, previous.access) if acc != "read"]
        best, longest = None, 0
        for n in range(len(tensors) + 1):
            head, tail = tensors[:n], tensors[n:]
            if n and not any(_contains(w, head[-1].data) for w in written):
                break
            if n and any(np.array_equal(head[-1].data, h.data) for h in head[:-1]):
                break  # a dispatch's results are distinct tensors: a repeat is the next one's input
            longest = n
            if bound is None or all(any(_contains(b, t.data) for b in bound) for t in tail):
                best = n
        # An input the next dispatch's bindings do not hold as such (a constant it reads in another layout)
        # leaves no split whose tail is all bound: the longest run of the previous dispatch's results then.
        n = longest if best is None else best
        return tensors[:n], tensors[n:]

    # -- the observer

    def before_dispatch(self, record: DispatchRecord) -> None:
        bindings = [self._range(b) for b in record.bindings]
        before = [np.array(b.data, copy=True) for b in record.bindings]
        outputs, inputs = self._split(self._previous, self._tensors(), before)
        if self._previous is not None:
            self._queue(self._previous, outputs)
        inputs = self._late_inputs(inputs, before)
        self._current = _Dispatch(record, bindings, inputs=inputs)
        self._current.before = before

    # IREE's scheduler may trace a dispatch's inputs after it ran (several dispatches in one submission):
    # those reads come before the next dispatch's own inputs and are not in its bindings. Dispatches still
    # without inputs wait (in order, at most ``LATE_WINDOW`` dispatches) for reads their bindings hold.
    LATE_WINDOW = 8

    def _queue(self, d: _Dispatch, outputs: list[_Read]) -> None:
        self._pending.append((d, outputs))
        self._flush(force=False)

    def _late_inputs(self, tensors: list[_Read], bound: list[np.ndarray]) -> list[_Read]:
        """Give the leading reads that are late inputs of waiting dispatches to them: a waiting dispatch's
        group starts at a tensor its bindings hold and this dispatch's do not, and runs while its bindings
        hold them; the rest are this dispatch's inputs."""
        at = 0
        for d, _ in self._pending:
            if d.inputs or at >= len(tensors):
                continue
            first = tensors[at].data
            if not any(_contains(b, first) for b in d.before) or any(_contains(b, first) for b in bound):
                continue
            end = at + 1
            while end < len(tensors) and any(_contains(b, tensors[end].data) for b in d.before):
                end += 1
            d.inputs, at = tensors[at:end], end
        self._flush(force=False)
        return tensors[at:]

    def _flush(self, force: bool) -> None:
        while self._pending:
            d, outputs = self._pending[0]
            if not force and not d.inputs and len(self._pending) <= self.LATE_WINDOW:
                return
            self._pending.pop(0)
            self._emit(d, outputs)

    def after_dispatch(self, record: DispatchRecord) -> None:
        d = self._current
        if d is None:
            return
        d.after = [np.array(b.data, copy=True) for b in record.bindings]
        changed = [not np.array_equal(b, a) for b, a in zip(d.before, d.after)]
        if changed and not any(changed):
            changed[-1] = True  # wrote what was there already: IREE puts results last
        d.access = ["write" if c else "read" for c in changed]
        d.written = [r for r, c in zip(d.bindings, changed) if c]
        self._previous, self._current = d, None

    def dispatch_failed(self, record: DispatchRecord, error: Exception) -> None:
        self._current = None

    def finish(self) -> None:
        """The last dispatch's outputs; what the host read after them are the program's results."""
        tensors = self._tensors()
        outputs, rest = self._split(self._previous, tensors, None)
        if self._previous is not None:
            self._queue(self._previous, outputs)
        self._flush(force=True)
        self._previous = None
        self.program_outputs = [t.data for t in rest]

    # -- writing

    @staticmethod
    def _range(binding) -> tuple[int, int, int]:
        allocation, start, end = allocation_span(binding.buffer, binding.offset, binding.length)
        return id(allocation), start, end

    def _emit(self, d: _Dispatch, traced_outputs: list[_Read]) -> None:
        record = d.record
        entry = entry_for(record)
        for b, acc in zip(record.bindings, d.access):
            key = self._range(b)
            buffer = self._buffer_ids.setdefault(key[0], len(self._buffer_ids))
            entry.bindings.append(
                {"index": b.index, "buffer": buffer, "offset": key[1], "length": int(b.length), "access": acc}
            )
        # Traced tensors where the host read them; a dispatch without (several in one submission) keeps its
        # bindings' bytes, as a plain capture does.
        if traced_outputs:
            entry.tensors_from = "trace"
            outs = [t.data for t in traced_outputs]
        else:
            outs = [d.after[i] for i, a in enumerate(d.access) if a != "read"]
        if d.inputs:
            ins = [t.data for t in d.inputs]
        else:
            ins = [d.before[i] for i, a in enumerate(d.access) if a == "read"]
        entry.inputs, entry.input_types = self._write(entry, "input", ins)
        entry.outputs, entry.output_types = self._write(entry, "output", outs)
        entry.health = health_of([view_bytes(a, type_from_name(entry.name, a.nbytes))[0] for a in outs])
        self.writer.add_dispatch(entry)

    def _write(
        self, entry: DispatchEntry, kind: str, arrays: list[np.ndarray]
    ) -> tuple[list[str], list[str]]:
        names, texts = [], []
        for position, raw in enumerate(arrays):
            array, tt = view_bytes(raw, type_from_name(entry.name, raw.nbytes))
            name, text = self.writer.write_tensor(f"d{entry.ordinal:05d}_{kind}{position}", array, tt)
            names.append(name)
            texts.append(text)
        return names, texts
