"""Executable editor figures: time from "apply" to the rerun dispatch's outputs, and one executable before/after.

For each route (MLIR source, LLVM IR, on CPU; MLIR and SPIR-V text on Vulkan when available) on the samples:
compile with dumps, run the program once in the debug engine with dispatch snapshots, then time
``LiveSubstitutions.apply`` (build + interface check + swap) followed by ``rerun`` of the saved dispatch.
Then the dispatch is timed with the module's code and the edit: the emulated HAL's rerun loop, and IREE's
``iree-benchmark-executable`` on the same bindings and workgroup count.

Run: ``.venv/bin/python benchmarks/editor_apply.py`` (under ``nice -n 19`` on a shared machine).
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_support import compile_with_dumps

from engine.runtime.debug_runner import DebugRunner, create_device
from engine.runtime.function_io import Tensor
from engine.runtime.hal.module import HalModule
from engine.runtime.vmfb.module import open_vmfb
from engine.substitute.benchmark import ExecutableBenchmark, benchmark_runs, benchmark_tool
from engine.substitute.live import LiveSubstitutions

REPEATS = 5


def session(tmp: Path, sample: str, target: str, device_uri: str, inputs):
    vmfb = compile_with_dumps(sample, target, tmp / f"{sample}_{target}")
    device = create_device(device_uri)
    runner = DebugRunner(vmfb, device_uri, hal_module=HalModule(device))
    live = LiveSubstitutions(device, open_vmfb(vmfb))
    live.observe()
    runner.invoke("main", [Tensor.from_numpy(x) for x in inputs])
    return vmfb, live


def time_apply(live: LiveSubstitutions, name: str, path: Path) -> list[float]:
    snapshot = live.snapshots.snapshots[0]
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        live.apply(name, path)
        live.rerun(snapshot)
        times.append(time.perf_counter() - t0)
        live.revert(name)
    return times


def report(label: str, times: list[float]) -> None:
    print(f"{label:48s} median {statistics.median(times) * 1e3:7.0f} ms  (min {min(times) * 1e3:.0f}, "
          f"max {max(times) * 1e3:.0f}, n={len(times)})")  # fmt: skip


def main() -> None:
    rng = np.random.default_rng(0)
    ew_inputs = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2)]
    with tempfile.TemporaryDirectory(prefix="editor-bench-") as d:
        tmp = Path(d)
        print("apply -> rerun outputs (build, interface check, swap, rerun the saved dispatch)")
        vmfb, live = session(tmp, "elementwise", "cpu", "local-sync", ew_inputs)
        src = (vmfb.parent / "sources" / "module_main_dispatch_0.mlir").read_text()
        mlir = tmp / "edit.mlir"
        mlir.write_text(re.sub(r"arith\.addf", "arith.mulf", src))
        report("CPU  elementwise  .mlir (iree-compile)", time_apply(live, "main_dispatch_0", mlir))
        for stage in ("optimized", "linked"):
            ll_src = next((vmfb.parent / "intermediates").glob(f"*.{stage}.ll")).read_text()
            ll = tmp / f"edit.{stage}.ll"
            ll.write_text(re.sub(r"= fadd (contract )?<", r"= fmul \1<", ll_src))
            report(f"CPU  elementwise  .{stage}.ll (llvmlite + iree-lld)", time_apply(live, "main_dispatch_0", ll))

        mlp_inputs = [rng.integers(-4, 5, (2, 16)).astype(np.float32)]
        vmfb_mlp, live_mlp = session(tmp, "mlp", "cpu", "local-sync", mlp_inputs)
        src = (vmfb_mlp.parent / "sources" / "module_main_dispatch_0.mlir").read_text()
        mlp_edit = tmp / "mlp_edit.mlir"
        mlp_edit.write_text(src.replace("arith.maximumf", "arith.minimumf"))
        report("CPU  mlp (linked) dispatch_0 .mlir", time_apply(live_mlp, "main_dispatch_0", mlp_edit))
        ll_src = next((vmfb_mlp.parent / "intermediates").glob("*.optimized.ll")).read_text()
        mlp_ll = tmp / "mlp.optimized.ll"
        mlp_ll.write_text(ll_src)
        report("CPU  mlp (linked) whole library .optimized.ll", time_apply(live_mlp, "main_dispatch_0", mlp_ll))

        try:
            vk_vmfb, vk_live = session(tmp, "elementwise", "vulkan", "vulkan", ew_inputs)
        except Exception as e:  # noqa: BLE001 - no Vulkan here: say so and go on
            print(f"Vulkan: not measured ({e})")
            vk_live = None
        if vk_live is not None:
            src = (vk_vmfb.parent / "sources" / "module_main_dispatch_0.mlir").read_text()
            vk_mlir = tmp / "vk_edit.mlir"
            vk_mlir.write_text(re.sub(r"arith\.addf", "arith.mulf", src))
            report("Vulkan elementwise .mlir", time_apply(vk_live, "main_dispatch_0", vk_mlir))
            from engine.runtime.vmfb.executables import spirv_disassembly
            from engine.substitute.spirv import words_of

            spv = next((vk_vmfb.parent / "binaries").glob("*.spv"))
            text = spirv_disassembly(words_of(spv.read_bytes()))
            vk_asm = tmp / "vk_edit.spvasm"
            vk_asm.write_text(text.replace("OpFAdd %float", "OpFMul %float"))
            report("Vulkan elementwise .spvasm (spirv-as)", time_apply(vk_live, "main_dispatch_0_elementwise_32_f32", vk_asm))

        print("\none dispatch before/after an edit (elementwise main_dispatch_0, CPU)")
        live.apply("main_dispatch_0", mlir)
        original, edited = live.benchmark(repeats=50)
        print(f"{'emulated HAL rerun loop (fresh buffers each run)':48s} original {original * 1e6:7.1f} us, "
              f"edited {edited * 1e6:7.1f} us")  # fmt: skip
        if benchmark_tool() is not None:
            snap = live.snapshots.snapshots[0]
            module_binary = bytes(open_vmfb(vmfb).executables[0].data)
            replacement = live.active["main_dispatch_0"]
            args = (0, snap.before, snap.record.workgroup_count, snap.record.constants)
            before = benchmark_runs(ExecutableBenchmark(module_binary, "embedded-elf-x86_64", *args), 1)[0]
            after = benchmark_runs(ExecutableBenchmark(replacement.data, "embedded-elf-x86_64", *args), 1)[0]
            print(f"{'iree-benchmark-executable (per dispatch)':48s} original {before * 1e6:7.2f} us, "
                  f"edited {after * 1e6:7.2f} us")  # fmt: skip


if __name__ == "__main__":
    main()
