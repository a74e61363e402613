"""A CNN built for VMVX: IREE's runtime against the debug engine (VMVX dispatches as native code).

Compiles a shared model (``../shared/models``: squeezenet1_1 by default, efficientvit_m0 (timm) or
small_cnn) for VMVX, then
calls it in both engines, interleaved: the debug engine's first call (it translates and compiles every
VMVX executable then), and the best of the later calls of each. Prints the times, the ratio (the goal is
at most 20x IREE's runtime) and whether the outputs are bit-identical.

    .venv/bin/python benchmarks/vmvx_cnn.py [--model squeezenet1_1|efficientvit_m0|small_cnn] [--calls N]
"""

from __future__ import annotations

import argparse
import lzma
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from engine.compiler.targets import target_flags  # noqa: E402
from engine.runtime.debug_runner import DebugRunner  # noqa: E402
from engine.runtime.function_io import Tensor  # noqa: E402
from engine.runtime.reference import ReferenceRunner  # noqa: E402
from engine.trace.ireeprof import iree_tool  # noqa: E402

MODELS = ROOT.parent / "shared" / "models"
FUNCTIONS = {"squeezenet1_1": "main", "efficientvit_m0": "main", "small_cnn": "small_cnn"}


def source_of(model: str, tmp: Path) -> Path:
    plain = MODELS / f"{model}.mlir"
    if plain.exists():
        return plain
    packed = MODELS / f"{model}.mlir.xz"
    out = tmp / f"{model}.mlir"
    out.write_bytes(lzma.decompress(packed.read_bytes()))
    return out


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="squeezenet1_1", choices=sorted(FUNCTIONS))
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    function = FUNCTIONS[args.model]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        vmfb = tmp / f"{args.model}_vmvx.vmfb"
        t_compile, _ = timed(
            lambda: subprocess.run(
                [
                    iree_tool("iree-compile"),
                    str(source_of(args.model, tmp)),
                    *target_flags("vmvx"),
                    "-o",
                    str(vmfb),
                ],
                check=True,
            )
        )
        x = [Tensor.from_numpy(np.load(MODELS / f"{args.model}_x.npy"))]
        reference = ReferenceRunner(str(vmfb), "local-sync")
        debug = DebugRunner(vmfb, "local-sync")
        t_first, debug_out = timed(lambda: debug.invoke(function, x))
        ref_times, debug_times = [], []
        ref_out = None
        for _ in range(args.calls):
            t, ref_out = timed(lambda: reference.invoke(function, x))
            ref_times.append(t)
            t, debug_out = timed(lambda: debug.invoke(function, x))
            debug_times.append(t)
        same = ref_out[0].array.tobytes() == debug_out[0].array.tobytes()
        print(f"model {args.model} (VMVX, iree-compile {t_compile:.1f} s)")
        print(f"  IREE runtime    best {min(ref_times):8.3f} s  ({', '.join(f'{t:.3f}' for t in ref_times)})")
        print(
            f"  debug engine    best {min(debug_times):8.3f} s  ({', '.join(f'{t:.3f}' for t in debug_times)})"
        )
        print(f"  debug first call     {t_first:8.3f} s  (translates and compiles the VMVX executables)")
        print(f"  ratio debug/IREE     {min(debug_times) / min(ref_times):8.2f}x  (goal <= 20x)")
        print(f"  outputs bit-identical: {same}")
        torch_y = MODELS / f"{args.model}_torch_y.npy"
        if torch_y.exists():
            y = np.load(torch_y)
            got = debug_out[0].array.reshape(y.shape)
            scale = float(np.abs(y).max()) or 1.0
            print(
                f"  debug vs PyTorch: max abs {float(np.abs(got - y).max()):.3g} (output scale {scale:.3g})"
            )


if __name__ == "__main__":
    main()
