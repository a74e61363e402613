"""Overhead of phase capture: a compile job (phase snapshots, pass timing, executable dumps) against a
plain ``iree-compile`` of the same program, median of N runs each, interleaved.

    .venv/bin/python benchmarks/compile_overhead.py [--runs 5] [--target llvm-cpu] [SAMPLE ...]

Prints one line per sample and configuration with the ratio (goal: phase capture <= 1.2x).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from engine.compiler import CompileRequest, compile_program
from engine.compiler.job import iree_compile_path
from engine.compiler.targets import target_flags
from engine.samples import sample_path

CONFIGS = {
    "phases only": dict(dump_executables=False, timing=False),
    "phases+timing": dict(dump_executables=False, timing=True),
    "full capture": dict(dump_executables=True, timing=True),
}


def plain(sample: str, target: str, out: Path) -> float:
    start = time.perf_counter()
    cmd = [
        iree_compile_path(),
        str(sample_path(sample)),
        *target_flags(target),
        "-o",
        str(out / "plain.vmfb"),
    ]
    subprocess.run(cmd, check=True)
    return time.perf_counter() - start


def captured(sample: str, target: str, out: Path, options: dict) -> float:
    start = time.perf_counter()
    compile_program(
        CompileRequest(sample_path(sample), target=target, **options), out_dir=out
    ).raise_if_failed()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("samples", nargs="*", default=["mlp", "softmax", "conv"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", default="llvm-cpu")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for sample in args.samples:
            times: dict[str, list[float]] = {"plain": [], **{name: [] for name in CONFIGS}}
            for run in range(args.runs):
                times["plain"].append(plain(sample, args.target, root))
                for name, options in CONFIGS.items():
                    times[name].append(
                        captured(sample, args.target, root / f"{sample}-{name}-{run}", options)
                    )
            base = statistics.median(times["plain"])
            print(f"{sample} ({args.target}): plain iree-compile {base:.3f} s")
            for name in CONFIGS:
                t = statistics.median(times[name])
                print(f"  {name:14s} {t:.3f} s  ratio {t / base:.2f}x")


if __name__ == "__main__":
    main()
