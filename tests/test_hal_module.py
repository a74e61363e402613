"""Unit tests of the ``hal`` module's functions on their own (no VM), checked against IREE's runtime and numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.hal_conformance import vm_bytes, vm_text

from engine.runtime.hal import constants as c
from engine.runtime.hal.buffers import HalBufferView, HalFile
from engine.runtime.hal.commands import BindingTableEntry, BufferRef, resolve_ref
from engine.runtime.hal.convert import buffer_view_from_numpy, buffer_view_to_numpy
from engine.runtime.hal.cpu_device import CpuDevice
from engine.runtime.hal.module import HalModule
from engine.runtime.vm.native import StatusCode, VmStatusError
from engine.runtime.vm.values import VmBuffer

ANY = -1


@pytest.fixture
def hal() -> HalModule:
    return HalModule(CpuDevice())


@pytest.fixture
def device(hal) -> CpuDevice:
    return hal.devices[0]


def _alloc(hal, device, size, usage=0xC03):
    return hal.allocator_allocate(hal.device_allocator(device), ANY, c.MEMORY_TYPE_DEVICE_LOCAL, usage, size)


def test_exports_and_cconvs_equal_iree_runtime(hal):
    import iree.runtime as rt

    theirs = rt.create_hal_module(rt.VmInstance(), rt.get_device("local-sync"))
    cconvs = {}
    for name in theirs.function_names:
        text = repr(theirs.lookup_function(name))
        cconvs[name] = text[text.index("(") + 1 : text.index(")")]
    assert len(cconvs) == 60
    assert {n: f.cconv for n, f in hal.functions.items()} == cconvs
    assert (hal.name, hal.version) == ("hal", 7)


def test_device_queries_answer_like_local_sync(hal, device):
    assert hal.devices_count() == 1 and hal.devices_get(0) is device and hal.devices_get(1) is None
    q = hal.device_query_i64
    assert q(device, vm_text("hal.device.id"), vm_text("local*")) == (1, 1)
    assert q(device, vm_text("hal.device.id"), vm_text("local-sync")) == (1, 1)
    assert q(device, vm_text("hal.device.id"), vm_text("vulkan*")) == (1, 0)
    assert q(device, vm_text("hal.executable.format"), vm_text("embedded-elf-x86_64")) == (1, 1)
    assert q(device, vm_text("hal.executable.format"), vm_text("vmvx-bytecode-fb")) == (1, 1)
    assert q(device, vm_text("hal.executable.format"), vm_text("vulkan-spirv-fb")) == (1, 0)
    assert q(device, vm_text("hal.device"), vm_text("concurrency")) == (1, 1)
    assert q(device, vm_text("hal.dispatch"), vm_text("concurrency")) == (1, 1)
    assert q(device, vm_text("hal.device"), vm_text("nonsense")) == (0, 0)
    # hal.cpu features agree with the kernel's view of this CPU (/proc/cpuinfo spells sse3 "pni").
    flags = set(Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split())
    for feature, flag in (("sse3", "pni"), ("avx2", "avx2"), ("avx512f", "avx512f"), ("fma", "fma")):
        assert q(device, vm_text("hal.cpu"), vm_text(feature)) == (1, int(flag in flags)), feature
    assert q(device, vm_text("hal.cpu"), vm_text("no-such-feature")) == (0, 0)


@pytest.mark.parametrize(
    "value,pattern,expected",
    [
        ("local-sync", "local*", True),
        ("local-sync", "*sync", True),
        ("local-sync", "local-????", True),
        ("local-sync", "local-???", False),
        ("local-sync", "l*c*y*c", True),
        ("local-sync", "local", False),
        ("local-sync", "*", True),
        ("", "*", True),
        ("", "?", False),
        ("vulkan", "local*", False),
        ("abc", "?" * 17, False),  # more than 16 wildcards never match
    ],
)
def test_match_pattern(value, pattern, expected):
    assert c.match_pattern(value, pattern) is expected


def test_bitfield_names_like_iree():
    assert c.format_memory_type(0x32) == "DEVICE_LOCAL|HOST_VISIBLE"
    assert c.format_memory_type(0x46) == "HOST_LOCAL"
    assert c.format_buffer_usage(0xC03) == "TRANSFER|DISPATCH_STORAGE"
    assert (
        c.format_buffer_usage(0x80C03 | (1 << 30)) == "TRANSFER|DISPATCH_STORAGE|SHARING_IMMUTABLE|40000000h"
    )


def test_allocate_subspan_load_store(hal, device):
    buffer = _alloc(hal, device, 64)
    # The heap allocator makes buffers host visible and mappable, whatever was asked.
    assert buffer.memory_type == c.MEMORY_TYPE_DEVICE_LOCAL | c.MEMORY_TYPE_HOST_VISIBLE
    assert buffer.allowed_usage & c.BUFFER_USAGE_MAPPING_SCOPED
    assert buffer.allocation.data.ctypes.data % 64 == 0
    sub = hal.buffer_subspan(buffer, 16, 32)
    assert hal.buffer_length(sub) == 32 and hal.buffer_subspan(buffer, 0, 64) is buffer
    subsub = hal.buffer_subspan(sub, 4, 8)
    assert subsub.byte_offset == 20 and subsub.allocated_buffer is buffer
    hal.buffer_store(-2, subsub, 0, 4)
    hal.buffer_store(0x1234ABCD, subsub, 4, 2)
    assert buffer.allocation.data[20:26].tobytes() == bytes([0xFE, 0xFF, 0xFF, 0xFF, 0xCD, 0xAB])
    assert hal.buffer_load(sub, 4, 4) == 0xFFFFFFFE
    assert hal.buffer_load(sub, 8, 1) == 0xCD
    with pytest.raises(VmStatusError) as e:
        hal.buffer_store(1, subsub, 6, 4)
    assert e.value.code == StatusCode.OUT_OF_RANGE
    assert e.value.message == "store out of bounds (target_offset=6, length=4 into max 8)"
    with pytest.raises(VmStatusError) as e:
        hal.buffer_load(sub, 0, 8)
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    with pytest.raises(VmStatusError) as e:
        hal.buffer_subspan(buffer, 60, 8)
    assert e.value.code == StatusCode.OUT_OF_RANGE
    assert "invalid subspan of an existing buffer (source_offset=60, length=8)" in e.value.message


def test_buffer_assert_messages(hal, device):
    buffer = _alloc(hal, device, 64, usage=c.BUFFER_USAGE_TRANSFER)
    allocator = hal.device_allocator(device)
    hal.buffer_assert(buffer, vm_text("tensor"), allocator, 64, c.MEMORY_TYPE_DEVICE_VISIBLE, 3)
    with pytest.raises(VmStatusError) as e:
        hal.buffer_assert(buffer, vm_text("tensor"), allocator, 128, c.MEMORY_TYPE_DEVICE_VISIBLE, 3)
    assert (e.value.code, e.value.message) == (
        StatusCode.INVALID_ARGUMENT,
        "tensor buffer byte length 64 less than expected minimum 128",
    )
    with pytest.raises(VmStatusError) as e:
        hal.buffer_assert(buffer, vm_text("tensor"), allocator, 64, c.MEMORY_TYPE_DEVICE_VISIBLE, 0xC03)
    assert e.value.code == StatusCode.PERMISSION_DENIED
    assert e.value.message == (
        "tensor requested usage was not specified when the buffer was allocated; buffer allows "
        "TRANSFER|MAPPING|MAPPING_PERSISTENT, operation requires "
        "TRANSFER|DISPATCH_STORAGE"
    )


def test_buffer_views(hal, device):
    buffer = _alloc(hal, device, 256)
    view = hal.buffer_view_create(buffer, 64, 96, 0x21000020, 1, [4, 6])
    assert view.buffer.byte_offset == 64 and view.buffer.byte_length == 96
    assert hal.buffer_view_buffer(view) is view.buffer
    assert (hal.buffer_view_rank(view), hal.buffer_view_dim(view, 1), hal.buffer_view_dim(view, 2)) == (
        2,
        6,
        0,
    )
    assert hal.buffer_view_element_type(view) == 0x21000020 and hal.buffer_view_encoding_type(view) == 1
    array = view.to_numpy(writable=True)
    array[:] = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(buffer.allocation.data[64:160].view(np.float32), np.arange(24))  # zero-copy
    hal.buffer_view_assert(view, vm_text("input0"), 0x21000020, 1, [4, 6])
    # Same-width integers are compatible; opaque actual types pass anything.
    ints = HalBufferView(buffer, (4,), 0x11000020)
    hal.buffer_view_assert(ints, vm_text("x"), 0x10000020, 1, [4])
    hal.buffer_view_assert(HalBufferView(buffer, (4,), 0x00000020), vm_text("x"), 0x21000020, 1, [4])
    with pytest.raises(VmStatusError) as e:
        hal.buffer_view_assert(view, vm_text("input0"), 0x21000020, 2, [4, 6])
    assert e.value.message == "input0 encoding mismatch; expected 00000002 but have 00000001"
    with pytest.raises(VmStatusError) as e:
        hal.buffer_view_assert(HalBufferView(buffer, (), 0x21000020), vm_text("x"), 0x21000020, 1, [3])
    assert e.value.message == (
        "x shape rank mismatch; expected 1 but have 0 (scalar); expected shape `3`, actual shape ``"
    )
    with pytest.raises(VmStatusError):
        hal.buffer_view_create(buffer, 200, 96, 0x21000020, 1, [4, 6])


@pytest.mark.parametrize(
    "array,code",
    [
        (np.array([True, False, True]), 0x13000008),
        (np.arange(6, dtype=np.float16).reshape(2, 3), 0x21000010),
        (np.arange(4, dtype=np.int8), 0x10000008),
        (np.arange(4, dtype=np.uint16), 0x12000010),
        (np.arange(4, dtype=np.int64).reshape(2, 2, 1), 0x10000040),
        (np.array([1 + 2j, 3 - 4j], dtype=np.complex64), 0x23000040),
        (np.array(2.5), 0x21000040),
    ],
)
def test_numpy_round_trip(device, array, code):
    view = buffer_view_from_numpy(device, array)
    assert view.element_type == code and view.shape == array.shape
    back = buffer_view_to_numpy(view)
    assert back.dtype == array.dtype and back.tobytes() == array.tobytes()
    assert np.shares_memory(buffer_view_to_numpy(view, copy=False), view.buffer.allocation.data)


def test_bf16_comes_as_raw_bits(device):
    bits = np.array([0x3F80, 0xC000], dtype=np.uint16)  # 1.0, -2.0
    view = buffer_view_from_numpy(device, bits, 0x22000010)
    assert view.to_numpy().dtype == np.uint16 and view.to_numpy().tolist() == [0x3F80, 0xC000]


def test_import_aliases_writable_constants(hal, device):
    allocator = hal.device_allocator(device)
    raw = np.zeros(256, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    rodata = VmBuffer(raw[start : start + 128], False, "rodata 4")  # immutable to the VM, writable memory
    usage = 0x80C03  # what programs pass: constant (SHARING_IMMUTABLE) dispatch storage
    buffer = hal.allocator_import(allocator, 1, ANY, c.MEMORY_TYPE_DEVICE_LOCAL, usage, rodata, 64, 64)
    assert buffer is not None and buffer.allocation.origin == "import rodata 4"
    buffer.write_view(0, 4)[:] = 7  # a kernel writing in place reaches the module's memory, as in IREE
    assert rodata.data[64:68].tolist() == [7, 7, 7, 7]
    with pytest.raises(VmStatusError) as e:
        hal.allocator_import(allocator, 1, ANY, c.MEMORY_TYPE_DEVICE_LOCAL, 0xC03, rodata, 0, 64)
    assert e.value.code == StatusCode.PERMISSION_DENIED
    with pytest.raises(VmStatusError) as e:
        hal.allocator_import(allocator, 1, ANY, c.MEMORY_TYPE_DEVICE_LOCAL, usage, rodata, 100, 64)
    assert e.value.message == "byte range out of bounds (requested 100-163 of available 128)"
    # Memory kernels could not use in place (unaligned, read-only) is refused, and the program copies instead.
    unaligned = VmBuffer(raw[start + 1 : start + 65], False, "rodata 5")
    assert (
        hal.allocator_import(allocator, 1, ANY, c.MEMORY_TYPE_DEVICE_LOCAL, usage, unaligned, 0, -1) is None
    )
    with pytest.raises(VmStatusError):
        hal.allocator_import(allocator, 0, ANY, c.MEMORY_TYPE_DEVICE_LOCAL, usage, unaligned, 0, -1)


def test_file_from_memory_and_queue_read(hal, device):
    source = vm_bytes(bytes(range(200)))
    file = hal.ex_file_from_memory(device, ANY, c.MEMORY_ACCESS_READ, source, 100, 50, 0)
    with pytest.raises(VmStatusError) as e:
        hal.ex_file_from_memory(device, ANY, c.MEMORY_ACCESS_WRITE, source, 0, 10, 0)
    assert e.value.code == StatusCode.PERMISSION_DENIED
    buffer = _alloc(hal, device, 64)
    fence = hal.fence_create(device, 0)
    hal.device_queue_read(device, ANY, None, fence, file, 10, buffer, 8, 32, 0)
    assert hal.fence_await(-1, 0, [fence]) == 0
    assert buffer.allocation.data[8:40].tolist() == list(range(110, 142))
    # The file holds 50 bytes: a read or write past them is refused before any byte moves.
    with pytest.raises(VmStatusError) as e:
        hal.device_queue_read(device, ANY, None, None, file, 40, buffer, 0, 32, 0)
    assert e.value.code == StatusCode.OUT_OF_RANGE
    # ex.file.from_memory makes read-only files only (as IREE's does); a writable one is made directly.
    writable = HalFile(np.zeros(16, np.uint8), c.MEMORY_ACCESS_WRITE, "scratch")
    with pytest.raises(VmStatusError) as e:
        hal.device_queue_write(device, ANY, None, None, buffer, 0, writable, 8, 16, 0)
    assert e.value.code == StatusCode.OUT_OF_RANGE
    hal.device_queue_write(device, ANY, None, None, buffer, 8, writable, 0, 16, 0)
    assert bytes(writable.data) == bytes(range(110, 126))


def test_binding_table_resolution():
    device = CpuDevice()
    buffer = device.allocate(256)
    table = [BindingTableEntry(buffer, 64, 128), BindingTableEntry(buffer, 0, -1)]
    r = resolve_ref(BufferRef(0, None, 16, 32), table)
    assert (r.buffer, r.offset, r.length) == (buffer, 80, 32)
    r = resolve_ref(BufferRef(0, None, 16, -1), table)
    assert (r.offset, r.length) == (80, 112)  # the rest of the table entry
    r = resolve_ref(BufferRef(1, None, 0, -1), table)
    assert (r.offset, r.length) == (0, 256)
    r = resolve_ref(BufferRef(5, buffer, 8, 8), table)  # direct buffers ignore the slot
    assert (r.offset, r.length) == (8, 8)
    assert resolve_ref(BufferRef(0, None, 0, 8), []).buffer is None
    with pytest.raises(VmStatusError) as e:
        resolve_ref(BufferRef(2, None, 0, 8), table)
    assert e.value.code == StatusCode.OUT_OF_RANGE
    with pytest.raises(VmStatusError) as e:
        resolve_ref(BufferRef(0, None, 120, 16), table)  # past the entry's 128 bytes
    assert e.value.code == StatusCode.OUT_OF_RANGE


def test_command_buffer_lifecycle(hal, device):
    buffer = _alloc(hal, device, 16)
    cb = hal.command_buffer_create(device, 0, 3, ANY, 1)
    hal.command_buffer_begin_debug_group(cb, vm_text("group"))
    hal.command_buffer_fill_buffer(cb, None, 4, 8, 0, 0x55, 1, 0)
    hal.command_buffer_end_debug_group(cb)
    hal.command_buffer_finalize(cb)
    with pytest.raises(VmStatusError) as e:
        hal.command_buffer_fill_buffer(cb, buffer, 0, 4, 0, 0, 1, 0)
    assert e.value.code == StatusCode.FAILED_PRECONDITION
    for _ in range(2):  # reusable: replayed with a table each time
        fence = hal.fence_create(device, 0)
        hal.device_queue_execute_indirect(device, ANY, None, fence, cb, 0, [(buffer, 0, 16)])
        assert hal.fence_query(fence) == 0
    assert cb.submissions == 2
    assert buffer.allocation.data.tolist() == [0] * 4 + [0x55] * 8 + [0] * 4
    unfinished = hal.command_buffer_create(device, 1, 3, ANY, 0)
    with pytest.raises(VmStatusError):
        hal.device_queue_execute(device, ANY, None, None, unfinished, 0)
    with pytest.raises(VmStatusError) as e:
        hal.command_buffer_dispatch(cb, None, 0, 1, 1, 1, 0, [], [])
    assert e.value.code == StatusCode.INVALID_ARGUMENT


def test_alloca_dealloca_and_ownership(hal, device):
    signal = hal.fence_create(device, 0)
    buffer = hal.device_queue_alloca(device, ANY, None, signal, 0, 48, 0xC03, 100, 0)
    assert hal.fence_query(signal) == 0 and hal.buffer_length(buffer) == 100
    assert hal.buffer_allocation_is_terminal(buffer) == 1
    hal.buffer_allocation_preserve(buffer)
    assert hal.buffer_allocation_is_terminal(buffer) == 0
    assert hal.buffer_allocation_discard(buffer) == 0
    assert hal.buffer_allocation_discard(buffer) == 1
    with pytest.raises(VmStatusError) as e:
        hal.device_queue_alloca(device, ANY, None, None, 1, 48, 0xC03, 100, 0)
    assert e.value.code == StatusCode.UNIMPLEMENTED
    done = hal.fence_create(device, 0)
    hal.device_queue_dealloca(device, ANY, signal, done, buffer, 0)
    hal.device_queue_barrier(device, ANY, done, None, 0)
    hal.device_queue_flush(device, ANY)
    assert hal.fence_query(done) == 0


def test_await_never_signaled_fence_does_not_hang(hal, device):
    fence = hal.fence_create(device, 0)
    with pytest.raises(VmStatusError) as e:
        hal.fence_await(-1, 0, [fence])
    assert e.value.code == StatusCode.DEADLINE_EXCEEDED
    assert hal.fence_await(-1, 0, []) == 0 and hal.fence_await(-1, 0, [None]) == 0
