"""Peak memory of a long debug run with tensor capture on (issue: the session in its own process).

Runs ``control_flow.repeat_double`` (one dispatch per loop iteration) in the debug engine with every
dispatch's bindings captured into a TensorStore with a small memory limit, and prints the dispatch count,
the store's figures and the process's peak RSS. Usage:

    .venv/bin/python benchmarks/capture_memory.py [DISPATCHES]   (default 100,000; the figure in the notes used 1,000,000)
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_support import compile_sample  # noqa: E402

from engine.runtime.debug_runner import DebugRunner  # noqa: E402
from engine.runtime.function_io import parse_inputs  # noqa: E402
from engine.session.capture import TensorCapture  # noqa: E402
from engine.session.tensor_store import TensorStore  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        vmfb = compile_sample("control_flow", "llvm-cpu", Path(tmp) / "control_flow.vmfb")
        runner = DebugRunner(vmfb)
        store = TensorStore(memory_limit_bytes=64 << 20, spill_dir=Path(tmp) / "spill")
        capture = TensorCapture(store)
        runner.device.observers.append(capture)
        rss_before = peak_rss_mib()
        start = time.perf_counter()
        runner.invoke("repeat_double", parse_inputs(["4xf32=1 1 1 1", str(n)], "ri"))
        elapsed = time.perf_counter() - start
        stats = store.stats()
        print(
            f"dispatches run and captured: {len(capture):,} in {elapsed:.1f} s "
            f"({len(capture) / elapsed:,.0f} dispatches/s)"
        )
        print(
            f"tensors: {stats.tensors:,}; in memory: {stats.in_memory:,} ({stats.memory_bytes / 2**20:.1f} MiB, "
            f"limit 64 MiB); spilled to disk: {stats.spilled:,} ({stats.spilled_bytes / 2**20:.1f} MiB)"
        )
        print(f"peak RSS: {peak_rss_mib():.0f} MiB (before the run: {rss_before:.0f} MiB)")
        store.close()


if __name__ == "__main__":
    main()
