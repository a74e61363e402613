"""One CPU dispatch timed the way ``iree-benchmark-executable`` times it, beside IREE's tool, in the same minute.

IREE's tool (local-sync) loads the executable's binary, binds one set of buffers holding the given bytes,
and records ``--batch_size`` dispatches of the export per command buffer, each running every workgroup
inline on the calling thread; Google Benchmark runs batches until ``--benchmark_min_time`` has passed and
reports the mean real time per dispatch of each repetition. ``time_kernel`` does the same with the same
binary: the library loaded once, the dispatch's structs built once (``prepare_dispatch``), one set of
64-byte-aligned buffers filled with the dispatch's input bytes, a warm-up dispatch, then batches of
``batch_size`` dispatches until ``min_time_s`` has passed: one sample per repetition, seconds per dispatch.
A batch is one native call (``native_loop``: the same dispatch ``batch_size`` times, each running its
workgroups in z, y, x order with denormals flushed, as local-sync does), so no Python runs between the
dispatches of a batch, as none runs between those of IREE's command buffer (one ctypes call per dispatch
read a 3.4 us convolution as 4.8 us).

``compare_with_iree`` alternates the two, one repetition each per round, so both see the same load.

Both clocks are kept, as IREE's tool reports both: wall time (``real_time``) and the CPU time of the
thread running the kernel (``cpu_time``). On a loaded machine the wall time holds the scheduler's share
(at load 16 on two cores a 0.6 ms convolution read 0.45 to 1.0 ms by wall clock, run to run); the CPU
time is the kernel's own, and it is what the two are compared on first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from engine.errors import LensError
from engine.runtime.hal.formats import is_native_cpu

NOISE_LIMIT = 0.05  # a spread above this share of the median cannot tell a 5 % change


@dataclass(frozen=True)
class KernelTiming:
    """CPU seconds per dispatch, one sample per repetition, and the wall seconds of the same repetitions."""

    samples_s: tuple[float, ...]
    wall_samples_s: tuple[float, ...] = ()

    @property
    def wall_median_s(self) -> float:
        return float(np.median(self.wall_samples_s)) if self.wall_samples_s else float("nan")

    @property
    def median_s(self) -> float:
        return float(np.median(self.samples_s))

    @property
    def relative_spread(self) -> float:
        """Half the interquartile range over the median: how far a typical sample strays."""
        if len(self.samples_s) < 2:
            return 0.0
        q1, q3 = np.percentile(self.samples_s, [25, 75])
        return float((q3 - q1) / 2 / self.median_s) if self.median_s > 0 else 0.0

    @property
    def too_noisy(self) -> bool:
        """The spread is wider than NOISE_LIMIT: a 5 % change would drown in it."""
        return self.relative_spread > NOISE_LIMIT

    def as_dict(self) -> dict:
        return {"median_s": self.median_s, "relative_spread": self.relative_spread, "too_noisy": self.too_noisy,
                "samples_s": list(self.samples_s), "wall_median_s": self.wall_median_s,
                "wall_samples_s": list(self.wall_samples_s)}  # fmt: skip


@dataclass(frozen=True)
class KernelRun:
    """What one dispatch needs to run alone: the binary, the export, its workgroups, constants and bytes."""

    binary: bytes
    executable_format: str
    export_name: str
    workgroup_count: tuple[int, int, int]
    constants: tuple[int, ...]
    bindings: tuple[np.ndarray, ...]  # each binding's bytes before the dispatch


class KernelTimer:
    """The dispatch loaded and prepared once; ``repetition`` times one sample."""

    def __init__(self, run: KernelRun, batch_size: int = 16):
        from engine.runtime.hal.cpu_library import CpuExecutableLibrary, aligned_copy

        if not is_native_cpu(run.executable_format):
            raise LensError(f"time_kernel runs CPU libraries (embedded or system ELF), not {run.executable_format}")
        self.batch_size = max(1, batch_size)
        self.library = CpuExecutableLibrary.load(run.binary, run.export_name)
        self.buffers = [
            aligned_copy(np.ascontiguousarray(b).view(np.uint8).reshape(-1)) for b in run.bindings
        ]
        self.prepared = self.library.prepare_dispatch(
            run.export_name, run.workgroup_count, run.constants, self.buffers
        )
        self.prepared.run()  # warm-up: page faults and first-touch costs are not the kernel's
        self.descriptors = np.tile(np.asarray(self.prepared.native_descriptor, np.uint64), self.batch_size)
        self.progress = np.zeros(1, np.int64)

    def repetition(self, min_time_s: float) -> tuple[float, float]:
        """(wall, CPU) mean seconds per dispatch over batches run until ``min_time_s`` has passed (by the
        CPU clock, as Google Benchmark counts its minimum time)."""
        from engine.runtime.hal.machine_code import MXCSR_FLUSH_DENORMALS, machine_code
        from engine.runtime.hal.native_loop import BATCH_OK, native_loop

        run_batch, batch = native_loop().run_batch, self.batch_size
        args = (self.descriptors.ctypes.data, batch, MXCSR_FLUSH_DENORMALS, machine_code().run_workgroups_address,
                self.progress.ctypes.data, None)  # fmt: skip
        dispatches = 0
        start, cpu_start = time.perf_counter(), time.thread_time()
        cpu = 0.0
        while cpu < min_time_s or dispatches == 0:
            result = run_batch(*args)
            if result != BATCH_OK:
                raise LensError(
                    f"{self.prepared.export.name} returned {int(result) & 0xFFFFFFFF} while timed"
                )
            dispatches += batch
            cpu = time.thread_time() - cpu_start
        return (time.perf_counter() - start) / dispatches, cpu / dispatches

    def close(self) -> None:
        self.library.close()


def time_kernel(
    run: KernelRun, repetitions: int = 5, min_time_s: float = 0.2, batch_size: int = 16
) -> KernelTiming:
    """``repetitions`` samples of the dispatch alone (see the module's docstring)."""
    timer = KernelTimer(run, batch_size)
    try:
        samples = [timer.repetition(min_time_s) for _ in range(max(1, repetitions))]
    finally:
        timer.close()
    return KernelTiming(tuple(c for _, c in samples), tuple(w for w, _ in samples))


@dataclass(frozen=True)
class Agreement:
    lens: KernelTiming
    iree: KernelTiming

    @property
    def ratio(self) -> float:
        """IREE Lens's median over IREE's (1.0: the same)."""
        return self.lens.median_s / self.iree.median_s if self.iree.median_s > 0 else float("inf")

    @property
    def paired_ratio(self) -> float:
        """The median of each round's ratio: the two repetitions of a round ran back to back, so a load
        that drifts over the minute moves both."""
        pairs = [a / b for a, b in zip(self.lens.samples_s, self.iree.samples_s) if b > 0]
        return float(np.median(pairs)) if pairs else float("inf")

    def as_dict(self) -> dict:
        return {"lens": self.lens.as_dict(), "iree": self.iree.as_dict(), "ratio": self.ratio,
                "paired_ratio": self.paired_ratio}  # fmt: skip


def compare_with_iree(
    run: KernelRun, rounds: int = 5, min_time_s: float = 0.2, batch_size: int = 16, device: str = "local-sync"
) -> Agreement:
    """IREE Lens's timing and ``iree-benchmark-executable``'s of the same dispatch, alternating one
    repetition each for ``rounds`` rounds (same binary, workgroup count, bytes, batch and minimum time)."""
    from engine.substitute.benchmark import ExecutableBenchmark, benchmark_clocks

    timer = KernelTimer(run, batch_size)
    entry = timer.library.export(run.export_name).ordinal
    bench = ExecutableBenchmark(
        run.binary, run.executable_format, entry, run.bindings, run.workgroup_count, run.constants,
        device=device, batch_size=batch_size, min_time_s=min_time_s,
    )  # fmt: skip
    lens, iree = [], []
    try:
        for _ in range(max(1, rounds)):
            iree += benchmark_clocks(bench, repetitions=1)
            lens.append(timer.repetition(min_time_s))
    finally:
        timer.close()
    return Agreement(
        KernelTiming(tuple(c for _, c in lens), tuple(w for w, _ in lens)),
        KernelTiming(tuple(c for _, c in iree), tuple(w for w, _ in iree)),
    )
