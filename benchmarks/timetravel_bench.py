"""Time travel figures: recording overhead, reverse-step latency, memory of the history.

    nice -n 19 .venv/bin/python benchmarks/timetravel_bench.py [--instructions 1000000] [--samples 30]

Programs (compiled here with the real iree-compile for llvm-cpu):
* ``spin``: a host loop of scalar arithmetic, about 9 instructions an iteration, sized to the requested
  instruction count (one long run of the VM, as the collatz loop but as long as asked);
* ``repeat_double`` of the control_flow sample: a loop with one dispatch each iteration (buffers, fences
  and command buffers in every checkpoint).

For each: forward runs to the end (five of each, interleaved, medians) without history (plain ``Interpreter`` + ``Controller.continue_``),
the same with history (``TimeTravel``, default interval and budget), their ratio (goal <= 1.3x); then
reverse steps from random positions anywhere in the run (``goto(p)`` then ``reverse_step(1)``, timed: the
restore of the nearest checkpoint plus the replay; goal < 100 ms); the history's memory per million
instructions. Each reverse step's state is checked against the position it claims.

Times are CPU time of this process (``time.process_time``): the machine this runs on is shared, and
wall-clock figures there measure the neighbours. Wall-clock medians are printed alongside.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.compiler.targets import TARGETS  # noqa: E402
from engine.runtime.debug_runner import DebugRunner  # noqa: E402
from engine.runtime.function_io import parse_inputs, split_cconv  # noqa: E402
from engine.runtime.vm.controller import Controller, FunctionBreakpoint  # noqa: E402
from engine.samples import sample_path  # noqa: E402
from engine.timetravel import TimeTravel  # noqa: E402

SPIN = """
func.func @spin(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c7 = arith.constant 7 : i32
  %r:2 = scf.while (%i = %c0, %acc = %c1) : (i32, i32) -> (i32, i32) {
    %more = arith.cmpi slt, %i, %n : i32
    scf.condition(%more) %i, %acc : i32, i32
  } do {
  ^bb0(%i: i32, %acc: i32):
    %m = arith.muli %acc, %c7 : i32
    %x = arith.xori %m, %i : i32
    %next = arith.addi %i, %c1 : i32
    scf.yield %next, %x : i32, i32
  }
  return %r#1 : i32
}
"""


def compile_mlir(src: Path, out: Path, target: str = "llvm-cpu") -> Path:
    iree_compile = ROOT / ".venv" / "bin" / "iree-compile"
    subprocess.run([str(iree_compile), str(src), *TARGETS[target].flags, "-o", str(out)], check=True)
    return out


DEVICE = {"local-sync": "local-sync"}


def begin(path: Path, function: str, inputs: list[str], history: bool):
    runner = DebugRunner(path, DEVICE.get(str(path), "local-sync"))
    kinds = split_cconv(runner.cconv(function))[0]
    args = [runner.to_vm(k, v) for k, v in zip(kinds, parse_inputs(inputs, kinds))]
    if history:
        tt = TimeTravel.for_runner(runner)
        tt.begin_call(function, args)
        return runner, tt, tt.controller
    runner.context.begin_call(function, args)
    return runner, None, Controller(runner.context)


def forward_seconds(path, function, inputs, history: bool) -> tuple[float, object]:
    runner, tt, controller = begin(path, function, inputs, history)
    start = time.process_time()
    stop = controller.continue_()
    seconds = time.process_time() - start
    assert stop.reason == "done", stop
    return seconds, tt


def forward_pair(path, function, inputs, repeats: int = 5) -> tuple[float, float, object]:
    """Median CPU seconds of runs without and with history, interleaved (the machine's load drifts)."""
    off, on = [], []
    tt = None
    for _ in range(repeats):
        off.append(forward_seconds(path, function, inputs, history=False)[0])
        seconds, tt = forward_seconds(path, function, inputs, history=True)
        on.append(seconds)
    return statistics.median(off), statistics.median(on), tt


def bench(name: str, path: Path, function: str, inputs: list[str], samples: int) -> None:
    plain, recorded, tt = forward_pair(path, function, inputs)
    total = tt.position
    print(f"== {name}: {total:,} instructions, {tt.dispatch_count} dispatches")
    print(f"forward run, history off: {plain * 1e3:9.1f} ms ({total / plain / 1e6:.2f} M instructions/s)")
    print(f"forward run, history on : {recorded * 1e3:9.1f} ms  -> overhead {recorded / plain:.3f}x (goal <= 1.3x)")
    print(
        f"checkpoints: {len(tt.checkpoints)} every {tt.interval:,} instructions, "
        f"snapshots took {tt.snapshot_seconds * 1e3:.1f} ms in all"
    )
    mem = tt.memory_bytes
    print(f"history memory: {mem / 1024:.1f} KiB = {mem / 1024 / (total / 1e6):.1f} KiB per million instructions")
    rng = random.Random(1)
    latencies = []
    walls = []
    for _ in range(samples):
        p = rng.randrange(1, total + 1)
        tt.goto(p)
        start, wall = time.process_time(), time.perf_counter()
        stop = tt.reverse_step(1)
        latencies.append(time.process_time() - start)
        walls.append(time.perf_counter() - wall)
        assert stop.position == p - 1 == tt.position
    latencies.sort()
    print(
        f"reverse-step anywhere ({samples} random positions): median {statistics.median(latencies) * 1e3:.1f} ms, "
        f"p90 {latencies[int(0.9 * (len(latencies) - 1))] * 1e3:.1f} ms, max {latencies[-1] * 1e3:.1f} ms "
        f"(goal < 100 ms); wall-clock median {statistics.median(walls) * 1e3:.1f} ms"
    )
    tt.goto(total)
    tt.controller.add_breakpoint(FunctionBreakpoint(function))  # hit once, at the entry
    start = time.process_time()
    stop = tt.reverse_continue()
    print(
        f"reverse-continue to a breakpoint at the start, from the end: "
        f"{(time.process_time() - start) * 1e3:.1f} ms ({stop.reason} at {stop.position})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instructions", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--dispatch-iterations", type=int, default=300)
    ap.add_argument("--vulkan", action="store_true", help="also the dispatch loop on Vulkan (lavapipe here)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "spin.mlir").write_text(SPIN)
        spin = compile_mlir(tmp_path / "spin.mlir", tmp_path / "spin.vmfb")
        flow = compile_mlir(sample_path("control_flow"), tmp_path / "control_flow.vmfb")
        # Measure instructions per iteration once, then size the loop to the requested count.
        _, tt = forward_seconds(spin, "spin", ["1000"], history=True)
        per_iteration = tt.position / 1000
        n = max(1, int(a.instructions / per_iteration))
        bench(f"spin({n})", spin, "spin", [str(n)], a.samples)
        bench(
            f"control_flow.repeat_double(n={a.dispatch_iterations})",
            flow,
            "repeat_double",
            ["4xf32=1 2 3 4", str(a.dispatch_iterations)],
            a.samples,
        )
        if a.vulkan:
            vk = compile_mlir(sample_path("control_flow"), tmp_path / "control_flow.vk.vmfb", "vulkan-spirv")
            DEVICE[str(vk)] = "vulkan"
            bench(
                f"control_flow.repeat_double(n={a.dispatch_iterations}) on Vulkan",
                vk,
                "repeat_double",
                ["4xf32=1 2 3 4", str(a.dispatch_iterations)],
                a.samples,
            )


if __name__ == "__main__":
    main()
