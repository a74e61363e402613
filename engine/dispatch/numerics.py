"""Comparing two tensors the way floating point asks for: one module for every comparing feature (the
divergence finder, break on divergence, golden replay, the inspector's Compare tab).

Two runs of a correct program rarely agree bit for bit across targets and devices: a reduction summed in
another order, a fused multiply-add, another ``exp`` polynomial round differently. Those differences are
measured against the *tensor's own scale* (its largest finite magnitude), not element by element: an
element near zero in a tensor of unit values that is off by 1e-7 is rounding, not a 0.11 relative error.

The default verdict (no explicit tolerance):

* integer, boolean and raw-byte tensors compare exactly;
* a float element agrees within rounding when ``|a - b| <= rounding(dtype) * max(scale, |b|)``, where
  ``scale`` is the largest finite magnitude of either tensor (sentinels such as ``-FLT_MAX`` masks left
  out) and ``rounding(dtype)`` is a multiple of the element type's epsilon (``ROUNDING_EPS``: 2048 eps for
  f32, about 2.4e-4, room for reassociated reductions of tens of thousands of terms and drift through a
  network; fewer eps for f16/bf16/f8, whose results are rounded from wider accumulators);
* NaN agrees with NaN and an infinity with the same infinity; any other non-finite disagreement diverges;
* a reduction (``reduction_length`` known) whose inputs' scale is known (``Tolerance.input_scale``) has
  its rounding measured against the larger of the two scales: summing values that cancel (a variance's
  deviations, a residual) leaves a result far smaller than its terms, and reassociating the sum moves it
  by the rounding of the terms, which is then many times the result's own scale.

An explicit tolerance replaces the default: an element agrees when ``|a - b| <= atol + rtol * |b|``
(numpy's ``allclose``, ``b`` the expected side) or, with ``ulps``, when it is at most that many units in
the last place away. The verdict is ``exact`` (bit for bit), ``within_rounding`` (default rule),
``within_tolerance`` (explicit rule) or ``diverged``.

Metrics users know come with it: max abs error, max relative error (relative to the element, floored at
the tensor's RMS so near-zero elements do not dominate), max error relative to the scale, max ulps,
SQNR in dB, cosine similarity, count and first index of mismatches, NaN/Inf agreement. Everything works
chunk by chunk, so a large tensor never needs a float64 copy of itself.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np

from engine.errors import LensError

CHUNK_ELEMENTS = 1 << 18  # float64 temporaries of a chunk stay in cache (2 MiB each)

# The default rounding allowance per element type, in that type's epsilons, relative to the tensor's scale.
ROUNDING_EPS: dict[str, float] = {"f64": 2048.0, "f32": 2048.0, "f16": 8.0, "bf16": 8.0}
ROUNDING_EPS_NARROW = 2.0  # f8 and other very narrow floats: a couple of steps of their coarse grid
# Elements this close to the type's largest finite value are sentinels (masks, "-inf" fills), not data:
# they do not set the tensor's scale.
SENTINEL_FRACTION = 0.25


class GoldenError(LensError):
    """Golden data could not be read or does not fit the tensor it is compared with."""


class Verdict(StrEnum):
    EXACT = "exact"  # bit for bit
    WITHIN_ROUNDING = "within_rounding"  # differences at the default rounding level
    WITHIN_TOLERANCE = "within_tolerance"  # differences inside an explicit --atol/--rtol/--ulps
    DIVERGED = "diverged"

    @property
    def agrees(self) -> bool:
        return self is not Verdict.DIVERGED

    @property
    def label(self) -> str:
        return VERDICT_LABELS[self]


VERDICT_LABELS = {
    Verdict.EXACT: "exact",
    Verdict.WITHIN_ROUNDING: "within rounding",
    Verdict.WITHIN_TOLERANCE: "within tolerance",
    Verdict.DIVERGED: "diverged",
}
_VERDICT_ORDER = [Verdict.EXACT, Verdict.WITHIN_ROUNDING, Verdict.WITHIN_TOLERANCE, Verdict.DIVERGED]
# Not a verdict: output bytes of no known element type (no sources, and IREE's name gives none) that differ.
# Compared byte for byte, rounding cannot be told from a divergence, so such a dispatch is never judged
# diverged (nor stopped at, nor named the first divergence); it is said apart, with what would judge it.
BYTES_DIFFER = "bytes_differ"
BYTES_DIFFER_LABEL = "bytes differ"


def worst_verdict(verdicts) -> Verdict:
    """The least agreeing of ``verdicts`` (``exact`` for none)."""
    found = [Verdict(v) for v in verdicts]
    return max(found, key=_VERDICT_ORDER.index) if found else Verdict.EXACT


@dataclass(frozen=True)
class Tolerance:
    """How two tensors are judged: the default rounding rule, or an explicit ``atol``/``rtol``/``ulps``."""

    atol: float | None = None
    rtol: float | None = None
    ulps: float | None = None
    reduction_length: int | None = None  # terms summed per output element, where known: widens rounding
    # The largest finite magnitude of what a reduction read, where known: a sum that cancels to almost zero
    # (values less their mean) keeps the rounding of its terms, not of its tiny result.
    input_scale: float | None = None

    @property
    def explicit(self) -> bool:
        return self.atol is not None or self.rtol is not None or self.ulps is not None

    @functools.cache  # noqa: B019 (frozen and hashable: one text per rule)
    def describe(self) -> str:
        if not self.explicit:
            if self.reduction_length and self.input_scale and math.isfinite(self.input_scale):
                return (f"default: within rounding relative to the larger of the tensor's scale and its "
                        f"{self.reduction_length}-term reduction's inputs' ({self.input_scale:.3g})")
            return "default: within rounding relative to the tensor's scale"
        parts = [f"{k}={v:g}" for k, v in (("atol", self.atol), ("rtol", self.rtol), ("ulps", self.ulps)) if v is not None]
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {"atol": self.atol, "rtol": self.rtol, "ulps": self.ulps, "default": not self.explicit}


DEFAULT = Tolerance()


@dataclass(frozen=True)
class Comparison:
    shape_matches: bool
    count: int
    mismatches: int  # elements outside the rule (a NaN against a number counts)
    max_abs_error: float
    max_rel_error: float  # relative to the element, floored at the tensor's RMS
    first_mismatch: tuple[int, ...] | None
    atol: float | None = None
    rtol: float | None = None
    note: str = ""
    verdict: Verdict = Verdict.EXACT
    element: str = ""  # the expected side's element type (f32, bf16, i32, raw...)
    ulps: float | None = None  # the explicit ulps rule, if any
    max_ulps: float | None = None  # floats: the largest distance in units in the last place
    scale: float = 0.0  # largest finite magnitude of either tensor (sentinels left out)
    rms: float = 0.0  # of the expected tensor's finite elements
    max_scaled_error: float = 0.0  # max abs error / scale
    # The default rule's allowance relative to ``scale``, as applied: ``max_scaled_error`` beyond it is a
    # mismatch (None: explicit/exact). A reduction's is widened where its inputs' scale is the larger.
    rounding: float | None = None
    sqnr_db: float = math.inf  # 10 log10(sum b^2 / sum (a-b)^2) over elements finite on both sides
    cosine: float = 1.0
    nan_expected: int = 0
    nan_actual: int = 0
    inf_expected: int = 0
    inf_actual: int = 0
    nonfinite_mismatches: int = 0  # positions where the NaN/Inf pattern differs
    tolerance_text: str = ""
    extra: dict = field(default_factory=dict)
    # The magnitude the rounding was measured against: the tensor's scale, or a reduction's inputs' when
    # larger (its allowance in absolute terms is rounding * scale = dtype's allowance * this).
    rounding_scale: float = 0.0

    @property
    def ok(self) -> bool:
        return self.shape_matches and self.verdict is not Verdict.DIVERGED

    @property
    def nonfinite_agree(self) -> bool:
        return self.nonfinite_mismatches == 0

    def summary(self) -> str:
        """One line: the verdict and the metrics that justify it."""
        if not self.shape_matches:
            return f"diverged: {self.note}"
        if self.verdict is Verdict.EXACT:
            return f"exact ({self.count} elements)"
        parts = [f"max abs {self.max_abs_error:.3g}"]
        if self.max_ulps is not None:  # floats: the error against the tensor's scale
            parts.append(f"{self.max_scaled_error:.3g} of scale {self.scale:.3g}")
        if self.max_ulps is not None:
            parts.append(f"{self.max_ulps:.0f} ulps")
        if math.isfinite(self.sqnr_db):
            parts.append(f"SQNR {self.sqnr_db:.1f} dB")
        if self.mismatches:
            parts.append(f"{self.mismatches} of {self.count} beyond, first at {self.first_mismatch}")
        if self.nonfinite_mismatches:
            parts.append(f"{self.nonfinite_mismatches} NaN/Inf disagree")
        return f"{self.verdict.label}: " + ", ".join(parts)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "verdict": str(self.verdict),
            "shape_matches": self.shape_matches,
            "element": self.element,
            "count": self.count,
            "mismatches": self.mismatches,
            "first_mismatch": list(self.first_mismatch) if self.first_mismatch is not None else None,
            "max_abs_error": finite_or_text(self.max_abs_error),
            "max_rel_error": finite_or_text(self.max_rel_error),
            "max_scaled_error": finite_or_text(self.max_scaled_error),
            "max_ulps": finite_or_text(self.max_ulps) if self.max_ulps is not None else None,
            "scale": finite_or_text(self.scale),
            "rms": finite_or_text(self.rms),
            "rounding": self.rounding,
            "rounding_scale": finite_or_text(self.rounding_scale),
            "sqnr_db": finite_or_text(self.sqnr_db),
            "cosine": finite_or_text(self.cosine),
            "nan": [self.nan_actual, self.nan_expected],
            "inf": [self.inf_actual, self.inf_expected],
            "nonfinite_mismatches": self.nonfinite_mismatches,
            "tolerance": self.tolerance_text,
            "note": self.note,
        }


def finite_or_text(x: float) -> float | str:
    """JSON has no Inf/NaN: those are written as strings."""
    return float(x) if math.isfinite(x) else str(float(x))


# ------------------------------------------------------------------------------------ element kinds


def float_info(dtype: np.dtype):
    """``finfo`` for IEEE and ml_dtypes floats (bf16, f8); None for anything else."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.finfo(dtype)
    if dtype.kind in "iubcSUOM":
        return None
    try:  # ml_dtypes' floats (kind "V")
        import ml_dtypes

        return ml_dtypes.finfo(dtype)
    except (ImportError, ValueError, TypeError):
        return None


def is_float(dtype: np.dtype) -> bool:
    return float_info(dtype) is not None


@functools.lru_cache(maxsize=256)
def element_of(dtype: np.dtype) -> str:
    from engine.dispatch.tensor_types import element_name

    try:
        return element_name(np.dtype(dtype))
    except (KeyError, ValueError, TypeError):
        return str(dtype)


MAX_ALLOWANCE = 0.25  # never call a quarter of the tensor's scale rounding, however long the reduction


def rounding_allowance(dtype: np.dtype, reduction_length: int | None = None) -> float:
    """The default rule's allowance, relative to the tensor's scale, for results of element type ``dtype``;
    a known reduction length widens it (rounding of a sum of K terms grows like sqrt(K) ulps, more where
    the sum is kept in the narrow type itself)."""
    info = float_info(dtype)
    if info is None:
        return 0.0
    eps = float(info.eps)
    element = element_of(dtype)
    factor = ROUNDING_EPS.get(element, ROUNDING_EPS_NARROW)
    if reduction_length and reduction_length > 1:
        per_term = 32.0 if element in ("f32", "f64") else 2.0
        factor = max(factor, per_term * math.sqrt(reduction_length))
    return min(factor * eps, max(MAX_ALLOWANCE, ROUNDING_EPS_NARROW * eps))


_CONTRACTIONS = ("matmul", "matvec", "vecmat", "contract", "reduction", "conv", "dot")


def reduction_length_from_name(export_name: str) -> int | None:
    """Terms summed per output element, from IREE's dispatch name where it says (``…_matmul_MxNxK_f32``:
    K; ``…_conv_FxHxWxCxKHxKW_f32``: C*KH*KW; ``…_reduction_MxN_f32``: N); None otherwise."""
    from engine.dispatch.tensor_types import name_candidates

    found = name_candidates(export_name)
    if found is None:
        return None
    dims, _ = found
    lowered = export_name.lower()
    kind = next((k for k in _CONTRACTIONS if f"_{k}" in lowered), None)
    if kind is None or not dims:
        return None
    if kind == "conv" and len(dims) >= 4:
        return int(np.prod(dims[-3:]))
    return int(dims[-1])


def _coarser(a: np.dtype, b: np.dtype) -> np.dtype:
    """Of two float dtypes, the one with the larger epsilon (the precision both can claim)."""
    ia, ib = float_info(a), float_info(b)
    if ia is None:
        return b
    if ib is None:
        return a
    return a if float(ia.eps) >= float(ib.eps) else b


def ordered_bits(x: np.ndarray) -> np.ndarray:
    """Float bits as int64 ordered like the values (+0 and -0 both 0): the ulp distance is a difference."""
    width = x.dtype.itemsize
    signed = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[width]
    bits = x.view(signed).astype(np.int64)
    magnitude = bits & ((1 << (8 * width - 1)) - 1)
    return np.where(bits < 0, -magnitude, magnitude)


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Units in the last place between two float arrays, in the coarser of their types (float64 result;
    NaN against anything is inf, NaN against NaN 0)."""
    dtype = _coarser(actual.dtype, expected.dtype)
    a = np.asarray(actual).astype(dtype, copy=False)
    b = np.asarray(expected).astype(dtype, copy=False)
    d = np.abs(ordered_bits(a).astype(np.float64) - ordered_bits(b).astype(np.float64))
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(fa), np.isnan(fb)
    d = np.where(nan_a | nan_b, np.where(nan_a & nan_b, 0.0, np.inf), d)
    return d


def _as_float64(c: np.ndarray) -> np.ndarray:
    return c.astype(np.float64)


# ------------------------------------------------------------------------------------ compare


def compare(
    actual: np.ndarray,
    expected: np.ndarray,
    atol: float | None = None,
    rtol: float | None = None,
    *,
    ulps: float | None = None,
    tolerance: Tolerance | None = None,
    exact_stats: bool = True,
) -> Comparison:
    """How far ``actual`` is from ``expected`` and the verdict (see the module doc). ``atol``/``rtol``/``ulps``
    (or ``tolerance``) given: the explicit rule; none: the default rounding rule. Different shapes with
    the same element count are compared flat (the note says so); different counts do not match at all.
    ``exact_stats=False`` spares a bit-identical pair its scale and NaN/Inf counts (the divergence finder
    only needs the verdict there)."""
    tol = tolerance or Tolerance(atol, rtol, ulps)
    a = np.asarray(actual)
    b = np.asarray(expected)
    element = element_of(b.dtype)
    note = ""
    if a.shape != b.shape:
        if a.size != b.size:
            return Comparison(False, a.size, a.size, math.inf, math.inf, None, tol.atol, tol.rtol,
                              f"shape {a.shape} vs expected {b.shape}", Verdict.DIVERGED, element, tol.ulps,
                              tolerance_text=tol.describe())  # fmt: skip
        note = f"compared flat: shape {a.shape} vs expected {b.shape}"
    fa, fb = a.reshape(-1), b.reshape(-1)
    if _bitwise_equal(fa, fb):
        return Comparison(True, a.size, 0, 0.0, 0.0, None, tol.atol, tol.rtol, note, Verdict.EXACT, element,
                          tol.ulps, 0.0 if is_float(b.dtype) or is_float(a.dtype) else None,
                          **(_exact_stats(fb) if exact_stats else {}), tolerance_text=tol.describe())  # fmt: skip
    floats = is_float(a.dtype) or is_float(b.dtype)
    acc = _Accumulator()
    scale, rms = _scale(fa, fb) if floats else (0.0, 0.0)
    rounding = None
    rounding_scale = scale
    if floats and not tol.explicit:
        rounding = rounding_allowance(_coarser(a.dtype, b.dtype), tol.reduction_length)
        if tol.reduction_length and tol.input_scale and math.isfinite(tol.input_scale):
            rounding_scale = max(scale, tol.input_scale)
    for start in range(0, fa.size, CHUNK_ELEMENTS):
        ra, rb = fa[start : start + CHUNK_ELEMENTS], fb[start : start + CHUNK_ELEMENTS]
        if ra.dtype == rb.dtype and _bitwise_equal(ra, rb):
            acc.equal_chunk(rb, floats)
            continue
        acc.chunk(start, ra, rb, floats, tol, rounding_scale, rms, rounding)
    first = acc.first
    first_index = (
        tuple(int(i) for i in np.unravel_index(first, a.shape))
        if first is not None and a.ndim
        else ((first,) if first is not None else None)
    )
    if acc.mismatches or acc.nonfinite_mismatches:
        verdict = Verdict.DIVERGED
    else:
        verdict = Verdict.WITHIN_TOLERANCE if tol.explicit or not floats else Verdict.WITHIN_ROUNDING
    max_abs = acc.max_abs
    if rounding is not None and scale > 0 and rounding_scale > scale:
        # Said against the tensor's own scale, like max_scaled_error: every element is within the scale, so
        # max_scaled_error beyond this is exactly a mismatch (the inputs' scale would otherwise hide the widening).
        rounding *= rounding_scale / scale
    return Comparison(
        True, a.size, acc.mismatches, max_abs, acc.max_rel, first_index, tol.atol, tol.rtol, note, verdict,
        element, tol.ulps, acc.max_ulps if floats else None, scale, rms,
        (max_abs / scale) if scale > 0 else (0.0 if max_abs == 0 else math.inf), rounding,
        _sqnr(acc.signal, acc.noise), _cosine(acc.dot, acc.norm_a, acc.norm_b),
        acc.nan_b, acc.nan_a, acc.inf_b, acc.inf_a, acc.nonfinite_mismatches, tol.describe(),
        rounding_scale=rounding_scale if rounding is not None else 0.0,
    )  # fmt: skip


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype:
        return False
    if a.flags.c_contiguous and b.flags.c_contiguous and a.nbytes <= 1 << 16:
        return a.tobytes() == b.tobytes()  # small: one memcmp beats numpy's call overhead
    try:
        return bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)))
    except ValueError:
        return bool(np.array_equal(a, b))


def _exact_stats(fb: np.ndarray) -> dict:
    """Metrics of an exact comparison (no error; the non-finite counts still say what is there)."""
    nan = inf = 0
    scale = rms = 0.0
    if is_float(fb.dtype) and fb.size:
        for start in range(0, fb.size, CHUNK_ELEMENTS):
            c = fb[start : start + CHUNK_ELEMENTS].astype(np.float64)
            nan += int(np.isnan(c).sum())
            inf += int(np.isinf(c).sum())
        scale, rms = _scale(fb, fb)
    return {"scale": scale, "rms": rms, "nan_expected": nan, "nan_actual": nan, "inf_expected": inf, "inf_actual": inf}


def finite_scale(arrays) -> float:
    """The largest finite magnitude of the float arrays among ``arrays`` (sentinels left out, as ``_scale``
    leaves them out); 0 when there are none. A reduction's ``Tolerance.input_scale``."""
    scale = 0.0
    for x in arrays:
        flat = np.asarray(x).reshape(-1)
        if is_float(flat.dtype) and flat.size:
            scale = max(scale, _scale(flat, flat)[0])
    return scale


def _scale(fa: np.ndarray, fb: np.ndarray) -> tuple[float, float]:
    """(largest finite magnitude of either side without sentinels, RMS of the expected side's finite
    elements)."""
    limits = []
    for x in (fa, fb):
        info = float_info(x.dtype)
        limits.append(float(info.max) * SENTINEL_FRACTION if info is not None else math.inf)
    scale = 0.0
    squares = 0.0
    n = 0
    sides = (fa, fb) if fa is not fb else (fb,)
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, fa.size, CHUNK_ELEMENTS):
            for k, x in enumerate(sides):
                c = x[start : start + CHUNK_ELEMENTS]
                if c.dtype.kind != "f":  # ml_dtypes and integers: through float32 (exact for them)
                    c = c.astype(np.float32)
                c = np.abs(c)
                keep = np.isfinite(c) & (c < limits[k if len(sides) == 2 else 1])
                if not keep.all():
                    c = c[keep]
                if c.size:
                    scale = max(scale, float(c.max()))
                if x is fb:
                    squares += float(np.dot(c.astype(np.float64), c.astype(np.float64)))
                    n += c.size
    return scale, math.sqrt(squares / n) if n else 0.0


class _Accumulator:
    def __init__(self):
        self.mismatches = 0
        self.nonfinite_mismatches = 0
        self.first: int | None = None
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.max_ulps = 0.0
        self.signal = self.noise = self.dot = self.norm_a = self.norm_b = 0.0
        self.nan_a = self.nan_b = self.inf_a = self.inf_b = 0

    def equal_chunk(self, rb: np.ndarray, floats: bool) -> None:
        cb = rb.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            nan, inf = np.isnan(cb), np.isinf(cb)
            self.nan_a += int(nan.sum())
            self.nan_b += int(nan.sum())
            self.inf_a += int(inf.sum())
            self.inf_b += int(inf.sum())
            fin = cb[~(nan | inf)]
            s = float(np.dot(fin, fin))
        self.signal += s
        self.dot += s
        self.norm_a += s
        self.norm_b += s

    def chunk(self, start, ra, rb, floats, tol: Tolerance, scale, rms, rounding) -> None:
        ca, cb = _as_float64(ra), _as_float64(rb)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            nan_a, nan_b = np.isnan(ca), np.isnan(cb)
            inf_a, inf_b = np.isinf(ca), np.isinf(cb)
            self.nan_a += int(nan_a.sum())
            self.nan_b += int(nan_b.sum())
            self.inf_a += int(inf_a.sum())
            self.inf_b += int(inf_b.sum())
            finite = ~(nan_a | nan_b | inf_a | inf_b)
            same_nonfinite = (nan_a & nan_b) | (inf_a & inf_b & (ca == cb))
            nonfinite_bad = ~finite & ~same_nonfinite
            err = np.where(finite, np.abs(ca - cb), 0.0)
            if not floats:
                if tol.explicit:
                    bad = err > (tol.atol or 0.0) + (tol.rtol or 0.0) * np.abs(cb)
                else:
                    bad = ca != cb  # integers, booleans and raw bytes: exactly
            elif tol.explicit:
                if tol.atol is None and tol.rtol is None:
                    within = np.zeros(err.shape, bool)  # --ulps alone
                else:
                    within = err <= (tol.atol or 0.0) + (tol.rtol or 0.0) * np.abs(cb)
                if tol.ulps is not None:
                    within |= ulp_distance(ra, rb) <= tol.ulps
                bad = ~within & finite
            else:
                bad = (err > rounding * np.maximum(scale, np.abs(cb))) & finite
            bad |= nonfinite_bad
            if floats:
                ulp = ulp_distance(ra, rb)
                ulp = np.where(same_nonfinite, 0.0, ulp)
                if ulp.size:
                    self.max_ulps = max(self.max_ulps, float(ulp.max()))
            fa, fb = np.where(finite, ca, 0.0), np.where(finite, cb, 0.0)
            self.signal += float(np.dot(fb, fb))
            d = fa - fb
            self.noise += float(np.dot(d, d))
            self.dot += float(np.dot(fa, fb))
            self.norm_a += float(np.dot(fa, fa))
            self.norm_b += float(np.dot(fb, fb))
            rel = err / np.maximum(np.abs(cb), max(rms, np.finfo(np.float64).tiny))
        n_bad = int(bad.sum())
        self.nonfinite_mismatches += int(nonfinite_bad.sum())
        if n_bad:
            self.mismatches += n_bad
            if self.first is None:
                self.first = start + int(np.argmax(bad))
        if err.size:
            self.max_abs = max(self.max_abs, float(err.max()))
            self.max_rel = max(self.max_rel, float(rel.max()))
        if nonfinite_bad.any():
            self.max_abs = math.inf
            self.max_rel = math.inf


def _sqnr(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def _cosine(dot: float, na: float, nb: float) -> float:
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    return max(-1.0, min(1.0, dot / math.sqrt(na * nb)))


def error_map(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """``|actual - expected|`` in float32 with the actual array's shape (NaN where exactly one side is NaN)."""
    a = np.asarray(actual)
    b = np.asarray(expected).reshape(a.shape)
    out = np.empty(a.shape, np.float32)
    fa, fb, fo = a.reshape(-1), b.reshape(-1), out.reshape(-1)
    for start in range(0, fa.size, CHUNK_ELEMENTS):
        ca = _as_float64(fa[start : start + CHUNK_ELEMENTS])
        cb = _as_float64(fb[start : start + CHUNK_ELEMENTS])
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
    from engine.runtime.function_io import read_numpy_arrays

    return read_numpy_arrays(p, lambda e: GoldenError(f"cannot read {p} as .npy/.npz: {e}"))
