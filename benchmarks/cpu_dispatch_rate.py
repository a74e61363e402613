"""How fast ``CpuExecutableLibrary`` dispatches: dispatches per second and the cost of one workgroup.

    .venv/bin/python benchmarks/cpu_dispatch_rate.py

* dispatches/s of a tiny elementwise kernel (16 x f32, one workgroup): building the argument structs
  and running (``dispatch``), and re-running a ``PreparedDispatch`` (``run``), through both loops;
* overhead per workgroup, measured on a copy of that kernel whose code is patched to ``return 0``, so
  the figure is the loop's own cost (native machine-code loop vs one ctypes call per workgroup).
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from elftools.elf.elffile import ELFFile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.compiler.targets import target_flags  # noqa: E402
from engine.runtime.hal.cpu_library import CpuExecutableLibrary, aligned_copy, aligned_empty  # noqa: E402
from engine.runtime.vmfb.module import open_vmfb  # noqa: E402

KERNEL = """
func.func @add(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %r = arith.addf %a, %b : tensor<16xf32>
  return %r : tensor<16xf32>
}
"""


def compile_kernel(tmp: Path) -> bytes:
    src, out = tmp / "add.mlir", tmp / "add.vmfb"
    src.write_text(KERNEL)
    compiler = Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(compiler), str(src), *target_flags("llvm-cpu"), "-o", str(out)], check=True)
    (elf,) = [x for x in open_vmfb(out).executables if x.format.startswith("embedded-elf")]
    return bytes(elf.data)


def rate(fn, min_seconds: float = 0.5) -> float:
    """Calls per second of ``fn``, timed over at least ``min_seconds``."""
    n, start = 0, time.perf_counter()
    batch = 1
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return n / elapsed
        batch *= 2


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        elf = compile_kernel(Path(d))
    lib = CpuExecutableLibrary.load(elf, "add")
    export = lib.exports[0]
    a, b = aligned_copy(np.arange(16, dtype=np.float32)), aligned_copy(np.ones(16, np.float32))
    out = aligned_empty(16, np.float32)
    lib.dispatch(0, (1, 1, 1), [], [a, b, out])
    assert np.array_equal(out, a + b)
    print(f"kernel: {export.name} ({export.attributes.binding_count} bindings, 1 workgroup)")

    for native in (True, False):
        loop = "native loop" if native else "python loop"
        full = rate(lambda native=native: lib.dispatch(0, (1, 1, 1), [], [a, b, out], native_loop=native))
        prepared = lib.prepare_dispatch(0, (1, 1, 1), [], [a, b, out])
        rerun = rate(lambda native=native, p=prepared: p.run(native_loop=native))
        print(
            f"  {loop}: dispatch() {full:>9,.0f}/s ({1e6 / full:6.1f} us)   prepared.run() {rerun:>9,.0f}/s ({1e6 / rerun:6.1f} us)"
        )

    # The same library with the kernel's first instructions replaced by `xor eax, eax; ret`.
    offset = next(ELFFile(io.BytesIO(elf)).address_offsets(lib.export_address(0) - lib.load_base))
    empty = CpuExecutableLibrary.load(elf[:offset] + bytes.fromhex("31c0c3") + elf[offset + 3 :], "empty")
    count = (1000, 10, 10)
    total = count[0] * count[1] * count[2]
    prepared = empty.prepare_dispatch(0, count, [], [a, b, out])
    print(f"per-workgroup overhead (empty kernel, {total:,} workgroups):")
    for native in (True, False):
        start = time.perf_counter()
        prepared.run(native_loop=native)
        per = (time.perf_counter() - start) / total
        print(f"  {'native loop' if native else 'python loop'}: {per * 1e9:8.1f} ns/workgroup")
    lib.close()
    empty.close()


if __name__ == "__main__":
    main()
