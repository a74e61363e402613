"""Stepping inside a dispatch: how long recording one workgroup takes (issue 31).

Compiles ``../shared/models/small_cnn.mlir`` for llvm-cpu and VMVX, then for one workgroup of a dispatch of
each prints: the run to the dispatch, the recording (first: it rebuilds the program with its sources dumped
into a cache; second: from the cache), the statements and stores recorded, and the steps per second of the
VMVX interpreter's trace.

    .venv/bin/python benchmarks/kernel_step.py [--llvm-dispatch 1] [--vmvx-dispatch 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.compiler.job import iree_compile_path  # noqa: E402
from engine.compiler.targets import target_flags  # noqa: E402

MODELS = ROOT / ".." / "shared" / "models"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llvm-dispatch", type=int, default=1, help="small_cnn's first convolution on llvm-cpu")
    p.add_argument("--vmvx-dispatch", type=int, default=4, help="its pooling reduction on VMVX")
    a = p.parse_args()
    import subprocess

    from engine.kernel.dispatch_run import run_to_dispatch
    from engine.kernel.stepper import record_captured

    program = (MODELS / "small_cnn.mlir").resolve()
    x = (MODELS / "small_cnn_x.npy").resolve()
    if not program.exists():
        print(f"kernel_step: {program} is not here")
        return 2
    work = Path(tempfile.mkdtemp(prefix="kernel-step-bench-"))
    cache = Path(tempfile.gettempdir()) / "iree-lens-kernel"
    print(f"load average {os.getloadavg()[0]:.1f}")
    try:
        for target, dispatch in (("llvm-cpu", a.llvm_dispatch), ("vmvx", a.vmvx_dispatch)):
            vmfb = work / f"small_cnn_{target}.vmfb"
            subprocess.run([iree_compile_path(), str(program), *target_flags(target), "-o", str(vmfb)], check=True)
            shutil.rmtree(cache, ignore_errors=True)  # the first recording rebuilds
            t0 = time.perf_counter()
            captured = run_to_dispatch(vmfb, "small_cnn", [f"@{x}"], dispatch)
            t1 = time.perf_counter()
            trace = record_captured(vmfb, captured, (0, 0, 0))
            t2 = time.perf_counter()
            again = record_captured(vmfb, captured, (0, 0, 0))
            t3 = time.perf_counter()
            assert [s.values for s in again.steps[:100]] == [s.values for s in trace.steps[:100]]
            rate = f", {len(trace.steps) / (t3 - t2):,.0f} statements/s" if target == "vmvx" else ""
            print(f"{target:8} dispatch {dispatch} {captured.export_name} workgroup (0,0,0) of "
                  f"{captured.workgroup_count}: run to it {t1 - t0:.2f} s, record first {t2 - t1:.2f} s "
                  f"(rebuild included), again {t3 - t2:.2f} s; {len(trace.steps):,} statements, "
                  f"{len(trace.stores()):,} stores{rate}; notes: {list(trace.notes) or 'none'}")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
