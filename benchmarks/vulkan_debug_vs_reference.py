"""Dispatches per second of a small elementwise program (4x8 f32 a*b+|a|, one dispatch per call) on Vulkan:
the debug engine (our VM and emulated HAL with the Vulkan device) over the reference engine (iree.runtime on
IREE's vulkan driver), both on the same physical device (lavapipe where there is no GPU).

  debug              DebugRunner(path, "vulkan").invoke, no observer (bindings are never read back mid-run)
  debug+observer     the same with a DispatchObserver that reads every binding before and after each dispatch
  reference          ReferenceRunner(path, "vulkan").invoke

    .venv/bin/python benchmarks/vulkan_debug_vs_reference.py [--seconds 3] [--device vulkan://0]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.compiler.targets import TARGETS  # noqa: E402
from engine.runtime.function_io import Tensor  # noqa: E402
from engine.runtime.hal.device import DispatchObserver, DispatchRecord  # noqa: E402
from engine.runtime.reference import ReferenceRunner  # noqa: E402
from engine.samples import sample_path  # noqa: E402
from engine.session.debug_run import DebugRunner  # noqa: E402


class ReadEveryBinding(DispatchObserver):
    def __init__(self) -> None:
        self.bytes_read = 0

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.bytes_read += sum(len(b.data) for b in record.bindings)

    def after_dispatch(self, record: DispatchRecord) -> None:
        self.bytes_read += sum(len(b.data) for b in record.bindings)


def compile_elementwise(out_dir: Path) -> Path:
    out = out_dir / "elementwise.vulkan.vmfb"
    tool = Path(sys.executable).parent / "iree-compile"
    cmd = [str(tool), str(sample_path("elementwise")), *TARGETS["vulkan-spirv"].flags, "-o", str(out)]
    subprocess.run(cmd, check=True)
    return out


def calls_per_second(runner, args: list, seconds: float) -> tuple[float, list]:
    result = runner.invoke("main", args)  # warm up (pipelines, staging buffers)
    n = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        result = runner.invoke("main", args)
        n += 1
    return n / elapsed, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--device", default="vulkan", help="Vulkan device URI for both engines")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    inputs = [Tensor.from_numpy(rng.standard_normal((4, 8)).astype(np.float32)) for _ in range(2)]
    with tempfile.TemporaryDirectory() as tmp:
        path = compile_elementwise(Path(tmp))
        debug = DebugRunner(path, args.device)
        reference = ReferenceRunner(path, args.device)
        print(f"device: {debug.device.name}")
        debug_rate, debug_out = calls_per_second(debug, inputs, args.seconds)
        observer = ReadEveryBinding()
        debug.device.observers.append(observer)
        observed_rate, observed_out = calls_per_second(debug, inputs, args.seconds)
        debug.device.observers.remove(observer)
        reference_rate, reference_out = calls_per_second(reference, inputs, args.seconds)
    for got in (debug_out, observed_out):
        if got[0].array.tobytes() != reference_out[0].array.tobytes():
            print("MISMATCH: the debug engine's result differs from the reference's")
            return 1
    print(f"debug engine:            {debug_rate:10.1f} dispatches/s")
    print(
        f"debug engine + observer: {observed_rate:10.1f} dispatches/s (every binding read before and after)"
    )
    print(f"reference engine:        {reference_rate:10.1f} dispatches/s")
    print(f"debug / reference:       {debug_rate / reference_rate:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
