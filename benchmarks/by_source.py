"""Time by source line and per-dispatch timing against IREE's tool, on the shared models.

    .venv/bin/python benchmarks/by_source.py [--models small_cnn attention_block squeezenet1_1 efficientvit_m0]
                                            [--agreement-model squeezenet1_1] [--dispatches 5] [--rounds 5]

Prints, per model: the profile's dispatch time, how much of it ``profile --by-source`` puts on input-program
lines holding torch ops (the issue asks >= 90 %), how many lines, and how long finding the source ops took
(the flow-phase compile). Then ``iree-lens benchmark``'s timing of the model's most expensive dispatches
against ``iree-benchmark-executable`` (alternating, same minute): CPU-time and wall-time medians and their
ratios, and each one's noise. The machine's load is printed with the figures.
"""

from __future__ import annotations

import argparse
import lzma
import os
import subprocess
import time
from pathlib import Path

import numpy as np

from engine.compiler.targets import target_flags
from engine.trace.ireeprof import iree_tool

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
FUNCTIONS = {"small_cnn": "small_cnn", "attention_block": "attention_block"}


def model_module(model: str, work: Path) -> tuple[Path, Path, Path]:
    """(input program, module, input) of a shared model, compiled for llvm-cpu once into ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    source = MODELS / f"{model}.mlir"
    if not source.exists():
        source = work / f"{model}.mlir"
        if not source.exists():
            source.write_bytes(lzma.open(MODELS / f"{model}.mlir.xz").read())
    vmfb = work / f"{model}.vmfb"
    if not vmfb.exists():
        subprocess.run([iree_tool("iree-compile"), str(source), *target_flags("llvm-cpu"), "-o", str(vmfb)],
                       check=True, capture_output=True)  # fmt: skip
    return source, vmfb, MODELS / f"{model}_x.npy"


def coverage(model: str, work: Path) -> None:
    from engine.cli.profile import profile_reference
    from engine.trace.by_source import attribute, source_map

    source, vmfb, x = model_module(model, work)
    function = FUNCTIONS.get(model, "main")
    trace = profile_reference(str(vmfb), function, [f"@{x}"], "local-sync", repeat=3)
    t = time.perf_counter()
    sources = source_map(vmfb, source=source)
    found_s = time.perf_counter() - t
    result = attribute(trace, sources)
    split = sum(1 for how in sources.how.values() if how == "flow")
    print(f"{model:16} {result.dispatch_time_ns / 3e6:9.2f} ms/call  {result.coverage * 100:6.1f} % on frontend-op lines  "
          f"{len(result.by_source):4} lines  {split}/{len(sources.how)} exports split by their ops  "
          f"source ops found in {found_s:.1f} s")  # fmt: skip


def agreement(model: str, work: Path, count: int, rounds: int) -> None:
    from engine.cli.profile import profile_reference
    from engine.dispatch.kernel_timing import KernelRun, compare_with_iree
    from engine.runtime.debug_runner import DebugRunner, create_device
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.hal.device import DispatchObserver
    from engine.runtime.hal.module import HalModule
    from engine.runtime.vmfb.module import open_vmfb
    from engine.trace.stats import zone_statistics

    _, vmfb, x = model_module(model, work)
    function = FUNCTIONS.get(model, "main")
    trace = profile_reference(str(vmfb), function, [f"@{x}"], "local-sync")
    stats = zone_statistics(trace, trace.name_ids("dispatch"))
    wanted = [s.name for s in sorted(stats, key=lambda s: -s.total_ns)[:count]]
    module = open_vmfb(str(vmfb))
    executables = {f"rodata {e.rodata_ordinal}": e for e in module.executables}
    runs: dict[str, KernelRun] = {}

    class Keep(DispatchObserver):
        def before_dispatch(self, record) -> None:
            if record.export_name in wanted and record.export_name not in runs:
                e = executables[record.executable]
                bytes_before = tuple(
                    np.array(b.data, copy=True).view(np.uint8).reshape(-1) for b in record.bindings
                )
                runs[record.export_name] = KernelRun(bytes(e.data), e.format, record.export_name,
                                                     tuple(record.workgroup_count),
                                                     tuple(int(c) & 0xFFFFFFFF for c in record.constants), bytes_before)  # fmt: skip

    device = create_device("local-sync")
    runner = DebugRunner(str(vmfb), "local-sync", hal_module=HalModule(device))
    device.observers.append(Keep())
    runner.invoke(function, parse_inputs([f"@{x}"], split_cconv(runner.cconv(function))[0]))
    print(f"\n{model}: its {count} most expensive dispatches, {rounds} rounds of 0.2 s repetitions, IREE Lens and "
          "iree-benchmark-executable alternating (CPU time; wall time after)")  # fmt: skip
    for name in wanted:
        a = compare_with_iree(runs[name], rounds=rounds)
        wall = a.lens.wall_median_s / a.iree.wall_median_s
        noisy = " (too noisy to tell 5 %)" if a.lens.too_noisy or a.iree.too_noisy else ""
        print(f"  {name[-48:]:48} lens {a.lens.median_s * 1e6:9.1f} us  iree {a.iree.median_s * 1e6:9.1f} us  "
              f"ratio {a.ratio:.3f} (paired {a.paired_ratio:.3f})  noise +-{a.lens.relative_spread * 100:.1f} / "
              f"+-{a.iree.relative_spread * 100:.1f} %  wall ratio {wall:.3f}{noisy}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--models", nargs="*", default=["small_cnn", "attention_block", "squeezenet1_1", "efficientvit_m0"]
    )
    p.add_argument("--agreement-model", default="squeezenet1_1")
    p.add_argument("--dispatches", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--work", default="/tmp/lens-bench-by-source")
    args = p.parse_args()
    work = Path(args.work)
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    for model in args.models:
        coverage(model, work)
    if args.agreement_model:
        agreement(args.agreement_model, work, args.dispatches, args.rounds)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
