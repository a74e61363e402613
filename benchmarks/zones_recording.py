"""Overhead of recording timing zones in a debug run (goal: at most 1.2x the run without recording).

The same ``DebugRunner`` invokes a function N times without a recorder, then N times with a
``ZoneRecorder`` attached (VM calls and imports through the interpreter's ``zone_hook``, dispatches through
the HAL observer), alternating rounds so the machine's load falls on both alike.

Usage: ``.venv/bin/python benchmarks/zones_recording.py [--device local-sync|vulkan] [--calls N]``
(compiles the attention block of the shared models if present, else the ``mlp`` sample).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.runtime.debug_runner import DebugRunner  # noqa: E402
from engine.runtime.function_io import parse_inputs, split_cconv  # noqa: E402
from engine.samples import sample_path  # noqa: E402
from engine.trace.recorder import ZoneRecorder  # noqa: E402

MODELS = ROOT / ".." / "shared" / "models"


def program(d: Path, device: str) -> tuple[Path, str, list[str]]:
    flags = (
        ["--iree-hal-target-device=vulkan"]
        if device.startswith("vulkan")
        else ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
              "--iree-llvmcpu-target-cpu=host"]
    )  # fmt: skip
    if (MODELS / "attention_block.mlir").exists():
        src, fn, inputs = (
            MODELS / "attention_block.mlir",
            "attention_block",
            [f"@{MODELS / 'attention_block_x.npy'}"],
        )
    else:
        src, fn, inputs = sample_path("mlp"), "main", ["2x16xf32=0.5"]
    out = d / "program.vmfb"
    tool = Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(tool), str(src), *flags, "-o", str(out)], check=True, capture_output=True)
    return out, fn, inputs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="local-sync")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        vmfb, fn, inputs = program(Path(d), args.device)
        runner = DebugRunner(vmfb, args.device)
        values = parse_inputs(inputs, split_cconv(runner.cconv(fn))[0])
        runner.invoke(fn, values)  # warm: closures compiled, executables loaded
        plain, recorded = [], []
        zones = dispatches = 0
        for _ in range(args.rounds):
            t = time.perf_counter()
            for _ in range(args.calls):
                runner.invoke(fn, values)
            plain.append(time.perf_counter() - t)
            rec = ZoneRecorder()
            rec.attach(runner.context.interpreter, runner.device)
            t = time.perf_counter()
            for _ in range(args.calls):
                runner.invoke(fn, values)
            recorded.append(time.perf_counter() - t)
            rec.detach(runner.context.interpreter, runner.device)
            t = time.perf_counter()
            trace = rec.trace()
            build = time.perf_counter() - t
            zones, dispatches = len(trace.zones), rec.dispatch_count
        p, r = min(plain), min(recorded)
        print(f"{fn} on {args.device}, {args.calls} calls per round, best of {args.rounds} rounds")
        print(f"without zones: {p / args.calls * 1e3:.2f} ms per call")
        print(
            f"with zones:    {r / args.calls * 1e3:.2f} ms per call = {r / p:.2f}x (goal <= 1.2x); "
            f"{zones} zones ({dispatches} dispatches) per round, trace built in {build * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
