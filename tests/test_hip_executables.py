"""IREE's HIP (ROCm) builds without an AMD GPU: HIP1 executables read from real .vmfbs that iree-compile built
here (kernels checked against iree-dump-module's dispatch sites and against the code object's own ELF
symbols, the code object against IREE's dumped binary, its gfx target against the one it was built for),
written back, refused when damaged; the device choice and the one sentence without ROCm. What needs an AMD
GPU skips with the runtime's reason."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from support import GPU_PROGRAM, compile_for, damage_at_random, lens_in_process, tool_call_sites

from engine.errors import ExecutableFormatError, HipUnavailableError
from engine.runtime.hal.devices import (
    compile_target_for,
    create_device,
    device_kind,
    formats_kind,
    hip_absence,
    hip_compile_target,
    hip_device_properties,
    runs_formats,
)
from engine.runtime.hal.driver_api import dashed_uuid
from engine.runtime.hal.hip.driver import (
    NO_RUNTIME,
    HipDeviceInfo,
    architecture_in_device_info,
    list_hip_devices,
)
from engine.runtime.vmfb.executables import describe_executable, read_elf
from engine.runtime.vmfb.hip1 import other_architectures, read_hip1, write_hip1
from engine.runtime.vmfb.module import open_vmfb

HAS_RUNTIME = hip_absence() is None
NEEDS_NO_RUNTIME = pytest.mark.skipif(HAS_RUNTIME, reason="a HIP device is present: the no-runtime sentence cannot show")
NEEDS_GPU = pytest.mark.skipif(not HAS_RUNTIME, reason=hip_absence() or "")

PROGRAM = GPU_PROGRAM


@pytest.fixture(scope="module")
def hip_build(tmp_path_factory) -> tuple[Path, Path]:
    """The program for gfx942 (MI300) with IREE's dumped binaries beside it."""
    tmp = tmp_path_factory.mktemp("hip")
    source = tmp / "program.mlir"
    source.write_text(PROGRAM)
    dumps = tmp / "binaries"
    return compile_for(source, tmp / "program_hip.vmfb", "rocm", f"--iree-hal-dump-executable-binaries-to={dumps}"), dumps


def test_hip1_kernels_are_the_code_objects_and_iree_dump_modules(hip_build):
    vmfb, dumps = hip_build
    module = open_vmfb(vmfb)
    [exe] = module.executables
    assert exe.format == "rocm-hsaco-fb"
    hip = read_hip1(exe.data)
    dispatched = {name for _, _, name, _ in tool_call_sites(vmfb)}
    assert set(hip.export_names) == dispatched and len(dispatched) == 2
    [dumped] = dumps.glob("*.hsaco")
    assert [m.hsaco for m in hip.modules] == [dumped.read_bytes()]  # the code object IREE built, byte for byte
    assert hip.modules[0].architecture == "gfx942"
    functions = {s.name for s in read_elf(hip.modules[0].hsaco).symbols if s.type == "STT_FUNC"}
    assert set(hip.export_names) <= functions  # each kernel is a function of the code object
    elementwise = next(e for e in hip.exports if "elementwise" in e.kernel_name)
    assert elementwise.constant_count > 0 and [elementwise.binding_read_only(b) for b in range(3)] == [True, True, False]
    assert all(e.location is not None and Path(e.location.filename).name == "program.mlir" for e in hip.exports)
    assert read_hip1(write_hip1(hip)) == hip
    text = describe_executable(exe)
    assert all(f"kernel {n}" in text for n in hip.export_names) and "gfx942" in text


@pytest.mark.parametrize("target", ["gfx90a", "gfx1100", "gfx1201"])
def test_a_code_object_names_the_target_it_was_built_for(tmp_path, target):
    source = tmp_path / "p.mlir"
    source.write_text(PROGRAM)
    # The target a HIP device of that architecture compiles for in the window (hip_compile_target).
    target_name = hip_compile_target(HipDeviceInfo(0, "an AMD GPU", 1 << 30, arch=target))
    assert target_name == f"rocm:{target}"
    vmfb = compile_for(source, tmp_path / "p.vmfb", target_name)
    [exe] = open_vmfb(vmfb).executables
    hip = read_hip1(exe.data)
    assert [m.architecture for m in hip.modules] == [target]
    # A device of another architecture refuses it before the runtime's hipErrorNoBinaryForGpu.
    assert other_architectures(hip, target) == [] and other_architectures(hip, "gfx942") == [target]


def _iree_runtime_library() -> bytes:
    import iree._runtime_libs as libs

    [library] = Path(libs.__file__).parent.glob("_runtime*.so")
    return library.read_bytes()


def test_device_names_and_architectures_are_read_as_irees_hip_driver_writes_them():
    """The UUID and gfx target come from the formats compiled into IREE 3.13's runtime library: the device
    path (``hip://GPU-...``, both engines) printed from hipDeviceGetUuid's 16 bytes, and ``dump_device_info``'s
    ``gpu-arch-name`` line, which is where IREE Lens reads a device's architecture."""
    library = _iree_runtime_library()
    uuid_format = b"GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x"
    assert uuid_format in library
    raw = bytes([0x5A, 0x01, 0xFF, 0x10, 0x00, 0x7E, 0x80, 0x09, 0xAB, 0xCD, 0xEF, 0x00, 0x12, 0x34, 0x56, 0x78])
    assert dashed_uuid(raw) == (uuid_format.decode() % tuple(raw))
    match = re.search(rb"\n?- gpu-arch-name: %s", library)
    assert match is not None
    line = match[0].decode().strip()
    info = f"- amdhip64_dylib_path: /opt/rocm/lib/libamdhip64.so\n{line % 'gfx942:sramecc+:xnack-'}\n"
    assert architecture_in_device_info(info) == "gfx942"
    assert architecture_in_device_info(line % "gfx1100") == "gfx1100"
    assert architecture_in_device_info("- gpu-compute-capability: 9.4\n") is None
    # No architecture reported: the default target, and the Device panel says it is not known.
    unknown = HipDeviceInfo(0, "an AMD GPU", 1 << 30)
    assert hip_compile_target(unknown) == "rocm"
    assert dict(hip_device_properties(unknown))["Architecture"] == "not reported by IREE's HIP driver"
    assert dict(hip_device_properties(replace(unknown, arch="gfx90a")))["Architecture"] == "gfx90a"


def test_damaged_hip1_is_a_format_error(hip_build):
    data = bytes(open_vmfb(hip_build[0]).executables[0].data)
    with pytest.raises(ExecutableFormatError, match="not a HIP1"):
        read_hip1(b"CDA1" + data[4:])
    with pytest.raises(ExecutableFormatError):
        read_hip1(data[:200])
    damage_at_random(data, read_hip1, ExecutableFormatError, 1000)


def test_a_hip_build_needs_a_hip_device(hip_build):
    formats = {x.format for x in open_vmfb(hip_build[0]).executables}
    assert formats_kind(formats) == "hip"
    assert device_kind("hip://0") == "hip" and compile_target_for("hip") == "rocm"
    assert runs_formats("hip", formats) and not runs_formats("cuda", formats) and not runs_formats("local-sync", formats)


@NEEDS_NO_RUNTIME
def test_without_rocm_one_sentence_says_so(hip_build):
    for uri in ("hip", "hip://1", "hip://mi300"):
        with pytest.raises(HipUnavailableError) as raised:
            create_device(uri)
        assert str(raised.value) == NO_RUNTIME
    with pytest.raises(HipUnavailableError):
        list_hip_devices()
    run = lens_in_process("run", "--engine=debug", hip_build[0], "--function=mm",
                          "--input=16x32xf32=1", "--input=32x8xf32=1")  # fmt: skip
    assert run.returncode != 0 and NO_RUNTIME in run.stderr
    devices = lens_in_process("devices")
    assert devices.returncode == 0 and f"HIP:\n  not available: {NO_RUNTIME}" in devices.stdout


@NEEDS_GPU
def test_debug_run_on_hip_equals_iree_runtime_bit_for_bit(tmp_path):
    """On an AMD GPU: the debug engine's HIP device against IREE's HIP driver, the same code object: the same
    bits. Built for the device's own gfx target as IREE's driver reports it (compile_target_for), unless
    IREE_LENS_TEST_HIP_TARGET names another."""
    source = tmp_path / "p.mlir"
    source.write_text(PROGRAM)
    target = os.environ.get("IREE_LENS_TEST_HIP_TARGET")
    target_name = f"rocm:{target}" if target else compile_target_for("hip")
    vmfb = compile_for(source, tmp_path / "p.vmfb", target_name)
    inputs = ["--function=mm", "--input=16x32xf32=0.3", "--input=32x8xf32=1.7"]
    debug = lens_in_process("run", "--engine=debug", "--device=hip", vmfb, *inputs)
    reference = lens_in_process("run", "--engine=reference", "--device=hip", vmfb, *inputs)
    assert reference.returncode == 0, f"built as {target_name}: {reference.stderr}"
    assert debug.returncode == 0, debug.stderr
    assert debug.stdout.split("result[0]")[1] == reference.stdout.split("result[0]")[1]


def test_an_mlir_source_rebuilt_for_hip_becomes_a_code_object_of_its_own(tmp_path):
    """``iree-lens sources --target=rocm`` of a real model: its dispatch sources, no AMDGPU LLVM IR offered;
    one source rebuilt for HIP is merged into the linked executable as a second code object (the reference
    engine's patched module), the other kernels unchanged."""
    from support import shared_model

    from engine.substitute.apply import build_all, patched_module
    from engine.substitute.build import SubstitutionSpec

    out = tmp_path / "sources"
    proc = lens_in_process("sources", shared_model("small_cnn"), f"--out={out}", "--target=rocm")
    assert proc.returncode == 0, proc.stderr
    assert not list(out.glob("*.ll")) and len(list(out.glob("*.mlir"))) == 6
    module = open_vmfb(out / "small_cnn.vmfb")
    original = read_hip1(module.executables[0].data)
    source = out / "small_cnn$async_dispatch_4.mlir"
    [replacement] = build_all(module, [SubstitutionSpec.parse(f"small_cnn$async_dispatch_4={source}")])
    assert replacement.interface.kind == "hip1" and not replacement.whole
    [export] = replacement.exports
    patched_path = tmp_path / "patched.vmfb"
    patched_path.write_bytes(patched_module(module, [replacement]))
    patched = read_hip1(open_vmfb(patched_path).executables[0].data)
    i = patched.export_index(export)
    assert len(patched.modules) == 2 and patched.exports[i].module_ordinal == 1
    assert patched.modules[1].hsaco == read_hip1(replacement.data).modules[0].hsaco
    assert [e for k, e in enumerate(patched.exports) if k != i] == [e for k, e in enumerate(original.exports) if k != i]
