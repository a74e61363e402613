"""Dispatches per second of a small elementwise program (4x8 f32 a*b+|a|, one dispatch per call) on Vulkan:
the debug engine (our VM and emulated HAL with the Vulkan device) over the reference engine (iree.runtime on
IREE's vulkan driver), both on the same physical device (lavapipe where there is no GPU).

  debug              DebugRunner(path, "vulkan").invoke, no observer (bindings are never read back mid-run)
  debug+observer     the same with a DispatchObserver that reads every binding before and after each dispatch
  reference          ReferenceRunner(path, "vulkan").invoke

    .venv/bin/python benchmarks/vulkan_debug_vs_reference.py [--seconds 3] [--rounds 6] [--device vulkan://0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_support import compile_sample  # noqa: E402

from engine.runtime.debug_runner import DebugRunner  # noqa: E402
from engine.runtime.function_io import Tensor  # noqa: E402
from engine.runtime.hal.device import DispatchObserver, DispatchRecord  # noqa: E402
from engine.runtime.reference import ReferenceRunner  # noqa: E402


class ReadEveryBinding(DispatchObserver):
    def __init__(self) -> None:
        self.bytes_read = 0

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.bytes_read += sum(len(b.data) for b in record.bindings)

    def after_dispatch(self, record: DispatchRecord) -> None:
        self.bytes_read += sum(len(b.data) for b in record.bindings)


def calls_per_second(runner, args: list, seconds: float) -> tuple[float, list]:
    n = 0
    start = time.perf_counter()
    result = None
    while (elapsed := time.perf_counter() - start) < seconds:
        result = runner.invoke("main", args)
        n += 1
    return n / elapsed, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per engine, over all rounds")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds; the best rate counts")
    parser.add_argument("--device", default="vulkan", help="Vulkan device URI for both engines")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    inputs = [Tensor.from_numpy(rng.standard_normal((4, 8)).astype(np.float32)) for _ in range(2)]
    with tempfile.TemporaryDirectory() as tmp:
        path = compile_sample("elementwise", "vulkan-spirv", Path(tmp) / "elementwise.vulkan.vmfb")
        debug = DebugRunner(path, args.device)
        reference = ReferenceRunner(path, args.device)
        print(
            f"device: {debug.device.name}; best of {args.rounds} interleaved rounds (the machine is shared)"
        )
        observer = ReadEveryBinding()
        runs = {"debug": (debug, None), "observed": (debug, observer), "reference": (reference, None)}
        rates: dict[str, float] = {k: 0.0 for k in runs}
        outs: dict[str, list] = {}
        for runner, _ in runs.values():
            runner.invoke("main", inputs)  # warm up (pipelines, staging buffers)
        for _ in range(args.rounds):
            for key, (runner, obs) in runs.items():
                if obs is not None:
                    debug.device.observers.append(obs)
                rate, outs[key] = calls_per_second(runner, inputs, args.seconds / args.rounds)
                if obs is not None:
                    debug.device.observers.remove(obs)
                rates[key] = max(rates[key], rate)
    debug_rate, observed_rate, reference_rate = rates["debug"], rates["observed"], rates["reference"]
    debug_out, observed_out, reference_out = outs["debug"], outs["observed"], outs["reference"]
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
