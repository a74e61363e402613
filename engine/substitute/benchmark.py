"""Benchmark one executable with IREE's ``iree-benchmark-executable``: a dispatch's real bindings and
workgroup count (from a ``DispatchSnapshot``), the module's binary or an edited one.

Each binding's saved input bytes are written to a file and passed as ``--binding=Nxi8=@file``; the tool
runs the export ``--batch_size`` times per submission and reports the real time per dispatch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.substitute.errors import SubstitutionError


def benchmark_tool() -> str | None:
    """``iree-benchmark-executable`` beside this interpreter (the venv) or on PATH."""
    beside = Path(sys.executable).parent / "iree-benchmark-executable"
    return str(beside) if beside.exists() else shutil.which("iree-benchmark-executable")


@dataclass(frozen=True)
class ExecutableBenchmark:
    """One export of an executable binary as ``iree-benchmark-executable`` runs it: the binding bytes,
    workgroup count and constants of a dispatch, on ``device``, ``batch_size`` dispatches per submission,
    each repetition at least ``min_time_s`` long."""

    binary: bytes
    executable_format: str
    entry_point: int
    bindings: tuple[np.ndarray, ...]
    workgroup_count: tuple[int, int, int]
    constants: tuple[int, ...] = ()
    device: str = "local-sync"
    batch_size: int = 16
    timeout_s: float = 120.0
    min_time_s: float = 0.2


def benchmark_runs(bench: ExecutableBenchmark, repetitions: int = 5) -> list[float]:
    """Seconds per dispatch in each of ``repetitions`` runs of IREE's tool (its own run-to-run noise)."""
    return [real for real, _ in benchmark_clocks(bench, repetitions)]


def benchmark_clocks(bench: ExecutableBenchmark, repetitions: int = 5) -> list[tuple[float, float]]:
    """(wall, CPU) seconds per dispatch in each of ``repetitions`` runs of IREE's tool: its ``real_time``
    and the ``cpu_time`` it reports beside it (on a loaded machine the wall time holds the scheduler's
    share, the CPU time the kernel's own)."""
    tool = benchmark_tool()
    if tool is None:
        raise SubstitutionError("iree-benchmark-executable is not installed")
    with tempfile.TemporaryDirectory(prefix="iree-lens-bench-") as d:
        exe = Path(d) / "executable.bin"
        exe.write_bytes(bench.binary)
        args = [
            tool,
            f"--device={bench.device}",
            f"--executable_format={bench.executable_format}",
            f"--executable_file={exe}",
            f"--entry_point={bench.entry_point}",
            f"--workgroup_count={','.join(str(int(c)) for c in bench.workgroup_count)}",
            f"--batch_size={bench.batch_size}",
            "--benchmark_format=json",
            f"--benchmark_min_time={bench.min_time_s}s",
            f"--benchmark_repetitions={max(1, repetitions)}",
        ]
        args += [f"--constant={int(c) & 0xFFFFFFFF}" for c in bench.constants]
        for i, data in enumerate(bench.bindings):
            path = Path(d) / f"binding{i}.bin"
            np.ascontiguousarray(data, dtype=np.uint8).tofile(path)
            args.append(f"--binding={max(1, data.size)}xi8=@{path}")
        proc = subprocess.run(args, capture_output=True, text=True, timeout=bench.timeout_s)
        if proc.returncode != 0:
            raise SubstitutionError(f"iree-benchmark-executable failed: {proc.stderr.strip()[-500:]}")
        report = json.loads(proc.stdout[proc.stdout.index("{") :])
        runs = [b for b in report.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]
        if not runs:
            raise SubstitutionError("iree-benchmark-executable reported no benchmark")
        return [(_seconds(b), _seconds(b, "cpu_time")) for b in runs]


def _seconds(b: dict, key: str = "real_time") -> float:
    # The tool counts its iterations in dispatches (``iree_benchmark_keep_running(state, batch_size)``), so
    # ``real_time`` is per dispatch; its items are workgroup invocations (dispatches x workgroups), not
    # dispatches, so ``items_per_second`` is no dispatch rate.
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
    return float(b[key]) * scale
