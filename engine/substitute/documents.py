"""The editable texts of a module's executables, and the drafts that keep a user's edits across restarts.

What can be edited depends on what is known: a compilation's dumps (``sources/`` MLIR per dispatch,
``intermediates/`` LLVM IR of CPU libraries, ``binaries/`` SPIR-V) or the module alone (a Vulkan executable's
SPIR-V, disassembled). Each ``EditableText`` names what ``--substitute`` takes (NAME and a file suffix).

``DraftStore`` writes each edit atomically (temporary file + rename) as the user types, under the app's
state folder, keyed by the module and the text, so a restart or a crash loses nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from engine.runtime.vmfb.module import VmfbModule
from engine.session.persist import atomic_write

KIND_SUFFIX = {"mlir": ".mlir", "llvm": ".ll", "spirv": ".spvasm", "ptx": ".ptx"}
KIND_TITLE = {"mlir": "MLIR source", "llvm": "LLVM IR", "spirv": "SPIR-V", "ptx": "PTX"}
# GPU dumps: IREE's NVPTX and AMDGPU LLVM IR is not rebuilt here (a CUDA build's PTX is its editable text; a
# HIP build's code objects are machine code, edited through the dispatches' MLIR sources).
_NVPTX_TAIL = "_cuda_nvptx_fb"
_GPU_IR_TAILS = (_NVPTX_TAIL, "_rocm_hsaco_fb")


@dataclass(frozen=True)
class EditableText:
    name: str  # what --substitute takes as NAME (a dispatch executable, a linked library, an export)
    kind: str  # mlir, llvm, spirv or ptx
    original: str
    origin: str  # the file it came from, or where in the module

    @property
    def suffix(self) -> str:
        return KIND_SUFFIX[self.kind]

    @property
    def title(self) -> str:
        return f"{self.name} ({KIND_TITLE[self.kind]})"


def _dispatch_name(path: Path, module_name: str | None) -> str:
    stem = path.name.split(".")[0]
    if module_name and stem.startswith(module_name + "_"):
        return stem[len(module_name) + 1 :]
    return stem.split("_", 1)[1] if "_" in stem else stem


def _library_name(path: Path, module_name: str | None) -> str:
    # module_<module>_linked_embedded_elf_x86_64.optimized.ll -> <module>_linked; module_main_dispatch_0_... too.
    stem = _dispatch_name(path, module_name)
    for tail in ("_embedded_elf_x86_64", "_system_elf_x86_64", "_embedded_elf_aarch64", "_embedded_elf_riscv_64", _NVPTX_TAIL):
        if tail in stem:
            return stem[: stem.index(tail)]
    return stem


def documents_from_dumps(dump_dir: Path, module_name: str | None = "module") -> list[EditableText]:
    """Texts IREE dumped for a compilation (``sources``, ``intermediates``, ``binaries`` under ``dump_dir``)."""
    out: list[EditableText] = []
    sources = dump_dir / "sources"
    if sources.is_dir():
        from engine.substitute.build import executable_name_in_source

        for p in sorted(sources.glob("*.mlir"), key=_natural):
            text = p.read_text(errors="replace")
            name = executable_name_in_source(text) or _dispatch_name(p, module_name)
            out.append(EditableText(name, "mlir", text, str(p)))
    inter = dump_dir / "intermediates"
    if inter.is_dir():
        for p in sorted(inter.glob("*.optimized.ll"), key=_natural):
            if any(tail in p.name for tail in _GPU_IR_TAILS):
                continue
            out.append(EditableText(_library_name(p, module_name), "llvm", p.read_text(errors="replace"), str(p)))
    binaries = dump_dir / "binaries"
    if binaries.is_dir():
        from engine.runtime.vmfb.executables import spirv_disassembly
        from engine.substitute.spirv import entry_points, words_of

        for p in sorted(binaries.glob("*.spv"), key=_natural):
            words = words_of(p.read_bytes(), str(p))
            text = spirv_disassembly(words)
            if text is not None:
                names = entry_points(words)
                out.append(EditableText(names[0] if names else p.stem, "spirv", text, str(p)))
        for p in sorted(binaries.glob("*.ptx"), key=_natural):
            out.append(EditableText(_library_name(p, module_name), "ptx", p.read_text(errors="replace"), str(p)))
    return out


def documents_from_sources_dir(folder: Path) -> list[EditableText]:
    """What ``iree-lens sources --out=FOLDER`` wrote: ``<executable>.mlir``, ``<library>.ll``, ``<export>.spvasm``,
    ``<executable>.ptx`` (each stem the NAME ``--substitute`` takes)."""
    out: list[EditableText] = []
    for suffix, kind in ((".mlir", "mlir"), (".ll", "llvm"), (".spvasm", "spirv"), (".ptx", "ptx")):
        for p in sorted(folder.glob(f"*{suffix}"), key=_natural):
            text = p.read_text(errors="replace")
            if kind == "mlir":
                from engine.substitute.build import executable_name_in_source

                if executable_name_in_source(text) is None:
                    continue  # a program, not an executable
            out.append(EditableText(p.stem, kind, text, str(p)))
    return out


def documents_for_module_file(path: Path, module: VmfbModule | None = None) -> list[EditableText]:
    """Every editable text known for a ``.vmfb``: a compile job's dumps beside it (``executables/``),
    IREE's own dump folders beside it, ``iree-lens sources`` files beside it, else what the module alone
    offers (Vulkan SPIR-V, CUDA PTX). Empty when nothing is (a CPU module from elsewhere without its sources)."""
    path = Path(path)
    for folder in (path.parent / "executables", path.parent):
        if (folder / "sources").is_dir() or (folder / "intermediates").is_dir():
            found = documents_from_dumps(folder)
            if found:
                return found
    found = documents_from_sources_dir(path.parent)
    if found:
        return found
    if module is None:
        from engine.runtime.vmfb.module import open_vmfb

        module = open_vmfb(path)
    return documents_from_module(module)


def documents_from_module(module: VmfbModule) -> list[EditableText]:
    """What the module alone offers: each Vulkan pipeline's SPIR-V as text, each CUDA executable's PTX modules
    (CPU code has no editable text)."""
    from engine.runtime.vmfb.cda1 import CDA1_MAGIC, read_cda1
    from engine.runtime.vmfb.executables import spirv_disassembly
    from engine.runtime.vmfb.vke1 import is_vke1, read_vke1

    out = []
    for e in module.executables:
        if bytes(e.data[:4]) == CDA1_MAGIC:
            cuda = read_cda1(bytes(e.data))
            for k, m in enumerate(cuda.modules):
                # NAME: the executable when it has one module (IREE links them so), else a kernel of the module.
                first = next(x.kernel_name for x in cuda.exports if x.module_ordinal == k) if len(cuda.modules) > 1 else None
                out.append(EditableText(first or e.name, "ptx", m.ptx, f"{module.source}: executable {e.name}"))
            continue
        if not is_vke1(e.data):
            continue
        exe = read_vke1(bytes(e.data))
        for p in exe.pipelines:
            text = spirv_disassembly(exe.shader_modules[p.shader_module_ordinal].spirv)
            if text is not None:
                out.append(EditableText(p.entry_point, "spirv", text, f"{module.source}: executable {e.name}"))
    return out


def _natural(p: Path) -> list:
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]


def default_drafts_dir() -> Path:
    """``$IREE_LENS_STATE_DIR/edits`` when set (tests, scripted walks), else ``$XDG_STATE_HOME/iree-lens/edits``
    (beside the saved session's ``last-session``). Inside the given folder, not beside it: beside a
    ``mktemp -d`` folder is ``/tmp/edits``, which every test and walk would share."""
    state = os.environ.get("IREE_LENS_STATE_DIR")
    if state:
        return Path(state) / "edits"
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "iree-lens" / "edits"


class DraftStore:
    """Edited texts on disk, one file per (scope, document); written atomically."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else default_drafts_dir()

    def key(self, scope: str, doc: EditableText) -> str:
        digest = hashlib.sha1(f"{scope}\0{doc.name}\0{doc.kind}".encode()).hexdigest()[:16]
        return f"{doc.name.replace('$', '_')[:60]}-{digest}"

    def path(self, scope: str, doc: EditableText) -> Path:
        return self.root / f"{self.key(scope, doc)}{doc.suffix}"

    def save(self, scope: str, doc: EditableText, text: str) -> Path:
        path = self.path(scope, doc)
        atomic_write(path, text)
        meta = path.with_suffix(path.suffix + ".json")
        atomic_write(meta, json.dumps({"scope": scope, "name": doc.name, "kind": doc.kind}))
        return path

    def load(self, scope: str, doc: EditableText) -> str | None:
        path = self.path(scope, doc)
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            return None

    def discard(self, scope: str, doc: EditableText) -> None:
        path = self.path(scope, doc)
        for p in (path, path.with_suffix(path.suffix + ".json")):
            p.unlink(missing_ok=True)
