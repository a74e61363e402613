"""Comparing a tensor with golden data or with the same tensor of another run (the comparison itself lives in
``engine.dispatch.numerics``, one module for every comparing feature), and a whole capture against another
run's: each dispatch's verdict, for the window's dispatch lists."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.dispatch.bundle import Bundle, DispatchEntry
from engine.dispatch.numerics import (
    CHUNK_ELEMENTS,
    Comparison,
    GoldenError,
    Tolerance,
    Verdict,
    compare,
    element_of,
    error_map,
    load_golden,
    reduction_length_from_name,
    worst_verdict,
)
from engine.dispatch.typed_tensors import (
    NO_SOURCES,
    ExecutableSources,
    SourcesError,
    dispatch_tensors,
    read_sources,
)


@dataclass(frozen=True)
class DispatchVerdict:
    """One dispatch of a run judged against the same dispatch of another run."""

    ordinal: int
    verdict: Verdict  # of its outputs (the worst one)
    summary: str = ""  # numerics' one line for the worst output
    inherited: bool = False  # diverged, but its inputs already differed: not where the runs went apart
    read_as: str | None = None  # the element type untyped bytes were read as (the name's, or what was copied)


class CapturedByteTypes:
    """The element type each captured dispatch's written bytes were read as, by the capture's buffer number
    and byte range: an untyped dispatch whose name gives no type (``slow_memcpy``) moves bytes of the type
    they were written as (the live counterpart is ``diverge_condition.ByteTypes``)."""

    def __init__(self):
        self._ranges: dict[int, list[tuple[int, int, np.dtype]]] = {}

    def mark(self, entry: DispatchEntry, dtype: np.dtype) -> None:
        for b in entry.bindings:
            if b.get("access") in ("write", "readwrite"):
                start, end = int(b["offset"]), int(b["offset"]) + int(b["length"])
                ranges = self._ranges.setdefault(int(b["buffer"]), [])
                kept = [(s, e, d) for s, e, d in ranges if e <= start or end <= s]
                kept += [(s, start, d) for s, e, d in ranges if s < start < e]
                kept += [(end, e, d) for s, e, d in ranges if s < end < e]
                ranges[:] = [*kept, (start, end, np.dtype(dtype))]

    def read_by(self, entry: DispatchEntry) -> np.dtype | None:
        found = set()
        for b in entry.bindings:
            start, end = int(b["offset"]), int(b["offset"]) + int(b["length"])
            for s, e, d in self._ranges.get(int(b["buffer"]), ()):
                if s < end and start < e:
                    found.add(d)
        return found.pop() if len(found) == 1 else None


def read_bytes_as(arrays: list, element: str) -> list:
    """Raw-byte arrays read as ``element`` (the type a ``DispatchVerdict`` says the comparison read them as);
    typed arrays, and byte counts that do not divide, stay as they are."""
    from engine.dispatch.tensor_types import element_dtype

    return _typed(arrays, "", element_dtype(element))


def _typed(arrays: list, name: str, dtype: np.dtype | None) -> list:
    from engine.dispatch.lockstep import typed_by_name

    arrays = typed_by_name(arrays, name)
    if dtype is None:
        return arrays
    return [
        np.ascontiguousarray(a).reshape(-1).view(dtype) if a.dtype == np.uint8 and a.nbytes % dtype.itemsize == 0 else a
        for a in arrays
    ]


def _judge(actual: list, expected: list, name: str, tolerance: Tolerance,
           dtype: np.dtype | None = None) -> tuple[Verdict, Comparison | None, str]:  # fmt: skip
    from engine.dispatch.lockstep import pair_tensors

    pairs = pair_tensors(_typed(expected, name, dtype), _typed(actual, name, dtype))
    if pairs is None:
        return Verdict.DIVERGED, None, "the tensors differ in size"
    if not tolerance.explicit:
        tolerance = Tolerance(reduction_length=reduction_length_from_name(name))
    found = [compare(b, a, tolerance=tolerance, exact_stats=False) for a, b in pairs]
    if not found:
        return Verdict.EXACT, None, ""
    worst = max(found, key=lambda c: ([*Verdict].index(c.verdict), c.max_scaled_error))
    return worst_verdict(c.verdict for c in found), worst, worst.summary()


def bundle_sources(bundle: Bundle) -> ExecutableSources:
    """The executable sources a capture was typed with (its manifest names them), or ``NO_SOURCES``."""
    path = (bundle.manifest.get("sources") or {}).get("path")
    if not path or not Path(path).exists():
        return NO_SOURCES
    try:
        return read_sources([path], "capture")
    except (SourcesError, OSError):
        return NO_SOURCES


def retyped(bundle: Bundle, entry: DispatchEntry, sources: ExecutableSources) -> tuple[list, list] | None:
    """An untyped captured dispatch (each binding's bytes) typed by ``sources`` (another capture's of the same
    program: the same dispatch binds the same subspans on every target): its (inputs, outputs), or None when
    the sources do not declare it or do not fit."""
    if entry.tensors_from != "bindings" or not sources.interfaces.get(entry.name) or not entry.bindings:
        return None
    inputs, outputs = bundle.dispatch_tensors(entry, "inputs"), bundle.dispatch_tensors(entry, "outputs")
    before, after, access, i, o = [], [], [], 0, 0
    for info in entry.bindings:
        acc = info.get("access")
        b = a = None
        if acc in ("read", "readwrite") and i < len(inputs):
            b, i = np.ascontiguousarray(inputs[i]).reshape(-1).view(np.uint8), i + 1
        if acc in ("write", "readwrite") and o < len(outputs):
            a, o = np.ascontiguousarray(outputs[o]).reshape(-1).view(np.uint8), o + 1
        if a is None and b is None:
            return None
        before.append(b if b is not None else a)
        after.append(a if a is not None else b)
        access.append(acc)
    tensors = dispatch_tensors(entry.name, entry.constants, before, after, sources, access)
    if not tensors or tensors[0].provenance != "sources":
        return None
    return [t.array for t in tensors if t.role == "input"], [t.array for t in tensors if t.role == "output"]


def comparable_tensors(
    bundle: Bundle, entry: DispatchEntry, other: DispatchEntry, other_sources: ExecutableSources | None
) -> tuple[list, list]:
    """``entry``'s (inputs, outputs), typed by the other capture's sources where only that one is typed."""
    if other_sources is not None and other.tensors_from == "interface":
        found = retyped(bundle, entry, other_sources)
        if found is not None:
            return found
    return bundle.dispatch_tensors(entry, "inputs"), bundle.dispatch_tensors(entry, "outputs")


def dispatch_verdict(
    bundle: Bundle,
    entry: DispatchEntry,
    reference: Bundle,
    other: DispatchEntry,
    tolerance: Tolerance | None = None,
    byte_types: CapturedByteTypes | None = None,
    sources: tuple[ExecutableSources, ExecutableSources] | None = None,
) -> DispatchVerdict:
    """``entry`` of ``bundle`` against ``other`` of ``reference``: its outputs' verdict, and whether its inputs
    already differed. Untyped captures are read as the element type IREE's dispatch name gives, else (with
    ``byte_types``, the dispatches before it seen) as the type of the bytes it read."""
    from engine.dispatch.lockstep import typed_by_name

    tolerance = tolerance or Tolerance()
    if entry.name != other.name:
        return DispatchVerdict(entry.ordinal, Verdict.DIVERGED, f"the reference runs {other.name} here")
    named = typed_by_name([np.zeros(8, np.uint8)], entry.name)[0].dtype
    dtype = None
    if byte_types is not None:
        dtype = byte_types.read_by(entry) if named == np.uint8 else named
        if dtype is not None:
            byte_types.mark(entry, dtype)
    own_sources, reference_sources = sources or (None, None)
    mine = comparable_tensors(bundle, entry, other, reference_sources)
    theirs = comparable_tensors(reference, other, entry, own_sources)
    verdict, _, summary = _judge(mine[1], theirs[1], entry.name, tolerance, dtype)
    inherited = False
    if verdict is Verdict.DIVERGED:
        inputs, _, _ = _judge(mine[0], theirs[0], entry.name, tolerance, dtype)
        inherited = inputs is Verdict.DIVERGED
    raw = any(np.asarray(a).dtype == np.uint8 for a in [*mine[1], *theirs[1]])
    read_as = element_of(dtype) if raw and dtype is not None and dtype != np.uint8 else None
    return DispatchVerdict(entry.ordinal, verdict, summary, inherited, read_as)


def bundle_verdicts(
    bundle: Bundle,
    reference: Bundle,
    tolerance: Tolerance | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> dict[int, DispatchVerdict]:
    """Every dispatch of ``bundle`` judged against the dispatch of the same ordinal in ``reference`` (one
    tensor pair in memory at a time); dispatches the reference does not have are left out (not compared)."""
    others = {d.ordinal: d for d in reference.dispatches}
    found: dict[int, DispatchVerdict] = {}
    byte_types = CapturedByteTypes()
    sources = (bundle_sources(bundle), bundle_sources(reference))
    for entry in bundle.dispatches:
        if cancelled():
            break
        other = others.get(entry.ordinal)
        if other is not None:
            found[entry.ordinal] = dispatch_verdict(bundle, entry, reference, other, tolerance, byte_types, sources)
    return found


__all__ = [
    "CHUNK_ELEMENTS",
    "CapturedByteTypes",
    "Comparison",
    "DispatchVerdict",
    "GoldenError",
    "Tolerance",
    "Verdict",
    "bundle_sources",
    "bundle_verdicts",
    "comparable_tensors",
    "compare",
    "dispatch_verdict",
    "error_map",
    "load_golden",
    "read_bytes_as",
    "retyped",
]
