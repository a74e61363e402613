"""Text the module inspector shows, built from the engine's readers (no Qt here, no parsing of its own).

The disassembly comes from ``engine.runtime.vmfb.disassembler``; executables are read by
``engine.runtime.vmfb.executables`` (ELF sections and symbols, the nested VMVX module, ``spirv-dis``)
and ``engine.runtime.vmfb.vke1`` (Vulkan ``VKE1`` containers). This module only lays their results out
as text; the tree nodes built from them live in ``app.views.module_tree``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.views.disassembly_view import ListingLine
from engine.runtime.vmfb.cda1 import read_cda1
from engine.runtime.vmfb.executables import read_elf, spirv_disassembly
from engine.runtime.vmfb.module import VmfbModule
from engine.runtime.vmfb.vke1 import read_vke1

# -- disassembly -----------------------------------------------------------------------------------


def function_listing(module: Any, function: Any, names: Any = None) -> list[ListingLine]:
    """The disassembly of ``function`` of ``module``: the text ``iree-dump-module`` prints, with pcs; with
    ``names`` (``engine.runtime.vmfb.global_names.GlobalNames``) a global access ends ``// @name``."""
    from engine.runtime.vmfb.disassembler import FunctionDisassembler
    from engine.runtime.vmfb.global_names import accessed_global

    dis = FunctionDisassembler(module)
    structured = dis.lines(function)
    text = list(dis.function_text(function))
    header = len(text) - len(structured) - 1  # export lines + the vm.func line; "}" closes
    out = [ListingLine(t) for t in text[:header]]
    for t, line in zip(text[header:-1], structured):
        name = accessed_global(names, line.instruction) if names is not None and names.globals else None
        out.append(ListingLine(f"{t}  // @{name}" if name else t, line.pc))
    out.append(ListingLine(text[-1]))
    return out


# -- rodata ----------------------------------------------------------------------------------------


def describe_rodata(module: Any, seg: Any) -> str:
    """A decoded view of a rodata segment for the formats we know."""
    fmt = seg.detected_format
    for x in module.executables:
        if x.rodata_ordinal == seg.ordinal:
            return f"executable [{x.ordinal}] {x.name} ({x.format})\n\n" + executable_summary(module, x)
    if fmt == "text":
        return f"string ({seg.length} bytes):\n{seg.text()}"
    if fmt == "elf":
        return elf_summary(seg.data)
    if fmt in ("zip", "vm-flatbuffer"):
        return nested_module_summary(seg.data)
    if fmt == "vke1":
        return spirv_summary(seg.data)
    if fmt == "cda1":
        return ptx_summary(seg.data)
    if seg.length >= 4 and int.from_bytes(bytes(seg.data[:4]), "little") == 0x07230203:
        return spirv_text(np.frombuffer(bytes(seg.data[: seg.length // 4 * 4]), dtype="<u4"))
    return f"{seg.length:,} bytes of binary data (no known format); see the Hex tab."


# -- executables -----------------------------------------------------------------------------------


def text_title(x: Any) -> str:
    if x.format.startswith("vmvx"):
        return "VMVX disassembly"
    if x.format.startswith("vulkan") or x.format.startswith("spirv"):
        return "SPIR-V"
    if x.format.startswith("cuda"):
        return "PTX"
    if x.format.startswith("rocm"):
        return "HSACO"
    if "elf" in x.format:
        return "ELF"
    return "Decoded"


def executable_summary(module: Any, x: Any) -> str:
    seg = module.rodata_segments[x.rodata_ordinal]
    lines = [
        f"executable [{x.ordinal}] {x.name}",
        f"format: {x.format}",
        f"rodata segment: [{x.rodata_ordinal}] {'embedded' if seg.embedded else 'external'}, "
        f"{len(x.data):,} bytes at file offset {seg.file_offset:#x}",
        f"found by: {x.found_by}",
    ]
    if seg.zip_name:
        lines.append(f"archive entry: {seg.zip_name}")
    try:
        entry = executable_entry_points(x)
    except Exception as e:  # noqa: BLE001 - a damaged executable still shows its other details
        entry = [f"<cannot read: {e}>"]
    if entry:
        lines.append("entry points:")
        lines += [f"  {e}" for e in entry]
    return "\n".join(lines)


def executable_text(module: Any, x: Any) -> str:
    """The decoded executable: ELF sections and symbols, VMVX disassembly, or SPIR-V text."""
    if x.format.startswith("vmvx"):
        return vmvx_disassembly(x.data)
    if x.format.startswith("vulkan"):
        return spirv_summary(x.data, with_text=True)
    if x.format.startswith("cuda"):
        return ptx_summary(x.data, with_text=True)
    if x.format.startswith("rocm"):
        return hsaco_summary(x.data, with_text=True)
    if x.data[:4] == b"\x7fELF":
        return elf_summary(x.data)
    return f"{len(x.data):,} bytes in format {x.format}; see the Hex tab."


def executable_entry_points(x: Any) -> list[str]:
    if x.format.startswith("vmvx"):
        nested = nested_module(x.data)
        return [e.name for e in nested.exports]
    if x.format.startswith("vulkan"):
        return list(read_vke1(x.data).entry_points)
    if x.format.startswith("cuda"):
        return list(read_cda1(x.data).export_names)
    if x.format.startswith("rocm"):
        from engine.runtime.vmfb.hip1 import read_hip1

        return list(read_hip1(x.data).export_names)
    if bytes(x.data[:4]) == b"\x7fELF":
        return elf_dispatch_names(x.data)
    return []


# -- ELF --------------------------------------------------------------------------------------------


def elf_dispatch_names(data: Any) -> list[str]:
    """Dispatch export names: the NUL-terminated names in .rodata that IREE's export table points at.

    IREE's library export table is reached through relocations and its ELF keeps no symbol per dispatch;
    the names the table lists are the ``*_dispatch_*`` strings of the read-only data.
    """
    info = read_elf(data)
    rodata = next((s for s in info.sections if s.name == ".rodata"), None)
    if rodata is None:
        return []
    raw_bytes = bytes(data)[rodata.offset : rodata.offset + rodata.size]
    names = []
    for raw in raw_bytes.split(b"\0"):
        try:
            s = raw.decode("ascii")
        except UnicodeDecodeError:
            continue
        if "_dispatch_" in s and s.isprintable() and " " not in s and "/" not in s:
            names.append(s)
    return names


def elf_summary(data: Any) -> str:
    info = read_elf(data)
    lines = [
        f"ELF {info.elf_class}-bit, machine {info.machine}",
        "",
        "dispatches:",
        *[f"  {n}" for n in elf_dispatch_names(data)],
        "",
        f"{'section':<22} {'type':<16} {'address':>10} {'offset':>10} {'size':>10}",
    ]
    for s in info.sections:
        lines.append(f"{(s.name or '(null)'):<22} {s.type:<16} {s.address:>#10x} {s.offset:>#10x} {s.size:>10,}")
    lines += ["", f"{'symbol':<48} {'type':<10} {'value':>10} {'size':>8}"]
    for sym in info.symbols:
        lines.append(f"{sym.name:<48} {sym.type:<10} {sym.value:>#10x} {sym.size:>8}")
    return "\n".join(lines)


# -- VMVX (a nested VM module) ---------------------------------------------------------------------


def nested_module(data: Any) -> VmfbModule:
    """The nested VM module of a VMVX executable, read by the engine's own ``.vmfb`` reader."""
    return VmfbModule.from_bytes(data, name="nested VMVX module")


def nested_module_summary(data: Any) -> str:
    m = nested_module(data)
    lines = [f"nested VM module @{m.name} : version {m.version}", "", "exports:"]
    for e in m.exports:
        lines.append(f"  {e.name}  {e.signature.calling_convention}")
        lines += [f"      {k}: {v}" for k, v in e.signature.attrs.items()]
    return "\n".join(lines)


def vmvx_disassembly(data: Any) -> str:
    m = nested_module(data)
    out = [nested_module_summary(data), ""]
    for f in m.functions:
        out += [ln.text for ln in function_listing(m, f)]
        out.append("")
    return "\n".join(out)


# -- SPIR-V ----------------------------------------------------------------------------------------


def spirv_summary(data: Any, with_text: bool = False) -> str:
    exe = read_vke1(data)
    lines = ["Vulkan SPIR-V executable (VKE1)", "", "pipelines:"]
    for i, p in enumerate(exe.pipelines):
        lines.append(
            f"  [{i}] {p.entry_point}: shader module {p.shader_module_ordinal}, layout {p.pipeline_layout_ordinal}, "
            f"bindings {exe.binding_count(i)}, subgroup size {p.subgroup_size or 'any'}"
        )
    for i, m in enumerate(exe.shader_modules):
        lines.append(f"shader module [{i}]: {m.byte_size:,} bytes")
        if with_text:
            lines += ["", spirv_text(m.spirv), ""]
    return "\n".join(lines)


def spirv_text(words: np.ndarray) -> str:
    text = spirv_disassembly(words)
    if text is None:
        return f"({words.size * 4:,} bytes of SPIR-V; spirv-dis (SPIRV-Tools) is missing or failed on them)"
    return text


# -- PTX (IREE's CUDA executables) ------------------------------------------------------------------


def ptx_summary(data: Any, with_text: bool = False) -> str:
    """A CUDA executable's kernels (block size, bindings, constants) and, with ``with_text``, its PTX."""
    exe = read_cda1(data)
    lines = ["CUDA executable (CDA1)", "", "kernels:", *gpu_kernel_lines(exe.exports, "PTX module")]
    for i, m in enumerate(exe.modules):
        lines.append(f"PTX module [{i}]: {len(m.ptx):,} characters")
        if with_text:
            lines += ["", m.ptx, ""]
    return "\n".join(lines)


def gpu_kernel_lines(exports: Any, module_word: str) -> list[str]:
    """A CUDA or HIP executable's kernels, one line each: module, block, shared memory, arguments."""
    lines = []
    for i, e in enumerate(exports):
        x, y, z = e.block_dims
        access = ", ".join("read-only" if e.binding_read_only(b) else "read-write" for b in range(e.binding_count))
        lines.append(
            f"  [{i}] {e.kernel_name}: {module_word} {e.module_ordinal}, block {x}x{y}x{z}, "
            f"{e.block_shared_memory_size:,} B dynamic shared memory, {e.constant_count} constants, "
            f"bindings ({access})"
        )
    return lines


# -- HSACO (IREE's HIP executables) -----------------------------------------------------------------


def hsaco_summary(data: Any, with_text: bool = False) -> str:
    """A HIP executable's kernels and its AMDGPU code objects (target, sections and symbols with
    ``with_text``: the code is machine code, shown as the ELF it is)."""
    from engine.runtime.vmfb.hip1 import read_hip1

    exe = read_hip1(data)
    lines = ["HIP executable (HIP1)", "", "kernels:", *gpu_kernel_lines(exe.exports, "code object")]
    for i, m in enumerate(exe.modules):
        arch = m.architecture or "not an AMDGPU ELF"
        lines.append(f"code object [{i}]: {len(m.hsaco):,} bytes, {arch}")
        if with_text and m.architecture is not None:
            info = read_elf(m.hsaco)
            lines += ["", f"  {'section':<24} {'size':>10}"]
            lines += [f"  {(s.name or '(null)'):<24} {s.size:>10,}" for s in info.sections]
            lines += ["", "  symbols:"] + sorted({f"    {sym.name} ({sym.type})" for sym in info.symbols if sym.name})
            lines.append("")
    return "\n".join(lines)
