"""Memory of a long capture (iree-lens capture, debug engine): peak RSS stays flat as dispatches grow.

Runs ``control_flow.repeat_double`` (one dispatch per loop iteration) with every dispatch captured into a
bundle, for a short and a long run in separate processes, and prints each run's peak RSS, dispatch count
and bundle size. Bounded memory means the long run's peak is close to the short run's.

    nice -n 19 .venv/bin/python benchmarks/dispatch_capture_memory.py [SHORT] [LONG]   (default 200 20000)
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_support import compile_sample  # noqa: E402


def child(vmfb: str, n: int, out: str) -> None:
    from engine.dispatch.capture import capture_debug

    t = time.perf_counter()
    r = capture_debug(vmfb, "repeat_double", ["4xf32=1 -2 0.5 3", str(n)], out)
    seconds = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size = sum(p.stat().st_size for p in Path(out).iterdir()) / 2**20
    print(f"{r.dispatches} dispatches: peak RSS {rss:.0f} MiB, bundle {size:.1f} MiB on disk, {seconds:.1f} s "
          f"({seconds / max(r.dispatches, 1) * 1e3:.2f} ms per dispatch)", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    short = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    long = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    with tempfile.TemporaryDirectory() as tmp:
        vmfb = compile_sample("control_flow", "llvm-cpu", Path(tmp) / "control_flow.vmfb")
        for n in (short, long):
            subprocess.run([sys.executable, __file__, "--child", str(vmfb), str(n), str(Path(tmp) / f"b{n}")],
                           check=True)


if __name__ == "__main__":
    main()
