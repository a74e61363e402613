"""Programs compiled with ``--iree-execution-model=inline-dynamic`` import IREE's inline HAL (``hal_inline``,
``hal_loader``: host buffers with ``!vm.buffer`` storage, dispatches run at once) instead of ``hal``. The
debug engine runs them (engine/runtime/hal/inline_modules.py) as iree-run-module does, on llvm-cpu and VMVX
builds, and stops at their dispatches with their tensors; the reference engine (IREE's Python runtime, which
does not register the inline HAL) says so plainly. (IREE 3.13 builds inline-dynamic only for programs without
constant globals: the models of ../shared fail in iree-compile with "hal.devices.get" illegal.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import iree_run_module_stdout, lens_in_process, save_after_each_dispatch
from support.session import compile_program

from engine.dispatch.bundle import Bundle
from engine.runtime.vmfb.module import open_vmfb

INLINE = "--iree-execution-model=inline-dynamic"
W = np.diag(np.float32([0.5, 2, 0.25, 1]))
CHAIN_INPUTS = ("4x4xf32=1", "4x4xf32=" + " ".join(f"{v:g}" for v in W.reshape(-1)))


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[tuple[str, str], Path]:
    out = tmp_path_factory.mktemp("inline")
    # compile_program names a build with flags NAME.TARGET.traced.vmfb: one folder a target keeps them apart.
    for target in ("llvm-cpu", "vmvx"):
        (out / target).mkdir()
    return {(name, target): compile_program(name, target, out / target, INLINE)
            for name in ("matmul_chain12", "stateful") for target in ("llvm-cpu", "vmvx")}  # fmt: skip


def test_the_builds_import_the_inline_hal(builds):
    for vmfb in builds.values():
        names = {d.name for d in open_vmfb(vmfb).dependencies}
        assert {"hal_inline", "hal_loader"} <= names and "hal" not in names, names


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
@pytest.mark.parametrize("name, function, inputs", [("matmul_chain12", "main", CHAIN_INPUTS),
                                                    ("stateful", "accumulate", ("8xf32=1 2 3 4 5 6 7 8",))])
def test_the_debug_engine_prints_what_iree_run_module_prints(builds, target, name, function, inputs):
    vmfb = builds[(name, target)]
    proc = lens_in_process("run", str(vmfb), f"--function={function}", *[f"--input={i}" for i in inputs])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == iree_run_module_stdout(vmfb, function, inputs)


def test_every_dispatch_stops_and_its_output_is_the_chain_so_far(builds, tmp_path):
    # Dispatch k writes x @ w^(k+1), computed here by numpy from the inputs.
    vmfb = builds[("matmul_chain12", "llvm-cpu")]
    script = save_after_each_dispatch(tmp_path, 12)
    proc = lens_in_process("debug", str(vmfb), "--function=main", *[f"--input={i}" for i in CHAIN_INPUTS],
                           f"--commands={script}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Stopped (dispatch) after dispatch #") == 12
    x = np.ones((4, 4), np.float32)
    for k in range(12):
        x = x @ W
        # The output is a 4x4 slice of a binding (IREE may bind a slab that holds two tensors, at 64-byte steps).
        saved = [np.load(f).reshape(-1).view(np.float32) for f in sorted((tmp_path / str(k)).glob("*.npy"))]
        assert any(np.array_equal(s[i : i + 16].reshape(4, 4), x) for s in saved for i in range(0, s.size - 15, 16)), k


def test_its_dispatches_are_typed_by_a_rebuild_whose_kernels_are_its_own(tmp_path):
    # IREE's inline pipeline dumps no sources; the default build gives the same kernel bytes under other
    # executable names, so its sources type the tensors: each output a 4x4xf32, the chain numpy computes.
    program = tmp_path / "chain.mlir"  # its own folder: the module's debug locations name it, nothing beside
    program.write_text((Path(__file__).parent / "session_programs" / "matmul_chain12.mlir").read_text())
    vmfb = compile_program(str(program), "llvm-cpu", tmp_path, INLINE)
    out = tmp_path / "bundle"
    proc = lens_in_process("capture", str(vmfb), "--function=main", *[f"--input={i}" for i in CHAIN_INPUTS],
                           f"--out={out}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "typed by executable sources rebuilt" in proc.stderr, proc.stderr
    bundle = Bundle(out)
    assert len(bundle.dispatches) == 12
    x = np.ones((4, 4), np.float32)
    for d in bundle.dispatches:
        x = x @ W
        (output,) = bundle.dispatch_tensors(d, "outputs")
        assert d.tensors_from == "interface" and np.asarray(output).dtype == np.float32
        assert np.array_equal(np.asarray(output), x), d.ordinal


def test_the_reference_engine_says_it_has_no_inline_hal(builds):
    vmfb = builds[("matmul_chain12", "llvm-cpu")]
    proc = lens_in_process("run", str(vmfb), "--engine=reference", *[f"--input={i}" for i in CHAIN_INPUTS])
    assert proc.returncode != 0
    assert "inline-dynamic" in proc.stderr and "--engine=debug" not in proc.stderr.split("run it on")[0], proc.stderr
    assert "debug engine" in proc.stderr, proc.stderr
