"""The condition of ``break diverge``: stop at the first dispatch whose outputs differ from a reference run
(another device, target or module) beyond a tolerance.

The reference is a capture bundle (``iree-lens capture --out=DIR``, any engine and device), or a module
(``.vmfb``, another target or an older build) that is captured with the debug engine on the first call,
to a temporary directory (memory stays bounded: tensors are read from disk one dispatch at a time).
A live dispatch is compared with the reference dispatch of the same run ordinal, on **the bytes the
dispatch defined**: in each binding it wrote (``write``) or updated in place (``readwrite``: IREE packs
several tensors into one slab, binds whole transient buffers, concatenates in place with
``slow_memcpy``), only the bytes either run's dispatch changed are compared; the rest of the binding holds
what earlier dispatches wrote (judged when they ran) or bytes no one defined. Those bytes are read as the
executable sources type them (the session's sources), else as the element type IREE's dispatch name ends
with, else as the type of the bytes the dispatch read (a ``slow_memcpy`` copies what an ``…_f32``
dispatch wrote: f32), else as bytes, compared exactly; and judged by ``numerics`` (no tolerance given:
differences at the rounding level of the element type, relative to the tensor's scale, are not a
divergence; another device or target rounds differently). Different names, counts or sizes at that
ordinal are a divergence too (named in the note): the runs went apart there.

A module reference is captured untyped (each binding's bytes, before and after), so every dispatch can be
compared binding by binding; a bundle captured with types (sources, trace points) is compared tensor by
tensor, the live dispatch's written and updated bindings against the bundle's outputs.

Each dispatch checked gets a verdict (``verdicts``: exact, within rounding, within tolerance, diverged),
which a stop reports so the window can colour its dispatch list. Written bytes of no known element type
(no sources, no type in IREE's name, none read) that differ are ``numerics.BYTES_DIFFER``, not diverged:
compared byte for byte, rounding cannot be told from a divergence, so the breakpoint does not fire there
(as the divergence finder never names such a dispatch); ``--sources`` judges them.
"""

from __future__ import annotations

import math
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.dispatch.bundle import Bundle, BundleError
from engine.dispatch.lockstep import typed_by_name
from engine.dispatch.numerics import (
    BYTES_DIFFER,
    Tolerance,
    Verdict,
    compare,
    element_of,
    reduction_length_from_name,
    worst_verdict,
)
from engine.dispatch.snapshot import DispatchSnapshot
from engine.dispatch.typed_tensors import NO_SOURCES, binding_label
from engine.errors import LensError
from engine.runtime.hal.buffers import allocation_span


class DivergeError(LensError):
    """The reference of a diverge breakpoint cannot be read or run."""


@dataclass(frozen=True)
class DivergeHit:
    """Where the live run left the reference: its dispatch and how far its outputs are."""

    ordinal: int
    name: str
    reference_name: str | None
    output: int | None  # which output (of the concatenation when types vary) diverged
    max_abs_error: float
    max_rel_error: float
    mismatches: int
    first_mismatch: tuple[int, ...] | None = None
    note: str = ""
    summary: str = ""  # numerics' one-line verdict with its metrics
    label: str = ""  # the tensor in the one vocabulary (typed_tensors.binding_label): binding 3, write, output 0

    def to_json(self) -> dict:
        def finite(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)

        return {
            "ordinal": self.ordinal,
            "name": self.name,
            "reference_name": self.reference_name,
            "output": self.output,
            "max_abs_error": finite(self.max_abs_error),
            "max_rel_error": finite(self.max_rel_error),
            "mismatches": self.mismatches,
            "first_mismatch": list(self.first_mismatch) if self.first_mismatch is not None else None,
            "note": self.note,
            "summary": self.summary,
            "label": self.label,
        }

    def describe(self) -> str:
        if self.note:
            return f"diverged from the reference at dispatch #{self.ordinal} {self.name}: {self.note}"
        where = self.label or f"output {self.output}"
        if self.summary:
            return f"diverged from the reference at dispatch #{self.ordinal} {self.name}: {where}: {self.summary}"
        return (
            f"diverged from the reference at dispatch #{self.ordinal} {self.name}: {where}: "
            f"{self.mismatches} elements beyond tolerance, max abs error {self.max_abs_error:.6g}"
        )


NOT_TYPED = object()  # a typed comparison does not apply to this dispatch


def _changed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per element, whether its bytes changed (bit patterns: NaN to NaN is no change)."""
    size = after.dtype.itemsize
    return (before.view(np.uint8).reshape(-1, size) != after.view(np.uint8).reshape(-1, size)).any(axis=1)


class ByteTypes:
    """The element type each dispatch's written bytes were read as, by allocation and byte range (weakly
    keyed: forgotten with the allocation): a dispatch whose name gives no type (``slow_memcpy``) moves bytes
    of the type they were written as."""

    def __init__(self):
        self._ranges: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @staticmethod
    def _key(binding) -> tuple[object, int, int]:
        allocation, start, end = allocation_span(binding.buffer, binding.offset, binding.length)
        return allocation, start, end - start

    def _get(self, allocation) -> list[tuple[int, int, np.dtype]]:
        try:
            return self._ranges.setdefault(allocation, [])
        except TypeError:  # not weak-referenceable
            return []

    def mark(self, binding, start: int, end: int, dtype: np.dtype) -> None:
        """Bytes ``[start, end)`` of ``binding`` now hold elements of ``dtype`` (older types there go)."""
        allocation, base, _ = self._key(binding)
        start, end = base + start, base + end
        ranges = self._get(allocation)
        kept = [(s, e, d) for s, e, d in ranges if e <= start or end <= s]
        kept += [(s, start, d) for s, e, d in ranges if s < start < e]
        kept += [(end, e, d) for s, e, d in ranges if s < end < e]
        ranges[:] = sorted(kept + [(start, end, np.dtype(dtype))], key=lambda r: r[0])

    def read_by(self, record) -> np.dtype:
        """The one non-byte element type of what ``record``'s bindings held (uint8 when none or several)."""
        found = set()
        for b in record.bindings:
            allocation, start, length = self._key(b)
            for s, e, d in self._get(allocation):
                if s < start + length and start < e and d != np.uint8:
                    found.add(d)
        return found.pop() if len(found) == 1 else np.dtype(np.uint8)

    def clear(self) -> None:
        self._ranges = weakref.WeakKeyDictionary()


def compiled_for(module: str | Path) -> str:
    """The device a module was compiled for: vulkan when its executables are SPIR-V, else local-sync."""
    from engine.runtime.vmfb.module import open_vmfb

    try:
        formats = {getattr(e, "format", "") or "" for e in open_vmfb(module).executables}
    except (LensError, OSError):
        return "local-sync"  # the reference run itself reports what is wrong with the module
    return "vulkan" if any(f.startswith("vulkan") for f in formats) else "local-sync"


def is_module(path: str | Path) -> bool:
    return Path(path).suffix == ".vmfb"


@dataclass(frozen=True)
class CallHistory:
    """The calls a live module instance ran before the current one (``(function, input specs)``, the
    initializer's not among them: it runs as a module loads), and the first call left before its end, if any
    (its state is part way)."""

    calls: tuple[tuple[str, tuple[str, ...]], ...] = ()
    unfinished: str | None = None


class DivergeReference:
    """The reference run of one diverge breakpoint; ``prepare`` before a call, ``check`` after each dispatch."""

    def __init__(self, source: str | Path, atol: float | None = None, rtol: float | None = None,
                 device: str | None = None, ulps: float | None = None, parameters=None):  # fmt: skip
        self.source = Path(source)
        self.parameters = parameters  # the ParameterArchives a module reference loads (the session's own)
        self.atol = float(atol) if atol is not None else None
        self.rtol = float(rtol) if rtol is not None else None
        self.tolerance = Tolerance(self.atol, self.rtol, ulps)  # none given: the rounding rule (numerics)
        self.device = device  # None: a module reference runs on the device it was compiled for
        self.bundle: Bundle | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._prepared_for: tuple | None = None
        if not self.source.exists():
            raise DivergeError(f"break diverge: {self.source} does not exist (a capture bundle or a .vmfb module)")
        if not is_module(self.source):
            try:
                self.bundle = Bundle(self.source)
            except BundleError as e:
                raise DivergeError(f"break diverge: {self.source} is not a capture bundle: {e}") from None
        self._by_ordinal = {}
        # Of each dispatch checked in the current call, by ordinal (or BYTES_DIFFER: untyped bytes differ).
        self.verdicts: dict[int, Verdict | str] = {}
        self.exports: dict[int, str] = {}  # the live export name of each dispatch checked, by ordinal
        self._types = ByteTypes()
        self._sources = None  # the reference bundle's executable sources (read when first needed)
        if self.bundle is not None:
            self._by_ordinal = {d.ordinal: d for d in self.bundle.dispatches}

    def prepare(self, function: str, inputs: tuple[str, ...] | list[str], earlier: CallHistory | None = None) -> None:
        """Before a call. For a module reference: capture its run of ``function`` with ``inputs``, untyped (each
        binding's bytes: compared binding by binding, on the bytes the dispatch defined), once per inputs.

        ``earlier``: for a program whose calls leave state (``global_names.calls_leave_state``: a KV cache, a
        counter), the calls the live module instance ran before this one. A module reference runs them first, so
        its call N meets the state the N-1 calls left, as the live call does; a bundle must have been captured
        after the same calls. A history no reference can follow (a call left before its end) is refused, named,
        rather than compared with another state."""
        self.verdicts = {}
        self.exports = {}
        self._types.clear()
        calls_before = earlier.calls if earlier is not None else ()
        if earlier is not None and earlier.unfinished is not None:
            raise DivergeError(
                f"break diverge: the module keeps state between calls (its functions store globals) and an "
                f"earlier call ({earlier.unfinished}) was left before its end, so no reference run reaches the "
                "state this call starts from: open the module again to compare from its first call"
            )
        if not is_module(self.source):
            if earlier is not None and self.bundle is not None and self.bundle.calls_before != calls_before:
                raise DivergeError(
                    f"break diverge: the module keeps state between calls and this is call {len(calls_before) + 1} "
                    f"since it loaded; {self.source.name} was captured at call {len(self.bundle.calls_before) + 1}, "
                    "from another state: give the module as the reference (it is run through the same calls)"
                )
            return
        key = (function, tuple(inputs), calls_before)
        if key == self._prepared_for:
            return
        from engine.dispatch.capture import capture_debug

        self.close()
        self._tmp = tempfile.TemporaryDirectory(prefix="lens-diverge-")
        try:
            device = self.device or compiled_for(self.source)
            capture_debug(self.source, function, list(inputs), self._tmp.name, device=device, sources=NO_SOURCES,
                          parameters=self.parameters, calls_before=calls_before)  # fmt: skip
            self.bundle = Bundle(self._tmp.name)
        except LensError as e:
            self.close()
            raise DivergeError(f"break diverge: the reference run of {self.source.name} failed: {e}") from None
        self._by_ordinal = {d.ordinal: d for d in self.bundle.dispatches}
        self._prepared_for = key

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
            self.bundle = None
            self._prepared_for = None

    def check_dispatch(self, ordinal: int, snapshot: DispatchSnapshot) -> DivergeHit | None:
        """The live dispatch that just ran (its snapshot, bytes before kept) against the reference's dispatch
        ``ordinal``; None when they agree. Its verdict is kept in ``verdicts``."""
        record = snapshot.record
        name = record.export_name
        if self.bundle is None:
            return None
        self.exports[ordinal] = name
        entry = self._by_ordinal.get(ordinal)
        unmatched = self._unmatched(ordinal, name, entry)
        if unmatched is not None:
            return unmatched
        reference = self._reference_bindings(entry, record)
        if reference is None:  # typed tensors, or laid out otherwise: tensor by tensor
            typed = self._check_typed(ordinal, entry, snapshot)
            if typed is not NOT_TYPED:
                return typed
            access = snapshot.observed_access()
            kept = [(k, acc) for k, acc in enumerate(access) if acc in ("write", "readwrite")]
            labels = [binding_label(k, acc) for k, acc in kept]  # untyped: no role claimed
            return self.check(ordinal, name, [snapshot.after(k) for k, _ in kept], labels)
        verdicts: list[Verdict] = []
        untyped_differ = False
        for k, (ref_before, ref_after) in enumerate(reference):
            live_before = snapshot.before[k].reshape(-1).view(np.uint8)
            live_after = np.asarray(snapshot.after(k)).reshape(-1).view(np.uint8)
            if ref_after is None:  # the reference only read it
                ref_after = ref_before
            # The bytes either dispatch defined: changed by the live one, or by the reference's (against its own
            # bytes before where it kept them; a binding it only wrote, against the live bytes before).
            defined = live_before != live_after
            defined |= (ref_before != ref_after) if ref_before is not None else (live_before != ref_after)
            if not defined.any():
                continue
            for offset, count, dtype, typed in self._pieces(snapshot, k, live_after.size):
                end = offset + count * dtype.itemsize
                elements = defined[offset:end].reshape(count, dtype.itemsize).any(axis=1)
                if not elements.any():
                    continue
                actual = live_after[offset:end].view(dtype)[elements]
                expected = ref_after[offset:end].view(dtype)[elements]
                c = compare(actual, expected, tolerance=self._tolerance(name))
                self._types.mark(record.bindings[k], offset, end, dtype)
                if not c.ok and dtype == np.uint8:  # bytes of no known type: not judged, said apart
                    untyped_differ = True
                    continue
                verdicts.append(c.verdict)
                if not c.ok:
                    first = None
                    if c.first_mismatch is not None:
                        first = (int(np.flatnonzero(elements)[c.first_mismatch[0]]),)
                    label = binding_label(k, snapshot.observed_access()[k])
                    where = f"{typed}, {int(elements.sum())} elements it wrote"
                    return self._hit(DivergeHit(ordinal, name, entry.name, k, c.max_abs_error, c.max_rel_error,
                                                c.mismatches, first, summary=f"{where}: {c.summary()}",
                                                label=label))  # fmt: skip
        self.verdicts[ordinal] = BYTES_DIFFER if untyped_differ else worst_verdict(verdicts)
        return None

    def _check_typed(self, ordinal: int, entry, snapshot: DispatchSnapshot):
        """A typed reference (captured with sources or trace points) against the live dispatch typed by the
        same interface (the session's sources, else the reference's own: the same program's dispatch binds the
        same subspans on every target): output by output, an in-place (readwrite) output on the elements
        either run's dispatch changed. ``NOT_TYPED`` when the live dispatch cannot be typed to match."""
        from engine.dispatch.typed_tensors import dispatch_tensors

        record = snapshot.record
        name = record.export_name
        sources = snapshot.sources if snapshot.sources.interfaces.get(name) else self._own_sources()
        if sources is None or not sources.interfaces.get(name) or not snapshot.has_before:
            return NOT_TYPED
        n = len(record.bindings)
        tensors = dispatch_tensors(name, record.constants, snapshot.before, [snapshot.after(k) for k in range(n)],
                                   sources, snapshot.observed_access())  # fmt: skip
        if not tensors or tensors[0].provenance != "sources":
            return NOT_TYPED
        live_in = [t for t in tensors if t.role == "input"]
        live_out = [t for t in tensors if t.role == "output"]
        ref_in = self.bundle.dispatch_tensors(entry, "inputs")
        ref_out = self.bundle.dispatch_tensors(entry, "outputs")
        if len(ref_out) != len(live_out) or any(r.nbytes != t.array.nbytes for r, t in zip(ref_out, live_out)):
            return NOT_TYPED
        verdicts: list[Verdict] = []
        for k, t in enumerate(live_out):
            actual = np.ascontiguousarray(t.array).reshape(-1)
            expected = np.ascontiguousarray(ref_out[k]).reshape(-1).view(np.uint8).view(actual.dtype)
            if t.access == "readwrite":  # updated in place: only the elements either dispatch changed
                j = next((i for i, x in enumerate(live_in) if (x.binding, x.offset) == (t.binding, t.offset)), None)
                if j is None or len(ref_in) != len(live_in) or ref_in[j].nbytes != t.array.nbytes:
                    return NOT_TYPED
                live_before = np.ascontiguousarray(live_in[j].array).reshape(-1)
                ref_before = np.ascontiguousarray(ref_in[j]).reshape(-1).view(np.uint8).view(actual.dtype)
                changed = _changed(live_before, actual) | _changed(ref_before, expected)
                actual, expected = actual[changed], expected[changed]
            c = compare(actual, expected, tolerance=self._tolerance(name))
            verdicts.append(c.verdict)
            if not c.ok:
                return self._hit(DivergeHit(ordinal, name, entry.name, k, c.max_abs_error, c.max_rel_error,
                                            c.mismatches, c.first_mismatch,
                                            summary=f"{t.type}: {c.summary()}", label=t.binding_label))  # fmt: skip
        self.verdicts[ordinal] = worst_verdict(verdicts)
        return None

    def _own_sources(self):
        """The executable sources the reference bundle was captured with (its manifest names them), if any."""
        if self._sources is None:
            from engine.dispatch.typed_tensors import SourcesError, read_sources

            path = (self.bundle.manifest.get("sources") or {}).get("path") if self.bundle is not None else None
            try:
                self._sources = read_sources([path], "reference") if path and Path(path).exists() else NO_SOURCES
            except (SourcesError, OSError):
                self._sources = NO_SOURCES
        return self._sources if self._sources.found else None

    def _unmatched(self, ordinal: int, name: str, entry) -> DivergeHit | None:
        """A hit where the reference has no dispatch ``ordinal`` (``entry`` None) or runs another export there."""
        if entry is None:
            return self._hit(DivergeHit(ordinal, name, None, None, math.inf, math.inf, 0,
                                        note=f"the reference run has no dispatch #{ordinal}"))  # fmt: skip
        if entry.name != name:
            return self._hit(DivergeHit(ordinal, name, entry.name, None, math.inf, math.inf, 0,
                                        note=f"the reference runs {entry.name} here"))  # fmt: skip
        return None

    def _hit(self, hit: DivergeHit) -> DivergeHit:
        self.verdicts[hit.ordinal] = Verdict.DIVERGED
        return hit

    def _tolerance(self, name: str) -> Tolerance:
        if self.tolerance.explicit:
            return self.tolerance
        return Tolerance(reduction_length=reduction_length_from_name(name))

    def _reference_bindings(self, entry, record) -> list[tuple[np.ndarray | None, np.ndarray | None]] | None:
        """Per binding of an untyped reference dispatch (bound like the live one): its bytes before (None
        where it only wrote the binding) and after (None where it only read it); None otherwise."""
        if entry.tensors_from != "bindings" or len(entry.bindings) != len(record.bindings):
            return None
        if any(int(info.get("length", -1)) != int(b.length) for info, b in zip(entry.bindings, record.bindings)):
            return None
        inputs = self.bundle.dispatch_tensors(entry, "inputs")
        outputs = self.bundle.dispatch_tensors(entry, "outputs")
        found, i, o = [], 0, 0
        for info in entry.bindings:
            acc = info.get("access")
            before = after = None
            if acc in ("read", "readwrite"):
                if i >= len(inputs):
                    return None
                before, i = np.ascontiguousarray(inputs[i]).reshape(-1).view(np.uint8), i + 1
            if acc in ("write", "readwrite"):
                if o >= len(outputs):
                    return None
                after, o = np.ascontiguousarray(outputs[o]).reshape(-1).view(np.uint8), o + 1
            if before is None and after is None:
                return None  # access unknown
            found.append((before, after))
        return found

    def _pieces(self, snapshot: DispatchSnapshot, k: int, length: int) -> list[tuple[int, int, np.dtype, str]]:
        """How binding ``k``'s bytes are read: (offset, element count, dtype, where the type came from)."""
        name = snapshot.record.export_name
        if snapshot.sources.interfaces.get(name):
            typed = [t for t in snapshot.tensors() if t.role == "output" and t.binding == k and t.provenance == "sources"]
            if typed:
                return [(t.offset, t.array.size, t.array.dtype, f"{t.type.element} from the sources") for t in typed]
        dtype = typed_by_name([np.zeros(8, np.uint8)], name)[0].dtype
        typed_as = f"{element_of(dtype)} from the dispatch's name"
        if dtype == np.uint8:
            dtype = self._types.read_by(snapshot.record)
            typed_as = f"{element_of(dtype)}, the type of the bytes it read" if dtype != np.uint8 else "bytes"
        return [(0, length // dtype.itemsize, dtype, typed_as)]

    def check(
        self, ordinal: int, name: str, written: list[np.ndarray], labels: list[str] | None = None
    ) -> DivergeHit | None:
        """Tensor by tensor: ``written``, the bytes of the bindings the live dispatch wrote or updated, in
        binding order (``labels``: each one's ``binding_label``), against the reference's outputs."""
        if self.bundle is None:
            return None
        self.exports[ordinal] = name
        entry = self._by_ordinal.get(ordinal)
        unmatched = self._unmatched(ordinal, name, entry)
        if unmatched is not None:
            return unmatched
        # Untyped captures hold bytes: read them as the element IREE's name gives, so another device's
        # rounding is judged as floats.
        refs = typed_by_name(self.bundle.dispatch_tensors(entry, "outputs"), entry.name)
        live_raw = [np.ascontiguousarray(w).reshape(-1).view(np.uint8) for w in written]
        if len(refs) == len(live_raw) and all(r.nbytes == w.size for r, w in zip(refs, live_raw)):
            pairs = [(w.view(r.dtype).reshape(r.shape), r) for r, w in zip(refs, live_raw)]
        else:  # packed differently (an interface-typed capture): one concatenation, typed as the first
            ref_raw = np.concatenate([np.ascontiguousarray(r).reshape(-1).view(np.uint8) for r in refs]) if refs else np.zeros(0, np.uint8)
            live = np.concatenate(live_raw) if live_raw else np.zeros(0, np.uint8)
            if ref_raw.size != live.size:
                # Untyped, the live side is whole bindings (a padded copy's 3904 bytes) and the reference's
                # tensors are laid out otherwise (its 3888-byte tensor): nothing says which bytes to pair, so
                # this is no evidence of a divergence. Not judged, said apart as untyped bytes are.
                self.verdicts[ordinal] = BYTES_DIFFER
                return None
            dtype = refs[0].dtype if refs and all(r.dtype == refs[0].dtype for r in refs) else np.uint8
            if ref_raw.size % np.dtype(dtype).itemsize:
                dtype = np.uint8
            pairs = [(live.view(dtype), ref_raw.view(dtype))]
        verdicts: list[Verdict] = []
        untyped_differ = False
        for k, (actual, expected) in enumerate(pairs):
            c = compare(actual, expected, tolerance=self._tolerance(name))
            if not c.ok and actual.dtype == np.uint8:  # bytes of no known type: not judged, said apart
                untyped_differ = True
                continue
            verdicts.append(c.verdict)
            if not c.ok:
                label = labels[k] if labels is not None and len(pairs) == len(labels) else ""
                return self._hit(DivergeHit(ordinal, name, entry.name, k, c.max_abs_error, c.max_rel_error,
                                            c.mismatches, c.first_mismatch, summary=c.summary(),
                                            label=label))  # fmt: skip
        self.verdicts[ordinal] = BYTES_DIFFER if untyped_differ else worst_verdict(verdicts)
        return None
