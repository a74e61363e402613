"""Native speed between stops (issue 29), on the CPU: the debug engine over IREE's runtime, in process.

For each shared model (``../shared/models``: the 96-layer transformer, SqueezeNet, EfficientViT-M0; any
other ``.mlir``/``.mlir.xz`` with its ``_x.npy`` input given with ``--model``), compiled for the host CPU:

* plain calls, no stop armed: debug engine (``DebugRunner``) and IREE's runtime (``ReferenceRunner``) called
  alternately, best and median of each, and the ratio debug/reference (goals: <= 1.2x on the CNNs, <= 2x
  on the transformer); the outputs compared bit for bit;
* the host time per dispatch above IREE's: (debug - reference) / dispatches (goal <= 2 us);
* a call that continues to a dispatch breakpoint at the last dispatch (a ``DispatchGate`` whose park
  returns at once), over the plain reference call (goal <= 1.3x).

    .venv/bin/python benchmarks/native_batches.py [--repeats N] [--model PATH [--inputs A.npy,B.npy]]... [--cache DIR]

Prints one line per figure; the machine's load (``os.getloadavg``) is printed first, since other work on
the machine changes every figure.
"""

from __future__ import annotations

import argparse
import lzma
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.compiler.targets import target_flags  # noqa: E402
from engine.dispatch.snapshot import DispatchSnapshots  # noqa: E402
from engine.runtime.debug_runner import DebugRunner  # noqa: E402
from engine.runtime.function_io import Tensor  # noqa: E402
from engine.runtime.reference import ReferenceRunner  # noqa: E402
from engine.session.dispatch_gate import DispatchGate  # noqa: E402
from engine.session.protocol import Breakpoint  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
DEFAULT = ("transformer96", "squeezenet1_1", "efficientvit_m0")


def compiled(source: Path, cache: Path) -> Path:
    name = source.name.removesuffix(".xz").removesuffix(".mlir")
    out = cache / f"{name}.llvm-cpu.vmfb"
    if out.exists():
        return out
    mlir = source
    if source.suffix == ".xz":
        mlir = cache / f"{name}.mlir"
        mlir.write_bytes(lzma.decompress(source.read_bytes()))
    compiler = Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(compiler), str(mlir), *target_flags("llvm-cpu"), "-o", str(out)], check=True)
    return out


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench(source: Path, arrays: list[np.ndarray], cache: Path, repeats: int) -> None:
    vmfb = compiled(source, cache)
    name = vmfb.name.split(".")[0]
    inputs = [Tensor.from_numpy(a) for a in arrays]
    debug = DebugRunner(str(vmfb), "local-sync")
    reference = ReferenceRunner(str(vmfb), "local-sync")
    ours = debug.invoke("main", inputs)  # first calls: load, plan
    theirs = reference.invoke("main", inputs)
    identical = len(ours) == len(theirs) and all(
        a.array.tobytes() == b.array.tobytes() for a, b in zip(ours, theirs)
    )
    start_count = debug.device.dispatch_count
    debug.invoke("main", inputs)
    dispatches = debug.device.dispatch_count - start_count

    # The same module with a gate stopping at the last dispatch (its park returns at once).
    stopping = DebugRunner(str(vmfb), "local-sync")
    stops: list[int] = []
    gate = DispatchGate(lambda record, info, stop: stops.append(record.sequence), lambda: False, lambda r: None)
    gate.breakpoints = (Breakpoint("dispatch", ordinal=dispatches - 1),)
    DispatchSnapshots.for_device(stopping.device).subscribe(gate)

    def stop_call() -> None:
        gate.begin_call(stopping.device.dispatch_count)
        stopping.invoke("main", inputs)

    stop_call()
    times: dict[str, list[float]] = {"debug": [], "reference": [], "stop": []}
    for _ in range(repeats):  # interleaved: the machine's load falls on all three alike
        times["reference"].append(timed(lambda: reference.invoke("main", inputs)))
        times["debug"].append(timed(lambda: debug.invoke("main", inputs)))
        times["stop"].append(timed(stop_call))
    assert len(stops) == repeats + 1, stops
    best = {k: min(v) for k, v in times.items()}
    median = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"{name}: {dispatches} dispatches; outputs {'bit-identical' if identical else 'DIFFER'} to IREE's runtime"
    )
    print(
        f"  plain call   debug {best['debug'] * 1e3:9.3f} ms  reference {best['reference'] * 1e3:9.3f} ms  "
        f"ratio {best['debug'] / best['reference']:5.2f}x (best)   {median['debug'] / median['reference']:5.2f}x (median)"
    )
    per_dispatch = (best["debug"] - best["reference"]) / max(dispatches, 1)
    print(f"  host time per dispatch above IREE's: {per_dispatch * 1e6:6.2f} us (best calls)")
    print(
        f"  continue to a breakpoint at the last dispatch {best['stop'] * 1e3:9.3f} ms  "
        f"ratio {best['stop'] / best['reference']:5.2f}x the plain reference call (best)   "
        f"{median['stop'] / median['reference']:5.2f}x (median)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--model", action="append", default=[], help="an .mlir[.xz] with NAME_x.npy beside it")
    parser.add_argument(
        "--inputs", action="append", default=[], help="for each --model, its inputs (comma-separated .npy files)"
    )
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "iree_lens_native_batches"))
    args = parser.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    sources = [Path(m) for m in args.model] or [MODELS / f"{m}.mlir.xz" for m in DEFAULT]
    for k, source in enumerate(sources):
        stem = source.name.removesuffix(".xz").removesuffix(".mlir")
        paths = [Path(p) for p in args.inputs[k].split(",")] if k < len(args.inputs) else [
            source.parent / f"{stem}_x.npy"
        ]
        if not source.exists() or not all(p.exists() for p in paths):
            print(f"{stem}: skipped ({source} or its inputs are absent)")
            continue
        bench(source, [np.load(p) for p in paths], cache, args.repeats)


if __name__ == "__main__":
    main()
