"""A reference run (IREE's runtime) with every dispatch tensor captured, against the plain reference run
(goal: at most 1.5x).

The plain run is the module compiled without trace points, run by ``ReferenceRunner``; the captured run
is the same program compiled with ``--iree-flow-trace-dispatch-tensors`` and run by ``capture_reference``,
which writes every dispatch's inputs and outputs to a bundle. Both times include loading the module.
Best of interleaved rounds (the machine is shared). Usage:

    nice -n 19 .venv/bin/python benchmarks/dispatch_capture_overhead.py [ROUNDS]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.compiler.targets import target_flags  # noqa: E402
from engine.dispatch.capture import capture_reference  # noqa: E402
from engine.runtime.function_io import parse_inputs, split_cconv  # noqa: E402
from engine.runtime.reference import ReferenceRunner  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"


def chain_program(layers: int, rows: int, width: int) -> str:
    """``layers`` times x = tanh(x . w): one matmul dispatch (+ fused tanh) per layer."""
    lines = [f"func.func @main(%x0: tensor<{rows}x{width}xf32>, %w: tensor<{width}x{width}xf32>) -> "
             f"tensor<{rows}x{width}xf32> {{", "  %zero = arith.constant 0.0 : f32"]
    for i in range(layers):
        t = f"tensor<{rows}x{width}xf32>"
        lines += [
            f"  %e{i} = tensor.empty() : {t}",
            f"  %f{i} = linalg.fill ins(%zero : f32) outs(%e{i} : {t}) -> {t}",
            f"  %m{i} = linalg.matmul ins(%x{i}, %w : {t}, tensor<{width}x{width}xf32>) outs(%f{i} : {t}) -> {t}",
            f"  %x{i + 1} = math.tanh %m{i} : {t}",
        ]
    lines += [f"  return %x{layers} : tensor<{rows}x{width}xf32>", "}"]
    return "\n".join(lines) + "\n"


def compile_to(source: Path, out: Path, *flags: str) -> Path:
    compiler = Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(compiler), str(source), *target_flags("llvm-cpu"), *flags, "-o", str(out)], check=True)
    return out


def plain_run(vmfb: Path, function: str, inputs: list[str]) -> float:
    t = time.perf_counter()
    runner = ReferenceRunner(vmfb)
    runner.invoke(function, parse_inputs(inputs, split_cconv(runner.cconv(function))[0]))
    return time.perf_counter() - t


def captured_run(vmfb: Path, function: str, inputs: list[str], out: Path) -> tuple[float, int, int]:
    t = time.perf_counter()
    r = capture_reference(vmfb, function, inputs, out)
    return time.perf_counter() - t, r.dispatches, r.bytes_written


def measure(name: str, source: Path, function: str, inputs: list[str], tmp: Path, rounds: int) -> None:
    plain = compile_to(source, tmp / f"{name}.vmfb")
    traced = compile_to(source, tmp / f"{name}_t.vmfb", "--iree-flow-trace-dispatch-tensors")
    best_plain = best_capture = float("inf")
    dispatches = written = 0
    for k in range(rounds):
        best_plain = min(best_plain, plain_run(plain, function, inputs))
        seconds, dispatches, written = captured_run(traced, function, inputs, tmp / f"{name}_bundle{k}")
        best_capture = min(best_capture, seconds)
    print(f"{name}: {dispatches} dispatches, {written / 2**20:.1f} MiB captured; plain reference "
          f"{best_plain * 1e3:.1f} ms, captured {best_capture * 1e3:.1f} ms, ratio {best_capture / best_plain:.2f}x")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        src = tmp / "chain.mlir"
        src.write_text(chain_program(8, 256, 512))
        np.save(tmp / "x.npy", np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32) * 0.1)
        np.save(tmp / "w.npy", np.random.default_rng(1).standard_normal((512, 512)).astype(np.float32) * 0.05)
        measure("chain8", src, "main", [f"@{tmp / 'x.npy'}", f"@{tmp / 'w.npy'}"],
                tmp, rounds)
        model = MODELS / "attention_block.mlir"
        if model.exists():
            measure("attention_block", model, "attention_block", [f"@{MODELS / 'attention_block_x.npy'}"],
                    tmp, rounds)
        else:
            print(f"attention_block: skipped ({model} absent)")


if __name__ == "__main__":
    main()
