"""The condition of ``break diverge``: stop at the first dispatch whose outputs differ from a reference run
(another device, target or module) beyond a tolerance.

The reference is a capture bundle (``iree-lens capture --out=DIR``, any engine and device), or a module
(``.vmfb``, another target or an older build) that is captured with the debug engine on the first call,
to a temporary directory (memory stays bounded: tensors are read from disk one dispatch at a time).
A live dispatch is compared with the reference dispatch of the same run ordinal: what it wrote (the
bindings whose bytes changed, the debug capture's definition of outputs) against the reference's outputs,
read with the reference's element types, and judged by ``numerics`` (no tolerance given: differences at
the rounding level of the element type, relative to the tensor's scale, are not a divergence; another
device or target rounds differently). Different names, counts or sizes at that ordinal are a
divergence too (named in the note): the runs went apart there.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.dispatch.bundle import Bundle, BundleError
from engine.dispatch.numerics import Tolerance, compare
from engine.errors import LensError


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
        }

    def describe(self) -> str:
        if self.note:
            return f"diverged from the reference at dispatch #{self.ordinal} {self.name}: {self.note}"
        if self.summary:
            return f"diverged from the reference at dispatch #{self.ordinal} {self.name}: output {self.output}, {self.summary}"
        return (
            f"diverged from the reference at dispatch #{self.ordinal} {self.name}: output {self.output}, "
            f"{self.mismatches} elements beyond tolerance, max abs error {self.max_abs_error:.6g}"
        )


def is_module(path: str | Path) -> bool:
    return Path(path).suffix == ".vmfb"


class DivergeReference:
    """The reference run of one diverge breakpoint; ``prepare`` before a call, ``check`` after each dispatch."""

    def __init__(self, source: str | Path, atol: float | None = None, rtol: float | None = None,
                 device: str = "local-sync", ulps: float | None = None):  # fmt: skip
        self.source = Path(source)
        self.atol = float(atol) if atol is not None else None
        self.rtol = float(rtol) if rtol is not None else None
        self.tolerance = Tolerance(self.atol, self.rtol, ulps)  # none given: the rounding rule (numerics)
        self.device = device
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
        if self.bundle is not None:
            self._by_ordinal = {d.ordinal: d for d in self.bundle.dispatches}

    def prepare(self, function: str, inputs: tuple[str, ...] | list[str]) -> None:
        """For a module reference: capture its run of ``function`` with ``inputs`` (once per call)."""
        if not is_module(self.source):
            return
        key = (function, tuple(inputs))
        if key == self._prepared_for:
            return
        from engine.dispatch.capture import capture_debug

        self.close()
        self._tmp = tempfile.TemporaryDirectory(prefix="lens-diverge-")
        try:
            capture_debug(self.source, function, list(inputs), self._tmp.name, device=self.device)
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

    def check(self, ordinal: int, name: str, written: list[np.ndarray]) -> DivergeHit | None:
        """``written``: the bytes of the bindings the live dispatch changed, in binding order."""
        if self.bundle is None:
            return None
        entry = self._by_ordinal.get(ordinal)
        if entry is None:
            return DivergeHit(ordinal, name, None, None, math.inf, math.inf, 0,
                              note=f"the reference run has no dispatch #{ordinal}")  # fmt: skip
        if entry.name != name:
            return DivergeHit(ordinal, name, entry.name, None, math.inf, math.inf, 0,
                              note=f"the reference runs {entry.name} here")  # fmt: skip
        from engine.dispatch.lockstep import typed_by_name

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
                return DivergeHit(ordinal, name, entry.name, None, math.inf, math.inf, 0,
                                  note=f"it wrote {live.size} bytes, the reference {ref_raw.size}")  # fmt: skip
            dtype = refs[0].dtype if refs and all(r.dtype == refs[0].dtype for r in refs) else np.uint8
            if ref_raw.size % np.dtype(dtype).itemsize:
                dtype = np.uint8
            pairs = [(live.view(dtype), ref_raw.view(dtype))]
        for k, (actual, expected) in enumerate(pairs):
            c = compare(actual, expected, tolerance=self.tolerance)
            if not c.ok:
                return DivergeHit(ordinal, name, entry.name, k, c.max_abs_error, c.max_rel_error, c.mismatches,
                                  c.first_mismatch, summary=c.summary())  # fmt: skip
        return None
