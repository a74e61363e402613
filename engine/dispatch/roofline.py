"""Where a dispatch sits on the machine's roofline: is this kernel slow, or is it at the limit?

A dispatch's bytes are those it binds (every binding's bound range, read or written, counted once); its
FLOPs come from its ops (``engine.trace.source_ops``: two per point of a contraction's loop nest, one per
point otherwise). The machine's limits are measured here, once per process: memory bandwidth as numpy
copies a buffer far larger than the caches (bytes read plus bytes written per second, best of 5), peak
as one core multiplies float32 matrices (numpy's BLAS in a child process held to one thread, as
local-sync runs a dispatch on one thread; best of 5). The attainable rate at the dispatch's arithmetic
intensity I (FLOPs per byte) is ``min(peak, I x bandwidth)``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

_COPY_BYTES = 64 << 20
_SGEMM_N = 512
_SGEMM_SCRIPT = f"""
import time, numpy as np
a = np.random.default_rng(0).standard_normal(({_SGEMM_N}, {_SGEMM_N})).astype(np.float32)
best = 1e9
for _ in range(5):
    t = time.perf_counter(); a @ a; best = min(best, time.perf_counter() - t)
print(2 * {_SGEMM_N} ** 3 / best)
"""


@dataclass(frozen=True)
class MachineLimits:
    bandwidth_bytes_s: float
    peak_flops_s: float


@lru_cache(maxsize=1)
def machine_limits() -> MachineLimits:
    """This machine's measured memory bandwidth and one core's float32 peak (see the module's docstring)."""
    src = np.ones(_COPY_BYTES // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    bandwidth = 2 * _COPY_BYTES / best
    one_thread = {
        **os.environ,
        **{k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
    }
    proc = subprocess.run([sys.executable, "-c", _SGEMM_SCRIPT], capture_output=True, text=True, env=one_thread,
                          timeout=120)  # fmt: skip
    peak = float(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else float("nan")
    return MachineLimits(bandwidth, peak)


# Bytes that stay in a core's caches between repetitions: the DRAM bandwidth measured does not bound them.
CACHE_RESIDENT_BYTES = 1 << 20


@dataclass(frozen=True)
class Roofline:
    bytes_moved: int
    flops: float | None  # None where the dispatch's ops are not known (no input program here)
    seconds: float
    limits: MachineLimits
    # ``tensors``: the bytes of the tensors the dispatch reads and writes (its executable's source says);
    # ``bindings``: no source here, so the whole bound ranges (IREE binds whole slabs): an upper bound.
    bytes_from: str = "tensors"

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes_moved if self.flops is not None and self.bytes_moved else None

    @property
    def attainable_flops_s(self) -> float | None:
        i = self.intensity
        return min(self.limits.peak_flops_s, i * self.limits.bandwidth_bytes_s) if i is not None else None

    @property
    def bytes_exact(self) -> bool:
        """False where the bytes are the whole bound ranges: an upper bound, so the intensity is a lower bound,
        the attainable rate too, and the share of the roof an upper bound."""
        return self.bytes_from != "bindings"

    @property
    def bound(self) -> str | None:
        """``memory`` or ``compute``: which roof is lower at the dispatch's intensity; None where that is not
        known (FLOPs unknown, or bytes an upper bound that puts it under the memory roof: the true, higher
        intensity may reach the compute roof)."""
        i = self.intensity
        if i is None:
            return None
        if i * self.limits.bandwidth_bytes_s >= self.limits.peak_flops_s:
            return "compute"  # (an intensity that is a lower bound only moves further under the compute roof)
        return "memory" if self.bytes_exact else None

    @property
    def achieved_flops_s(self) -> float | None:
        return self.flops / self.seconds if self.flops is not None and self.seconds > 0 else None

    @property
    def achieved_bytes_s(self) -> float:
        return self.bytes_moved / self.seconds if self.seconds > 0 else 0.0

    @property
    def share_of_roof(self) -> float:
        """Achieved over attainable: of FLOP/s where the FLOPs are known, else of bandwidth. Where the bytes
        are an upper bound, so is this share (``share_is_upper_bound``)."""
        attainable = self.attainable_flops_s
        achieved = self.achieved_flops_s
        if attainable and achieved is not None:
            return achieved / attainable
        return self.achieved_bytes_s / self.limits.bandwidth_bytes_s

    @property
    def share_is_upper_bound(self) -> bool:
        """The share of the roof is at most the figure given: the bytes are an upper bound, and the roof it is
        measured against is the memory roof at the intensity they give (the compute roof is exact)."""
        return not self.bytes_exact and self.bound != "compute"

    def as_dict(self) -> dict:
        return {
            "bytes": self.bytes_moved,
            "flops": self.flops,
            "intensity_flops_per_byte": self.intensity,
            "machine_bandwidth_bytes_s": self.limits.bandwidth_bytes_s,
            "machine_peak_flops_s": self.limits.peak_flops_s,
            "attainable_flops_s": self.attainable_flops_s,
            "achieved_flops_s": self.achieved_flops_s,
            "achieved_bytes_s": self.achieved_bytes_s,
            "bound": self.bound,
            "share_of_roof": self.share_of_roof,
            "share_is_upper_bound": self.share_is_upper_bound,
            "bytes_from": self.bytes_from,
            "cache_resident": self.cache_resident,
        }

    @property
    def cache_resident(self) -> bool:
        """Its bytes stay in cache from one repetition to the next: the memory roof (DRAM) does not bound it."""
        return self.bytes_moved <= CACHE_RESIDENT_BYTES

    def _caveats(self) -> str:
        notes = []
        if self.bytes_from == "bindings":
            notes.append("bytes are the whole bound ranges (no executable source types its tensors: an upper bound)")
        if self.cache_resident:
            notes.append("its data stays in cache between repetitions, so the DRAM bandwidth measured does not bound "
                         "it and a share above 100 % is expected")  # fmt: skip
        return "".join(f"; {n}" for n in notes)

    def describe(self) -> str:
        mb = self.bytes_moved / 1e6
        machine = (f"machine {self.limits.bandwidth_bytes_s / 1e9:.1f} GB/s, "
                   f"{self.limits.peak_flops_s / 1e9:.1f} GFLOP/s on one core")  # fmt: skip
        at_most = "at most " if self.share_is_upper_bound else ""
        moved = f"{mb:.3f} MB moved" if self.bytes_exact else f"at most {mb:.3f} MB moved"
        if self.flops is None:
            return (f"{moved}, FLOPs unknown (its ops are not readable here or their shapes are dynamic); {machine}; "
                    f"achieved {self.achieved_bytes_s / 1e9:.2f} GB/s = {at_most}{self.share_of_roof * 100:.0f} % of "
                    "bandwidth" + self._caveats())  # fmt: skip
        if self.bound is None:  # bytes an upper bound: the intensity, and the roof it meets, at least these
            where = (f"at least {self.intensity:.2f} FLOP/byte; {machine}; memory- or compute-bound: not known (the "
                     f"true intensity is higher), attainable at least {self.attainable_flops_s / 1e9:.2f} GFLOP/s")  # fmt: skip
        else:
            intensity = f"{self.intensity:.2f}" if self.bytes_exact else f"at least {self.intensity:.2f}"
            where = (f"{intensity} FLOP/byte; {machine}; {self.bound}-bound, attainable "
                     f"{self.attainable_flops_s / 1e9:.2f} GFLOP/s")  # fmt: skip
        return (f"{moved}, {self.flops / 1e6:.2f} MFLOP, {where}, achieved {self.achieved_flops_s / 1e9:.2f} GFLOP/s"
                f" = {at_most}{self.share_of_roof * 100:.0f} % of the roof" + self._caveats())  # fmt: skip


def bytes_moved(module_path: str, export: str, constants, bindings) -> tuple[int, str]:
    """The bytes one dispatch reads and writes, and where the figure comes from: the tensors its executable's
    source declares (``tensors``: a tensor both read and written counts twice), else the whole bound ranges
    (``bindings``; IREE binds whole slabs, several times the tensors)."""
    from engine.dispatch.rebuild_sources import found_or_rebuilt
    from engine.dispatch.typed_tensors import Provenance, dispatch_tensors

    sources = found_or_rebuilt(module_path)
    if sources.found:
        tensors = dispatch_tensors(export, constants, list(bindings), None, sources)
        if tensors and all(t.provenance == Provenance.SOURCES for t in tensors):
            return sum(t.length for t in tensors), "tensors"
    return sum(int(b.nbytes) for b in bindings), "bindings"


def dispatch_flops(module_path: str, export: str, source: str | None = None) -> float | None:
    """The FLOPs of ``export``'s ops from the flow phase of the module's input program; None where the
    program is not readable here or does not hold that dispatch."""
    from engine.errors import LensError
    from engine.trace.by_source import export_locations, input_program_of, target_flags_of
    from engine.trace.source_ops import dispatch_source_ops, flow_with_locations

    program = source or input_program_of(export_locations(module_path), module_path)
    if program is None:
        return None
    try:
        ops = dispatch_source_ops(flow_with_locations(program, target_flags_of(module_path))).get(export)
    except LensError:
        return None
    if not ops or any(o.flops is None for o in ops):
        return None  # a dynamic shape: its FLOPs are the run's, unknown from the program
    return sum(o.flops for o in ops)
