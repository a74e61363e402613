"""Hostile FlatBuffers whose tables share data cannot make a reader's walk quadratic: reads are metered
against the buffer's size. Module functions whose bytecode overlaps are rejected for the same reason."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from engine.errors import VmfbFormatError
from engine.runtime.vmfb.flatbuffer import READ_BUDGET_PER_BYTE, FlatBuffer
from engine.runtime.vmfb.module import FUNCTION_DESCRIPTOR_DTYPE, VmfbModule


def shared_vector_buffer(n_tables: int, n_ints: int) -> bytes:
    """A root table with a vector of ``n_tables`` offsets that all point at ONE table, whose field 0 is
    a vector of ``n_ints`` int32: walking every table's vector reads n_tables * n_ints elements."""
    b = bytearray()
    b += struct.pack("<I", 12)  # root table at 12
    b += struct.pack("<HHHxx", 6, 8, 4)  # root vtable at 4
    w = 20
    b += struct.pack("<iI", 8, w - 16)  # root table: vtable 8 bytes back, field 0 -> vector at w
    t = w + 4 + 4 * n_tables + 8
    b += struct.pack("<I", n_tables)
    for k in range(n_tables):
        b += struct.pack("<I", t - (w + 4 + 4 * k))
    b += struct.pack("<HHHxx", 6, 8, 4)  # the shared table's vtable
    b += struct.pack("<iI", 8, 4)  # the shared table: field 0 -> the vector right after it
    b += struct.pack("<I", n_ints) + np.arange(n_ints, dtype="<i4").tobytes()
    return bytes(b)


def walk(data: bytes) -> int:
    root = FlatBuffer(data).root()
    return sum(int(x) for t in root.tables(0) for x in t.scalars(0, "i32"))


def test_a_small_valid_buffer_reads():
    assert walk(shared_vector_buffer(3, 10)) == 3 * 45


def test_tables_sharing_one_vector_are_stopped_in_bounded_time():
    data = shared_vector_buffer(4000, 4000)  # 32 KB; 16 million elements if walked naively
    start = time.perf_counter()
    with pytest.raises(VmfbFormatError, match="share data"):
        walk(data)
    assert time.perf_counter() - start < 5
    # The budget is proportional to the size: what was read before stopping is too.
    assert READ_BUDGET_PER_BYTE * len(data) < 4000 * 4000


def test_functions_sharing_bytecode_are_a_format_error(compiled):
    data = bytearray(compiled.path("mlp", "vmvx").read_bytes())
    module = VmfbModule.from_bytes(bytes(data))
    assert len(module.functions) >= 2
    pos, n = module.root.vector_span(12, FUNCTION_DESCRIPTOR_DTYPE.itemsize)
    first = bytes(data[pos : pos + FUNCTION_DESCRIPTOR_DTYPE.itemsize])
    biggest = max(module.functions, key=lambda f: f.bytecode_length)
    for k in range(n):  # every descriptor now claims the biggest function's bytecode
        struct.pack_into("<ii", data, pos + k * len(first), biggest.bytecode_offset, biggest.bytecode_length)
    with pytest.raises(VmfbFormatError, match="overlap"):
        len(VmfbModule.from_bytes(bytes(data)).functions)


def test_overlapping_elf_symbol_tables_are_a_format_error(compiled):
    from engine.runtime.vmfb.executables import read_elf
    from engine.runtime.vmfb.module import open_vmfb

    elf = next(
        x
        for x in open_vmfb(compiled.path("mlp", "llvm-cpu")).executables
        if x.format.startswith("embedded-elf")
    )
    data = bytearray(elf.data)
    assert read_elf(bytes(data)).sections  # the valid one reads
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    types = [struct.unpack_from("<I", data, shoff + k * shentsize + 4)[0] for k in range(shnum)]
    strtab = next(k for k, t in enumerate(types) if t == 3 and k != shstrndx)  # SHT_STRTAB
    converted = 0
    for k in range(1, shnum):  # every other section becomes a symbol table over the whole file
        if k in (shstrndx, strtab):
            continue
        h = shoff + k * shentsize
        struct.pack_into("<I", data, h + 4, 2)  # SHT_SYMTAB
        # sh_offset, sh_size (whole 24-byte entries, or pyelftools refuses the table first), sh_link
        struct.pack_into("<QQI", data, h + 24, 0, len(data) // 24 * 24, strtab)
        struct.pack_into("<Q", data, h + 56, 24)  # sh_entsize
        converted += 1
    assert converted >= 2
    start = time.perf_counter()
    with pytest.raises(VmfbFormatError, match="symbol tables claim"):
        read_elf(bytes(data))
    assert time.perf_counter() - start < 5
