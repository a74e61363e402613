"""NaN and Inf a dispatch wrote, judged once on its snapshot: the one NaN rule of every stop.

``break nan`` stops at the first dispatch that *writes* a non-finite value. What a dispatch wrote is read
from its snapshot (``engine.dispatch.snapshot.DispatchSnapshot``: its bytes before and after), as typed as
it can be:

* with the executable's source, each output tensor at its place in its binding and with its element type:
  a write-only output whole (the dispatch defined every element, even one that held the same NaN before),
  an output updated in place (IREE concatenates into slices of one slab) on the elements it changed;
* without, each binding the dispatch changed, on the elements it changed, read as the element type the
  dispatch's own name says (IREE names an export by its element type: ``…_elementwise_64_f32``); a
  dispatch whose name says no float type (integers, ``slow_memcpy``) is read as f32 only where its name
  says nothing at all.

Earlier rules judged only bindings seen as ``write`` (a slab another dispatch wrote first is ``readwrite``:
the log written in place into a concatenation was passed over, and the matmul after it named instead) and
counted non-finite values before and after over the whole binding.
"""

from __future__ import annotations

import numpy as np

from engine.dispatch.snapshot import DispatchSnapshot
from engine.dispatch.typed_tensors import Provenance, Role
from engine.session.protocol import NonFinite

_FLOAT_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def name_float_dtype(export: str) -> np.dtype | None:
    """The float type a dispatch's name says (f32 when it says no element type); None for a name that says
    an integer type, whose bit patterns are not NaN."""
    from engine.dispatch.tensor_types import name_candidates

    found = name_candidates(export)
    element = found[1] if found else "f32"
    if element == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    dtype = _FLOAT_DTYPES.get(element)
    return None if dtype is None else np.dtype(dtype)


def _judged(values: np.ndarray) -> np.ndarray:
    """``values`` as numpy tells NaN and Inf in: floats and complex as they are (a complex element is not
    finite when either part is not: its imaginary part is not dropped), the others (bf16, f8) widened."""
    return values if values.dtype.kind in "fc" else values.astype(np.float32)


def nonfinite_in(
    values: np.ndarray, binding: int, label: str, base: int = 0, access: str = ""
) -> NonFinite | None:
    """NaN and Inf among ``values`` (a flat float array), or None when all are finite; ``first`` is the
    flat index of the first, plus ``base`` (where ``values`` start in the tensor)."""
    if values.size == 0:
        return None
    as_float = _judged(values)
    bad = ~np.isfinite(as_float)
    count = int(np.count_nonzero(bad))
    if not count:
        return None
    nan = int(np.count_nonzero(np.isnan(as_float)))
    return NonFinite(binding, count, nan, count - nan, base + int(np.argmax(bad)), label, access)


def nonfinite_changed(
    values: np.ndarray, earlier: list[np.ndarray], binding: int, label: str, access: str = ""
) -> NonFinite | None:
    """``nonfinite_in`` over the elements of ``values`` (a flat float array) that differ, bit for bit, from
    the same element of each of ``earlier`` (flat arrays of its size and type): an element every one of
    them already held is not counted as written. No ``earlier``: ``values`` whole."""
    if not earlier:
        return nonfinite_in(values, binding, label, access=access)
    size = values.dtype.itemsize
    changed = np.ones(values.size, dtype=bool)
    for before in earlier:  # bit for bit, whatever the width (complex<f64> is 16 bytes: no such unsigned type)
        changed &= (values.view(np.uint8).reshape(-1, size) != before.view(np.uint8).reshape(-1, size)).any(axis=1)
    as_float = _judged(values)
    bad = ~np.isfinite(as_float) & changed
    count = int(np.count_nonzero(bad))
    if not count:
        return None
    nan = int(np.count_nonzero(np.isnan(as_float) & changed))
    return NonFinite(binding, count, nan, count - nan, int(np.argmax(bad)), label, access)


def _changed_elements(
    snapshot: DispatchSnapshot, binding: int, start: int, length: int, itemsize: int
) -> list[tuple[int, int]]:
    """The element ranges ``[first, end)`` of the tensor at bytes ``[start, start+length)`` of ``binding``
    that the dispatch changed (a changed byte makes its whole element written), each element once: runs of
    changed bytes split inside one element (a NaN over 1.0000001 leaves its second byte as it was) give
    overlapping element spans, merged here, else that element is counted twice."""
    found: list[tuple[int, int]] = []
    for s, e in snapshot.written_ranges(binding):
        s, e = max(s, start), min(e, start + length)
        if s < e:
            first, end = (s - start) // itemsize, -(-(e - start) // itemsize)
            if found and first < found[-1][1]:  # the ranges are sorted: only the last span can overlap
                found[-1] = (found[-1][0], max(end, found[-1][1]))
            else:
                found.append((first, end))
    return found


def _judge_spans(
    values: np.ndarray, spans: list[tuple[int, int]], binding: int, label: str, access: str
) -> NonFinite | None:
    """``nonfinite_in`` over the written element spans of ``values`` (counts summed, first of the first)."""
    parts = [s for a, b in spans if (s := nonfinite_in(values[a:b], binding, label, a, access)) is not None]
    if not parts:
        return None
    return NonFinite(
        binding, sum(p.count for p in parts), sum(p.nan for p in parts), sum(p.inf for p in parts),
        parts[0].first, label, access,
    )


def nonfinite_written(snapshot: DispatchSnapshot) -> tuple[NonFinite, ...]:
    """The NaN/Inf the dispatch of ``snapshot`` wrote, per output tensor (typed) or changed binding; empty
    when it wrote none, or when its bytes before were not kept (nothing is known of what it wrote)."""
    if not snapshot.ran or not snapshot.has_before:
        return ()
    record = snapshot.record
    if snapshot.sources.interfaces.get(record.export_name):
        tensors = snapshot.tensors()
        if tensors and all(t.provenance == Provenance.SOURCES for t in tensors):
            return _typed(snapshot, [t for t in tensors if t.role == Role.OUTPUT])
    dtype = name_float_dtype(record.export_name)
    if dtype is None:
        return ()
    found = []
    access = snapshot.observed_access()
    for k in range(len(record.bindings)):
        data = np.asarray(snapshot.after(k)).reshape(-1).view(np.uint8)
        usable = data.size - data.size % dtype.itemsize
        spans = _changed_elements(snapshot, k, 0, usable, dtype.itemsize)
        if not spans:
            continue
        summary = _judge_spans(data[:usable].view(dtype), spans, k, f"binding {k}", access[k])
        if summary is not None:
            found.append(summary)
    return tuple(found)


def _typed(snapshot: DispatchSnapshot, outputs: list) -> tuple[NonFinite, ...]:
    found = []
    for t in outputs:
        values = np.asarray(t.array).reshape(-1)
        if values.dtype.kind in "biu":
            continue  # an integer or boolean tensor holds no NaN
        label = f"{t.role} {t.position}"
        if t.access == "write":  # write-only: the dispatch defined every element
            summary = nonfinite_in(values, t.binding, label, access=t.access)
        else:
            spans = _changed_elements(snapshot, t.binding, t.offset, t.length, values.dtype.itemsize)
            summary = _judge_spans(values, spans, t.binding, label, t.access)
        if summary is not None:
            found.append(summary)
    return tuple(found)


__all__ = ["name_float_dtype", "nonfinite_changed", "nonfinite_in", "nonfinite_written"]
