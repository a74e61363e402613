"""Interpreter speed in VM instructions per second on host-code-heavy loops.

* ``collatz_steps`` of resources/samples/control_flow.mlir (compiled for llvm-cpu: the function is pure
  host code), called for many starting values;
* a tight VM-dialect counting loop (cmp, cond_br, add, add, br per iteration).

Both run through ``Interpreter.run`` (the fast path: pre-compiled closures, no step records).
Usage: ``.venv/bin/python benchmarks/vm_speed.py`` (prints the load average first: other work on the machine
lowers the wall-clock figures).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.compiler.targets import TARGETS  # noqa: E402
from engine.runtime.hal.module import HalModule  # noqa: E402
from engine.runtime.vm.context import VmContext  # noqa: E402
from engine.runtime.vmfb.module import open_vmfb  # noqa: E402
from engine.samples import sample_path  # noqa: E402

# The counting loop (one home for tests and this benchmark: a VM-dialect source file under tests/).
COUNTING_LOOP = ROOT / "tests" / "vm_programs" / "counting_loop.mlir"


def _iree_compile(args: list[str]) -> None:
    tool = Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(tool) if tool.exists() else "iree-compile", *args], check=True)


def measure(ctx: VmContext, fn: str, arg_sets: list[list]) -> tuple[int, float, float]:
    """(instructions, wall seconds, this process's CPU seconds): on a machine shared with other work the
    wall figure falls with the load, the CPU figure much less."""
    t = ctx.interpreter
    before = t.steps_executed
    start, cpu = time.perf_counter(), time.process_time()
    for args in arg_sets:
        ctx.invoke(fn, args)
    return t.steps_executed - before, time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as d:
        cf = Path(d) / "control_flow.vmfb"
        _iree_compile([str(sample_path("control_flow")), *TARGETS["llvm-cpu"].flags, "-o", str(cf)])
        spin = Path(d) / "spin.vmfb"
        _iree_compile(["--compile-from=vm", "--output-format=vm-bytecode", str(COUNTING_LOOP), "-o", str(spin)])

        ctx = VmContext([HalModule(), open_vmfb(cf, writable=True)])
        ctx.invoke("collatz_steps", [27])  # compile the closures once
        n, dt, cpu = measure(ctx, "collatz_steps", [[s] for s in range(1, 20001)])
        print(
            f"collatz_steps(1..20000): {n} instructions in {dt:.3f} s = {n / dt / 1e6:.2f} M instructions/s "
            f"({n / cpu / 1e6:.2f} M/s of CPU time)"
        )

        ctx = VmContext([open_vmfb(spin, writable=True)])
        n, dt, cpu = measure(ctx, "loop", [[2_000_000]])
        print(
            f"counting loop (2M iterations): {n} instructions in {dt:.3f} s = {n / dt / 1e6:.2f} M instructions/s "
            f"({n / cpu / 1e6:.2f} M/s of CPU time)"
        )

        ctx.begin_call("loop", [20000])
        t = ctx.interpreter
        start = time.perf_counter()
        steps = 0
        while not t.finished:
            t.step()
            steps += 1
        dt = time.perf_counter() - start
        print(
            f"step() with records: {steps} instructions in {dt:.3f} s = {steps / dt / 1e3:.0f} k instructions/s"
        )


if __name__ == "__main__":
    main()
