"""The ``VKE1`` executable of IREE 3.13's Vulkan target, parsed into plain data.

A ``vulkan-spirv-fb`` executable is a 64-byte ``iree_flatbuffer_file_header_t`` (magic ``VKE1``, version 0,
content size) followed by a FlatBuffer whose file identifier is also ``VKE1``. Its schema is IREE's
``vulkan_executable_def.fbs``: pipelines (one per export), descriptor set layouts, pipeline layouts with
push-constant ranges, and shader modules holding SPIR-V words.

Every read is bounds-checked; a malformed executable raises :class:`ExecutableFormatError` naming the
table path and byte offset, never an ``IndexError`` or ``struct.error``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from engine.errors import ExecutableFormatError

VKE1_MAGIC = b"VKE1"
HEADER_SIZE = 64

# PipelineDef.dispatch_abi values.
DISPATCH_ABI_DESCRIPTOR = 0
DISPATCH_ABI_BDA_V1 = 1

SPIRV_MAGIC = 0x07230203


@dataclass(frozen=True)
class DescriptorSetLayoutBinding:
    binding: int
    descriptor_type: int  # VkDescriptorType: 7 = STORAGE_BUFFER, 6 = UNIFORM_BUFFER
    descriptor_count: int
    stage_flags: int


@dataclass(frozen=True)
class DescriptorSetLayout:
    bindings: tuple[DescriptorSetLayoutBinding, ...]


@dataclass(frozen=True)
class PushConstantRange:
    stage_flags: int
    offset: int
    size: int


@dataclass(frozen=True)
class PipelineLayout:
    descriptor_set_layout_ordinals: tuple[int, ...]
    push_constant_ranges: tuple[PushConstantRange, ...]

    @property
    def push_constant_bytes(self) -> int:
        """Bytes of push-constant space the layout declares (the end of its last range)."""
        return max((r.offset + r.size for r in self.push_constant_ranges), default=0)


@dataclass(frozen=True)
class SourceLocation:
    filename: str
    line: int


@dataclass(frozen=True)
class Pipeline:
    """One exported entry point (``PipelineDef``)."""

    entry_point: str
    shader_module_ordinal: int
    pipeline_layout_ordinal: int
    subgroup_size: int  # 0: no required subgroup size
    dispatch_abi: int  # DISPATCH_ABI_DESCRIPTOR or DISPATCH_ABI_BDA_V1
    debug_name: str | None = None
    location: SourceLocation | None = None


@dataclass(frozen=True)
class ShaderModule:
    spirv: np.ndarray  # uint32 words, a read-only view into the executable's bytes

    @property
    def byte_size(self) -> int:
        return int(self.spirv.size) * 4


@dataclass(frozen=True)
class ExecutableDef:
    """A parsed ``VKE1`` executable."""

    pipelines: tuple[Pipeline, ...]
    descriptor_set_layouts: tuple[DescriptorSetLayout, ...]
    pipeline_layouts: tuple[PipelineLayout, ...]
    shader_modules: tuple[ShaderModule, ...]

    @property
    def entry_points(self) -> tuple[str, ...]:
        return tuple(p.entry_point for p in self.pipelines)

    def pipeline_index(self, name: str) -> int:
        for i, p in enumerate(self.pipelines):
            if p.entry_point == name:
                return i
        raise KeyError(f"no entry point {name!r}; this executable has {', '.join(self.entry_points)}")

    def binding_count(self, pipeline_ordinal: int) -> int:
        """How many HAL bindings the pipeline takes: every descriptor of every set of its layout."""
        layout = self.pipeline_layouts[self.pipelines[pipeline_ordinal].pipeline_layout_ordinal]
        return sum(
            b.descriptor_count
            for s in layout.descriptor_set_layout_ordinals
            for b in self.descriptor_set_layouts[s].bindings
        )


class _Reader:
    """Bounds-checked FlatBuffer reads over one buffer (little endian, offsets relative to ``base``)."""

    def __init__(self, data: memoryview, base: int):
        self.data = data
        self.base = base  # absolute position of the FlatBuffer's byte 0 within ``data``

    def fail(self, message: str, where: str, pos: int | None = None) -> ExecutableFormatError:
        at = where if pos is None else f"{where} (byte {pos})"
        return ExecutableFormatError(f"malformed VKE1 executable: {message}", where=at)

    def _unpack(self, fmt: str, pos: int, where: str):
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > len(self.data):
            raise self.fail(f"read of {size} bytes out of bounds (size {len(self.data)})", where, pos)
        return struct.unpack_from(fmt, self.data, pos)[0]

    def u8(self, pos: int, where: str) -> int:
        return self._unpack("<B", pos, where)

    def u16(self, pos: int, where: str) -> int:
        return self._unpack("<H", pos, where)

    def u32(self, pos: int, where: str) -> int:
        return self._unpack("<I", pos, where)

    def i32(self, pos: int, where: str) -> int:
        return self._unpack("<i", pos, where)

    def table(self, pos: int, where: str) -> _Table:
        vtable = pos - self.i32(pos, where)
        vsize = self.u16(vtable, f"{where}.vtable")
        if vsize < 4 or vsize % 2:
            raise self.fail(f"bad vtable size {vsize}", where, vtable)
        self.u16(vtable + vsize - 2, f"{where}.vtable")  # the whole vtable is in bounds
        return _Table(self, pos, vtable, vsize, where)

    def deref(self, pos: int, where: str) -> int:
        return pos + self.u32(pos, where)

    def vector(self, pos: int, elem_size: int, where: str) -> tuple[int, int]:
        """(first element position, length) of the vector at ``pos``."""
        n = self.u32(pos, where)
        start = pos + 4
        if start + n * elem_size > len(self.data):
            raise self.fail(f"vector of {n} elements runs past the end", where, pos)
        return start, n

    def string(self, pos: int, where: str) -> str:
        start, n = self.vector(pos, 1, where)
        try:
            return bytes(self.data[start : start + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"string is not UTF-8 ({e})", where, pos) from None


class _Table:
    def __init__(self, r: _Reader, pos: int, vtable: int, vsize: int, where: str):
        self.r, self.pos, self.vtable, self.vsize, self.where = r, pos, vtable, vsize, where

    def _field(self, fid: int) -> int | None:
        voff = 4 + 2 * fid
        if voff + 2 > self.vsize:
            return None
        off = self.r.u16(self.vtable + voff, self.where)
        return None if off == 0 else self.pos + off

    def scalar(self, fid: int, kind: str, default: int = 0) -> int:
        p = self._field(fid)
        if p is None:
            return default
        return getattr(self.r, kind)(p, f"{self.where}.field{fid}")

    def ref(self, fid: int, name: str) -> int | None:
        p = self._field(fid)
        return None if p is None else self.r.deref(p, f"{self.where}.{name}")

    def string(self, fid: int, name: str) -> str | None:
        p = self.ref(fid, name)
        return None if p is None else self.r.string(p, f"{self.where}.{name}")

    def tables(self, fid: int, name: str) -> list[_Table]:
        p = self.ref(fid, name)
        if p is None:
            return []
        start, n = self.r.vector(p, 4, f"{self.where}.{name}")
        out = []
        for i in range(n):
            w = f"{self.where}.{name}[{i}]"
            out.append(self.r.table(self.r.deref(start + 4 * i, w), w))
        return out

    def table(self, fid: int, name: str) -> _Table | None:
        p = self.ref(fid, name)
        return None if p is None else self.r.table(p, f"{self.where}.{name}")

    def u32_vector(self, fid: int, name: str) -> tuple[int, int]:
        p = self.ref(fid, name)
        if p is None:
            return 0, 0
        return self.r.vector(p, 4, f"{self.where}.{name}")


def is_vke1(data: bytes | memoryview) -> bool:
    """Whether ``data`` starts with a VKE1 executable header."""
    return bytes(data[:4]) == VKE1_MAGIC


def parse_executable(data: bytes | bytearray | memoryview | np.ndarray) -> ExecutableDef:
    """Parse a ``VKE1`` executable (header + FlatBuffer). SPIR-V words are views into ``data``."""
    mv = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else memoryview(data.view(np.uint8))
    if len(mv) < HEADER_SIZE:
        raise ExecutableFormatError(
            f"VKE1 executable is {len(mv)} bytes, shorter than its {HEADER_SIZE}-byte header", where="byte 0"
        )
    magic = bytes(mv[:4])
    if magic != VKE1_MAGIC:
        raise ExecutableFormatError(f"not a VKE1 executable (magic {magic!r})", where="byte 0")
    version, content_size = struct.unpack_from("<IQ", mv, 4)
    if version != 0:
        raise ExecutableFormatError(f"unsupported VKE1 header version {version}", where="byte 4")
    if content_size > len(mv) - HEADER_SIZE or content_size < 8:
        raise ExecutableFormatError(
            f"VKE1 content size {content_size} does not fit the {len(mv) - HEADER_SIZE} bytes after the header",
            where="byte 8",
        )
    fb = mv[HEADER_SIZE : HEADER_SIZE + content_size]
    r = _Reader(fb, HEADER_SIZE)
    if bytes(fb[4:8]) != VKE1_MAGIC:
        raise ExecutableFormatError(
            f"FlatBuffer identifier is {bytes(fb[4:8])!r}, expected b'VKE1'", where=f"byte {HEADER_SIZE + 4}"
        )
    root = r.table(r.deref(0, "root"), "ExecutableDef")

    pipelines = []
    for t in root.tables(0, "pipelines"):
        entry = t.string(1, "entry_point")
        if entry is None:
            raise r.fail("pipeline has no entry_point", t.where, t.pos)
        debug = t.table(4, "debug_info")
        debug_name = location = None
        if debug is not None:
            debug_name = debug.string(0, "name")
            loc = debug.table(1, "location")
            if loc is not None:
                location = SourceLocation(loc.string(0, "filename") or "", loc.scalar(1, "u32"))
        pipelines.append(
            Pipeline(
                entry_point=entry,
                shader_module_ordinal=t.scalar(0, "u32"),
                pipeline_layout_ordinal=t.scalar(2, "u32"),
                subgroup_size=t.scalar(3, "u32"),
                dispatch_abi=t.scalar(5, "u8"),
                debug_name=debug_name,
                location=location,
            )
        )

    set_layouts = []
    for t in root.tables(1, "descriptor_set_layouts"):
        bindings = tuple(
            DescriptorSetLayoutBinding(
                binding=b.scalar(0, "u32"),
                descriptor_type=b.scalar(1, "u32"),
                descriptor_count=b.scalar(2, "u32"),
                stage_flags=b.scalar(3, "u32"),
            )
            for b in t.tables(0, "bindings")
        )
        set_layouts.append(DescriptorSetLayout(bindings))

    layouts = []
    for t in root.tables(2, "pipeline_layouts"):
        start, n = t.u32_vector(0, "descriptor_set_layout_ordinals")
        ordinals = tuple(r.u32(start + 4 * i, t.where) for i in range(n))
        p = t.ref(1, "push_constant_ranges")
        ranges: list[PushConstantRange] = []
        if p is not None:
            start, n = r.vector(p, 12, f"{t.where}.push_constant_ranges")
            for i in range(n):
                stage, offset, size = struct.unpack_from("<III", fb, start + 12 * i)
                ranges.append(PushConstantRange(stage, offset, size))
        layouts.append(PipelineLayout(ordinals, tuple(ranges)))

    modules = []
    for t in root.tables(3, "shader_modules"):
        start, n = t.u32_vector(0, "spirv_code")
        abs_start = HEADER_SIZE + start
        raw = np.frombuffer(mv, dtype=np.uint8, count=4 * n, offset=abs_start)
        words = raw.view("<u4")  # a zero-copy view; numpy allows it unaligned
        if n == 0 or int(words[0]) != SPIRV_MAGIC:
            raise r.fail("shader module does not start with the SPIR-V magic number", t.where, start)
        modules.append(ShaderModule(words))

    exe = ExecutableDef(tuple(pipelines), tuple(set_layouts), tuple(layouts), tuple(modules))
    _check_ordinals(exe)
    return exe


def _check_ordinals(exe: ExecutableDef) -> None:
    for i, p in enumerate(exe.pipelines):
        where = f"ExecutableDef.pipelines[{i}]"
        if p.shader_module_ordinal >= len(exe.shader_modules):
            raise ExecutableFormatError(
                f"shader_module_ordinal {p.shader_module_ordinal} out of range "
                f"({len(exe.shader_modules)} shader modules)",
                where=where,
            )
        if p.pipeline_layout_ordinal >= len(exe.pipeline_layouts):
            raise ExecutableFormatError(
                f"pipeline_layout_ordinal {p.pipeline_layout_ordinal} out of range "
                f"({len(exe.pipeline_layouts)} pipeline layouts)",
                where=where,
            )
    for i, layout in enumerate(exe.pipeline_layouts):
        for s in layout.descriptor_set_layout_ordinals:
            if s >= len(exe.descriptor_set_layouts):
                raise ExecutableFormatError(
                    f"descriptor set layout ordinal {s} out of range "
                    f"({len(exe.descriptor_set_layouts)} set layouts)",
                    where=f"ExecutableDef.pipeline_layouts[{i}]",
                )
