"""Adapter between the module inspector and engine APIs that are still landing (no Qt here).

Everything the inspector needs beyond ``engine.runtime.vmfb.module`` goes through this file: the
disassembler (``engine.runtime.vmfb.disassembler`` when present; until then a plain listing from
the instruction decoder), ELF details (pyelftools), VMVX (the nested module, read with the same
reader) and SPIR-V (the Vulkan executable parser of ``engine.runtime.hal.vulkan`` and ``spirv-dis``).
When the engine grows the same capability, the functions here should just call it.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from typing import Any

from app.views.disassembly_view import ListingLine

_LABEL_RE = re.compile(r"^\s*\^bb\d+")


# -- disassembly -----------------------------------------------------------------------------------


def function_listing(module: Any, function: Any) -> list[ListingLine]:
    """The disassembly of ``function`` of ``module``: the text ``iree-dump-module`` prints, with pcs."""
    try:
        from engine.runtime.vmfb import disassembler
    except ModuleNotFoundError as e:
        if e.name != "engine.runtime.vmfb.disassembler":
            raise
        return _decoder_listing(function)
    return _engine_listing(disassembler, module, function)


def _engine_listing(disassembler: Any, module: Any, function: Any) -> list[ListingLine]:
    """The tool's text for the function (export lines, header, body, brace) with each line's pc."""
    dis = disassembler.FunctionDisassembler(module)
    structured = dis.lines(function)
    text = list(dis.function_text(function))
    header = len(text) - len(structured) - 1  # export lines + the vm.func line; "}" closes
    out = [ListingLine(t) for t in text[:header]]
    out += [ListingLine(t, line.pc) for t, line in zip(text[header:-1], structured)]
    out.append(ListingLine(text[-1]))
    return out


def _as_line(x: Any) -> ListingLine:
    if isinstance(x, str):
        return ListingLine(x)
    text = getattr(x, "text", None)
    if text is None:
        text = str(x)
    pc = getattr(x, "pc", None)
    return ListingLine(text, pc if isinstance(pc, int) else None)


def _decoder_listing(function: Any) -> list[ListingLine]:
    """Stopgap listing from the decoder: one line per instruction, blocks labelled."""
    lines = [ListingLine(f"vm.func @{function.name}  // {function.signature.calling_convention}")]
    block = 0
    for ins in function.instructions():
        if ins.opcode.is_block_marker:
            lines.append(ListingLine(f"^bb{block}:", ins.pc))
            block += 1
            continue
        if ins.opcode.is_prefix:
            continue
        operands = ", ".join(str(o) for o in ins.operands)
        lines.append(ListingLine(f"  {ins.opcode.mnemonic or ins.opcode.symbol} {operands}".rstrip(), ins.pc))
    return lines


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
    if seg.length >= 4 and int.from_bytes(bytes(seg.data[:4]), "little") == 0x07230203:
        return spirv_dis(bytes(seg.data))
    return f"{seg.length:,} bytes of binary data (no known format); see the Hex tab."


# -- executables -----------------------------------------------------------------------------------


def text_title(x: Any) -> str:
    if x.format.startswith("vmvx"):
        return "VMVX disassembly"
    if x.format.startswith("vulkan") or x.format.startswith("spirv"):
        return "SPIR-V"
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
    if x.data[:4] == b"\x7fELF":
        return elf_summary(x.data)
    return f"{len(x.data):,} bytes in format {x.format}; see the Hex tab."


def executable_entry_points(x: Any) -> list[str]:
    if x.format.startswith("vmvx"):
        nested = _nested_module(x.data)
        return [e.name for e in nested.exports]
    if x.format.startswith("vulkan"):
        from engine.runtime.vmfb.vke1 import read_vke1

        return list(read_vke1(x.data).entry_points)
    if bytes(x.data[:4]) == b"\x7fELF":
        return _elf_dispatch_names(x.data)
    return []


def executable_children(module: Any, x: Any) -> list:
    """Tree children of an executable node: entry points, and per format its sections/functions."""
    from app.views.module_tree import TreeNode, _function_node, _leaf

    nodes = [_leaf(f"entry point {i}", name) for i, name in enumerate(executable_entry_points(x))]
    if x.format.startswith("vmvx"):
        nested = _nested_module(x.data)
        nodes += [_function_node(nested, f) for f in nested.functions]
    elif bytes(x.data[:4]) == b"\x7fELF":
        elf = _elf(x.data)
        nodes.append(
            TreeNode(
                "sections",
                str(elf.num_sections()),
                children=lambda: [
                    _leaf(s.name or "(null)", f"{s['sh_type']}, {s['sh_size']:,} B at {s['sh_offset']:#x}")
                    for s in elf.iter_sections()
                ],
            )
        )
        symbols = _elf_symbols(elf)
        nodes.append(
            TreeNode(
                "symbols",
                str(len(symbols)),
                children=lambda: [
                    _leaf(name, f"{kind} {value:#x} size {size}") for name, kind, value, size in symbols
                ],
            )
        )
    elif x.format.startswith("vulkan"):
        from engine.runtime.vmfb.vke1 import read_vke1

        exe = read_vke1(x.data)
        nodes += [
            _leaf(f"shader module {i}", f"{m.byte_size:,} bytes of SPIR-V")
            for i, m in enumerate(exe.shader_modules)
        ]
    return nodes


# -- ELF (pyelftools) ------------------------------------------------------------------------------


def _elf(data: Any):
    from elftools.elf.elffile import ELFFile

    return ELFFile(io.BytesIO(bytes(data)))


def _elf_symbols(elf: Any) -> list[tuple[str, str, int, int]]:
    from elftools.elf.sections import SymbolTableSection

    out = []
    for sec in elf.iter_sections():
        if isinstance(sec, SymbolTableSection):
            for sym in sec.iter_symbols():
                if sym.name:
                    out.append((sym.name, sym["st_info"]["type"], sym["st_value"], sym["st_size"]))
    return out


def _elf_dispatch_names(data: Any) -> list[str]:
    """Dispatch export names: the NUL-terminated names in .rodata that IREE's export table points at.

    Stopgap: IREE's library export table is reached through relocations; the names it lists are the
    ``*_dispatch_*`` strings of the read-only data.
    """
    elf = _elf(data)
    sec = elf.get_section_by_name(".rodata")
    if sec is None:
        return []
    names = []
    for raw in sec.data().split(b"\0"):
        try:
            s = raw.decode("ascii")
        except UnicodeDecodeError:
            continue
        if "_dispatch_" in s and s.isprintable() and " " not in s and "/" not in s:
            names.append(s)
    return names


def elf_summary(data: Any) -> str:
    elf = _elf(data)
    h = elf.header
    lines = [
        f"ELF {elf.elfclass}-bit {'little' if elf.little_endian else 'big'} endian, {h['e_type']}, "
        f"machine {h['e_machine']}, entry {h['e_entry']:#x}",
        "",
        "dispatches:",
        *[f"  {n}" for n in _elf_dispatch_names(data)],
        "",
        f"{'section':<22} {'type':<16} {'address':>10} {'offset':>10} {'size':>10}",
    ]
    for s in elf.iter_sections():
        lines.append(
            f"{(s.name or '(null)'):<22} {s['sh_type']:<16} {s['sh_addr']:>#10x} {s['sh_offset']:>#10x} {s['sh_size']:>10,}"
        )
    lines += ["", f"{'symbol':<48} {'type':<10} {'value':>10} {'size':>8}"]
    for name, kind, value, size in _elf_symbols(elf):
        lines.append(f"{name:<48} {kind:<10} {value:>#10x} {size:>8}")
    return "\n".join(lines)


# -- VMVX (a nested VM module) ---------------------------------------------------------------------


def _nested_module(data: Any):
    from engine.runtime.vmfb.module import VmfbModule

    return VmfbModule.from_bytes(data, name="nested VMVX module")


def nested_module_summary(data: Any) -> str:
    m = _nested_module(data)
    lines = [f"nested VM module @{m.name} : version {m.version}", "", "exports:"]
    for e in m.exports:
        lines.append(f"  {e.name}  {e.signature.calling_convention}")
        lines += [f"      {k}: {v}" for k, v in e.signature.attrs.items()]
    return "\n".join(lines)


def vmvx_disassembly(data: Any) -> str:
    m = _nested_module(data)
    out = [nested_module_summary(data), ""]
    for f in m.functions:
        out += [ln.text for ln in function_listing(m, f)]
        out.append("")
    return "\n".join(out)


# -- SPIR-V ----------------------------------------------------------------------------------------


def spirv_summary(data: Any, with_text: bool = False) -> str:
    from engine.runtime.vmfb.vke1 import read_vke1

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
            lines += ["", spirv_dis(m.spirv.tobytes()), ""]
    return "\n".join(lines)


def spirv_dis(words: bytes) -> str:
    tool = shutil.which("spirv-dis")
    if tool is None:
        return f"({len(words):,} bytes of SPIR-V; install spirv-dis (SPIRV-Tools) to see them as text)"
    proc = subprocess.run([tool, "-", "-o", "-"], input=words, capture_output=True, timeout=60)
    if proc.returncode != 0:
        return f"spirv-dis failed: {proc.stderr.decode(errors='replace').strip()}"
    return proc.stdout.decode(errors="replace")
