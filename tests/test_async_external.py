"""Programs compiled with ``--iree-execution-model=async-external`` export coarse-fences functions: their
last two arguments are a wait fence and a signal fence (``iree.abi.model = coarse-fences``), which
iree-run-module adds itself (a null wait fence, a new semaphore's 0 -> 1 as the signal, awaited after the
call). Both engines call them the same way, so ``iree-lens run``, ``debug``, ``capture`` and the window take
the inputs the program declares, not its fences. A torch or ONNX import's ``F$async`` is that ABI too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import (
    iree_run_module_stdout,
    lens_in_process,
    model_cpu_build,
    save_after_each_dispatch,
    shared_model,
)
from support.session import compile_program

from app.input_defaults import function_arguments
from engine.dispatch.bundle import Bundle
from engine.runtime.debug_runner import DebugRunError, DebugRunner
from engine.runtime.function_io import Scalar, Tensor
from engine.runtime.hal.sync import HalFence
from engine.runtime.reference import ReferenceRunner
from engine.runtime.vmfb.module import caller_calling_convention, open_vmfb, takes_fences, without_fences

ASYNC = "--iree-execution-model=async-external"
CHAIN_INPUT = "4x8xf32=1"


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[tuple[str, str], Path]:
    out = tmp_path_factory.mktemp("async")
    for target in ("llvm-cpu", "vulkan-spirv"):
        (out / target).mkdir()
    return {(name, target): compile_program(name, target, out / target, ASYNC)
            for name in ("chain12", "kv_cache") for target in ("llvm-cpu", "vulkan-spirv")}  # fmt: skip


def test_the_fences_are_the_callers_not_the_users():
    assert without_fences("0rrr_r") == "0r_r"
    assert without_fences("0rr_v") == "0v_v"
    assert without_fences("0irr_iI") == "0i_iI"
    assert without_fences("0i_i") == "0i_i"  # not a coarse-fences shape: as it is


def test_the_build_exports_coarse_fences_functions(builds):
    module = open_vmfb(builds[("chain12", "llvm-cpu")])
    main = next(e for e in module.exports if e.name == "main")
    assert main.signature.coarse_fences and takes_fences(module, "main") and not takes_fences(module, "__init")
    assert (main.signature.calling_convention, caller_calling_convention(module, "main")) == ("0rrr_r", "0r_r")


@pytest.mark.parametrize("target", ["llvm-cpu", "vulkan-spirv"])
@pytest.mark.parametrize("engine", ["debug", "reference"])
@pytest.mark.parametrize("name, function, inputs", [("chain12", "main", (CHAIN_INPUT,)),
                                                    ("kv_cache", "step", ("1x8xf32=1 2 3 4 5 6 7 8", "2"))])
def test_run_prints_what_iree_run_module_prints(builds, engine, target, name, function, inputs):
    vmfb = builds[(name, target)]
    device = "vulkan" if target == "vulkan-spirv" else "local-sync"
    proc = lens_in_process("run", str(vmfb), f"--engine={engine}", f"--device={device}", f"--function={function}",
                           *[f"--input={i}" for i in inputs])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == iree_run_module_stdout(vmfb, function, inputs, [device])


def test_the_runners_agree_call_after_call(builds):
    # A global carried from call to call through an async function (each call's signal fence is its own):
    # call i writes twice the row into row i of the cache.
    vmfb = builds[("kv_cache", "llvm-cpu")]
    row = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
    debug, reference = DebugRunner(vmfb), ReferenceRunner(vmfb)
    expected = np.zeros((4, 8), np.float32)
    for i in range(4):
        args = [Tensor.from_numpy(row + i), Scalar("i64", i)]
        ours, theirs = debug.invoke("step", args), reference.invoke("step", args)
        expected[i] = 2 * (row[0] + i)
        np.testing.assert_array_equal(ours[0].array, expected)
        np.testing.assert_array_equal(theirs[0].array, expected)


def test_a_call_whose_fence_is_never_reached_says_so_instead_of_waiting(builds):
    runner = DebugRunner(builds[("chain12", "llvm-cpu")])
    with pytest.raises(DebugRunError, match="without signaling its fence"):
        runner.finish_call("main", HalFence.new())
    failed = HalFence.new()
    from engine.errors import StatusCode, VmStatusError

    failed.fail(VmStatusError(StatusCode.ABORTED, "the device was lost"))
    with pytest.raises(DebugRunError, match="failed its signal fence: ABORTED; the device was lost"):
        runner.finish_call("main", failed)


def test_every_dispatch_stops_and_the_call_finishes(builds, tmp_path):
    # Dispatch k adds k + 1 to the running value (chain12.mlir): its output says which one wrote it.
    vmfb = builds[("chain12", "llvm-cpu")]
    script = save_after_each_dispatch(tmp_path, 12)
    proc = lens_in_process("debug", str(vmfb), "--function=main", f"--input={CHAIN_INPUT}", f"--commands={script}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Stopped (dispatch) after dispatch #") == 12
    assert "Finished main" in proc.stdout and "4x8xf32=[79 79 79 79 79 79 79 79]" in proc.stdout
    value = 1.0
    for k in range(12):
        value += k + 1
        saved = [np.load(f).reshape(-1).view(np.float32) for f in sorted((tmp_path / str(k)).glob("*.npy"))]
        assert any(np.all(s[:32] == value) for s in saved), (k, value)


def test_capture_records_each_dispatch(builds, tmp_path):
    vmfb = builds[("chain12", "llvm-cpu")]
    proc = lens_in_process("capture", str(vmfb), "--function=main", f"--input={CHAIN_INPUT}", f"--out={tmp_path / 'b'}")
    assert proc.returncode == 0, proc.stderr
    bundle = Bundle(tmp_path / "b")
    assert len(bundle.dispatches) == 12


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_a_torch_imports_async_half_takes_what_its_wrapper_takes(tmp_path, engine):
    # IREE's torch/ONNX input conversion makes F$async (fences last, its iree.abi.model not kept in the
    # module's reflection) and F, a synchronous wrapper: F$async is called as iree-run-module cannot.
    build = model_cpu_build("attention_block", tmp_path / "attention_block.vmfb").module
    x = shared_model("attention_block").with_name("attention_block_x.npy")
    module = open_vmfb(build)
    assert takes_fences(module, "attention_block$async") and not takes_fences(module, "attention_block")
    assert function_arguments(module, "attention_block$async") == function_arguments(module, "attention_block")
    outputs = []
    for function in ("attention_block$async", "attention_block"):
        out = tmp_path / f"{function}.npy"
        proc = lens_in_process("run", str(build), f"--engine={engine}", f"--function={function}", f"--input=@{x}",
                               f"--output=@{out}")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        outputs.append(np.load(out))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    assert outputs[0].shape == (1, 8, 32) and np.isfinite(outputs[0]).all()
