"""VMVX dispatch functions run as native code (engine.runtime.vm.vmvx_native) give the interpreter's results
bit for bit, IREE's runtime's on a real CNN, and the interpreter's trap when a check fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import compile_for, iree_compile

from engine.errors import DispatchError
from engine.runtime.function_io import Tensor
from engine.runtime.vm import vmvx
from engine.runtime.vm.vmvx import VmvxExecutable
from engine.runtime.vmfb.executables import vmvx_module
from engine.runtime.vmfb.module import open_vmfb

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent.parent / "shared" / "models"
COUNT, WORKGROUPS = 16, 3  # elements per workgroup, workgroups
OUT_WORDS = 16  # words the kernel writes per element


@pytest.fixture(scope="module")
def ops_module(tmp_path_factory) -> bytes:
    """A hand-written dispatch function using the VM ops VMVX code uses (and the edge cases C leaves to the
    compiler: INT_MIN / -1, NaN compares, lroundf of large values), compiled by iree-compile."""
    out = tmp_path_factory.mktemp("vmvx_ops") / "ops.vmfb"
    proc = iree_compile(
        ["--compile-from=vm", "--output-format=vm-bytecode",
         str(HERE / "vmvx_programs" / "dispatch_ops.mlir"), "-o", str(out)],
        text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out.read_bytes()


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    n = COUNT * WORKGROUPS
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    x[:8] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e30, -1e-40, 2.5]
    a = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    a[:6] = [-(2**31), -1, 0, 1, 2**31 - 1, -7]
    return x, a


def _dispatch(data: bytes, native: bool, count: int = COUNT) -> np.ndarray:
    vmvx.run_dispatches_natively(native)
    try:
        exe = VmvxExecutable.load(data)
    finally:
        vmvx.run_dispatches_natively(True)
    x, a = _inputs()
    out = np.zeros(COUNT * WORKGROUPS * OUT_WORDS, np.uint32)
    views = [x.view(np.uint8), a.view(np.uint8), out.view(np.uint8)]
    steps = exe.dispatch(0, (WORKGROUPS, 1, 1), [count], views)
    assert exe.native_refusals == {}
    assert steps > COUNT * WORKGROUPS * 60  # every instruction of every iteration counted
    return out, steps


def test_native_dispatch_equals_the_interpreter_bit_for_bit(ops_module):
    native, native_steps = _dispatch(ops_module, True)
    interpreted, interpreted_steps = _dispatch(ops_module, False)
    assert native.tobytes() == interpreted.tobytes()
    assert native_steps == interpreted_steps
    # Spot checks against numpy, so the two cannot agree on something wrong.
    x, a = _inputs()
    words = native.reshape(-1, OUT_WORDS)
    np.testing.assert_array_equal(words[:, 5], (x.view(np.uint32) & 0x7FFFFFFF))  # fabsf
    np.testing.assert_array_equal(words[:, 6], (x.view(np.uint32) ^ 0x80000000))  # negation
    np.testing.assert_array_equal(words[:, 8].view(np.float32), a.astype(np.float32))  # sitofp
    assert words[0, 11] == 2**31  # INT_MIN / -1 wraps to INT_MIN (C: undefined; the VM: wraps)
    with np.errstate(all="ignore"):
        rsqrt_nan = np.isnan(np.float32(1) / np.sqrt(x))
    np.testing.assert_array_equal(words[:, 3], rsqrt_nan.astype(np.uint32))


def test_native_out_of_bounds_raises_the_interpreters_trap(ops_module):
    # Element count past the bindings: the kernel's load goes out of bounds in workgroup 0.
    with pytest.raises(DispatchError) as native:
        _dispatch(ops_module, True, count=COUNT * WORKGROUPS + 1)
    with pytest.raises(DispatchError) as interpreted:
        _dispatch(ops_module, False, count=COUNT * WORKGROUPS + 1)
    assert str(native.value) == str(interpreted.value)
    assert "out-of-bounds" in str(native.value) and "workgroup (0, 0, 0)" in str(native.value)


def test_vmvx_cnn_native_equals_iree_and_the_interpreter(tmp_path):
    """small_cnn (a real ONNX import) built for VMVX: every dispatch function translates, and the debug run
    equals IREE's runtime and the interpreted debug run bit for bit."""
    from engine.runtime.debug_runner import DebugRunner
    from engine.runtime.reference import ReferenceRunner

    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not checked out)")
    vmfb = compile_for(source, tmp_path / "small_cnn.vmfb", "vmvx")
    module = open_vmfb(vmfb)
    assert module.executables
    for ex in module.executables:
        assert VmvxExecutable(vmvx_module(ex)).native_refusals == {}
    x = Tensor.from_numpy(np.load(MODELS / "small_cnn_x.npy"))
    expected = ReferenceRunner(str(vmfb), "local-sync").invoke("small_cnn", [x])[0].array
    native = DebugRunner(vmfb, "local-sync").invoke("small_cnn", [x])[0].array
    vmvx.run_dispatches_natively(False)
    try:
        interpreted = DebugRunner(vmfb, "local-sync").invoke("small_cnn", [x])[0].array
    finally:
        vmvx.run_dispatches_natively(True)
    assert native.tobytes() == expected.tobytes()
    assert interpreted.tobytes() == expected.tobytes()
