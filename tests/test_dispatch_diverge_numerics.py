"""The divergence finder with its default rule: healthy builds across targets and devices report no
divergence (rounding is not a bug), builds broken with IREE's own ``--iree-hal-substitute-executable-source``
(one op changed) name exactly the broken dispatch, integer programs compare exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import broken_build, compile_for, lens_in_process, shared_model

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "diverge_programs"
MODELS = HERE.parents[0] / ".." / "shared" / "models"


def _diverge(a: Path, b: Path, function: str, *args: str, timeout: float = 900) -> dict:
    proc = lens_in_process(*["diverge", str(a), str(b), f"--function={function}", *args, "--json"])  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert proc.returncode == (report["first_divergence"] is not None)  # 1 exactly when a divergence is named
    return report


def _diverged(report: dict) -> list[str]:
    return [d["name"] for d in report["dispatches"] if d["verdict"] == "diverged"]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chain")
    source = PROGRAMS / "reduction_chain.mlir"
    x = tmp / "x.npy"
    # Values around 100 with a spread of 3: the centring cancels most of each value (rounding shows).
    np.save(x, (np.random.default_rng(0).standard_normal((64, 1024)) * 3 + 100).astype(np.float32))
    return source, tmp, x


def test_reduction_chain_llvm_cpu_against_vmvx_agrees_within_rounding(chain):
    source, tmp, x = chain
    cpu = compile_for(source, tmp / "cpu.vmfb", "llvm-cpu")
    vmvx = compile_for(source, tmp / "vmvx.vmfb", "vmvx")
    report = _diverge(cpu, vmvx, "main", f"--input=@{x}")
    assert report["first_divergence"] is None, report
    verdicts = {d["verdict"] for d in report["dispatches"]}
    assert verdicts <= {"exact", "within_rounding"} and len(report["dispatches"]) == 3
    # Not bit for bit (a reduction summed in another order), and the program's output agrees too.
    assert "within_rounding" in verdicts and report["outputs"][0]["verdict"] == "within_rounding"
    # Asked for exactness, the same pair differs: the default is what makes it trustworthy.
    strict = _diverge(cpu, vmvx, "main", f"--input=@{x}", "--atol=0")
    assert strict["first_divergence"] is not None
    # Only the two modules: the one function, seeded random inputs shaped as the host code checks them.
    bare = lens_in_process(*["diverge", str(cpu), str(vmvx), "--json"])  # fmt: skip
    assert bare.returncode == 0 and json.loads(bare.stdout)["first_divergence"] is None, bare.stderr
    assert json.loads(bare.stdout)["dispatches_compared"] == 3


def test_reduction_chain_broken_dispatch_is_named_exactly_and_reproduced(chain):
    source, tmp, x = chain
    vmvx = compile_for(source, tmp / "vmvx_ref.vmfb", "vmvx")
    # The variance's square (x*x) becomes x+x in the llvm-cpu build: one op of one dispatch.
    broken = broken_build(source, tmp, "llvm-cpu", "main_dispatch_1", "arith.mulf %in, %in", "arith.addf %in, %in")
    repro = tmp / "repro"
    report = _diverge(vmvx, broken, "main", f"--input=@{x}", f"--repro={repro}")
    found = report["first_divergence"]
    assert found is not None and found["name"].startswith("main_dispatch_1_") and found["ordinal"] == 1
    assert found["same_inputs"] and found["comparison"]["verdict"] == "diverged"
    # Given the same inputs, the dispatches after it agree again: only the broken one is named.
    assert _diverged(report) == [found["name"]]
    # Each run on its own data, the difference flows on; the first diverged dispatch is still the culprit.
    own = _diverge(vmvx, broken, "main", f"--input=@{x}", "--own-inputs")
    assert own["first_divergence"]["name"] == found["name"] and not own["first_divergence"]["same_inputs"]
    # The reproducer runs on its own (module, inputs and bindings copied) and still diverges.
    meta = json.loads((repro / "repro.json").read_text())
    assert (repro / meta["module"]).is_file() and all((repro / b["before"]).is_file() for b in meta["bindings"])
    rerun = lens_in_process(*["diverge", f"--replay={repro}", "--json"])  # fmt: skip
    assert rerun.returncode == 1 and json.loads(rerun.stdout)["reproduced"], rerun.stderr


def test_integer_programs_compare_exactly(tmp_path):
    source = PROGRAMS / "int_chain.mlir"
    cpu = compile_for(source, tmp_path / "cpu.vmfb", "llvm-cpu")
    vmvx = compile_for(source, tmp_path / "vmvx.vmfb", "vmvx")
    inputs = ["--input=256xi32=7", "--input=256xi32=-3"]
    report = _diverge(cpu, vmvx, "main", *inputs)
    assert report["first_divergence"] is None and {d["verdict"] for d in report["dispatches"]} == {"exact"}
    # The sum starts at 1 instead of 0: off by one in about 500, rounding for a float, a bug for an i32.
    broken = broken_build(source, tmp_path, "llvm-cpu", "main_dispatch_1", "arith.constant 0 : i32",
                     "arith.constant 1 : i32")  # fmt: skip
    found = _diverge(vmvx, broken, "main", *inputs)["first_divergence"]
    assert found is not None and found["name"].startswith("main_dispatch_1_")
    assert found["max_abs_error"] == 1 and found["comparison"]["element"] == "i32"


@pytest.mark.parametrize("model,function", [("attention_block", "attention_block"), ("small_cnn", "small_cnn")])
def test_onnx_models_llvm_cpu_against_vmvx_agree_and_a_broken_erf_is_named(model, function, tmp_path):
    source = MODELS / f"{model}.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    x = MODELS / f"{model}_x.npy"
    cpu = compile_for(source, tmp_path / "cpu.vmfb", "llvm-cpu")
    vmvx = compile_for(source, tmp_path / "vmvx.vmfb", "vmvx")
    report = _diverge(cpu, vmvx, function, f"--input=@{x}")
    assert report["first_divergence"] is None, [d for d in report["dispatches"] if d["verdict"] != "exact"]
    assert report["outputs"][0]["ok"]
    if model == "attention_block":
        # GELU's erf made a tanh in the llvm-cpu build: the dispatch that computes it, and only it.
        broken = broken_build(source, tmp_path, "llvm-cpu", "attention_block$async_dispatch_10", "math.erf", "math.tanh")
        found = _diverge(vmvx, broken, function, f"--input=@{x}")
        assert found["first_divergence"]["executable"] == "attention_block$async_dispatch_10", found
        assert _diverged(found) == [found["first_divergence"]["name"]]
        assert found["first_divergence"]["location"], "the dispatch's source line is named"


@pytest.mark.vulkan
def test_small_cnn_llvm_cpu_against_vulkan_and_a_broken_vulkan_build(tmp_path):
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    x = MODELS / "small_cnn_x.npy"
    cpu = compile_for(source, tmp_path / "cpu.vmfb", "llvm-cpu")
    vk = compile_for(source, tmp_path / "vk.vmfb", "vulkan-spirv")
    # No --device-b: the finder runs each module on the device it was compiled for.
    report = _diverge(cpu, vk, "small_cnn", f"--input=@{x}")
    assert report["devices"][1].startswith("vulkan") and report["first_divergence"] is None, report
    assert len(report["dispatches"]) >= 5 and report["outputs"][0]["ok"]
    broken = broken_build(source, tmp_path, "vulkan-spirv", "small_cnn$async_dispatch_3", "arith.addf", "arith.subf")
    found = _diverge(cpu, broken, "small_cnn", f"--input=@{x}")["first_divergence"]
    assert found is not None and found["name"].startswith("small_cnn$async_dispatch_3_"), found


@pytest.mark.vulkan
@pytest.mark.slow
@pytest.mark.timeout(1800)  # two debug runs of SqueezeNet, one on lavapipe
def test_squeezenet_llvm_cpu_against_vulkan_has_no_divergence(tmp_path):
    source = shared_model("squeezenet1_1")
    # Both builds convert the convolutions to channels-last first (IREE's own preprocessing pass), so that
    # their dispatches are the same and line up. Without it IREE's SPIR-V code for an NCHW convolution is
    # not distributed over the workgroup: each of its 16 invocations computes every output channel of the
    # workgroup again, so lavapipe needs about 165 s of both cores for one SqueezeNet run (IREE's runtime as
    # much as ours) against 16 s channels-last, with the same outputs.
    channels_last = "--iree-preprocessing-pass-pipeline=builtin.module(util.func(iree-preprocessing-convert-conv-to-channels-last))"
    cpu = compile_for(source, tmp_path / "cpu.vmfb", "llvm-cpu", channels_last)
    vk = compile_for(source, tmp_path / "vk.vmfb", "vulkan-spirv", channels_last)
    x, y = MODELS / "squeezenet1_1_x.npy", MODELS / "squeezenet1_1_torch_y.npy"
    report = _diverge(cpu, vk, "main", f"--input=@{x}", f"--golden={y}", timeout=3300)
    assert report["first_divergence"] is None, [d for d in report["dispatches"] if d["verdict"] != "exact"]
    assert len(report["dispatches"]) > 20 and not report["notes"], report["notes"]
    # Both devices agree with PyTorch's own output within rounding.
    assert [g["ok"] for g in report["golden"]] == [True, True], report["golden"]
