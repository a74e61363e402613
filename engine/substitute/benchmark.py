"""Benchmark one executable with IREE's ``iree-benchmark-executable``: a dispatch's real bindings and
workgroup count (from a ``DispatchSnapshot``), the module's binary or an edited one.

Each binding's saved input bytes are written to a file and passed as ``--binding=Nxi8=@file``; the tool
runs the export ``--batch_size`` times per iteration and reports the time per dispatch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from engine.substitute.errors import SubstitutionError


def benchmark_tool() -> str | None:
    """``iree-benchmark-executable`` beside this interpreter (the venv) or on PATH."""
    beside = Path(sys.executable).parent / "iree-benchmark-executable"
    return str(beside) if beside.exists() else shutil.which("iree-benchmark-executable")


def benchmark_binary(
    binary: bytes,
    executable_format: str,
    entry_point: int,
    bindings: tuple[np.ndarray, ...],
    workgroup_count: tuple[int, int, int],
    constants: tuple[int, ...] = (),
    *,
    device: str = "local-sync",
    batch_size: int = 16,
    timeout_s: float = 120.0,
) -> float:
    """Mean seconds of one dispatch of ``entry_point`` of ``binary`` (batches of ``batch_size``), by IREE's tool."""
    tool = benchmark_tool()
    if tool is None:
        raise SubstitutionError("iree-benchmark-executable is not installed")
    with tempfile.TemporaryDirectory(prefix="iree-lens-bench-") as d:
        exe = Path(d) / "executable.bin"
        exe.write_bytes(binary)
        args = [
            tool,
            f"--device={device}",
            f"--executable_format={executable_format}",
            f"--executable_file={exe}",
            f"--entry_point={entry_point}",
            f"--workgroup_count={','.join(str(int(c)) for c in workgroup_count)}",
            f"--batch_size={batch_size}",
            "--benchmark_format=json",
            "--benchmark_min_time=0.2s",
        ]
        args += [f"--constant={int(c) & 0xFFFFFFFF}" for c in constants]
        for i, data in enumerate(bindings):
            path = Path(d) / f"binding{i}.bin"
            np.ascontiguousarray(data, dtype=np.uint8).tofile(path)
            args.append(f"--binding={max(1, data.size)}xi8=@{path}")
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise SubstitutionError(f"iree-benchmark-executable failed: {proc.stderr.strip()[-500:]}")
        report = json.loads(proc.stdout[proc.stdout.index("{") :])
        runs = [b for b in report.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]
        if not runs:
            raise SubstitutionError("iree-benchmark-executable reported no benchmark")
        b = runs[0]
        if b.get("items_per_second"):  # one item is one dispatch of the batch
            return 1.0 / float(b["items_per_second"])
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        return float(b["real_time"]) * scale
