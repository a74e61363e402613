"""Capture of every dispatch's tensors during a debug-engine run (our VM and emulated HAL).

``DispatchRecorder`` is a HAL ``DispatchObserver``. Before a dispatch it copies its bindings' bytes; after
it, it decides which bindings the dispatch wrote and writes the tensors to a ``BundleWriter``:

* bindings' access comes from the executable's interface when sources are given (``readonly`` vs
  ``writeonly``/``readwrite``); otherwise a binding is written if its bytes changed (and, if none did,
  the last binding, where IREE puts a dispatch's results);
* inputs are the bindings read, outputs those written, each exactly the bytes of its binding range,
  typed by the interface (when one tensor fills the binding) or IREE's dispatch name, raw bytes else;
* when the module has trace points (``--iree-flow-trace-dispatch-tensors``), the ``hal.buffer_view.trace``
  calls around a dispatch give its tensors with their types; those are what the bundle keeps, as IREE's
  runtime sees them, so a debug capture and a reference capture agree bit for bit.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.dispatch.bundle import BundleWriter, DispatchEntry, executable_of
from engine.dispatch.statistics import tensor_stats
from engine.dispatch.tensor_types import (
    BindingInterface,
    TensorType,
    resolve_offset,
    type_from_name,
    view_bytes,
)
from engine.runtime.hal.device import DispatchObserver, DispatchRecord


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


def health_of(arrays: list[np.ndarray]) -> str:
    """``ok`` or the NaN/Inf counts over ``arrays`` (float tensors only)."""
    nan = inf = 0
    for a in arrays:
        if a.dtype.kind == "f" or a.dtype.name in ("bfloat16",):
            s = tensor_stats(a)
            nan += s.nan
            inf += s.posinf + s.neginf
    if not nan and not inf:
        return "ok"
    return ", ".join(p for p in (f"{nan} NaN" if nan else "", f"{inf} Inf" if inf else "") if p)


class DispatchRecorder(DispatchObserver):
    """Writes each dispatch's tensors to ``writer`` as the run goes; also a ``trace_sink`` for the HAL
    module. ``interfaces`` maps export names to their bindings' interfaces (from executable sources)."""

    def __init__(
        self,
        writer: BundleWriter,
        interfaces: dict[str, dict[int, BindingInterface]] | None = None,
        overrides: dict[tuple[int, str, int], TensorType] | None = None,
        spirv: dict[str, dict[int, str]] | None = None,
    ):
        self.writer = writer
        self.interfaces = interfaces or {}
        self.overrides = overrides or {}  # (ordinal, "input"|"output", position) -> type
        self.spirv = spirv or {}  # export -> binding -> element type declared in its SPIR-V
        self.before_bytes: list[np.ndarray] = []
        self._pending_inputs: TracePoint | None = None
        self._awaiting_outputs: DispatchEntry | None = None
        self._buffer_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._next_buffer_id = 0
        # allocation -> byte ranges dispatches wrote (weak: forgotten with the allocation).
        self._written: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.traced = 0

    # -- the HAL module's trace sink

    def trace(self, key: str, buffer_views) -> None:
        from engine.runtime.hal.convert import tensor_from_buffer_view

        _, export, kind = parse_trace_key(key)
        tensors, types = [], []
        for bv in buffer_views:
            t = tensor_from_buffer_view(bv)
            tt = TensorType(tuple(t.shape), t.element_type.name, "trace")
            array, tt = view_bytes(t.array, tt)
            tensors.append(np.array(array, copy=True))
            types.append(tt)
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

    # -- the observer

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.before_bytes = [np.array(b.data, copy=True) for b in record.bindings]

    def after_dispatch(self, record: DispatchRecord) -> None:
        before, self.before_bytes = self.before_bytes, []
        after = [b.data for b in record.bindings]
        access = self._access(record, before, after)
        entry = DispatchEntry(
            ordinal=record.sequence,
            name=record.export_name,
            executable=executable_of(record.export_name),
            workgroups=list(record.workgroup_count),
            constants=[int(c) for c in record.constants],
        )
        for b, acc in zip(record.bindings, access):
            # Identity and offset within the allocation, so overlapping ranges of subspans can be matched.
            allocation = getattr(b.buffer, "allocation", b.buffer)
            entry.bindings.append(
                {
                    "index": b.index,
                    "buffer": self._buffer_id(allocation),
                    "offset": int(getattr(b.buffer, "byte_offset", 0)) + int(b.offset),
                    "length": int(b.length),
                    "access": acc,
                }
            )
        for binding, acc in zip(record.bindings, access):
            if acc != "read":
                self._mark_written(*self._range(binding))
        pending, self._pending_inputs = self._pending_inputs, None
        if pending is not None and pending.export == record.export_name:
            entry.tensors_from = "trace"
            entry.inputs, entry.input_types = self._write(
                entry.ordinal, "input", pending.tensors, pending.types
            )
            self.flush()
            self._awaiting_outputs = entry  # the outputs trace point follows the dispatch; written then
            return
        self.flush()
        tensors = self._interface_tensors(record, before, after)
        if tensors is not None:
            (in_arrays, in_types), (out_arrays, out_types) = tensors
            entry.tensors_from = "interface"
            entry.inputs, entry.input_types = self._write(entry.ordinal, "input", in_arrays, in_types)
            entry.outputs, entry.output_types = self._write(entry.ordinal, "output", out_arrays, out_types)
            entry.health = health_of(out_arrays)
            self.writer.add_dispatch(entry)
            return
        ins = [i for i, a in enumerate(access) if a in ("read", "readwrite")]
        outs = [i for i, a in enumerate(access) if a in ("write", "readwrite")]
        in_arrays, in_types = self._typed(record, [before[i] for i in ins], ins)
        out_arrays, out_types = self._typed(record, [np.array(after[i], copy=True) for i in outs], outs)
        entry.inputs, entry.input_types = self._write(entry.ordinal, "input", in_arrays, in_types)
        entry.outputs, entry.output_types = self._write(entry.ordinal, "output", out_arrays, out_types)
        entry.health = health_of(out_arrays)
        self.writer.add_dispatch(entry)

    def dispatch_failed(self, record: DispatchRecord, error: Exception) -> None:
        self.before_bytes = []

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

    def _access(self, record: DispatchRecord, before: list[np.ndarray], after: list[np.ndarray]) -> list[str]:
        interface = self.interfaces.get(record.export_name)
        if interface:
            return [interface[i].access if i in interface else "read" for i in range(len(record.bindings))]
        changed = [not np.array_equal(b, a) for b, a in zip(before, after)]
        if not any(changed) and changed:
            changed[-1] = True  # wrote what was there already: IREE puts results last
        access = []
        for binding, c in zip(record.bindings, changed):
            if not c:
                access.append("read")
                continue
            # A written binding that holds bytes an earlier dispatch wrote is a fused slab (IREE packs
            # several tensors in one binding): the dispatch may read them too.
            allocation, start, end = self._range(binding)
            access.append("readwrite" if self._overlaps_written(allocation, start, end) else "write")
        return access

    @staticmethod
    def _range(binding) -> tuple[object, int, int]:
        allocation = getattr(binding.buffer, "allocation", binding.buffer)
        start = int(getattr(binding.buffer, "byte_offset", 0)) + int(binding.offset)
        return allocation, start, start + int(binding.length)

    def _overlaps_written(self, key, start: int, end: int) -> bool:
        try:
            return any(s < end and start < e for s, e in self._written.get(key, ()))
        except TypeError:  # not weak-referenceable
            return False

    def _mark_written(self, key, start: int, end: int) -> None:
        merged = []
        try:
            ranges = self._written.get(key, ())
        except TypeError:
            return
        for s, e in ranges:
            if s <= end and start <= e:
                start, end = min(s, start), max(e, end)
            else:
                merged.append((s, e))
        merged.append((start, end))
        self._written[key] = sorted(merged)

    def _interface_tensors(self, record: DispatchRecord, before: list[np.ndarray], after: list[np.ndarray]):
        """Each tensor the executable's source binds, cut from its binding at its offset (several tensors
        share a binding when IREE packs them), in the source's order; None unless every one resolves."""
        interface = self.interfaces.get(record.export_name)
        if not interface:
            return None
        subspans = []
        for index, bi in interface.items():
            if index >= len(before):
                return None
            for k, t in enumerate(bi.tensors):
                offset = resolve_offset(bi.offsets[k], record.constants) if k < len(bi.offsets) else None
                if offset is None or t.byte_length == 0 or offset + t.byte_length > before[index].size:
                    return None
                position = bi.positions[k] if k < len(bi.positions) else index
                subspans.append(
                    (position, index, offset, t, bi.modes[k] if k < len(bi.modes) else "readonly")
                )
        ins: tuple[list, list] = ([], [])
        outs: tuple[list, list] = ([], [])
        for _, index, offset, t, mode in sorted(subspans, key=lambda s: s[0]):
            if mode in ("readonly", "readwrite"):
                array, tt = view_bytes(before[index][offset : offset + t.byte_length], t)
                ins[0].append(array)
                ins[1].append(tt)
            if mode in ("writeonly", "readwrite"):
                array, tt = view_bytes(np.array(after[index][offset : offset + t.byte_length]), t)
                outs[0].append(array)
                outs[1].append(tt)
        return ins, outs

    def _typed(self, record: DispatchRecord, arrays: list[np.ndarray], indices: list[int]):
        interface = self.interfaces.get(record.export_name, {})
        out_arrays, out_types = [], []
        for array, index in zip(arrays, indices):
            tt: TensorType | None = None
            bi = interface.get(index)
            if bi is not None and len(bi.tensors) == 1 and bi.tensors[0].byte_length == array.nbytes:
                tt = bi.tensors[0]
            if tt is None:
                tt = self._spirv_type(record.export_name, index, array.nbytes)
            if tt is None:
                tt = type_from_name(record.export_name, array.nbytes)
            typed, tt = view_bytes(array, tt)
            out_arrays.append(typed)
            out_types.append(tt)
        return out_arrays, out_types

    def _spirv_type(self, export_name: str, index: int, nbytes: int) -> TensorType | None:
        """The SPIR-V element of the binding, shaped by IREE's name when the name agrees on the element.
        An ``i32`` against a name's narrower or float type is IREE packing (i8/f16 in i32): the name wins."""
        element = self.spirv.get(export_name, {}).get(index)
        if element is None:
            return None
        named = type_from_name(export_name, nbytes)
        if named is not None and (named.element == element or element == "i32"):
            return TensorType(named.shape, named.element, "spirv" if named.element == element else "name")
        itemsize = (
            TensorType((1,), element).dtype.itemsize
            if element in ("f16", "f32", "f64", "i8", "i16", "i32", "i64")
            else 0
        )
        if not itemsize or nbytes % itemsize:
            return None
        return TensorType((nbytes // itemsize,), element, "spirv")

    def _write(self, ordinal: int, kind: str, arrays, types) -> tuple[list[str], list[str]]:
        names, texts = [], []
        for position, (array, tt) in enumerate(zip(arrays, types)):
            override = self.overrides.get((ordinal, kind, position))
            if override is not None:
                array, tt = view_bytes(array, override)
            name, text = self.writer.write_tensor(f"d{ordinal:05d}_{kind}{position}", array, tt)
            names.append(name)
            texts.append(text)
        return names, texts


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
