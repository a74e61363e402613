"""``iree-lens diverge`` at model scale: its time against the two plain debug runs it needs, and peak memory.

Two generated programs (MLIR written here, compiled for llvm-cpu):

* ``resnet18`` -- ResNet-18-sized: a 7x7 stride-2 stem and four stages of two residual blocks of 3x3
  convolutions (64, 128, 256, 512 channels, 11 M weights passed as inputs), about 30 dispatches over
  1x3x224x224 activations;
* ``chain2000`` -- 2,000 dispatches: a chain of 64x64 matmuls, each followed by a tanh (one dispatch each).

For each: the wall time and peak RSS of one plain debug run (``iree-lens run --engine=debug``) of A and of
B, and of ``iree-lens diverge A B --json`` (each in its own process; RSS from ``getrusage``). The goal is
diverge within 2.5x of the two runs together, with memory bounded by a few dispatches' bindings (no
tensors kept). A and B are the llvm-cpu build and, with ``--b-target vmvx``, a vmvx build (slow: its
kernels are interpreted); by default both are the llvm-cpu module.

    .venv/bin/python benchmarks/diverge_scale.py [--program resnet18|chain2000|both] [--b-target llvm-cpu|vmvx]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.compiler.targets import target_flags  # noqa: E402


def resnet18_mlir() -> tuple[str, list[tuple[int, ...]]]:
    """A ResNet-18-shaped network (convolutions with padding, bias-free, ReLU, residual adds); weights
    are function arguments so the MLIR stays small. Returns the text and the argument shapes."""
    lines: list[str] = []
    args: list[tuple[int, ...]] = [(1, 3, 224, 224)]
    counter = [0]

    def name() -> str:
        counter[0] += 1
        return f"%v{counter[0]}"

    def conv(x: str, shape, cout: int, k: int, stride: int, relu: bool, residual: str | None = None):
        n, cin, h, w = shape
        pad = k // 2
        args.append((cout, cin, k, k))
        weight = f"%arg{len(args) - 1}"
        hp, wp = h + 2 * pad, w + 2 * pad
        padded = name()
        lines.append(f"  %zp{counter[0]} = arith.constant 0.0 : f32")
        lines.append(
            f"  {padded} = tensor.pad {x} low[0, 0, {pad}, {pad}] high[0, 0, {pad}, {pad}] {{\n"
            f"  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):\n"
            f"    tensor.yield %zp{counter[0]} : f32\n"
            f"  }} : tensor<{n}x{cin}x{h}x{w}xf32> to tensor<{n}x{cin}x{hp}x{wp}xf32>"
        )
        ho, wo = (hp - k) // stride + 1, (wp - k) // stride + 1
        out_t = f"tensor<{n}x{cout}x{ho}x{wo}xf32>"
        empty, filled, result = name(), name(), name()
        lines.append(f"  {empty} = tensor.empty() : {out_t}")
        lines.append(f"  {filled} = linalg.fill ins(%zero : f32) outs({empty} : {out_t}) -> {out_t}")
        lines.append(
            f"  {result} = linalg.conv_2d_nchw_fchw {{dilations = dense<1> : tensor<2xi64>, "
            f"strides = dense<{stride}> : tensor<2xi64>}} ins({padded}, {weight} : "
            f"tensor<{n}x{cin}x{hp}x{wp}xf32>, tensor<{cout}x{cin}x{k}x{k}xf32>) outs({filled} : {out_t}) -> {out_t}"
        )
        value = result
        if residual is not None:
            added = name()
            lines.append(f"  {added} = arith.addf {value}, {residual} : {out_t}")
            value = added
        if relu:
            relued = name()
            lines.append(f"  {relued} = arith.maximumf {value}, %zeros{counter[0]} : {out_t}")
            lines.insert(len(lines) - 1, f"  %zeros{counter[0]} = arith.constant dense<0.0> : {out_t}")
            value = relued
        return value, (n, cout, ho, wo)

    x, shape = conv("%arg0", args[0], 64, 7, 2, True)
    for stage, channels in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            identity, identity_shape = x, shape
            if stride != 1 or shape[1] != channels:
                identity, identity_shape = conv(x, shape, channels, 1, stride, False)
            y, yshape = conv(x, shape, channels, 3, stride, True)
            x, shape = conv(y, yshape, channels, 3, 1, True, residual=identity)
    params = ", ".join(f"%arg{i}: tensor<{'x'.join(map(str, s))}xf32>" for i, s in enumerate(args))
    out_t = f"tensor<{'x'.join(map(str, shape))}xf32>"
    text = (
        f"func.func @main({params}) -> {out_t} {{\n  %zero = arith.constant 0.0 : f32\n"
        + "\n".join(lines)
        + f"\n  return {x} : {out_t}\n}}\n"
    )
    return text, args


def chain_mlir(length: int) -> str:
    t = "tensor<64x64xf32>"
    body = ["  %zero = arith.constant 0.0 : f32", f"  %e = tensor.empty() : {t}",
            f"  %f = linalg.fill ins(%zero : f32) outs(%e : {t}) -> {t}"]  # fmt: skip
    x = "%x"
    for i in range(length):
        body.append(f"  %m{i} = linalg.matmul ins({x}, %w : {t}, {t}) outs(%f : {t}) -> {t}")
        body.append(f"  %t{i} = math.tanh %m{i} : {t}")
        x = f"%t{i}"
    return f"func.func @main(%x: {t}, %w: {t}) -> {t} {{\n" + "\n".join(body) + f"\n  return {x} : {t}\n}}\n"


def compile_mlir(text: str, out: Path, target: str) -> Path:
    source = out.with_suffix(".mlir")
    source.write_text(text)
    compiler = Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(compiler), str(source), *target_flags(target), "-o", str(out)], check=True)
    return out


def timed(command: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes) and stdout of ``command`` in a child process (whose exit status is
    one of ``ok``)."""
    wrapper = (
        "import resource, subprocess, sys, time, json;"
        "t = time.perf_counter(); p = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "w = time.perf_counter() - t;"
        "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024;"
        "sys.stderr.write(p.stderr[-2000:]); print(json.dumps([w, r, p.returncode, p.stdout]))"
    )
    proc = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    wall, rss, code, stdout = json.loads(proc.stdout.strip().splitlines()[-1])
    if code not in ok:
        raise SystemExit(f"{' '.join(command[:4])}... failed: {proc.stderr[-2000:]}")
    return wall, rss, stdout


def bench(label: str, a: Path, b: Path, inputs: list[str]) -> dict:
    lens = [sys.executable, "-m", "app.launcher"]
    out = f"--output=@{a.parent / 'result.npy'}"
    run_a = timed([*lens, "run", str(a), "--engine=debug", "--function=main", *inputs, out])
    run_b = timed([*lens, "run", str(b), "--engine=debug", "--function=main", *inputs, out])
    diverge = timed([*lens, "diverge", str(a), str(b), "--function=main", *inputs, "--json"], ok=(0, 1))  # 1: diverged
    report = json.loads(diverge[2])
    plain = run_a[0] + run_b[0]
    row = {
        "program": label,
        "dispatches": report["dispatches_compared"],
        "run_a_s": round(run_a[0], 2),
        "run_b_s": round(run_b[0], 2),
        "diverge_s": round(diverge[0], 2),
        "ratio_to_two_runs": round(diverge[0] / plain, 2),
        "peak_rss_run_mib": round(max(run_a[1], run_b[1]) / 2**20, 1),
        "peak_rss_diverge_mib": round(diverge[1] / 2**20, 1),
        "first_divergence": report["first_divergence"],
        "verdicts": report["verdicts"],
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--program", choices=["resnet18", "chain2000", "both"], default="both")
    parser.add_argument("--b-target", default="llvm-cpu", choices=["llvm-cpu", "vmvx"])
    parser.add_argument("--chain-length", type=int, default=2000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lens-diverge-bench-"))
    rng = np.random.default_rng(0)
    if args.program in ("resnet18", "both"):
        text, shapes = resnet18_mlir()
        a = compile_mlir(text, work / "resnet18_a.vmfb", "llvm-cpu")
        b = a if args.b_target == "llvm-cpu" else compile_mlir(text, work / "resnet18_b.vmfb", args.b_target)
        inputs = []
        for i, s in enumerate(shapes):
            fan_in = int(np.prod(s[1:])) if i else 1
            data = (rng.standard_normal(s) * (np.sqrt(2.0 / fan_in) if i else 1.0)).astype(np.float32)
            np.save(work / f"r{i}.npy", data)
            inputs.append(f"--input=@{work / f'r{i}.npy'}")
        bench("resnet18", a, b, inputs)
    if args.program in ("chain2000", "both"):
        text = chain_mlir(args.chain_length)
        a = compile_mlir(text, work / "chain_a.vmfb", "llvm-cpu")
        b = a if args.b_target == "llvm-cpu" else compile_mlir(text, work / "chain_b.vmfb", args.b_target)
        np.save(work / "x.npy", rng.standard_normal((64, 64)).astype(np.float32))
        np.save(work / "w.npy", (rng.standard_normal((64, 64)) / 8).astype(np.float32))
        bench(f"chain{args.chain_length}", a, b, [f"--input=@{work / 'x.npy'}", f"--input=@{work / 'w.npy'}"])


if __name__ == "__main__":
    main()
