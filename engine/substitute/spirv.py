"""SPIR-V replacements of Vulkan executables: ``.spv`` words or ``.spvasm`` text (assembled by ``spirv-as``).

The words go into the module's own ``VKE1`` executable in place of the shader module of the replaced
pipeline, so descriptor set layouts, push constants and pipelines stay IREE's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from engine.runtime.vmfb.vke1 import SPIRV_MAGIC
from engine.substitute.errors import EditCompileError, SourceDiagnostic, SubstitutionError

_OP_ENTRY_POINT = 15
_OP_DECORATE = 71
_DECORATION_BINDING = 33
# spirv-as prints `error: LINE: COLUMN: message` (older releases: `FILE:LINE:COLUMN: error: message`).
_DIAG = re.compile(r"^(?P<sev>error|warning): (?P<line>\d+): (?P<col>\d+): (?P<msg>.*)$", re.M)
_DIAG_OLD = re.compile(r"^(?P<path>[^:\n]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): (?P<msg>.*)$", re.M)


def spirv_version_env(words: np.ndarray) -> str:
    """``spirv-as --target-env`` naming the SPIR-V version of ``words`` (the original module's)."""
    version = int(words[1]) if words.size > 1 else 0x10300
    return f"spv{(version >> 16) & 0xFF}.{(version >> 8) & 0xFF}"


def assemble(text: str, path: str = "<spirv>", target_env: str = "spv1.3") -> np.ndarray:
    """``spirv-as`` of SPIR-V text; ``EditCompileError`` with the line of the first error."""
    tool = shutil.which("spirv-as")
    if tool is None:
        raise SubstitutionError("spirv-as is not installed (Debian package spirv-tools)")
    with tempfile.TemporaryDirectory(prefix="iree-lens-spv-") as d:
        src = Path(d) / Path(path).name
        if src.suffix != ".spvasm":
            src = src.with_suffix(".spvasm")
        out = Path(d) / "out.spv"
        src.write_text(text)
        proc = subprocess.run(
            [tool, "--target-env", target_env, str(src), "-o", str(out)], capture_output=True, text=True, timeout=60
        )
        if proc.returncode != 0:
            message = (proc.stderr or proc.stdout).replace(str(src), path)
            diagnostics = [
                SourceDiagnostic(path, int(m["line"]), int(m["col"]), m["sev"], m["msg"])
                for rx in (_DIAG, _DIAG_OLD)
                for m in rx.finditer(message)
            ]
            if not diagnostics:
                diagnostics = [SourceDiagnostic(path, 0, 0, "error", message.strip() or "spirv-as failed")]
            raise EditCompileError(path, diagnostics, message)
        return words_of(out.read_bytes(), path)


def words_of(data: bytes, path: str = "<spirv>") -> np.ndarray:
    if len(data) % 4 or len(data) < 20:
        raise SubstitutionError(f"{path}: not a SPIR-V binary ({len(data)} bytes)")
    words = np.frombuffer(data, dtype="<u4").copy()
    if int(words[0]) != SPIRV_MAGIC:
        raise SubstitutionError(f"{path}: not a SPIR-V binary (magic 0x{int(words[0]):08x})")
    return words


def _instructions(words: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """Each instruction after the 5-word header: (opcode, its word count, its words from the opcode word);
    a zero word count ends the walk (a malformed module)."""
    i = 5
    n = int(words.size)
    while i < n:
        count = int(words[i]) >> 16
        if count == 0:
            break
        yield int(words[i]) & 0xFFFF, count, words[i : i + count]
        i += count


def entry_points(words: np.ndarray) -> list[str]:
    """Names of the ``OpEntryPoint`` instructions of a SPIR-V module."""
    names = []
    for opcode, count, inst in _instructions(words):
        if opcode == _OP_ENTRY_POINT and count >= 4:
            names.append(inst[3:].tobytes().split(b"\0", 1)[0].decode("utf-8", "replace"))
    return names


def binding_decorations(words: np.ndarray) -> set[int]:
    """Binding numbers the module decorates (``OpDecorate %x Binding N``)."""
    found = set()
    for opcode, count, inst in _instructions(words):
        if opcode == _OP_DECORATE and count >= 4 and int(inst[2]) == _DECORATION_BINDING:
            found.add(int(inst[3]))
    return found
