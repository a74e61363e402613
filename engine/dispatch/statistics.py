"""Statistics, histograms and heatmap images of tensors, fast enough for a 1 GiB tensor in under a second.

Everything works chunk by chunk on a flat view (a chunk stays in cache), so memory stays at one chunk of
temporaries whatever the tensor size. NaN and Inf are counted but excluded from min/max/mean/std (a
chunk whose sum is finite has neither, which spares the NaN scan on healthy data).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

PARALLEL_WORKERS = max(1, min(4, os.cpu_count() or 1))
PARALLEL_MIN_ELEMENTS = 1 << 24  # below 64 MiB of f32 a thread pool costs more than it saves
CHUNK_ELEMENTS = 1 << 18  # 1 MiB of f32: stays in L2, and f32 partial sums stay accurate


@dataclass(frozen=True)
class TensorStats:
    shape: tuple[int, ...]
    element: str
    count: int
    finite: int
    nan: int
    posinf: int
    neginf: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None

    @property
    def healthy(self) -> bool:
        return self.nan == 0 and self.posinf == 0 and self.neginf == 0

    @property
    def health(self) -> str:
        """``ok``, or the non-finite counts (``3 NaN, 1 Inf``)."""
        if self.healthy:
            return "ok"
        parts = []
        if self.nan:
            parts.append(f"{self.nan} NaN")
        if self.posinf or self.neginf:
            parts.append(f"{self.posinf + self.neginf} Inf")
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {
            "shape": list(self.shape),
            "dtype": self.element,
            "count": self.count,
            "nan": self.nan,
            "inf": self.posinf + self.neginf,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "std": self.std,
        }


def _arith(array: np.ndarray) -> np.ndarray:
    """A flat view numpy can do arithmetic on quickly: f16/bf16/f8 chunks are widened later, bool as u8."""
    flat = array.reshape(-1)
    if flat.dtype == np.bool_:
        return flat.view(np.uint8)
    return flat


def _work_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind == "f" and dtype.itemsize >= 4:
        return dtype
    if dtype.kind in "iub":
        return np.dtype(np.float64)
    return np.dtype(np.float32)  # f16, bf16, f8 (ml_dtypes kinds are 'V' or 'f')


def tensor_stats(array: np.ndarray, element: str | None = None, chunk: int = CHUNK_ELEMENTS) -> TensorStats:
    """Count, NaN/Inf counts and min/max/mean/std of the finite values of ``array`` (any shape/dtype)."""
    from engine.dispatch.tensor_types import element_name

    flat = _arith(np.asarray(array))
    work = _work_dtype(flat.dtype)
    is_float = work.kind == "f" and flat.dtype.kind not in "iub"
    n = flat.size
    total_n = 0
    mean = 0.0
    m2 = 0.0
    lo, hi = math.inf, -math.inf
    nan = posinf = neginf = 0
    starts = range(0, n, chunk)
    workers = min(PARALLEL_WORKERS, len(starts)) if n >= PARALLEL_MIN_ELEMENTS else 1

    def run(part: range) -> tuple:
        state = (0, 0.0, 0.0, math.inf, -math.inf, 0, 0, 0)
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite values are counted, not warned about
            for start in part:
                state = _accumulate(flat[start : start + chunk], work, is_float, state)
        return state

    if workers > 1:
        # numpy releases the GIL in its reductions: contiguous runs of chunks on a few threads.
        from concurrent.futures import ThreadPoolExecutor

        per = -(-len(starts) // workers)
        with ThreadPoolExecutor(workers) as pool:
            parts = list(pool.map(run, [starts[i : i + per] for i in range(0, len(starts), per)]))
    else:
        parts = [run(starts)]
    for p in parts:
        total_n, mean, m2, lo, hi, nan, posinf, neginf = _merge(
            (total_n, mean, m2, lo, hi, nan, posinf, neginf), p
        )
    name = element or element_name(np.asarray(array).dtype)
    if total_n == 0:
        return TensorStats(tuple(np.shape(array)), name, n, 0, nan, posinf, neginf, None, None, None, None)
    std = math.sqrt(max(m2, 0.0) / total_n)
    return TensorStats(tuple(np.shape(array)), name, n, total_n, nan, posinf, neginf, lo, hi, mean, std)


def histogram(array: np.ndarray, bins: int = 64, max_samples: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """Counts and bin edges of the finite values; big tensors are sampled with a regular stride."""
    flat = _arith(np.asarray(array))
    if flat.size > max_samples:
        flat = flat[:: -(-flat.size // max_samples)]
    values = flat.astype(np.float64) if flat.dtype.kind not in "f" or flat.dtype.itemsize < 4 else flat
    values = values[np.isfinite(values)]
    if values.size == 0:
        return np.zeros(bins, np.int64), np.linspace(0.0, 1.0, bins + 1)
    return np.histogram(values, bins=bins)


def plane(array: np.ndarray, axes: tuple[int, int] | None = None, index: tuple[int, ...] = ()) -> np.ndarray:
    """A 2-D slice of an N-D tensor: the two ``axes`` (default the last two) with the other dimensions fixed
    at ``index`` (in order of the remaining axes; missing ones are 0). A 1-D tensor is one row; 0-D is 1x1."""
    a = np.asarray(array)
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(1, -1)
    rows, cols = axes if axes is not None else (a.ndim - 2, a.ndim - 1)
    others = [d for d in range(a.ndim) if d not in (rows, cols)]
    sel: list = [slice(None)] * a.ndim
    for k, d in enumerate(others):
        i = index[k] if k < len(index) else 0
        sel[d] = min(max(int(i), 0), a.shape[d] - 1)
    sliced = a[tuple(sel)]
    return sliced if rows < cols else sliced.T


def downsample(plane2d: np.ndarray, max_size: int = 1024) -> tuple[np.ndarray, tuple[int, int]]:
    """At most ``max_size`` x ``max_size`` samples of a 2-D array (a regular stride: one cache line per
    sample, so a 1 GiB plane costs milliseconds); returns the samples and the (row, column) step."""
    r_step = max(1, -(-plane2d.shape[0] // max_size))
    c_step = max(1, -(-plane2d.shape[1] // max_size))
    return np.ascontiguousarray(plane2d[::r_step, ::c_step]), (r_step, c_step)


def _colormap(n: int = 256) -> np.ndarray:
    """A perceptual dark-blue -> teal -> yellow scale (viridis' anchor colours), RGBA uint8."""
    anchors = np.array(
        [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]], dtype=np.float64
    )
    x = np.linspace(0, len(anchors) - 1, n)
    i = np.minimum(x.astype(int), len(anchors) - 2)
    t = (x - i)[:, None]
    rgb = anchors[i] * (1 - t) + anchors[i + 1] * t
    return np.concatenate([rgb, np.full((n, 1), 255.0)], axis=1).astype(np.uint8)


COLORMAP = _colormap()
NONFINITE_RGBA = np.array([255, 0, 255, 255], np.uint8)  # NaN/Inf show magenta


def heatmap_image(
    plane2d: np.ndarray, levels: tuple[float, float] | None = None, max_size: int = 1024
) -> tuple[np.ndarray, tuple[int, int], tuple[float, float]]:
    """An RGBA image (rows x cols x 4, uint8) of a 2-D array, downsampled to ``max_size``; non-finite values
    magenta. Returns the image, the sampling step and the levels used (min/max of the samples by default)."""
    samples, step = downsample(plane2d, max_size)
    values = samples.astype(np.float32) if samples.dtype != np.float32 else samples
    finite = np.isfinite(values)
    if levels is None:
        if finite.any():
            levels = (float(values[finite].min()), float(values[finite].max()))
        else:
            levels = (0.0, 1.0)
    lo, hi = levels
    scale = (len(COLORMAP) - 1) / (hi - lo) if hi > lo else 0.0
    idx = np.clip((np.where(finite, values, lo) - lo) * scale, 0, len(COLORMAP) - 1).astype(np.intp)
    image = COLORMAP[idx]
    image[~finite] = NONFINITE_RGBA
    return image, step, (lo, hi)


def _accumulate(c: np.ndarray, work: np.dtype, is_float: bool, state: tuple) -> tuple:
    """Fold one chunk into (count, mean, M2, min, max, nan, +inf, -inf)."""
    total_n, mean, m2, lo, hi, nan, posinf, neginf = state
    if c.dtype != work:
        c = c.astype(work)
    s = float(c.sum(dtype=np.float64 if work.itemsize < 8 and not is_float else None))
    if is_float and not math.isfinite(s):
        nan_mask = np.isnan(c)
        pinf = np.isposinf(c)
        ninf = np.isneginf(c)
        nan += int(nan_mask.sum())
        posinf += int(pinf.sum())
        neginf += int(ninf.sum())
        c = c[~(nan_mask | pinf | ninf)]
        if c.size == 0:
            return total_n, mean, m2, lo, hi, nan, posinf, neginf
        s = float(c.sum(dtype=np.float64))
    k = c.size
    c_mean = s / k
    lo = min(lo, float(c.min()))
    hi = max(hi, float(c.max()))
    squares = float(np.dot(c, c)) if c.dtype.kind == "f" else float(np.dot(c, c.astype(np.float64)))
    c_m2 = squares - s * c_mean
    if c_mean * c_mean > 1e-3 * squares / k:
        # A mean large against the spread cancels catastrophically in sum-of-squares: centre first.
        d = c - c.dtype.type(c_mean)
        c_m2 = float(np.dot(d, d))
    # Chan et al.'s pairwise combination of (count, mean, M2).
    delta = c_mean - mean
    new_n = total_n + k
    mean += delta * k / new_n
    m2 += c_m2 + delta * delta * total_n * k / new_n
    return new_n, mean, m2, lo, hi, nan, posinf, neginf


def _merge(a: tuple, b: tuple) -> tuple:
    """Combine two partial states (Chan et al.) into one."""
    n1, mean1, m21, lo1, hi1, nan1, pinf1, ninf1 = a
    n2, mean2, m22, lo2, hi2, nan2, pinf2, ninf2 = b
    n = n1 + n2
    if n == 0:
        return (0, 0.0, 0.0, math.inf, -math.inf, nan1 + nan2, pinf1 + pinf2, ninf1 + ninf2)
    delta = mean2 - mean1
    mean = mean1 + delta * n2 / n
    m2 = m21 + m22 + delta * delta * n1 * n2 / n
    return (n, mean, m2, min(lo1, lo2), max(hi1, hi2), nan1 + nan2, pinf1 + pinf2, ninf1 + ninf2)
