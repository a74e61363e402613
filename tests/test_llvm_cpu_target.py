"""LLVM IR built again (an edited ``.ll`` substituted, the kernel stepper's instrumented kernel) is built for
the CPU its executable was built for, which IREE keeps out of the IR: for IREE's default (generic) CPU, a
multiply and an add the build kept apart are not contracted into an FMA the host has. An unedited IR then
gives the module's bits exactly, and the stepper's stores agree with what the dispatch wrote. A system-ELF
build's IR calls the C library's ``fmaf`` on a CPU without FMA: linked as a system library, it resolves."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import iree_tool, lens_in_process, save_matmul_inputs

from engine.samples import sample_path

BUILDS = {"default": (), "system": ("--iree-llvmcpu-link-embedded=false",)}  # no --iree-llvmcpu-target-cpu


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The matmul sample built as plain iree-compile builds it (IREE's default CPU), with its LLVM IR kept."""
    out = tmp_path_factory.mktemp("cpu_target")
    save_matmul_inputs(out, 3)
    for name, flags in BUILDS.items():
        proc = subprocess.run([iree_tool("iree-compile"), str(sample_path("matmul")), "--iree-hal-target-device=local",
                               "--iree-hal-local-target-device-backends=llvm-cpu", *flags,
                               f"--iree-hal-dump-executable-intermediates-to={out / name}", "-o", str(out / f"{name}.vmfb")],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        proc = subprocess.run([iree_tool("iree-run-module"), f"--module={out / f'{name}.vmfb'}", "--function=main",
                               f"--input=@{out / 'lhs.npy'}", f"--input=@{out / 'rhs.npy'}",
                               f"--output=@{out / f'{name}_iree.npy'}"], capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    return out


def inputs(folder: Path) -> list[str]:
    return [f"--input=@{folder / 'lhs.npy'}", f"--input=@{folder / 'rhs.npy'}"]


@pytest.mark.parametrize("build", BUILDS)
def test_the_unedited_ir_substituted_gives_the_modules_bits(folder, build):
    (linked,) = (folder / build).glob("*.linked.ll")
    out = folder / f"{build}_substituted.npy"
    proc = lens_in_process("run", str(folder / f"{build}.vmfb"), "--function=main", *inputs(folder),
                           f"--substitute=main_dispatch_0={linked}", f"--output=@{out}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(out), np.load(folder / f"{build}_iree.npy"))


@pytest.mark.parametrize("build", BUILDS)
def test_the_stepper_records_the_kernel_the_dispatch_ran(folder, build):
    proc = lens_in_process("kernel", str(folder / f"{build}.vmfb"), "--function=main", *inputs(folder),
                           "--dispatch=0")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "differ" not in proc.stderr and "868 statements" in proc.stdout
