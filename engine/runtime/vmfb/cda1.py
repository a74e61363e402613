"""The ``CDA1`` executable of IREE 3.13's CUDA target (``cuda-nvptx-fb``), parsed into plain data.

A CUDA executable is a 64-byte ``iree_flatbuffer_file_header_t`` (magic ``CDA1``, version 0, content size)
followed by a FlatBuffer whose file identifier is also ``CDA1``. Its schema is IREE's
``runtime/src/iree/schemas/cuda_executable_def.fbs``: exports (kernel name, block dims, dynamic shared
memory, constant count, one flag word per binding, debug info), modules (each a PTX image as text) and
the embedded source files.

IREE's CUDA HAL launches an export with ``cuLaunchKernel`` on the kernel named ``kernel_name`` in the
export's module, the block size ``block_dims`` and ``block_shared_memory_size`` bytes of dynamic shared
memory; its arguments are the bindings then the constants (``engine.runtime.hal.cuda_abi``).

Every read is bounds-checked (``engine.runtime.vmfb.flatbuffer``); a malformed executable raises
:class:`ExecutableFormatError` naming the table path and byte offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from engine.errors import ExecutableFormatError
from engine.runtime.vmfb.executable_flatbuffer import (
    SourceLocation,
    open_headed_flatbuffer,
    read_debug_info,
)

CDA1_MAGIC = b"CDA1"
CUDA_FORMAT = "cuda-nvptx-fb"

# BindingBits (bit flags of a uint64 per binding).
BINDING_READ_ONLY = 1 << 0
BINDING_INDIRECT = 1 << 1

# IREE's CUDA HAL limits (runtime/src/iree/hal/drivers/cuda/native_executable.h): an executable beyond
# them is refused when it is loaded.
MAX_DISPATCH_BINDING_COUNT = 16
MAX_DISPATCH_CONSTANT_COUNT = 64


@dataclass(frozen=True)
class CudaExportDef:
    """One exported kernel (``ExportDef``)."""

    module_ordinal: int
    kernel_name: str
    block_dims: tuple[int, int, int]
    block_shared_memory_size: int  # bytes of dynamic shared memory per block
    constant_count: int  # 32-bit push constants, passed after the bindings
    binding_flags: tuple[int, ...]  # one BindingBits word per binding
    debug_name: str | None = None
    location: SourceLocation | None = None

    @property
    def binding_count(self) -> int:
        return len(self.binding_flags)

    def binding_read_only(self, binding: int) -> bool:
        return bool(self.binding_flags[binding] & BINDING_READ_ONLY)


@dataclass(frozen=True)
class CudaModuleDef:
    ptx: str  # the PTX image as IREE embedded it (text)


@dataclass(frozen=True)
class CudaSourceFile:
    path: str
    content: bytes


class KernelExports:
    """Lookups by kernel name over ``exports`` (CDA1's and HIP1's executables)."""

    exports: tuple[CudaExportDef, ...]

    @property
    def export_names(self) -> tuple[str, ...]:
        return tuple(e.kernel_name for e in self.exports)

    def export_index(self, name: str) -> int:
        for i, e in enumerate(self.exports):
            if e.kernel_name == name:
                return i
        raise KeyError(f"no export {name!r}; this executable has {', '.join(self.export_names)}")


@dataclass(frozen=True)
class CudaExecutableDef(KernelExports):
    """A parsed ``CDA1`` executable."""

    exports: tuple[CudaExportDef, ...]
    modules: tuple[CudaModuleDef, ...]
    source_files: tuple[CudaSourceFile, ...]

    def ptx_of(self, export_ordinal: int) -> str:
        """The PTX text of the module holding export ``export_ordinal``."""
        return self.modules[self.exports[export_ordinal].module_ordinal].ptx


def read_cda1(data: bytes | bytearray | memoryview | np.ndarray) -> CudaExecutableDef:
    """Parse a ``CDA1`` executable (header + FlatBuffer)."""
    fb, root = open_headed_flatbuffer(data, CDA1_MAGIC, "CDA1 (CUDA)")
    modules = []
    for t in root.tables(1, "modules"):
        ptx = t.string(0, "ptx_image")
        if not ptx:
            raise ExecutableFormatError("malformed CDA1 executable: a module has no PTX image", where=t.path)
        modules.append(CudaModuleDef(ptx))
    exe = CudaExecutableDef(read_exports(fb, root, "CDA1"), tuple(modules), read_source_files(root))
    _check(exe)
    return exe


def read_exports(fb, root, kind: str) -> tuple[CudaExportDef, ...]:
    """``ExecutableDef.exports`` of a CDA1 or HIP1 executable (the two schemas' ``ExportDef`` are one table)."""
    exports = []
    for t in root.tables(0, "exports"):
        name = t.string(1, "kernel_name")
        if name is None:
            raise ExecutableFormatError(f"malformed {kind} executable: an export has no kernel_name", where=t.path)
        dims_pos = t.field_pos(2)  # BlockDims is a struct stored inline in the table
        dims = (
            tuple(fb.u32(dims_pos + 4 * k, f"{t.path}.block_dims") for k in range(3)) if dims_pos else (1, 1, 1)
        )
        debug_name, location = read_debug_info(t.table(6, "debug_info"), "i32")
        exports.append(
            CudaExportDef(
                module_ordinal=t.scalar(0, "u32", name="module_ordinal"),
                kernel_name=name,
                block_dims=(int(dims[0]), int(dims[1]), int(dims[2])),
                block_shared_memory_size=t.scalar(3, "u32", name="block_shared_memory_size"),
                constant_count=t.scalar(4, "u32", name="constant_count"),
                binding_flags=tuple(int(f) for f in t.scalars(5, "u64", "binding_flags")),
                debug_name=debug_name,
                location=location,
            )
        )
    return tuple(exports)


def read_source_files(root) -> tuple[CudaSourceFile, ...]:
    sources = []
    for t in root.tables(2, "source_files"):
        content = t.byte_vector(1, "content")
        sources.append(CudaSourceFile(t.string(0, "path") or "", bytes(content) if content is not None else b""))
    return tuple(sources)


def _check(exe: CudaExecutableDef) -> None:
    check_exports(exe.exports, len(exe.modules))


def check_exports(exports: tuple[CudaExportDef, ...], module_count: int) -> None:
    """IREE's load-time checks that need no device (CUDA's and HIP's native_executable.c)."""
    for i, e in enumerate(exports):
        where = f"ExecutableDef.exports[{i}]"
        if e.module_ordinal >= module_count:
            raise ExecutableFormatError(
                f"module_ordinal {e.module_ordinal} out of range ({module_count} modules)", where=where
            )
        if e.constant_count > MAX_DISPATCH_CONSTANT_COUNT:
            raise ExecutableFormatError(
                f"constant_count {e.constant_count} exceeds IREE's maximum of {MAX_DISPATCH_CONSTANT_COUNT}",
                where=where,
            )
        if e.binding_count > MAX_DISPATCH_BINDING_COUNT:
            raise ExecutableFormatError(
                f"binding count {e.binding_count} exceeds IREE's maximum of {MAX_DISPATCH_BINDING_COUNT}",
                where=where,
            )
        if 0 in e.block_dims:
            raise ExecutableFormatError(f"block_dims {e.block_dims} has a zero dimension", where=where)


def write_cda1(exe: CudaExecutableDef) -> bytes:
    """``exe`` as a ``CDA1`` executable (header + FlatBuffer) that ``read_cda1`` and IREE's CUDA HAL read.

    Written from the parsed fields, so what ``read_cda1`` does not keep is not written: an export's
    per-stage debug locations (``stage_locations``, debug level 3 builds) are dropped.
    """
    _check(exe)
    return write_headed_executable(CDA1_MAGIC, exe.exports, [m.ptx for m in exe.modules], exe.source_files)


def write_headed_executable(
    magic: bytes, exports: tuple[CudaExportDef, ...], images: list[str | bytes], sources: tuple[CudaSourceFile, ...]
) -> bytes:
    """A CDA1 or HIP1 executable: IREE's 64-byte header, then the FlatBuffer (each module one image string)."""
    from engine.runtime.vmfb.executable_flatbuffer import HEADER_SIZE
    from engine.runtime.vmfb.flatbuffer_writer import (
        Scalar,
        ScalarVector,
        String,
        Struct,
        TableValue,
        TableVector,
        build,
    )

    def export(e: CudaExportDef) -> TableValue:
        debug = None
        if e.debug_name is not None or e.location is not None:
            location = None
            if e.location is not None:
                location = TableValue([String(e.location.filename), Scalar("i32", int(e.location.line))])
            debug = TableValue([String(e.debug_name) if e.debug_name is not None else None, location])
        return TableValue(
            [
                Scalar("u32", e.module_ordinal),
                String(e.kernel_name),
                Struct(struct.pack("<3I", *e.block_dims)),
                Scalar("u32", e.block_shared_memory_size),
                Scalar("u32", e.constant_count),
                ScalarVector("u64", e.binding_flags),
                debug,
            ]
        )

    root = TableValue(
        [
            TableVector([export(e) for e in exports]),
            TableVector([TableValue([String(image)]) for image in images]),
            TableVector([TableValue([String(f.path), ScalarVector("u8", f.content)]) for f in sources]),
        ]
    )
    body = build(root, magic)
    header = magic + struct.pack("<IQ", 0, len(body))
    return header + bytes(HEADER_SIZE - len(header)) + body
