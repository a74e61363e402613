"""``ExecutableSubstitutions`` when the source is known: edited LLVM IR and SPIR-V swapped in the ``hal`` phase.

Expected values come from numpy on the inputs.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from engine.compiler import CompileRequest, ExecutableSubstitutions, compile_program, hal_binaries
from engine.runtime.function_io import Tensor
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.runtime.reference import ReferenceRunner
from engine.samples import sample_path

_NO_VULKAN = vulkan_available()


def _inputs():
    rng = np.random.default_rng(2)
    return rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((4, 8)).astype(np.float32)


def _run(vmfb, device, a, b) -> np.ndarray:
    (out,) = ReferenceRunner(vmfb, device).invoke("main", [Tensor.from_numpy(a), Tensor.from_numpy(b)])
    return out.array


def test_llvm_ir_at_the_hal_phase(tmp_path):
    base = compile_program(CompileRequest(sample_path("elementwise")), out_dir=tmp_path / "base")
    base.raise_if_failed()
    (binary,) = hal_binaries(base.phase("hal").text())
    ll = next(p for e in base.executables for p in e.intermediates if p.name.endswith(".optimized.ll"))
    edited, n = re.subn(r"= fadd (contract )?<(\d+) x float>", r"= fmul \1<\2 x float>", ll.read_text())
    assert n >= 1
    subs = ExecutableSubstitutions(base, tmp_path / "work")
    subs.replace_llvm_ir(binary.executable, edited)
    result = subs.apply(out_dir=tmp_path / "out")
    a, b = _inputs()
    np.testing.assert_array_equal(_run(result.vmfb_path, "local-sync", a, b), (a * b) * np.abs(a))


@pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}")
def test_spirv_text_at_the_hal_phase(tmp_path):
    request = CompileRequest(sample_path("elementwise"), extra_flags=("--iree-hal-target-device=vulkan",))
    base = compile_program(request, out_dir=tmp_path / "base")
    base.raise_if_failed()
    (binary,) = hal_binaries(base.phase("hal").text())
    spv = next(p for e in base.executables for p in e.binaries if p.suffix == ".spv")
    text = subprocess.run(["spirv-dis", str(spv)], check=True, capture_output=True, text=True).stdout
    subs = ExecutableSubstitutions(base, tmp_path / "work")
    subs.replace_spirv(binary.executable, text.replace("OpFAdd %float", "OpFMul %float"))
    result = subs.apply(out_dir=tmp_path / "out")
    a, b = _inputs()
    np.testing.assert_array_equal(_run(result.vmfb_path, "vulkan", a, b), (a * b) * np.abs(a))
