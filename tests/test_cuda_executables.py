"""IREE's CUDA builds without a GPU: CDA1 executables read from real .vmfbs that iree-compile built here
(exports checked against the PTX IREE embedded and against iree-dump-module's dispatch calls), IREE's
kernel argument packing, and the device choice with its errors on a machine without a CUDA driver.
What needs a GPU skips with the reason."""

from __future__ import annotations

import ctypes
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from support import (
    GPU_PROGRAM,
    compile_for,
    cuda_driver_present,
    damage_at_random,
    lens_in_process,
    tool_call_sites,
)

from engine.errors import CudaUnavailableError, ExecutableFormatError, HalError
from engine.runtime.hal.cuda.abi import BindingAddress, kernel_params, kernel_payload, launch_shape
from engine.runtime.hal.cuda.driver import NO_DRIVER, list_cuda_devices
from engine.runtime.hal.devices import (
    create_device,
    cuda_index,
    device_kind,
    formats_kind,
    iree_device_uri,
    runs_formats,
)
from engine.runtime.vmfb.cda1 import read_cda1
from engine.runtime.vmfb.executables import describe_executable
from engine.runtime.vmfb.module import open_vmfb

HAS_DRIVER = cuda_driver_present()
NEEDS_NO_DRIVER = pytest.mark.skipif(HAS_DRIVER, reason="a CUDA driver is present: the no-driver sentence cannot show")
NEEDS_GPU = pytest.mark.skipif(not HAS_DRIVER, reason=NO_DRIVER)

PROGRAM = GPU_PROGRAM


@pytest.fixture(scope="module")
def cuda_build(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("cuda")
    source = tmp / "program.mlir"
    source.write_text(PROGRAM)
    return compile_for(source, tmp / "program_cuda.vmfb", "cuda")


def _ptx_entries(ptx: str) -> dict[str, tuple[list[str], tuple[int, int, int] | None]]:
    """Each ``.entry`` of a PTX text: its parameters' types and its ``.maxntid`` (read from the text)."""
    entries = {}
    for m in re.finditer(r"\.entry (\w+)\((.*?)\)\s*(\.maxntid (\d+), (\d+), (\d+))?", ptx, re.DOTALL):
        params = re.findall(r"\.param (\.\w+)", m[2])
        block = (int(m[4]), int(m[5]), int(m[6])) if m[3] else None
        entries[m[1]] = (params, block)
    return entries


def test_cda1_exports_match_the_embedded_ptx_and_iree_dump_module(cuda_build):
    module = open_vmfb(cuda_build)
    [exe] = module.executables
    assert exe.format == "cuda-nvptx-fb"
    cuda = read_cda1(exe.data)
    dispatched = {name for _, _, name, _ in tool_call_sites(cuda_build)}
    assert set(cuda.export_names) == dispatched  # every export is one iree-dump-module sees dispatched
    assert len(cuda.export_names) == 2
    for i, export in enumerate(cuda.exports):
        params, block = _ptx_entries(cuda.ptx_of(i))[export.kernel_name]
        # IREE's CUDA ABI: one 64-bit pointer per binding, then one 32-bit value per constant.
        assert params == [".u64"] * export.binding_count + [".b32"] * export.constant_count
        assert block == export.block_dims
        # The location is the dispatch's function's line in the source (main's or mm's).
        function = export.kernel_name.split("_dispatch_")[0]
        line = next(n for n, text in enumerate(PROGRAM.splitlines(), 1) if f"func.func @{function}(" in text)
        assert export.location is not None and Path(export.location.filename).name == "program.mlir"
        assert export.location.line == line
    elementwise = cuda.exports[cuda.export_index(next(n for n in cuda.export_names if "elementwise" in n))]
    assert elementwise.constant_count > 0  # the dynamic sizes
    assert [elementwise.binding_read_only(b) for b in range(3)] == [True, True, False]
    matmul = next(e for e in cuda.exports if "matmul" in e.kernel_name)
    assert matmul.block_dims[1] > 1  # a 2-D block, read from the inline struct
    text = describe_executable(exe)
    assert all(f"kernel {n}" in text for n in cuda.export_names)


def test_damaged_cda1_is_a_format_error(cuda_build):
    data = bytes(open_vmfb(cuda_build).executables[0].data)
    with pytest.raises(ExecutableFormatError, match="shorter than its 64-byte header"):
        read_cda1(data[:20])
    with pytest.raises(ExecutableFormatError, match="not a CDA1"):
        read_cda1(b"VKE1" + data[4:])
    with pytest.raises(ExecutableFormatError, match="content size"):
        read_cda1(data[:4] + struct.pack("<IQ", 0, len(data)) + data[16:])
    with pytest.raises(ExecutableFormatError):
        read_cda1(data[:200])  # the header promises more than is there
    # Random damage (seeded): a format error or a reading, never another exception.
    damage_at_random(data, read_cda1, ExecutableFormatError, 2000)


def test_kernel_arguments_are_packed_as_iree_packs_them(cuda_build):
    cuda = read_cda1(open_vmfb(cuda_build).executables[0].data)
    export = next(e for e in cuda.exports if e.constant_count)
    bindings = [BindingAddress(0x7F0000001000, 256, 64), BindingAddress(0), BindingAddress(0x7F0000900000)]
    constants = [7, 0xFFFFFFFF, 0x80000000, 3][: export.constant_count]
    payload = kernel_payload(export, bindings, constants)
    # Independently: IREE's slots are 8 bytes each, pointers = base + buffer offset + binding offset (0 when
    # no buffer), each constant in the low 4 bytes of its slot.
    expected = struct.pack("<QQQ", 0x7F0000001000 + 256 + 64, 0, 0x7F0000900000) + b"".join(
        struct.pack("<II", c, 0) for c in constants
    )
    assert payload.tobytes() == expected
    params = kernel_params(payload)
    assert len(params) == export.binding_count + export.constant_count
    assert ctypes.c_uint64.from_address(params[0]).value == 0x7F0000001000 + 320
    assert ctypes.c_uint32.from_address(params[export.binding_count + 1]).value == 0xFFFFFFFF
    with pytest.raises(HalError, match="takes 3 bindings, the dispatch gives 2"):
        kernel_payload(export, bindings[:2], constants)
    with pytest.raises(HalError, match="constants"):
        kernel_payload(export, bindings, [*constants, 1])
    shape = launch_shape(export, (5, 1, 1))
    assert shape.grid == (5, 1, 1) and shape.block == export.block_dims
    assert launch_shape(export, (5, 1, 1), (64, 0, 0)).block == (64, *export.block_dims[1:])
    assert np.array_equal(payload[: export.binding_count] != 0, [True, False, True])


def test_a_cuda_build_needs_a_cuda_device(cuda_build):
    formats = {x.format for x in open_vmfb(cuda_build).executables}
    assert formats_kind(formats) == "cuda"
    assert device_kind("cuda://0") == "cuda"
    assert runs_formats("cuda", formats) and not runs_formats("local-sync", formats)
    assert not runs_formats("vulkan", formats) and not runs_formats("hip", formats)


@NEEDS_NO_DRIVER
def test_without_a_driver_one_sentence_says_so(cuda_build):
    for uri in ("cuda", "cuda://1", "cuda://h200", "cuda://GPU-8e7b6c2e-0000-0000-0000-000000000000"):
        with pytest.raises(CudaUnavailableError) as raised:
            create_device(uri)
        assert str(raised.value) == NO_DRIVER
    with pytest.raises(CudaUnavailableError):
        list_cuda_devices()
    # The debug run of a CUDA build, with no --device (local-sync by default): the sentence, not IREE's trap.
    run = lens_in_process("run", "--engine=debug", cuda_build, "--function=mm",
                          "--input=16x32xf32=1", "--input=32x8xf32=1")  # fmt: skip
    assert run.returncode != 0
    assert NO_DRIVER in run.stderr and "not found or unavailable" not in run.stderr
    # The reference engine on the same build asks IREE's cuda driver, which names the missing library.
    reference = lens_in_process("run", "--engine=reference", cuda_build, "--function=mm",
                                "--input=16x32xf32=1", "--input=32x8xf32=1")  # fmt: skip
    assert reference.returncode != 0 and "on cuda" in reference.stderr and "CUDA driver library" in reference.stderr
    # A device named by its name is IREE Lens's form: turned into IREE's (its UUID) through the driver, which
    # is not here.
    by_name = lens_in_process("run", "--engine=reference", "--device=cuda://h200", cuda_build, "--function=mm",
                              "--input=16x32xf32=1", "--input=32x8xf32=1")  # fmt: skip
    assert by_name.returncode != 0 and NO_DRIVER in by_name.stderr
    assert iree_device_uri("cuda://0") == "cuda://0" and iree_device_uri("local-task") == "local-task"
    # diverge llvm-cpu vs CUDA: B defaults to the cuda device, which says the same sentence.
    cpu_build = compile_for(Path(cuda_build).with_name("program.mlir"), Path(cuda_build).with_name("cpu.vmfb"), "llvm-cpu")
    diverge = lens_in_process("diverge", cpu_build, cuda_build, "--function=mm",
                              "--input=16x32xf32=1", "--input=32x8xf32=1")  # fmt: skip
    assert diverge.returncode != 0 and NO_DRIVER in diverge.stderr
    # debug and capture, with no --device, also take the build's device and say the same sentence.
    commands = Path(cuda_build).with_name("commands.txt")
    commands.write_text("break dispatch 0\ncontinue\n")
    debug = lens_in_process("debug", cuda_build, "--function=mm", f"--commands={commands}",
                            "--input=16x32xf32=1", "--input=32x8xf32=1")  # fmt: skip
    assert debug.returncode != 0 and NO_DRIVER in debug.stderr
    capture = lens_in_process("capture", cuda_build, "--function=mm", f"--out={commands.with_name('bundle')}",
                              "--input=16x32xf32=1", "--input=32x8xf32=1")  # fmt: skip
    assert capture.returncode != 0 and NO_DRIVER in capture.stderr
    devices = lens_in_process("devices")
    assert devices.returncode == 0
    assert f"CUDA:\n  not available: {NO_DRIVER}" in devices.stdout


def test_a_device_that_runs_none_of_the_builds_executables_is_refused_by_name(cuda_build):
    """A CUDA build given a CPU or Vulkan device: one sentence naming the formats and the device to give, from
    every command that runs a module, instead of the initializer's trap with IREE's whole target attribute."""
    commands = Path(cuda_build).with_name("commands.txt")
    commands.write_text("continue\n")
    inputs = ("--function=mm", "--input=16x32xf32=1", "--input=32x8xf32=1")
    for device in ("local-sync", "local-task", "vulkan"):
        runs = {
            "run": lens_in_process("run", cuda_build, f"--device={device}", *inputs),
            "debug": lens_in_process("debug", cuda_build, f"--device={device}", f"--commands={commands}", *inputs),
            "capture": lens_in_process("capture", cuda_build, f"--device={device}", *inputs,
                                       f"--out={commands.with_name('refused')}"),  # fmt: skip
            "profile": lens_in_process("profile", cuda_build, f"--device={device}", "--engine=debug", *inputs,
                                       f"--out={commands.with_name('refused.json')}"),  # fmt: skip
        }
        for command, result in runs.items():
            assert result.returncode == 1, (command, result.stderr)
            assert result.stderr.strip() == (
                f"iree-lens {command}: program_cuda.vmfb holds cuda-nvptx-fb executables, which {device} does "
                "not run: give --device=cuda (or leave --device out)"
            ), command
    assert not commands.with_name("refused").exists()


@NEEDS_GPU
def test_cuda_devices_are_listed_with_compute_capability():
    devices = list_cuda_devices()
    assert devices, "the driver loads but reports no device"
    assert all(d.compute_capability[0] >= 3 and d.total_memory > 0 for d in devices)
    listing = lens_in_process("devices").stdout
    assert all(f"cuda://{d.index}  {d.name}" in listing for d in devices)
    # Named as IREE names them (GPU-<uuid>) or by a part of the name.
    first = devices[0]
    assert first.uuid is not None and re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", first.uuid)
    assert cuda_index(first.uuid.upper()) == cuda_index(first.uuid) == 0
    if sum(d.name == first.name for d in devices) == 1:
        assert cuda_index(first.name.split()[-1].lower()) == 0
    with pytest.raises(HalError, match="no CUDA device matches cuda://no-such-gpu"):
        cuda_index("no-such-gpu")


@NEEDS_GPU
def test_debug_run_on_cuda_equals_iree_runtime_bit_for_bit(cuda_build):
    """The debug engine's CUDA device against IREE's CUDA driver, the same PTX: the same bits."""
    inputs = ["--function=mm", "--input=16x32xf32=0.3", "--input=32x8xf32=1.7"]
    debug = lens_in_process("run", "--engine=debug", "--device=cuda", cuda_build, *inputs)
    reference = lens_in_process("run", "--engine=reference", "--device=cuda", cuda_build, *inputs)
    assert debug.returncode == 0, debug.stderr
    assert reference.returncode == 0, reference.stderr
    assert debug.stdout.split("result[0]")[1] == reference.stdout.split("result[0]")[1]


@NEEDS_GPU
def test_cuda_zones_are_timed_by_events_and_keep_batches(cuda_build, tmp_path):
    """A profile of a debug run on CUDA: every dispatch a zone of its own, timed by CUDA events (no "batch
    share"), in order, inside its command buffer's zone, and the run still in batches (no zone watched)."""
    from engine.runtime.debug_runner import DebugRunner
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.trace.recorder import ZoneRecorder

    runner = DebugRunner(cuda_build, "cuda")
    values = parse_inputs(["16x32xf32=0.5", "32x8xf32=2"], split_cconv(runner.cconv("mm"))[0])
    recorder = ZoneRecorder()
    recorder.attach(runner.context.interpreter, runner.device)
    result = runner.invoke("mm", values)
    recorder.detach(runner.context.interpreter, runner.device)
    assert np.array_equal(result[0].array, np.full((16, 8), 32.0, np.float32))  # 32 products of 0.5 * 2
    trace = recorder.trace()
    z = trace.zones
    dispatches = [trace.zone(int(i)) for i in np.flatnonzero(z.category == trace.categories.id_of("dispatch"))]
    assert dispatches and not any("timing" in d.args for d in dispatches)
    queue = np.flatnonzero(z.category == trace.categories.id_of("queue"))
    for d in dispatches:
        assert d.end_ns >= d.start_ns
        assert np.any((z.start[queue] <= d.start_ns) & (z.end[queue] >= d.end_ns))


@NEEDS_GPU
def test_captured_cuda_dispatch_tensors_equal_iree_traced_tensors(tmp_path):
    """Every dispatch of a CUDA build stopped at (a capture observes each) holds IREE's traced tensors of the
    same build on IREE's CUDA driver, bit for bit."""
    from support import iree_traced_tensors

    from engine.dispatch.bundle import Bundle
    from engine.dispatch.capture import capture_debug
    from engine.samples import sample_path

    vmfb = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "cuda", "--iree-flow-trace-dispatch-tensors")
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(2, 16)
    np.save(tmp_path / "x.npy", x)
    capture_debug(vmfb, "main", [f"@{tmp_path / 'x.npy'}"], tmp_path / "bundle", device="cuda")
    bundle = Bundle(tmp_path / "bundle")
    traced = iree_traced_tensors(vmfb, "main", [x], device="cuda")
    for which in ("inputs", "outputs"):
        theirs = [arrays for key, arrays in traced if key.endswith(f" {which}")]
        assert len(theirs) == len(bundle.dispatches) > 0
        for d, arrays in zip(bundle.dispatches, theirs):
            ours = bundle.dispatch_tensors(d, which)
            assert [np.asarray(t).tobytes() for t in ours] == [a.tobytes() for a in arrays], (d.name, which)


def test_a_cuda_device_gets_code_for_its_own_architecture(tmp_path):
    """sm_80 code does not load on an older GPU: a device IREE 3.13 can build for gets its own compute
    capability; 8.0 and GPUs newer than IREE 3.13 knows (Hopper, Blackwell) get sm_80, whose PTX the driver
    compiles for them."""
    from engine.compiler.targets import find_target
    from engine.runtime.hal.cuda.driver import CudaDeviceInfo
    from engine.runtime.hal.devices import cuda_compile_target

    def target_of(major: int, minor: int) -> str:
        return cuda_compile_target(CudaDeviceInfo(0, "gpu", (major, minor), 1 << 30, 1))

    assert [target_of(*cc) for cc in ((7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0))] == [
        "cuda:sm_70", "cuda:sm_75", "cuda", "cuda:sm_86", "cuda:sm_89", "cuda", "cuda",
    ]  # fmt: skip
    assert find_target("cuda:sm_75").flags == ("--iree-hal-target-device=cuda", "--iree-cuda-target=sm_75")
    source = tmp_path / "p.mlir"
    source.write_text(PROGRAM)
    built = compile_for(source, tmp_path / "t4.vmfb", "cuda:sm_75")
    [exe] = open_vmfb(built).executables
    assert ".target sm_75" in read_cda1(exe.data).modules[0].ptx
