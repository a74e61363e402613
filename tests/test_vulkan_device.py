"""The Vulkan device of the emulated HAL, on a real Vulkan device (Mesa's lavapipe where there is no GPU).

Expected values come from numpy, from ``spirv-dis`` and ``iree-compile --compile-to=hal``, and from IREE's
own runtime on its ``vulkan`` driver (the same SPIR-V on the same device, so results must be bit-equal).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import hal_dispatches, iree_tool, run_reference

from engine.errors import ExecutableFormatError, HalError, VulkanError
from engine.runtime.hal.device import DispatchObserver
from engine.runtime.hal.vulkan import (
    BufferRange,
    VulkanDevice,
    list_physical_devices,
    vulkan_available,
)
from engine.runtime.vmfb.vke1 import read_vke1
from engine.samples import KNOWN_COMPILE_FAILURES, sample_names

pytestmark = pytest.mark.vulkan

ROOT = Path(__file__).resolve().parent.parent

_NO_VULKAN = vulkan_available()
needs_vulkan = pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}")

VULKAN_SAMPLES = [s for s in sample_names() if (s, "vulkan-spirv") not in KNOWN_COMPILE_FAILURES]


# ----------------------------------------------------------------------------------------------- helpers


def vke1_executables(vmfb: Path) -> list[bytes]:
    """The VKE1 executables embedded in a .vmfb, through the engine's module reader when it is there."""
    try:
        from engine.runtime.vmfb.module import open_vmfb
    except ImportError:  # the reader is another area's; scan for the header magic instead
        data = vmfb.read_bytes()
        out, i = [], data.find(b"VKE1\0\0\0\0")
        while i >= 0:
            out.append(data[i:])
            i = data.find(b"VKE1\0\0\0\0", i + 8)
        return out
    m = open_vmfb(vmfb)  # left to the garbage collector: close() is another area's and not needed here
    return [bytes(x.data) for x in m.executables if x.format == "vulkan-spirv-fb"]




def random_input(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


def parse_signature(declaration: str):
    """(input (shape, dtype) list, output (shape, dtype)) of ``sync func @f(%input0: tensor<4x8xf32>...)``."""
    dtypes = {
        "f32": np.float32,
        "f16": np.float16,
        "i8": np.int8,
        "i16": np.int16,
        "i32": np.int32,
        "i64": np.int64,
    }

    def tensor(t: str):
        parts = t.split("x")
        return tuple(int(p) for p in parts[:-1]), np.dtype(dtypes[parts[-1]])

    ins, outs = declaration.split("->")
    return [tensor(t) for t in re.findall(r"tensor<([^>]*)>", ins)], [
        tensor(t) for t in re.findall(r"tensor<([^>]*)>", outs)
    ]




def run_single_dispatch(
    dev: VulkanDevice, exe_bytes: bytes, entry: str, count, inputs: list[np.ndarray], out_spec
):
    """Our device: inputs in bindings 0..n-1, the result in binding n (IREE's order for these programs)."""
    exe = dev.load_executable(exe_bytes)
    pipeline = exe.pipeline(entry)
    shape, dtype = out_spec
    out_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buffers = []
    for x in inputs:
        b = dev.allocate(x.nbytes)
        dev.write(b, 0, x)
        buffers.append(b)
    result = dev.allocate(out_bytes)
    dev.fill(result, 0, None, 0, pattern_length=1)
    cb = dev.create_command_buffer()
    cb.begin()
    cb.dispatch(pipeline, count, (), [(b, 0, b.size) for b in (*buffers, result)])
    cb.end()
    dev.submit(cb).wait()
    return dev.read(result).view(dtype).reshape(shape)


@pytest.fixture(scope="module")
def device():
    if _NO_VULKAN is not None:
        pytest.skip(f"no Vulkan: {_NO_VULKAN}")
    with VulkanDevice() as d:
        yield d


@pytest.fixture(scope="module")
def elementwise_exe(compiled) -> bytes:
    (exe,) = vke1_executables(compiled.path("elementwise", "vulkan-spirv"))
    return exe


# ----------------------------------------------------------------------------------------------- devices


@needs_vulkan
def test_list_physical_devices_describes_lavapipe_or_gpu():
    devices = list_physical_devices()
    assert devices, "at least one device"
    for i, d in enumerate(devices):
        assert d.index == i and d.name
        major, minor, _ = (int(x) for x in d.api_version.split("."))
        assert (major, minor) >= (1, 1)
        # Vulkan's required minimums for these limits.
        assert min(d.max_compute_workgroup_count) >= 65535
        assert d.max_compute_workgroup_invocations >= 128
        assert d.max_push_constants_size >= 128
        assert d.max_storage_buffer_range >= 1 << 27
        assert d.memory_heaps and d.memory_types
        assert all(t.heap_index < len(d.memory_heaps) for t in d.memory_types)
        assert any(flags & 1 for flags, _ in d.queue_families) or any(
            flags & 2 for flags, _ in d.queue_families
        )
    if not any(d.device_type != "cpu" for d in devices):
        lavapipe = [d for d in devices if "llvmpipe" in d.name]
        assert lavapipe and lavapipe[0].device_type == "cpu" and lavapipe[0].subgroup_size > 0


@needs_vulkan
def test_open_device_by_index_and_name():
    first = list_physical_devices()[0]
    with VulkanDevice(0) as by_index:
        assert by_index.info == first
    with VulkanDevice(first.name[:5].upper()) as by_name:
        assert by_name.info.name == first.name
    with pytest.raises(VulkanError, match="no Vulkan device name contains"):
        VulkanDevice("no such device, surely")
    with pytest.raises(VulkanError, match="out of range"):
        VulkanDevice(99)


def test_missing_vulkan_is_a_clear_error_in_a_subprocess():
    # Point the loader at a driver manifest that does not exist: no ICD, so no device.
    env = dict(os.environ, VK_ICD_FILENAMES="/nonexistent/icd.json", VK_DRIVER_FILES="/nonexistent/icd.json")
    code = (
        "from engine.errors import VulkanUnavailableError\n"
        "import engine.runtime.hal.vulkan as v\n"
        "try:\n"
        "    v.VulkanDevice()\n"
        "except VulkanUnavailableError as e:\n"
        "    print('ERROR:', e)\n"
        "print('available:', v.vulkan_available() is None)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert "ERROR:" in proc.stdout and "libvulkan1 mesa-vulkan-drivers" in proc.stdout
    assert "available: False" in proc.stdout


# ----------------------------------------------------------------------------------------------- buffers


@needs_vulkan
def test_buffer_write_read_fill_copy_update(device):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 1000, dtype=np.uint8)
    a = device.allocate(1000, "a")
    b = device.allocate(1003, "b")
    device.write(a, 0, data)
    np.testing.assert_array_equal(device.read(a), data)
    np.testing.assert_array_equal(device.read(a, 17, 100), data[17:117])

    expected = np.zeros(1003, np.uint8)
    device.fill(b, 0, None, 0, pattern_length=1)
    device.fill(b, 8, 40, 0xDEADBEEF)  # aligned: vkCmdFillBuffer
    expected[8:48] = np.frombuffer((0xDEADBEEF).to_bytes(4, "little") * 10, np.uint8)
    device.fill(b, 49, 6, b"\x12\x34")  # unaligned 2-byte pattern
    expected[49:55] = [0x12, 0x34] * 3
    device.copy(a, 3, b, 101, 500)  # unaligned copy
    expected[101:601] = data[3:503]
    np.testing.assert_array_equal(device.read(b), expected)

    cb = device.create_command_buffer()
    cb.begin()
    cb.update((b, 601, 5), b"hello")  # unaligned: through an upload buffer
    cb.update((b, 700, 8), np.array([1.5, -2.0], np.float32))  # aligned: vkCmdUpdateBuffer
    cb.execution_barrier()
    cb.copy((b, 601, 5), (a, 0, None))
    cb.fill((a, 5, 3), 7, pattern_length=1)
    cb.end()
    device.submit(cb).wait()
    expected[601:606] = np.frombuffer(b"hello", np.uint8)
    expected[700:708] = np.frombuffer(np.array([1.5, -2.0], np.float32).tobytes(), np.uint8)
    np.testing.assert_array_equal(device.read(b), expected)
    np.testing.assert_array_equal(device.read(a, 0, 8), np.frombuffer(b"hello\7\7\7", np.uint8))

    with pytest.raises(HalError, match="outside"):
        device.read(a, 990, 20)
    with pytest.raises(HalError, match="outside"):
        device.write(a, 999, b"xy")
    big = device.allocate(1 << 20)
    payload = rng.integers(0, 256, 1 << 20, dtype=np.uint8)
    device.write(big, 0, payload)  # grows the staging buffer
    np.testing.assert_array_equal(device.read(big), payload)
    big.release()
    with pytest.raises(HalError, match="released"):
        device.read(big)


@needs_vulkan
def test_command_buffer_misuse_is_a_hal_error(device, elementwise_exe):
    p = device.load_executable(elementwise_exe).pipeline(0)
    cb = device.create_command_buffer()
    with pytest.raises(HalError, match="not recording"):
        cb.dispatch(p, (1, 1, 1), (), [])
    cb.begin()
    buf = device.allocate(128)
    with pytest.raises(HalError, match="needs 3 bindings"):
        cb.dispatch(p, (1, 1, 1), (), [(buf, 0, 128)])
    with pytest.raises(HalError, match="push constants"):
        cb.dispatch(p, (1, 1, 1), (1, 2), [(buf, 0, 128)] * 3)
    # One past the device's own limit on each axis: the limits differ by device (lavapipe: 65535 on x;
    # an NVIDIA H100: 2**31 - 1 on x, where 1 << 20 workgroups are allowed and ran).
    for axis, limit in enumerate(device.info.max_compute_workgroup_count):
        counts = [1, 1, 1]
        counts[axis] = limit + 1
        with pytest.raises(HalError, match="exceeds"):
            cb.dispatch(p, tuple(counts), (), [(buf, 0, 128)] * 3)
    cb.dispatch(p, tuple(device.info.max_compute_workgroup_count), (), [(buf, 0, 128)] * 3)  # at the limit: fine
    with pytest.raises(HalError, match="end"):
        device.submit(cb)


# ----------------------------------------------------------------------------------------------- executables


def _spirv_dis() -> str | None:
    return shutil.which("spirv-dis")


@pytest.mark.parametrize("sample", VULKAN_SAMPLES)
def test_parse_vke1_executables_agrees_with_spirv_dis(compiled, sample, tmp_path):
    exes = vke1_executables(compiled.path(sample, "vulkan-spirv"))
    assert exes, "every vulkan-spirv program embeds VKE1 executables"
    for data in exes:
        exe = read_vke1(data)
        assert exe.pipelines and exe.shader_modules
        for i, p in enumerate(exe.pipelines):
            assert p.dispatch_abi == 0 and p.debug_name in (None, p.entry_point)
            module = exe.shader_modules[p.shader_module_ordinal]
            if _spirv_dis() is None:
                continue
            spv = tmp_path / f"{p.entry_point}.spv"
            spv.write_bytes(module.spirv.tobytes())
            text = subprocess.run([_spirv_dis(), str(spv)], check=True, capture_output=True, text=True).stdout
            assert re.search(rf'OpEntryPoint GLCompute %\S+ "{re.escape(p.entry_point)}"', text)
            sets = dict(re.findall(r"OpDecorate (%\S+) DescriptorSet (\d+)", text))
            binds = dict(re.findall(r"OpDecorate (%\S+) Binding (\d+)", text))
            decorated = sorted((int(sets[v]), int(binds[v])) for v in sets)
            assert decorated, "IREE's SPIR-V declares its storage buffers"
            layout = exe.pipeline_layouts[p.pipeline_layout_ordinal]
            declared = sorted(
                (set_no, b.binding)
                for set_no, s in enumerate(layout.descriptor_set_layout_ordinals)
                for b in exe.descriptor_set_layouts[s].bindings
            )
            assert set(decorated) <= set(declared), (decorated, declared)
            assert exe.binding_count(i) == len(declared)
            has_push = "PushConstant" in text
            assert has_push == bool(layout.push_constant_ranges)


def test_malformed_vke1_raises_format_errors(compiled):
    data = vke1_executables(compiled.path("matmul", "vulkan-spirv"))[0]
    content = 64 + int.from_bytes(data[8:16], "little")
    data = data[:content]
    read_vke1(data)
    with pytest.raises(ExecutableFormatError, match="magic"):
        read_vke1(b"XXXX" + data[4:])
    for cut in (0, 10, 63, 64, 70, 200, content - 1):
        with pytest.raises(ExecutableFormatError):
            read_vke1(data[:cut])
    rng = np.random.default_rng(1)
    for _ in range(300):  # corrupt bytes of the FlatBuffer: a typed error or a parse, never anything else
        bad = bytearray(data)
        for pos in rng.integers(64, 400, 3):
            bad[pos] = int(rng.integers(0, 256))
        try:
            read_vke1(bytes(bad))
        except ExecutableFormatError:
            pass


# ----------------------------------------------------------------------------------------------- dispatches


@needs_vulkan
def test_elementwise_dispatch_matches_numpy(device, elementwise_exe):
    rng = np.random.default_rng(2)
    a, b = random_input((4, 8), np.float32, rng), random_input((4, 8), np.float32, rng)
    out = run_single_dispatch(
        device,
        elementwise_exe,
        "main_dispatch_0_elementwise_32_f32",
        (1, 1, 1),
        [a, b],
        ((4, 8), np.dtype(np.float32)),
    )
    np.testing.assert_allclose(out, a * b + np.abs(a), rtol=1e-6, atol=1e-6)


@needs_vulkan
def test_matmul_and_softmax_dispatches_match_numpy(device, compiled):
    rng = np.random.default_rng(3)
    lhs, rhs = random_input((4, 8), np.float32, rng), random_input((8, 16), np.float32, rng)
    (exe,) = vke1_executables(compiled.path("matmul", "vulkan-spirv"))
    out = run_single_dispatch(device, exe, 0, (1, 1, 1), [lhs, rhs], ((4, 16), np.dtype(np.float32)))
    np.testing.assert_allclose(out, np.tanh(lhs @ rhs), rtol=1e-5, atol=1e-5)

    x = random_input((4, 16), np.float32, rng)
    (exe,) = vke1_executables(compiled.path("softmax", "vulkan-spirv"))
    out = run_single_dispatch(device, exe, 0, (1, 1, 1), [x], ((4, 16), np.dtype(np.float32)))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


@needs_vulkan
def test_push_constants_and_indirect_dispatch(device, compiled):
    """``dynamic.scale``: N as push constants (i64 split into lo/hi words), one workgroup per 64 elements."""
    exes = [read_vke1(e) for e in vke1_executables(compiled.path("dynamic", "vulkan-spirv"))]
    (scale,) = [e for e in exes if e.entry_points[0].startswith("scale_dispatch")]
    pipeline = device.load_executable(scale).pipeline(0)
    assert pipeline.push_constant_bytes == 8
    n = 1000
    x = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    src, dst = device.allocate(4 * n), device.allocate(4 * n)
    device.write(src, 0, x)
    device.fill(dst, 0, None, 0)
    groups = device.allocate(12)
    device.write(groups, 0, np.array([-(-n // 64), 1, 1], np.uint32))
    cb = device.create_command_buffer()
    cb.begin()
    cb.dispatch_indirect(pipeline, (groups, 0), [n, 0], [BufferRange(src), BufferRange(dst)])
    cb.end()
    device.submit(cb).wait()
    np.testing.assert_array_equal(device.read(dst).view(np.float32), x * 2 + 1)  # exact in f32


@needs_vulkan
def test_observer_sees_bindings_before_and_after_each_dispatch(device, elementwise_exe):
    """Two chained dispatches split at dispatch boundaries; the observer reads every binding each time."""
    p = device.load_executable(elementwise_exe).pipeline(0)
    rng = np.random.default_rng(5)
    a, b = random_input((32,), np.float32, rng), random_input((32,), np.float32, rng)
    ba, bb, bc, bd = (device.allocate(128) for _ in range(4))
    device.write(ba, 0, a)
    device.write(bb, 0, b)
    cb = device.create_command_buffer()
    cb.begin()
    cb.fill((bc, 0, 128), 0)
    cb.fill((bd, 0, 128), 0)
    cb.execution_barrier()
    cb.dispatch(p, (1, 1, 1), (), [(ba, 0, 128), (bb, 0, 128), (bc, 0, 128)])
    cb.execution_barrier()
    cb.dispatch(p, (1, 1, 1), (), [(bc, 0, 128), (bb, 0, 128), (bd, 0, 128)])
    cb.end()

    seen = []

    class Recorder(DispatchObserver):  # the HAL's one observer API, told DispatchEvents here
        def before_dispatch(self, event):
            seen.append(
                ("before", event.index, [device.read_binding(r).view(np.float32) for r in event.op.bindings])
            )

        def after_dispatch(self, event):
            seen.append(
                ("after", event.index, [device.read_binding(r).view(np.float32) for r in event.op.bindings])
            )

    device.submit(cb, observer=Recorder()).wait()
    c = a * b + np.abs(a)
    d = c * b + np.abs(c)
    assert [(ph, i) for ph, i, _ in seen] == [("before", 0), ("after", 0), ("before", 1), ("after", 1)]
    np.testing.assert_array_equal(seen[0][2][2], np.zeros(32, np.float32))  # output not yet written
    np.testing.assert_allclose(seen[1][2][2], c, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(seen[2][2][2], np.zeros(32, np.float32))
    np.testing.assert_allclose(seen[3][2][2], d, rtol=1e-6, atol=1e-6)

    # The batched run gives the same bytes; an observer that wants only dispatch 1 sees only it.
    device.fill(bd, 0, None, 0)
    device.submit(cb).wait()
    batched = device.read(bd)
    np.testing.assert_array_equal(batched.view(np.float32), seen[3][2][2])
    seen.clear()
    Recorder.wants = lambda self, index, op: index == 1
    device.submit(cb, observer=Recorder())
    assert [(ph, i) for ph, i, _ in seen] == [("before", 1), ("after", 1)]


def _single_dispatch_cases():
    # (sample, function) pairs whose function runs exactly one dispatch with a static workgroup count.
    return [
        ("elementwise", "main"),
        ("matmul", "main"),
        ("softmax", "main"),
        ("conv", "main"),
        ("reductions", "row_sum"),
        ("reductions", "column_max"),
        ("large_constant", "main"),
        ("int_types", "i32_ops"),
        ("int_types", "i8_ops"),
        ("f16", "fma_f16"),
        ("f16", "widen"),
    ]


@needs_vulkan
@pytest.mark.parametrize(("sample", "function"), _single_dispatch_cases())
def test_single_dispatch_bit_equal_to_iree_runtime_on_vulkan(device, compiled, tmp_path, sample, function):
    vmfb = compiled.path(sample, "vulkan-spirv")
    counts = hal_dispatches(sample, tmp_path)
    exes = [(e, read_vke1(e)) for e in vke1_executables(vmfb)]
    mine = [
        (raw, d, name)
        for raw, d in exes
        for name in d.entry_points
        if name.startswith(f"{function}_dispatch_")
    ]
    if len(mine) != 1 or mine[0][2] not in counts:
        pytest.skip(f"{sample}.{function} is not one static dispatch")
    raw, definition, entry = mine[0]
    if definition.pipeline_layouts[
        definition.pipelines[definition.pipeline_index(entry)].pipeline_layout_ordinal
    ].push_constant_ranges:
        pytest.skip("dispatch constants are computed by the host program")

    declaration = None
    if declaration is None:
        dump = subprocess.run(
            [iree_tool("iree-dump-module"), str(vmfb)], check=True, capture_output=True, text=True
        )
        declaration = re.search(rf"iree\.abi\.declaration: sync func @{function}\(.*", dump.stdout).group(0)
    in_specs, (out_spec,) = parse_signature(declaration)
    rng = np.random.default_rng(6)
    inputs = [random_input(shape, dtype, rng) for shape, dtype in in_specs]
    if definition.binding_count(definition.pipeline_index(entry)) != len(inputs) + 1:
        pytest.skip("the dispatch binds constants or packs buffers; needs the VM to place its bindings")

    ours = run_single_dispatch(device, raw, entry, counts[entry], inputs, out_spec)
    reference = run_reference(vmfb, function, inputs)
    assert ours.shape == reference.shape
    np.testing.assert_array_equal(ours.view(np.uint8), np.ascontiguousarray(reference).view(np.uint8))


@needs_vulkan
def test_every_sample_entry_point_builds_a_pipeline(device, compiled):
    """f16, i8/i64, reductions...: each needs its SPIR-V capabilities enabled on the device."""
    built = 0
    for sample in VULKAN_SAMPLES:
        for data in vke1_executables(compiled.path(sample, "vulkan-spirv")):
            exe = device.load_executable(data)
            for name in exe.entry_points:
                pipeline = exe.pipeline(name)
                assert pipeline is exe.pipeline(name)  # built once
                assert pipeline.binding_count == exe.definition.binding_count(
                    exe.definition.pipeline_index(name)
                )
                built += 1
            exe.release()
    assert built >= len(VULKAN_SAMPLES)


def test_importing_the_device_does_not_load_vulkan():
    code = "import sys, engine.runtime.hal.vulkan; print('vulkan' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.stdout.strip() == "False", proc.stderr
