"""Comparing a tensor with golden data or with the same tensor of another run.

``allclose`` semantics as numpy's (``|a - b| <= atol + rtol * |b|``, ``b`` the expected side), NaN equal to
NaN at the same place, chunked so a large tensor never needs a float64 copy of itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import LensError

CHUNK_ELEMENTS = 1 << 20


class GoldenError(LensError):
    """Golden data could not be read or does not fit the tensor it is compared with."""


@dataclass(frozen=True)
class Comparison:
    shape_matches: bool
    count: int
    mismatches: int  # elements outside the tolerance (NaN against a number counts)
    max_abs_error: float
    max_rel_error: float
    first_mismatch: tuple[int, ...] | None
    atol: float
    rtol: float
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.shape_matches and self.mismatches == 0

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "shape_matches": self.shape_matches,
            "count": self.count,
            "mismatches": self.mismatches,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "first_mismatch": list(self.first_mismatch) if self.first_mismatch is not None else None,
        }


def _as_float(c: np.ndarray) -> np.ndarray:
    if c.dtype == np.bool_:
        return c.astype(np.float64)
    if c.dtype.kind in "iu" or c.dtype.itemsize < 4 or c.dtype.kind not in "fc":
        return c.astype(np.float64)
    return c


def compare(actual: np.ndarray, expected: np.ndarray, atol: float = 0.0, rtol: float = 0.0) -> Comparison:
    """How far ``actual`` is from ``expected``. Different shapes with the same element count are compared
    flat (the note says so); different counts do not match at all."""
    a = np.asarray(actual)
    b = np.asarray(expected)
    note = ""
    if a.shape != b.shape:
        if a.size != b.size:
            return Comparison(
                False,
                a.size,
                a.size,
                float("inf"),
                float("inf"),
                None,
                atol,
                rtol,
                f"shape {a.shape} vs expected {b.shape}",
            )
        note = f"compared flat: shape {a.shape} vs expected {b.shape}"
    fa, fb = a.reshape(-1), b.reshape(-1)
    mismatches = 0
    max_abs = 0.0
    max_rel = 0.0
    first: int | None = None
    for start in range(0, fa.size, CHUNK_ELEMENTS):
        ra, rb = fa[start : start + CHUNK_ELEMENTS], fb[start : start + CHUNK_ELEMENTS]
        if ra.dtype == rb.dtype and np.array_equal(ra, rb):
            continue  # the common case costs one pass (NaNs make it fall through to the full check)
        ca, cb = _as_float(ra), _as_float(rb)
        bad, err, rel = _chunk_errors(ca, cb, atol, rtol)
        n_bad = int(bad.sum())
        if n_bad:
            mismatches += n_bad
            if first is None:
                first = start + int(np.argmax(bad))
        finite = np.isfinite(err)
        if finite.any():
            max_abs = max(max_abs, float(err[finite].max()))
            max_rel = max(max_rel, float(rel[finite].max()))
        if not finite.all() and (~finite & bad).any():
            max_abs = float("inf")
    first_index = (
        tuple(int(i) for i in np.unravel_index(first, a.shape))
        if first is not None and a.ndim
        else ((first,) if first is not None else None)
    )
    return Comparison(True, a.size, mismatches, max_abs, max_rel, first_index, atol, rtol, note)


def _chunk_errors(ca: np.ndarray, cb: np.ndarray, atol: float, rtol: float):
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = np.abs(ca - cb)
        both_nan = np.isnan(ca) & np.isnan(cb)
        same_inf = np.isinf(ca) & (ca == cb)
        err = np.where(both_nan | same_inf, 0, err)
        equal = both_nan | same_inf
        bad = ~(err <= atol + rtol * np.abs(cb)) & ~equal  # NaN errors are mismatches
        rel = err / np.maximum(np.abs(cb), np.finfo(np.float64).tiny)
    return bad, err, rel


def error_map(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """``|actual - expected|`` in float32 with the actual array's shape (NaN where exactly one side is NaN)."""
    a = np.asarray(actual)
    b = np.asarray(expected).reshape(a.shape)
    out = np.empty(a.shape, np.float32)
    fa, fb, fo = a.reshape(-1), b.reshape(-1), out.reshape(-1)
    for start in range(0, fa.size, CHUNK_ELEMENTS):
        ca = _as_float(fa[start : start + CHUNK_ELEMENTS])
        cb = _as_float(fb[start : start + CHUNK_ELEMENTS])
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.abs(ca - cb)
            e = np.where((np.isnan(ca) & np.isnan(cb)) | (np.isinf(ca) & (ca == cb)), 0, e)
        fo[start : start + CHUNK_ELEMENTS] = e
    return out


def load_golden(path: str | Path) -> list[tuple[str, np.ndarray]]:
    """The arrays of a ``.npy`` (one, named by the file) or ``.npz`` (each, by its key), in order."""
    p = Path(path)
    if not p.exists():
        raise GoldenError(f"golden file {p} does not exist")
    try:
        loaded = np.load(p, allow_pickle=False)
    except Exception as e:  # numpy raises many types for a bad file
        raise GoldenError(f"cannot read {p} as .npy/.npz: {e}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            return [(k, loaded[k]) for k in loaded.files]
    return [(p.name, loaded)]
