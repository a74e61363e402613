"""PTX replacements of CUDA executables, and CUDA executables merged export by export.

A ``.ptx`` file replaces the PTX module that holds the named exports, whole: IREE links a program's CUDA
kernels into one module, so the file is that module's text (``iree-lens sources --target=cuda`` writes it)
with the kernels edited. Every kernel the module held must still be an ``.entry`` of the new text, taking
IREE's parameters (a 64-bit pointer per binding, then one 32-bit word per constant), or the launch would
read the wrong arguments: that is checked here, before anything runs. The PTX itself is compiled by the
CUDA driver when the module loads (its JIT log is the error then).

An MLIR source rebuilt for CUDA (or HIP) gives an executable of one dispatch; ``merge_exports`` puts its
kernels into the linked executable as a module of their own, the other exports unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.errors import LensError
from engine.runtime.vmfb.cda1 import CudaModuleDef, read_cda1, write_cda1
from engine.runtime.vmfb.hip1 import HIP1_MAGIC, read_hip1, write_hip1
from engine.substitute.errors import InterfaceMismatchError, SubstitutionError

_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)", re.DOTALL)
_PARAM = re.compile(r"\.param\s+(\.\w+)")
_VERSION = re.compile(r"^\s*\.version\s+\d+\.\d+", re.M)


@dataclass(frozen=True)
class PtxEntry:
    """One ``.entry`` (kernel) of a PTX text: its name and its parameters' types (``.u64``, ``.b32``...)."""

    name: str
    params: tuple[str, ...]


def ptx_entries(text: str) -> dict[str, PtxEntry]:
    """The kernels a PTX text defines, by name (comments are not stripped: IREE's PTX has none inside)."""
    return {m[1]: PtxEntry(m[1], tuple(_PARAM.findall(m[2]))) for m in _ENTRY.finditer(text)}


def _parse(data: bytes, what: str, hip: bool = False):
    try:
        return read_hip1(data) if hip else read_cda1(data)
    except LensError as e:
        raise SubstitutionError(f"{what}: {e}") from None


def replace_module_ptx(cda1: bytes, export_names: Sequence[str], text: str, path: str = "<ptx>") -> bytes:
    """``cda1`` with the PTX module holding ``export_names`` replaced by ``text``, checked against IREE's
    kernel arguments (``InterfaceMismatchError`` naming the kernel and what differs)."""
    exe = _parse(cda1, "the module's CUDA executable")
    if _VERSION.search(text) is None:
        raise SubstitutionError(f"{path}: not a PTX module (no .version directive)")
    modules = {exe.exports[exe.export_index(n)].module_ordinal for n in export_names}
    if len(modules) != 1:
        raise SubstitutionError(f"{path}: the named exports are in {len(modules)} PTX modules; name one export")
    index = modules.pop()
    found = ptx_entries(text)
    problems = []
    for e in exe.exports:
        if e.module_ordinal != index:
            continue
        entry = found.get(e.kernel_name)
        if entry is None:
            problems.append(f"kernel {e.kernel_name!r} is missing (the PTX has {', '.join(found) or 'no .entry'})")
            continue
        want = e.binding_count + e.constant_count
        if len(entry.params) != want:
            problems.append(
                f"{e.kernel_name}: {len(entry.params)} parameters, IREE passes {want} "
                f"({e.binding_count} binding pointers and {e.constant_count} constants)"
            )
            continue
        narrow = [k for k, t in enumerate(entry.params[: e.binding_count]) if t not in (".u64", ".b64", ".s64")]
        if narrow:
            problems.append(
                f"{e.kernel_name}: parameter {narrow[0]} is {entry.params[narrow[0]]}, IREE passes a 64-bit "
                "binding pointer there"
            )
    if problems:
        raise InterfaceMismatchError(f"{path}: interface mismatch: " + "; ".join(problems))
    modules_now = list(exe.modules)
    modules_now[index] = CudaModuleDef(text)
    return write_cda1(replace(exe, modules=tuple(modules_now)))


def merge_exports(base: bytes, replacement: bytes, exports: Sequence[str]) -> bytes:
    """``base`` (a CUDA or HIP executable) whose ``exports`` launch ``replacement``'s kernels of the same names:
    the replacement's modules (PTX, code objects) are added to ``base``'s and those exports point at them."""
    hip = bytes(base[:4]) == HIP1_MAGIC
    into = _parse(base, "the module's GPU executable", hip)
    source = _parse(replacement, "the replacement", hip)
    modules = list(into.modules)
    added: dict[int, int] = {}  # the replacement's module ordinal -> its ordinal in the merged executable
    merged = list(into.exports)
    for name in exports:
        new = source.exports[source.export_index(name)]
        if new.module_ordinal not in added:
            added[new.module_ordinal] = len(modules)
            modules.append(source.modules[new.module_ordinal])
        merged[into.export_index(name)] = replace(new, module_ordinal=added[new.module_ordinal])
    merged_exe = replace(into, exports=tuple(merged), modules=tuple(modules))
    return write_hip1(merged_exe) if hip else write_cda1(merged_exe)
