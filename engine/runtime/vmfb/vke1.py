"""The ``VKE1`` executable of IREE 3.13's Vulkan target, parsed into plain data.

A ``vulkan-spirv-fb`` executable is a 64-byte ``iree_flatbuffer_file_header_t`` (magic ``VKE1``, version 0,
content size) followed by a FlatBuffer whose file identifier is also ``VKE1``. Its schema is IREE's
``vulkan_executable_def.fbs``: pipelines (one per export), descriptor set layouts, pipeline layouts with
push-constant ranges, and shader modules holding SPIR-V words.

Every read is bounds-checked (the shared reader of ``engine.runtime.vmfb.flatbuffer``); a malformed executable raises :class:`ExecutableFormatError` naming the
table path and byte offset, never an ``IndexError`` or ``struct.error``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.errors import ExecutableFormatError
from engine.runtime.vmfb.executable_flatbuffer import (
    SourceLocation,
    open_headed_flatbuffer,
    read_debug_info,
)
from engine.runtime.vmfb.flatbuffer import Table

VKE1_MAGIC = b"VKE1"

# PipelineDef.dispatch_abi values.
DISPATCH_ABI_DESCRIPTOR = 0
DISPATCH_ABI_BDA_V1 = 1
# BdaDispatchLayoutDef.binding_table_entry_type values: ADDRESS64 = one u64 device address per binding.
BDA_ENTRY_ADDRESS64 = 0

SPIRV_MAGIC = 0x07230203

# struct PushConstantRange { uint32 stage_flags; uint32 offset; uint32 size; }
_PUSH_CONSTANT_RANGE = np.dtype([("stage_flags", "<u4"), ("offset", "<u4"), ("size", "<u4")])


@dataclass(frozen=True)
class DescriptorSetLayoutBindingDef:
    binding: int
    descriptor_type: int  # VkDescriptorType: 7 = STORAGE_BUFFER, 6 = UNIFORM_BUFFER
    descriptor_count: int
    stage_flags: int


@dataclass(frozen=True)
class DescriptorSetLayoutDef:
    bindings: tuple[DescriptorSetLayoutBindingDef, ...]


@dataclass(frozen=True)
class PushConstantRange:
    stage_flags: int
    offset: int
    size: int


@dataclass(frozen=True)
class PipelineLayoutDef:
    descriptor_set_layout_ordinals: tuple[int, ...]
    push_constant_ranges: tuple[PushConstantRange, ...]

    @property
    def push_constant_bytes(self) -> int:
        """Bytes of push-constant space the layout declares (the end of its last range)."""
        return max((r.offset + r.size for r in self.push_constant_ranges), default=0)


@dataclass(frozen=True)
class BdaDispatchLayoutDef:
    """``BdaDispatchLayoutDef``: where a ``BDA_V1`` pipeline takes its push-constant root and constants."""

    abi_version: int = 1
    root_push_constant_offset: int = 0
    root_push_constant_length: int = 32
    constant_push_constant_offset: int = 32
    constant_count: int = 0
    binding_table_entry_type: int = BDA_ENTRY_ADDRESS64
    binding_count: int = 0

    @property
    def push_constant_end(self) -> int:
        """End of the push-constant range the pipeline layout declares (root, then constants)."""
        root_end = self.root_push_constant_offset + self.root_push_constant_length
        if not self.constant_count:
            return root_end
        return max(root_end, self.constant_push_constant_offset + 4 * self.constant_count)


@dataclass(frozen=True)
class PipelineDef:
    """One exported entry point (``PipelineDef``)."""

    entry_point: str
    shader_module_ordinal: int
    pipeline_layout_ordinal: int
    subgroup_size: int  # 0: no required subgroup size
    dispatch_abi: int  # DISPATCH_ABI_DESCRIPTOR or DISPATCH_ABI_BDA_V1
    debug_name: str | None = None
    location: SourceLocation | None = None
    bda_layout: BdaDispatchLayoutDef | None = None  # set for DISPATCH_ABI_BDA_V1


@dataclass(frozen=True)
class ShaderModuleDef:
    spirv: np.ndarray  # uint32 words, a read-only view into the executable's bytes

    @property
    def byte_size(self) -> int:
        return int(self.spirv.size) * 4


@dataclass(frozen=True)
class ExecutableDef:
    """A parsed ``VKE1`` executable."""

    pipelines: tuple[PipelineDef, ...]
    descriptor_set_layouts: tuple[DescriptorSetLayoutDef, ...]
    pipeline_layouts: tuple[PipelineLayoutDef, ...]
    shader_modules: tuple[ShaderModuleDef, ...]

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


def is_vke1(data: bytes | memoryview) -> bool:
    """Whether ``data`` starts with a VKE1 executable header."""
    return bytes(data[:4]) == VKE1_MAGIC


def read_vke1(data: bytes | bytearray | memoryview | np.ndarray) -> ExecutableDef:
    """Parse a ``VKE1`` executable (header + FlatBuffer). SPIR-V words are views into ``data``."""
    _, root = open_headed_flatbuffer(data, VKE1_MAGIC, "VKE1")
    exe = ExecutableDef(
        tuple(_pipeline(t) for t in root.tables(0, "pipelines")),
        tuple(_set_layout(t) for t in root.tables(1, "descriptor_set_layouts")),
        tuple(_pipeline_layout(t) for t in root.tables(2, "pipeline_layouts")),
        tuple(_shader_module(t) for t in root.tables(3, "shader_modules")),
    )
    _check_ordinals(exe)
    return exe


def _pipeline(t: Table) -> PipelineDef:
    entry = t.string(1, "entry_point")
    if entry is None:
        raise ExecutableFormatError("malformed VKE1 executable: a pipeline has no entry_point", where=t.path)
    debug_name, location = read_debug_info(t.table(4, "debug_info"), "u32")
    dispatch_abi = t.scalar(5, "u8", name="dispatch_abi")
    bda_layout = None
    if dispatch_abi == DISPATCH_ABI_BDA_V1:
        b = t.table(6, "bda_dispatch_layout")
        if b is None:
            raise ExecutableFormatError(
                "malformed VKE1 executable: a BDA_V1 pipeline has no bda_dispatch_layout", where=t.path
            )
        bda_layout = _bda_layout(b)
    return PipelineDef(
        entry_point=entry,
        shader_module_ordinal=t.scalar(0, "u32", name="shader_module_ordinal"),
        pipeline_layout_ordinal=t.scalar(2, "u32", name="pipeline_layout_ordinal"),
        subgroup_size=t.scalar(3, "u32", name="subgroup_size"),
        dispatch_abi=dispatch_abi,
        bda_layout=bda_layout,
        debug_name=debug_name,
        location=location,
    )


def _bda_layout(b: Table) -> BdaDispatchLayoutDef:
    return BdaDispatchLayoutDef(
        abi_version=b.scalar(0, "u32", 1, name="abi_version"),
        root_push_constant_offset=b.scalar(1, "u32", 0, name="root_push_constant_offset"),
        root_push_constant_length=b.scalar(2, "u32", 32, name="root_push_constant_length"),
        constant_push_constant_offset=b.scalar(3, "u32", 32, name="constant_push_constant_offset"),
        constant_count=b.scalar(4, "u32", 0, name="constant_count"),
        binding_table_entry_type=b.scalar(5, "u8", 0, name="binding_table_entry_type"),
        binding_count=b.scalar(6, "u32", 0, name="binding_count"),
    )


def _set_layout(t: Table) -> DescriptorSetLayoutDef:
    return DescriptorSetLayoutDef(
        tuple(
            DescriptorSetLayoutBindingDef(
                binding=b.scalar(0, "u32", name="binding"),
                descriptor_type=b.scalar(1, "u32", name="descriptor_type"),
                descriptor_count=b.scalar(2, "u32", name="descriptor_count"),
                stage_flags=b.scalar(3, "u32", name="stage_flags"),
            )
            for b in t.tables(0, "bindings")
        )
    )


def _pipeline_layout(t: Table) -> PipelineLayoutDef:
    ordinals = tuple(int(x) for x in t.scalars(0, "u32", "descriptor_set_layout_ordinals"))
    ranges = t.structs(1, _PUSH_CONSTANT_RANGE, "push_constant_ranges")
    return PipelineLayoutDef(
        ordinals,
        tuple(PushConstantRange(int(r["stage_flags"]), int(r["offset"]), int(r["size"])) for r in ranges),
    )


def _shader_module(t: Table) -> ShaderModuleDef:
    words = t.scalars(0, "u32", "spirv_code")  # a zero-copy view
    if words.size == 0 or int(words[0]) != SPIRV_MAGIC:
        raise ExecutableFormatError(
            "malformed VKE1 executable: shader module does not start with the SPIR-V magic number",
            where=f"{t.path}.spirv_code",
        )
    return ShaderModuleDef(words)


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
