"""Kernels that share workgroup memory with no barrier (engine.dispatch.spirv_hazards), read from SPIR-V words.

Checked two ways: SPIR-V modules assembled by ``spirv-as`` from text that differs in one fact at a time, and
the real small_cnn model compiled by iree-compile for IREE's default Vulkan target and for sm_80, each
flagged kernel confirmed by ``spirv-dis``'s text (a Workgroup variable, no barrier, the LocalSize).
Where this matters: SqueezeNet 1.1 built for the default target gave a different wrong result on each call
on an NVIDIA H100 (64-invocation workgroups, subgroups of 32), in IREE's runtime as in the debug engine.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import iree_compile

from engine.dispatch.spirv_hazards import (
    UnsynchronisedWorkgroup,
    module_unsynchronised_workgroups,
    unsynchronised_workgroups,
)
from engine.runtime.vmfb.module import open_vmfb
from engine.runtime.vmfb.vke1 import read_vke1

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
needs_spirv_tools = pytest.mark.skipif(
    shutil.which("spirv-as") is None or shutil.which("spirv-dis") is None,
    reason="spirv-as/spirv-dis (Debian package spirv-tools) are not installed",
)

KERNEL = """
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "accumulate"
               OpExecutionMode %main LocalSize {x} {y} 1
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
      %float = OpTypeFloat 32
       %uint = OpTypeInt 32 0
     %uint_0 = OpConstant %uint 0
     %uint_2 = OpConstant %uint 2
   %uint_264 = OpConstant %uint 264
    %float_1 = OpConstant %float 1
    %uint_16 = OpConstant %uint 16
        %arr = OpTypeArray %float %uint_16
        %ptr = OpTypePointer {storage} %arr
      %fptr = OpTypePointer {storage} %float
     %shared = OpVariable %ptr {storage}
       %main = OpFunction %void None %fn
      %entry = OpLabel
       %slot = OpAccessChain %fptr %shared %uint_0
        %old = OpLoad %float %slot
        %new = OpFAdd %float %old %float_1
               OpStore %slot %new
{barrier}               OpReturn
               OpFunctionEnd
"""
BARRIER = "               OpControlBarrier %uint_2 %uint_2 %uint_264\n"


def assemble(tmp_path: Path, x: int = 64, y: int = 1, storage: str = "Workgroup", barrier: str = "") -> np.ndarray:
    src, out = tmp_path / "k.spvasm", tmp_path / "k.spv"
    src.write_text(KERNEL.format(x=x, y=y, storage=storage, barrier=barrier))
    subprocess.run(["spirv-as", "--target-env", "vulkan1.1", str(src), "-o", str(out)], check=True)
    return np.frombuffer(out.read_bytes(), dtype="<u4")


@needs_spirv_tools
def test_workgroup_memory_without_barrier_is_found_with_its_size(tmp_path):
    (found,) = unsynchronised_workgroups(assemble(tmp_path, 16, 4))
    assert found == UnsynchronisedWorkgroup("accumulate", (16, 4, 1))
    assert found.invocations == 64
    assert found.subgroups(32) == 2 and found.spans_subgroups(32)  # an NVIDIA GPU's subgroup
    assert found.subgroups(64) == 1 and not found.spans_subgroups(64)
    assert found.spans_subgroups(0)  # subgroup size unknown: nothing says the workgroup is one subgroup
    assert "16x4x1 (64 invocations, 2 subgroups of 32" in found.describe(32)


@needs_spirv_tools
@pytest.mark.parametrize(
    ("change", "kwargs"),
    [
        ("a barrier orders the invocations", {"barrier": BARRIER}),
        ("one invocation per workgroup", {"x": 1}),
        ("private memory, not workgroup memory", {"storage": "Private"}),
    ],
)
def test_not_flagged_when_one_fact_differs(tmp_path, change, kwargs):
    assert unsynchronised_workgroups(assemble(tmp_path, **kwargs)) == [], change


SUBGROUP_KERNEL = """
               OpCapability Shader
               OpCapability GroupNonUniform
               OpCapability GroupNonUniformArithmetic
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "row_sum"
               OpExecutionMode %main LocalSize 32 1 1
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
      %float = OpTypeFloat 32
       %uint = OpTypeInt 32 0
     %uint_3 = OpConstant %uint 3
    %float_1 = OpConstant %float 1
       %main = OpFunction %void None %fn
      %entry = OpLabel
        %sum = OpGroupNonUniformFAdd %float %uint_3 Reduce %float_1
               OpReturn
               OpFunctionEnd
"""


@needs_spirv_tools
def test_a_subgroup_reduction_without_barrier_is_found(tmp_path):
    src, out = tmp_path / "r.spvasm", tmp_path / "r.spv"
    src.write_text(SUBGROUP_KERNEL)
    subprocess.run(["spirv-as", "--target-env", "vulkan1.1", str(src), "-o", str(out)], check=True)
    (found,) = unsynchronised_workgroups(np.frombuffer(out.read_bytes(), dtype="<u4"))
    assert found == UnsynchronisedWorkgroup("row_sum", (32, 1, 1), workgroup_memory=False, subgroup_operations=True)
    assert not found.spans_subgroups(32) and found.spans_subgroups(8)  # an H100's subgroup; lavapipe's
    assert found.describe(8).endswith("(32 invocations, 4 subgroups of 8 on this device) uses subgroup operations with no barrier")


def test_damaged_words_give_what_was_read_never_an_error():
    assert unsynchronised_workgroups(np.zeros(3, np.uint32)) == []
    words = np.array([0x07230203, 0x10000, 0, 100, 0, 0xFFFF0000], np.uint32)  # count past the end
    assert unsynchronised_workgroups(words) == []


def _compile(source: Path, out: Path, *flags: str) -> Path:
    cmd = [str(source), "--iree-hal-target-device=vulkan", *flags, "-o", str(out)]
    proc = iree_compile(cmd, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@needs_spirv_tools
@pytest.mark.parametrize(("target", "workgroup"), [((), 64), (("--iree-vulkan-target=sm_80",), 32)])
def test_small_cnn_flagged_kernels_agree_with_spirv_dis(tmp_path, target, workgroup):
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models folder)")
    vmfb = _compile(source, tmp_path / "small_cnn.vmfb", *target)
    flagged: dict[str, UnsynchronisedWorkgroup] = {}
    checked = 0
    for exe in open_vmfb(vmfb).executables:
        definition = read_vke1(bytes(exe.data))
        for module in definition.shader_modules:
            spv = tmp_path / f"m{checked}.spv"
            spv.write_bytes(module.spirv.tobytes())
            text = subprocess.run(["spirv-dis", str(spv)], check=True, capture_output=True, text=True).stdout
            checked += 1
            found = {f.entry_point: f for f in unsynchronised_workgroups(module.spirv)}
            flagged.update(found)
            shared = re.search(r"OpVariable %\S+ Workgroup\b", text) is not None
            subgroup = re.search(r"= OpGroupNonUniform\w+|OpSubgroup(Ballot|FirstInvocation)KHR", text) is not None
            barrier = re.search(r"Op(Control|Memory)Barrier\b", text) is not None
            for name, size in re.findall(r'OpEntryPoint GLCompute (%\S+) "([^"]+)"', text):
                x, y, z = map(int, re.search(rf"OpExecutionMode {re.escape(name)} LocalSize (\d+) (\d+) (\d+)", text).groups())
                expected = (shared or subgroup) and not barrier and x * y * z > 1
                assert (size in found) == expected, size
                if expected:
                    assert found[size].local_size == (x, y, z)
                    assert (found[size].workgroup_memory, found[size].subgroup_operations) == (shared, subgroup)
    assert checked >= 5
    # The convolution keeps its accumulators in workgroup memory on both targets; the workgroup is two
    # subgroups of an NVIDIA GPU on the default target and one on sm_80.
    (conv,) = [f for name, f in flagged.items() if "conv" in name]
    assert conv.invocations == workgroup
    assert conv.spans_subgroups(32) == (workgroup > 32)


@pytest.mark.vulkan
def test_diverge_notes_a_culprit_that_shares_workgroup_memory_without_barrier(tmp_path):
    """At zero tolerance small_cnn's llvm-cpu and Vulkan builds part at the convolution (rounding), a kernel
    with 64-invocation workgroups sharing workgroup memory with no barrier: diverge says so in its notes."""
    import json
    import sys

    from engine.compiler.targets import target_flags
    from engine.runtime.hal.vulkan import vulkan_available

    if (reason := vulkan_available()) is not None:
        pytest.skip(f"no Vulkan: {reason}")
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models folder)")
    vulkan = _compile(source, tmp_path / "vk.vmfb")
    cpu = tmp_path / "cpu.vmfb"
    cmd = [str(source), *target_flags("llvm-cpu"), "-o", str(cpu)]
    iree_compile(cmd, check=True)
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher", "diverge", str(cpu), str(vulkan),
         f"--input=@{MODELS / 'small_cnn_x.npy'}", "--atol=0", "--rtol=0", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]  # a divergence named
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    culprit = report["first_divergence"]["name"]
    flagged = module_unsynchronised_workgroups(open_vmfb(vulkan))
    assert culprit in flagged  # the convolution, per the spirv-dis check above
    notes = [n for n in report["notes"] if n.startswith(f"B's {culprit}: workgroup")]
    assert len(notes) == 1 and f"({flagged[culprit].invocations} invocations)" in notes[0]
    assert not any(n.startswith("A's ") for n in report["notes"])  # llvm-cpu has no SPIR-V


def _narrow_subgroup_device() -> tuple[int, str, Path]:
    """The Vulkan device's subgroup size and name, and small_cnn's source; skips where there is no Vulkan, the
    subgroup is 32 or more (an sm_80 build's reductions fit it) or unknown, or the shared models are absent."""
    from engine.runtime.hal.vulkan import VulkanDevice, vulkan_available

    if (reason := vulkan_available()) is not None:
        pytest.skip(f"no Vulkan: {reason}")
    with VulkanDevice() as device:
        subgroup, name = device.info.subgroup_size, device.info.name
    if not 0 < subgroup < 32:
        pytest.skip(f"the device's subgroup is {subgroup or 'unknown'}: an sm_80 build's reductions fit it")
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models folder)")
    return subgroup, name, source


@pytest.mark.vulkan
def test_sm80_build_on_a_narrower_subgroup_diverges_at_its_subgroup_reduction(tmp_path):
    """small_cnn built for sm_80 reduces each row with one subgroup operation over a 32-invocation workgroup.
    On a device whose subgroup is smaller (lavapipe: 8) that covers part of the row: both engines give the
    same wrong result, diverge parts from llvm-cpu there and its note says why."""
    import json
    import sys

    from engine.compiler.targets import target_flags

    subgroup, _, source = _narrow_subgroup_device()
    vulkan = _compile(source, tmp_path / "vk.vmfb", "--iree-vulkan-target=sm_80")
    cpu = tmp_path / "cpu.vmfb"
    cmd = [str(source), *target_flags("llvm-cpu"), "-o", str(cpu)]
    iree_compile(cmd, check=True)
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher", "diverge", str(cpu), str(vulkan),
         f"--input=@{MODELS / 'small_cnn_x.npy'}", "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]  # a divergence named
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    culprit = report["first_divergence"]
    assert culprit is not None and "reduction" in culprit["name"]
    flagged = module_unsynchronised_workgroups(open_vmfb(vulkan))[culprit["name"]]
    assert flagged.subgroup_operations and flagged.spans_subgroups(subgroup)
    (note,) = [n for n in report["notes"] if n.startswith(f"B's {culprit['name']}: workgroup")]
    assert "a subgroup operation covers part of the workgroup" in note


@pytest.mark.vulkan
def test_a_run_is_warned_of_reductions_over_part_of_the_workgroup_and_a_default_build_is_not(tmp_path):
    """Before a run on this device: the sm_80 build's row reduction (above: the wrong result, in both engines)
    is named with the device's subgroup; IREE's default build, whose flagged kernels only share workgroup
    memory and which lavapipe runs right, gets no warning (none of the shared models' default builds do)."""
    import sys

    from engine.dispatch.spirv_hazards import partial_subgroup_warning
    subgroup, name, source = _narrow_subgroup_device()
    narrow = _compile(source, tmp_path / "sm80.vmfb", "--iree-vulkan-target=sm_80")
    default = _compile(source, tmp_path / "default.vmfb")
    warning = partial_subgroup_warning(open_vmfb(narrow), subgroup, name)
    assert warning is not None and "reduction" in warning and f"subgroup is {subgroup} invocations" in warning
    assert partial_subgroup_warning(open_vmfb(default), subgroup, name) is None
    assert partial_subgroup_warning(open_vmfb(narrow), 0, name) is None  # subgroup unknown: no guess
    for vmfb, warned in ((narrow, True), (default, False)):
        proc = subprocess.run([sys.executable, "-m", "app.launcher", "run", str(vmfb), "--device=vulkan",
                               f"--input=@{MODELS / 'small_cnn_x.npy'}"],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert ("iree-lens run: warning:" in proc.stderr) is warned, proc.stderr
    # The window hears it as the session opens the module (its log).
    import queue

    from engine.session.debug_session import DebugSession
    from engine.session.inprocess import InProcessSession
    from engine.session.protocol import Log, Open, Opened

    events: queue.Queue = queue.Queue()
    session = InProcessSession(DebugSession, events.put)
    try:
        session.send(Open(str(narrow), "vulkan", rebuild_sources=False))
        logs = []
        while not isinstance(event := events.get(timeout=120), Opened):
            logs.append(event.text if isinstance(event, Log) else "")
        assert any(text.startswith("warning: ") and "reduction" in text for text in logs), logs
    finally:
        session.close()
