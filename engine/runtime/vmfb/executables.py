"""What can be read statically from embedded executables: ELF sections and symbols, VMVX nested
modules, and the ``VKE1`` Vulkan flatbuffer (pipelines, layouts, push constants, SPIR-V words).

Damaged executables raise :class:`~engine.errors.VmfbFormatError` (the executable is part of the
module) naming the executable.
"""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import VmfbFormatError
from engine.runtime.vmfb.flatbuffer import FlatBuffer, Table
from engine.runtime.vmfb.module import Executable, VmfbModule

VKE1_HEADER_SIZE = 64


# -- ELF ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ElfSection:
    name: str
    type: str
    address: int
    offset: int
    size: int


@dataclass(frozen=True)
class ElfSymbol:
    name: str
    type: str
    binding: str
    section: str
    value: int
    size: int


@dataclass(frozen=True)
class ElfInfo:
    machine: str
    elf_class: int
    sections: tuple[ElfSection, ...]
    symbols: tuple[ElfSymbol, ...]  # .symtab and .dynsym
    exported: tuple[str, ...]  # global defined function symbols (iree_hal_executable_library_query)


def read_elf(data: bytes | memoryview, name: str = "executable") -> ElfInfo:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        elf = ELFFile(io.BytesIO(bytes(data)))
        sections = []
        symbols = []
        for s in elf.iter_sections():
            sections.append(ElfSection(s.name, str(s["sh_type"]), s["sh_addr"], s["sh_offset"], s["sh_size"]))
            if isinstance(s, SymbolTableSection):
                for sym in s.iter_symbols():
                    if not sym.name:
                        continue
                    shndx = sym["st_shndx"]
                    sec = (
                        shndx
                        if isinstance(shndx, str)
                        else (elf.get_section(shndx).name if shndx < elf.num_sections() else "?")
                    )
                    symbols.append(
                        ElfSymbol(
                            sym.name,
                            str(sym["st_info"]["type"]),
                            str(sym["st_info"]["bind"]),
                            sec,
                            sym["st_value"],
                            sym["st_size"],
                        )
                    )
        exported = sorted(
            {
                s.name
                for s in symbols
                if s.binding == "STB_GLOBAL" and s.type == "STT_FUNC" and s.section != "SHN_UNDEF"
            }
        )
        return ElfInfo(elf["e_machine"], elf.elfclass, tuple(sections), tuple(symbols), tuple(exported))
    except Exception as e:  # noqa: BLE001 - pyelftools raises many kinds of errors on a damaged ELF
        raise VmfbFormatError(f"embedded ELF cannot be read: {e}", where=f"executable {name}") from None


# -- Vulkan VKE1 ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VulkanPipeline:
    entry_point: str
    shader_module_ordinal: int
    pipeline_layout_ordinal: int
    subgroup_size: int
    dispatch_abi: int  # 0 descriptor sets, 1 BDA_V1
    debug_name: str | None


@dataclass(frozen=True)
class VulkanDescriptorBinding:
    binding: int
    descriptor_type: int  # 7 = STORAGE_BUFFER
    descriptor_count: int
    stage_flags: int


@dataclass(frozen=True)
class VulkanPipelineLayout:
    descriptor_set_layout_ordinals: tuple[int, ...]
    push_constant_ranges: tuple[tuple[int, int, int], ...]  # (stage_flags, offset, size)


@dataclass(frozen=True, eq=False)
class VulkanExecutable:
    pipelines: tuple[VulkanPipeline, ...]
    descriptor_set_layouts: tuple[tuple[VulkanDescriptorBinding, ...], ...]
    pipeline_layouts: tuple[VulkanPipelineLayout, ...]
    shader_modules: tuple[np.ndarray, ...]  # SPIR-V words (uint32 views)


_PUSH_RANGE = np.dtype([("stage_flags", "<u4"), ("offset", "<u4"), ("size", "<u4")])


def read_vke1(data: bytes | memoryview, name: str = "executable") -> VulkanExecutable:
    """Parse a ``vulkan-spirv-fb`` executable (64-byte ``VKE1`` header, then the flatbuffer)."""
    buf = memoryview(data)
    if len(buf) < VKE1_HEADER_SIZE or bytes(buf[:4]) != b"VKE1":
        raise VmfbFormatError("not a VKE1 Vulkan executable (bad magic)", where=f"executable {name}")
    (content_size,) = struct.unpack_from("<Q", buf, 8)
    end = VKE1_HEADER_SIZE + content_size
    if end > len(buf):
        raise VmfbFormatError(
            f"VKE1 content of {content_size} bytes runs past the {len(buf)}-byte executable",
            where=f"executable {name}",
        )
    fb = FlatBuffer(buf, VKE1_HEADER_SIZE, end, source=f"executable {name}")
    root = fb.root("ExecutableDef", b"VKE1")
    pipelines = []
    for p in root.tables(0, "pipelines"):
        dbg: Table | None = p.table(4, "debug_info")
        pipelines.append(
            VulkanPipeline(
                p.string(1, "entry_point") or "",
                p.scalar(0, "u32", 0, "shader_module_ordinal"),
                p.scalar(2, "u32", 0, "pipeline_layout_ordinal"),
                p.scalar(3, "u32", 0, "subgroup_size"),
                p.scalar(5, "u8", 0, "dispatch_abi"),
                dbg.string(0, "name") if dbg is not None else None,
            )
        )
    set_layouts = tuple(
        tuple(
            VulkanDescriptorBinding(
                b.scalar(0, "u32", 0), b.scalar(1, "u32", 0), b.scalar(2, "u32", 0), b.scalar(3, "u32", 0)
            )
            for b in t.tables(0, "bindings")
        )
        for t in root.tables(1, "descriptor_set_layouts")
    )
    layouts = tuple(
        VulkanPipelineLayout(
            tuple(int(v) for v in t.scalars(0, "u32", "descriptor_set_layout_ordinals")),
            tuple(tuple(int(x) for x in r) for r in t.structs(1, _PUSH_RANGE, "push_constant_ranges")),
        )
        for t in root.tables(2, "pipeline_layouts")
    )
    shaders = tuple(t.scalars(0, "u32", "spirv_code") for t in root.tables(3, "shader_modules"))
    return VulkanExecutable(tuple(pipelines), set_layouts, layouts, shaders)


def spirv_disassembly(words: np.ndarray) -> str | None:
    """``spirv-dis`` text of a shader module, or None when the tool is not on PATH or fails."""
    tool = shutil.which("spirv-dis")
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(np.ascontiguousarray(words, dtype="<u4").tobytes())
        f.flush()
        proc = subprocess.run([tool, f.name], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


# -- any executable --------------------------------------------------------------------------------------


def vmvx_module(executable: Executable) -> VmfbModule:
    """The nested VM module of a ``vmvx-bytecode-fb`` executable (read with the same reader)."""
    return VmfbModule.from_bytes(executable.data, name=f"executable {executable.name}")


def executable_details(executable: Executable) -> dict[str, Any]:
    """A JSON-able description of what the executable holds (exports, sections, pipelines...)."""
    fmt = executable.format
    name = executable.name
    if fmt.startswith("embedded-elf") or bytes(executable.data[:4]) == b"\x7fELF":
        info = read_elf(executable.data, name)
        return {
            "kind": "elf",
            "machine": info.machine,
            "class": info.elf_class,
            "sections": [s.__dict__ for s in info.sections],
            "exported_symbols": list(info.exported),
            "symbols": [s.name for s in info.symbols],
        }
    if fmt.startswith("vmvx") or bytes(executable.data[:4]) == b"PK\x03\x04":
        m = vmvx_module(executable)
        return {
            "kind": "vmvx",
            "module": m.name,
            "exports": [{"name": e.name, "attrs": dict(e.signature.attrs)} for e in m.exports],
            "functions": [f.name for f in m.functions],
        }
    if fmt.startswith("vulkan") or bytes(executable.data[:4]) == b"VKE1":
        vk = read_vke1(executable.data, name)
        return {
            "kind": "vulkan-spirv",
            "pipelines": [p.__dict__ for p in vk.pipelines],
            "descriptor_set_layouts": [[b.__dict__ for b in s] for s in vk.descriptor_set_layouts],
            "pipeline_layouts": [
                {
                    "sets": list(p.descriptor_set_layout_ordinals),
                    "push_constant_ranges": list(p.push_constant_ranges),
                }
                for p in vk.pipeline_layouts
            ],
            "shader_module_words": [len(w) for w in vk.shader_modules],
        }
    return {"kind": "unknown"}


def describe_executable(executable: Executable) -> str:
    """A few lines of text about one executable (``iree-lens inspect --output=executables``)."""
    head = (
        f"executable[{executable.ordinal}] {executable.name}: {executable.format}, "
        f"{len(executable.data)} bytes (rodata {executable.rodata_ordinal})"
    )
    d = executable_details(executable)
    lines = [head]
    if d["kind"] == "elf":
        lines.append(
            f"  ELF {d['machine']}, {len(d['sections'])} sections; exports: {', '.join(d['exported_symbols'])}"
        )
    elif d["kind"] == "vmvx":
        lines.extend(f"  export {e['name']} {e['attrs']}" for e in d["exports"])
    elif d["kind"] == "vulkan-spirv":
        for p in d["pipelines"]:
            lines.append(
                f"  pipeline {p['entry_point']} (shader {p['shader_module_ordinal']}, layout {p['pipeline_layout_ordinal']})"
            )
    return "\n".join(lines)
