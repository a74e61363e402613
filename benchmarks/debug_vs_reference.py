"""Wall time of a debug run (our VM + emulated HAL) over a reference run (IREE's runtime).

Three shapes of program: ``big_matmul`` (a 512x512x512 matmul: the dispatches' own work dominates),
``control_flow.repeat_double`` with N loop iterations (one tiny dispatch each, a few dozen host
instructions and nine HAL calls around it: host-code dominated), and ``mlp.main`` (a few small dispatches).
Prints the time per call of each engine and the ratio (the goal for the debug engine is at most 2x).

    .venv/bin/python benchmarks/debug_vs_reference.py [--target llvm-cpu|vmvx] [--iterations N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.compiler.targets import target_flags  # noqa: E402
from engine.runtime.debug_runner import DebugRunner  # noqa: E402
from engine.runtime.function_io import parse_inputs  # noqa: E402
from engine.runtime.reference import ReferenceRunner  # noqa: E402
from engine.samples import sample_path  # noqa: E402

BIG_MATMUL = """
func.func @main(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x512xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<512x512xf32>) -> tensor<512x512xf32>
  %r = linalg.matmul ins(%a, %b : tensor<512x512xf32>, tensor<512x512xf32>) outs(%f : tensor<512x512xf32>) -> tensor<512x512xf32>
  return %r : tensor<512x512xf32>
}
"""


def median_time(fn, repeats: int) -> float:
    fn()  # warm up (first-call decoding, executable loading)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="llvm-cpu")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    compiler = Path(sys.executable).parent / "iree-compile"
    big = Path(tempfile.gettempdir()) / "iree_lens_big_matmul.mlir"
    big.write_text(BIG_MATMUL)
    cases = [
        (big, "main", ["512x512xf32=0.5", "512x512xf32=0.25"], "rr"),
        ("control_flow", "repeat_double", ["4xf32=1 2 3 4", str(args.iterations)], "ri"),
        ("mlp", "main", ["2x16xf32=0.5"], "r"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for sample, function, inputs, kinds in cases:
            source = sample if isinstance(sample, Path) else sample_path(sample)
            sample = source.stem
            vmfb = Path(tmp) / f"{sample}.vmfb"
            subprocess.run(
                [str(compiler), str(source), *target_flags(args.target), "-o", str(vmfb)], check=True
            )
            values = parse_inputs(inputs, kinds)
            reference = ReferenceRunner(vmfb)
            debug = DebugRunner(vmfb)
            t_ref = median_time(lambda r=reference, f=function, v=values: r.invoke(f, v), args.repeats)
            t_dbg = median_time(lambda d=debug, f=function, v=values: d.invoke(f, v), args.repeats)
            dispatches = debug.device.dispatch_count
            print(
                f"{sample}.{function} on {args.target}: reference {t_ref * 1e3:.2f} ms, debug {t_dbg * 1e3:.2f} ms "
                f"per call; debug/reference = {t_dbg / t_ref:.2f}x ({dispatches} dispatches in all debug calls)"
            )


if __name__ == "__main__":
    main()
