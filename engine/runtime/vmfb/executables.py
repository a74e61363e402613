"""What can be read statically from embedded executables: ELF sections and symbols, VMVX nested
modules, ``VKE1`` Vulkan executables (read by ``vke1``) and their SPIR-V as text, ``CDA1`` CUDA
executables (read by ``cda1``) and their PTX.

Damaged executables raise :class:`~engine.errors.VmfbFormatError` (the executable is part of the
module) naming the executable.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from engine.errors import ExecutableFormatError, VmfbFormatError
from engine.runtime.hal.formats import STATIC_LIBRARY, is_cpu_elf
from engine.runtime.vmfb.cda1 import read_cda1
from engine.runtime.vmfb.module import Executable, VmfbModule
from engine.runtime.vmfb.vke1 import read_vke1

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
        # Symbol tables may overlap in a damaged file: many sections over one region would be read once
        # each (time quadratic in the size). Valid tables are disjoint, so they hold at most size/16
        # entries (ELF32 symbols are 16 bytes, ELF64 ones 24).
        claimed = sum(
            s["sh_size"] // max(1, s["sh_entsize"])
            for s in elf.iter_sections()
            if isinstance(s, SymbolTableSection)
        )
        if claimed > len(data) // 16:
            raise VmfbFormatError(
                f"symbol tables claim {claimed} entries, more than a {len(data)}-byte file can hold",
                where=f"executable {name}",
            )
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
    except VmfbFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - pyelftools raises many kinds of errors on a damaged ELF
        raise VmfbFormatError(f"embedded ELF cannot be read: {e}", where=f"executable {name}") from None


# -- Vulkan SPIR-V (the VKE1 container itself is read by ``vke1.read_vke1``) ---------------------------


SPIRV_DIS_SECONDS = 30  # a damaged module must not hold the caller forever


def spirv_disassembly(words: np.ndarray) -> str | None:
    """``spirv-dis`` text of a shader module, or None when the tool is not on PATH, fails or times out."""
    tool = shutil.which("spirv-dis")
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(np.ascontiguousarray(words, dtype="<u4").tobytes())
        f.flush()
        try:
            proc = subprocess.run([tool, f.name], capture_output=True, timeout=SPIRV_DIS_SECONDS)
        except subprocess.TimeoutExpired:
            return None
    # OpString/OpName operands come from the file: not necessarily UTF-8.
    return proc.stdout.decode("utf-8", errors="replace") if proc.returncode == 0 else None


# -- any executable --------------------------------------------------------------------------------------


def vmvx_module(executable: Executable) -> VmfbModule:
    """The nested VM module of a ``vmvx-bytecode-fb`` executable (read with the same reader)."""
    return VmfbModule.from_bytes(executable.data, name=f"executable {executable.name}")


def executable_details(executable: Executable) -> dict[str, Any]:
    """A JSON-able description of what the executable holds (exports, sections, pipelines...)."""
    fmt = executable.format
    name = executable.name
    if fmt == STATIC_LIBRARY:  # only its name is here: the code is in the object file the build wrote
        library = bytes(executable.data).rstrip(b"\0").decode("utf-8", "replace")
        return {"kind": "static", "library": library, "query": f"{library}_library_query"}
    if is_cpu_elf(fmt) or bytes(executable.data[:4]) == b"\x7fELF":
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
        try:
            vk = read_vke1(executable.data)
        except ExecutableFormatError as e:
            raise VmfbFormatError(str(e), where=f"executable {name}") from None
        return {
            "kind": "vulkan-spirv",
            "pipelines": [asdict(p) for p in vk.pipelines],
            "descriptor_set_layouts": [[asdict(b) for b in s.bindings] for s in vk.descriptor_set_layouts],
            "pipeline_layouts": [
                {
                    "sets": list(p.descriptor_set_layout_ordinals),
                    "push_constant_ranges": [
                        (r.stage_flags, r.offset, r.size) for r in p.push_constant_ranges
                    ],
                }
                for p in vk.pipeline_layouts
            ],
            "shader_module_words": [int(m.spirv.size) for m in vk.shader_modules],
        }
    cuda = fmt.startswith("cuda") or bytes(executable.data[:4]) == b"CDA1"
    if cuda or fmt.startswith("rocm") or bytes(executable.data[:4]) == b"HIP1":
        from engine.runtime.vmfb.hip1 import read_hip1

        try:
            gpu = (read_cda1 if cuda else read_hip1)(executable.data)
        except ExecutableFormatError as e:
            raise VmfbFormatError(str(e), where=f"executable {name}") from None
        details = {
            "kind": "cuda-ptx" if cuda else "hip-hsaco",
            "exports": [asdict(e) for e in gpu.exports],
            "source_files": [s.path for s in gpu.source_files],
        }
        if cuda:
            details["ptx_images"] = [m.ptx for m in gpu.modules]
        else:
            details["code_objects"] = [{"bytes": len(m.hsaco), "architecture": m.architecture} for m in gpu.modules]
        return details
    return {"kind": "unknown"}


def _imports(executable: Executable) -> list[str]:
    """The functions a CPU library for this machine imports (``?``: optional); [] when it cannot be read here."""
    from engine.errors import LensError
    from engine.runtime.hal.cpu_library import CpuExecutableLibrary
    from engine.runtime.hal.formats import is_native_cpu

    if not is_native_cpu(executable.format):
        return []
    try:
        declared = CpuExecutableLibrary.declared_imports(bytes(executable.data), executable.name)
    except LensError:
        return []
    return [("?" if i.optional else "") + i.name for i in declared]


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
        imports = _imports(executable)
        if imports:  # functions no code here defines: an executable plugin provides them when it loads
            lines.append(f"  imports (from executable plugins, --executable-plugin): {', '.join(imports)}")
    elif d["kind"] == "static":
        lines.append(f"  static library {d['library']}: its code is in the object file the build wrote, for a host to "
                     f"link and register ({d['query']})")  # fmt: skip
    elif d["kind"] == "vmvx":
        lines.extend(f"  export {e['name']} {e['attrs']}" for e in d["exports"])
    elif d["kind"] == "vulkan-spirv":
        for p in d["pipelines"]:
            lines.append(
                f"  pipeline {p['entry_point']} (shader {p['shader_module_ordinal']}, layout {p['pipeline_layout_ordinal']})"
            )
    elif d["kind"] in ("cuda-ptx", "hip-hsaco"):
        module = "PTX module" if d["kind"] == "cuda-ptx" else "code object"
        for e in d["exports"]:
            x, y, z = e["block_dims"]
            lines.append(
                f"  kernel {e['kernel_name']} ({module} {e['module_ordinal']}, block {x}x{y}x{z}, "
                f"{len(e['binding_flags'])} bindings, {e['constant_count']} constants, "
                f"{e['block_shared_memory_size']} B dynamic shared memory)"
            )
        for i, c in enumerate(d.get("code_objects", ())):
            lines.append(f"  code object {i}: {c['bytes']} bytes, {c['architecture'] or 'not an AMDGPU ELF'}")
    return "\n".join(lines)
