"""Dispatches per second of a small elementwise kernel (4x8 f32: a*b+|a|) on a Vulkan device.

Measures our Vulkan device three ways, and IREE's own runtime on the same device for comparison:
  batched      one command buffer of N dispatches (barriers between), one submission, one wait
  split        the same, split at every dispatch for an observer (submit and wait per dispatch)
  reference    iree.runtime calling the compiled program N times (one dispatch per call)

    .venv/bin/python benchmarks/vulkan_dispatch_rate.py [--count 2000] [--device NAME]
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

from engine.runtime.hal.device import DispatchObserver  # noqa: E402
from engine.runtime.hal.vulkan import VulkanDevice  # noqa: E402


def vke1(vmfb: Path) -> bytes:
    data = vmfb.read_bytes()
    return data[data.find(b"VKE1\0\0\0\0") :]


def ours(vmfb: Path, count: int, device: str | None) -> dict[str, float]:
    a = np.arange(32, dtype=np.float32)
    b = np.ones(32, np.float32)
    with VulkanDevice(device) as dev:
        pipeline = dev.load_executable(vke1(vmfb)).pipeline(0)
        ba, bb, bc = dev.allocate(128), dev.allocate(128), dev.allocate(128)
        dev.write(ba, 0, a)
        dev.write(bb, 0, b)
        bindings = [(ba, 0, 128), (bb, 0, 128), (bc, 0, 128)]

        t0 = time.perf_counter()
        cb = dev.create_command_buffer()
        cb.begin()
        for _ in range(count):
            cb.dispatch(pipeline, (1, 1, 1), (), bindings)
            cb.execution_barrier()
        cb.end()
        t1 = time.perf_counter()
        dev.submit(cb).wait()
        t2 = time.perf_counter()
        assert np.array_equal(dev.read(bc).view(np.float32), a * b + np.abs(a))

        class Observer(DispatchObserver):  # the HAL's observer API: a no-op that splits the submission
            pass

        n_split = max(1, count // 4)
        cb2 = dev.create_command_buffer()
        cb2.begin()
        for _ in range(n_split):
            cb2.dispatch(pipeline, (1, 1, 1), (), bindings)
            cb2.execution_barrier()
        cb2.end()
        t3 = time.perf_counter()
        dev.submit(cb2, observer=Observer())
        t4 = time.perf_counter()
        return {
            "device": dev.info.name,
            "record_per_s": count / (t1 - t0),
            "batched_per_s": count / (t2 - t0),
            "batched_submit_only_per_s": count / (t2 - t1),
            "split_per_s": n_split / (t4 - t3),
        }


def reference(vmfb: Path, count: int) -> float:
    import iree.runtime as rt

    config = rt.Config("vulkan")
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb.read_bytes()))
    f = ctx.modules.module["main"]
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.ones((4, 8), np.float32)
    f(a, b)  # warm-up: pipeline creation
    t0 = time.perf_counter()
    for _ in range(count):
        f(a, b)
    return count / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--device", default=None, help="Vulkan device index or name substring")
    args = parser.parse_args()
    device = int(args.device) if args.device and args.device.isdigit() else args.device
    with tempfile.TemporaryDirectory() as tmp:
        vmfb = compile_sample("elementwise", "vulkan-spirv", Path(tmp) / "elementwise.vulkan.vmfb")
        r = ours(vmfb, args.count, device)
        ref = reference(vmfb, args.count)
    print(f"device: {r['device']}")
    print(f"debug engine, record only:            {r['record_per_s']:10.0f} dispatches/s")
    print(f"debug engine, batched (record+run):   {r['batched_per_s']:10.0f} dispatches/s")
    print(f"debug engine, batched (encode+run):   {r['batched_submit_only_per_s']:10.0f} dispatches/s")
    print(f"debug engine, split per dispatch:     {r['split_per_s']:10.0f} dispatches/s")
    print(f"reference (iree.runtime, 1 per call): {ref:10.0f} dispatches/s")
    print(f"debug/reference: batched {r['batched_per_s'] / ref:.2f}x, split {r['split_per_s'] / ref:.2f}x")


if __name__ == "__main__":
    main()
