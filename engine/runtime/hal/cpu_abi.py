"""The CPU executable library ABI of IREE 3.13 (``runtime/src/iree/hal/local/executable_library.h``).

ctypes mirrors of the C structs (x86-64 layouts), the plain data read from a loaded library, and the
processor data IREE hands executables. Loading and dispatching live in ``cpu_library``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

from engine.errors import ExecutableLoadError
from engine.runtime.hal.machine_code import cpuid

LIBRARY_VERSION = 6  # IREE_HAL_EXECUTABLE_LIBRARY_VERSION_0_6; the query answers for exactly this one
QUERY_SYMBOL = "iree_hal_executable_library_query"
LOCAL_MEMORY_PAGE_SIZE = 4096
MAX_CONSTANT_COUNT = 64
MAX_BINDING_COUNT = 64
# IREE's local HAL hands kernels 64-byte aligned binding pointers and the compiler relies on it
# (``hal.interface.binding.subspan ... alignment(64)`` becomes aligned vector loads that fault otherwise).
BINDING_ALIGNMENT = 64

_c = ctypes
_char_pp = _c.POINTER(_c.c_char_p)


# --- The ABI's structs (x86-64 layouts; ctypes' natural alignment matches the C compiler's). ---


class HeaderStruct(_c.Structure):
    _fields_ = [
        ("version", _c.c_uint32),
        ("name", _c.c_char_p),
        ("features", _c.c_uint32),
        ("sanitizer", _c.c_int32),
    ]


class DispatchAttrsStruct(_c.Structure):
    _fields_ = [
        ("flags", _c.c_uint64),
        ("local_memory_pages", _c.c_uint16),
        ("constant_count", _c.c_uint8),
        ("binding_count", _c.c_uint8),
        ("workgroup_size_x", _c.c_uint32),
        ("workgroup_size_y", _c.c_uint32),
        ("workgroup_size_z", _c.c_uint16),
        ("parameter_count", _c.c_uint16),
        ("reserved_1", _c.c_uint64 * 5),
    ]


class DispatchParameterStruct(_c.Structure):
    _fields_ = [
        ("type", _c.c_uint8),
        ("size", _c.c_uint8),
        ("flags", _c.c_uint16),
        ("name", _c.c_uint16),
        ("offset", _c.c_uint16),
    ]


class SourceLocationStruct(_c.Structure):
    _fields_ = [("line", _c.c_uint32), ("path_length", _c.c_uint32), ("path", _c.c_void_p)]


class StageLocationTableStruct(_c.Structure):
    _fields_ = [("count", _c.c_uint32), ("names", _char_pp), ("locations", _c.POINTER(SourceLocationStruct))]


class SourceFileStruct(_c.Structure):
    _fields_ = [
        ("path_length", _c.c_uint32),
        ("path", _c.c_void_p),
        ("content_length", _c.c_uint32),
        ("content", _c.c_void_p),
    ]


class LibraryV0Struct(_c.Structure):
    _fields_ = [
        ("header", _c.POINTER(HeaderStruct)),
        ("imports_count", _c.c_uint32),
        ("imports_symbols", _char_pp),
        ("exports_count", _c.c_uint32),
        ("exports_ptrs", _c.POINTER(_c.c_void_p)),
        ("exports_attrs", _c.POINTER(DispatchAttrsStruct)),
        ("exports_params", _c.POINTER(_c.POINTER(DispatchParameterStruct))),
        ("exports_occupancy", _c.c_void_p),
        ("exports_names", _char_pp),
        ("exports_tags", _char_pp),
        ("exports_parameter_names", _char_pp),
        ("exports_source_locations", _c.POINTER(SourceLocationStruct)),
        ("exports_stage_locations", _c.POINTER(StageLocationTableStruct)),
        ("constants_count", _c.c_uint32),
        ("_constants_table_padding", _c.c_uint32),  # the constant table is its own 4-byte struct
        ("sources_count", _c.c_uint32),
        ("sources_files", _c.POINTER(SourceFileStruct)),
    ]


class EnvironmentStruct(_c.Structure):
    _fields_ = [
        ("constants", _c.c_void_p),
        ("import_thunk", _c.c_void_p),
        ("import_funcs", _c.c_void_p),
        ("import_contexts", _c.c_void_p),
        ("processor_data", _c.c_uint64 * 8),
    ]


class DispatchStateStruct(_c.Structure):
    _fields_ = [
        ("workgroup_size_x", _c.c_uint32),
        ("workgroup_size_y", _c.c_uint32),
        ("workgroup_size_z", _c.c_uint16),
        ("constant_count", _c.c_uint16),
        ("workgroup_count_x", _c.c_uint32),
        ("workgroup_count_y", _c.c_uint32),
        ("workgroup_count_z", _c.c_uint16),
        ("max_concurrency", _c.c_uint8),
        ("binding_count", _c.c_uint8),
        ("constants", _c.c_void_p),
        ("binding_ptrs", _c.c_void_p),
        ("binding_lengths", _c.c_void_p),
    ]


class WorkgroupStateStruct(_c.Structure):
    _fields_ = [
        ("workgroup_id_x", _c.c_uint32),
        ("workgroup_id_y", _c.c_uint32),
        ("workgroup_id_z", _c.c_uint16),
        ("reserved", _c.c_uint16),
        ("processor_id", _c.c_uint32),
        ("local_memory", _c.c_void_p),
        ("local_memory_size", _c.c_uint32),
    ]


for _struct, _size in (
    (HeaderStruct, 24),
    (LibraryV0Struct, 128),
    (DispatchAttrsStruct, 64),
    (DispatchParameterStruct, 8),
    (SourceLocationStruct, 16),
    (EnvironmentStruct, 96),
    (DispatchStateStruct, 48),
    (WorkgroupStateStruct, 32),
):
    if (
        _c.sizeof(_struct) != _size
    ):  # pragma: no cover - a layout slip would corrupt memory, so fail at import
        raise ImportError(f"{_struct.__name__} is {_c.sizeof(_struct)} bytes, IREE's is {_size}")


# --- Plain data read from a library. ---

PARAMETER_TYPES = {0: "constant", 1: "binding", 2: "buffer_ptr"}
DISPATCH_FLAG_SEQUENTIAL = 1
DISPATCH_FLAG_WORKGROUP_SIZE_DYNAMIC = 2


@dataclass(frozen=True)
class DispatchAttributes:
    """``iree_hal_executable_dispatch_attrs_v0_t`` of one export."""

    flags: int
    local_memory_pages: int
    constant_count: int
    binding_count: int
    workgroup_size: tuple[int, int, int]
    parameter_count: int

    @property
    def local_memory_size(self) -> int:
        return self.local_memory_pages * LOCAL_MEMORY_PAGE_SIZE


@dataclass(frozen=True)
class DispatchParameter:
    """One declared parameter of an export (only when the library has a parameter table)."""

    type: str  # constant | binding | buffer_ptr (or "type N" for an unknown one)
    size: int
    flags: int
    name: str | None
    offset: int


@dataclass(frozen=True)
class SourceLocation:
    path: str
    line: int


@dataclass(frozen=True)
class ExecutableExport:
    """One dispatch function of the library."""

    ordinal: int
    name: str
    attributes: DispatchAttributes
    tag: str | None
    parameters: tuple[DispatchParameter, ...]
    source_location: SourceLocation | None
    stage_locations: tuple[tuple[str, SourceLocation], ...]


@dataclass(frozen=True)
class LibraryImport:
    """One imported function; ``optional`` when its symbol starts with ``?`` (a weak import)."""

    ordinal: int
    name: str
    optional: bool


@dataclass(frozen=True)
class SourceFile:
    path: str
    content: bytes


# --- The processor data IREE gives executables (runtime/src/iree/base/internal/cpu.c). ---


@cache
def processor_data() -> tuple[int, ...]:
    """``processor.data[8]`` as IREE fills it on x86-64: word 0 holds the CPU feature bits."""
    max_base = cpuid(0)[0]
    max_ext = cpuid(0x80000000)[0]
    max_ext = max_ext if max_ext >= 0x80000000 else 0

    def leaf(eax: int, ecx: int = 0) -> tuple[int, int, int, int]:
        if eax > (max_base if eax < 0x80000000 else max_ext):
            return (0, 0, 0, 0)
        if ecx and ecx > cpuid(eax, 0)[0]:
            return (0, 0, 0, 0)
        return cpuid(eax, ecx)

    leaf1, leaf7_0, leaf7_1, leaf_d, leaf_ext1 = leaf(1), leaf(7, 0), leaf(7, 1), leaf(0xD), leaf(0x80000001)
    out = 0

    def copy(bit: int, reg: int, mask_bit: int) -> None:
        nonlocal out
        if reg & (1 << mask_bit):
            out |= 1 << bit

    eax, ebx, ecx, edx = 0, 1, 2, 3
    copy(0, leaf1[ecx], 0)  # sse3
    copy(1, leaf1[ecx], 9)  # ssse3
    copy(2, leaf1[ecx], 19)  # sse4.1
    copy(3, leaf1[ecx], 20)  # sse4.2
    copy(4, leaf_ext1[ecx], 6)  # sse4a
    if leaf_d[eax] & 0x7 == 0x7:  # YMM state enabled
        copy(10, leaf1[ecx], 28)  # avx
        copy(11, leaf1[ecx], 12)  # fma
        copy(12, leaf_ext1[ecx], 16)  # fma4
        copy(13, leaf_ext1[ecx], 11)  # xop
        copy(14, leaf1[ecx], 29)  # f16c
        copy(15, leaf7_0[ebx], 5)  # avx2
    if leaf_d[eax] & 0xE7 == 0xE7:  # ZMM state enabled
        copy(20, leaf7_0[ebx], 16)  # avx512f
        copy(21, leaf7_0[ebx], 28)  # avx512cd
        copy(22, leaf7_0[ebx], 31)  # avx512vl
        copy(23, leaf7_0[ebx], 17)  # avx512dq
        copy(24, leaf7_0[ebx], 30)  # avx512bw
        copy(25, leaf7_0[ebx], 21)  # avx512ifma
        copy(26, leaf7_0[ecx], 1)  # avx512vbmi
        copy(27, leaf7_0[ecx], 14)  # avx512vpopcntdq
        copy(28, leaf7_0[ecx], 11)  # avx512vnni
        copy(29, leaf7_0[ecx], 6)  # avx512vbmi2
        copy(30, leaf7_0[ecx], 12)  # avx512bitalg
        copy(31, leaf7_1[eax], 5)  # avx512bf16
        copy(32, leaf7_0[edx], 23)  # avx512fp16
    if leaf_d[eax] & 0x60000 == 0x60000:  # AMX tile state enabled
        copy(50, leaf7_0[edx], 24)  # amx-tile
        copy(51, leaf7_0[edx], 25)  # amx-int8
        copy(52, leaf7_0[edx], 22)  # amx-bf16
    return (out, 0, 0, 0, 0, 0, 0, 0)


# --- Reading C data. ---


def c_string(ptr: int | None, length: int | None = None) -> str:
    if not ptr:
        return ""
    raw = _c.string_at(ptr, length) if length is not None else _c.string_at(ptr)
    return raw.decode("utf-8", "replace")


def check_elf(data: memoryview, name: str) -> None:
    if len(data) < 64 or bytes(data[:4]) != b"\x7fELF":
        raise ExecutableLoadError(
            f"executable {name!r} is not an ELF file (it starts with {bytes(data[:4])!r})"
        )
    if data[4] != 2 or data[5] != 1:
        raise ExecutableLoadError(f"executable {name!r} is not a 64-bit little-endian ELF")
    e_type = int.from_bytes(data[16:18], "little")
    e_machine = int.from_bytes(data[18:20], "little")
    if e_machine != 62:
        raise ExecutableLoadError(f"executable {name!r} is for ELF machine {e_machine}, not x86-64 (62)")
    if e_type != 3:
        raise ExecutableLoadError(
            f"executable {name!r} is not a shared object (ELF type {e_type}, expected 3)"
        )
