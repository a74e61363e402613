"""The ``HIP1`` executable of IREE 3.13's ROCm target (``rocm-hsaco-fb``, AMD GPUs), parsed into plain data.

The container is CDA1's (``cda1``) with HSACO code objects in place of PTX: IREE's 64-byte header (magic
``HIP1``), then a FlatBuffer of IREE's ``hip_executable_def.fbs`` whose ``ExportDef`` is CDA1's field for field
(kernel name, block dims, dynamic shared memory, constant count, binding flags, debug info) and whose
modules each hold an ``hsaco_image``: an AMDGPU ELF code object stored as a FlatBuffer string (bytes, not
text). IREE's HIP HAL loads each with ``hipModuleLoadDataEx`` and launches an export with
``hipModuleLaunchKernel`` and the same argument layout as CUDA's (``engine.runtime.hal.cuda.abi``), with the
same limits (16 bindings, 64 constants).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.errors import ExecutableFormatError
from engine.runtime.vmfb.cda1 import (
    CudaExportDef,
    CudaSourceFile,
    KernelExports,
    check_exports,
    read_exports,
    read_source_files,
    write_headed_executable,
)
from engine.runtime.vmfb.executable_flatbuffer import open_headed_flatbuffer

HIP1_MAGIC = b"HIP1"
HIP_FORMAT = "rocm-hsaco-fb"
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class HipModuleDef:
    hsaco: bytes  # the AMDGPU code object (an ELF)

    @property
    def architecture(self) -> str | None:
        """The ``gfx`` target the code object was built for (``gfx942``), read from its ELF header's
        ``e_flags`` (LLVM's ``EF_AMDGPU_MACH``); None when it is not an AMDGPU ELF."""
        return amdgpu_architecture(self.hsaco)


@dataclass(frozen=True)
class HipExecutableDef(KernelExports):
    """A parsed ``HIP1`` executable."""

    exports: tuple[CudaExportDef, ...]
    modules: tuple[HipModuleDef, ...]
    source_files: tuple[CudaSourceFile, ...]


def read_hip1(data: bytes | bytearray | memoryview | np.ndarray) -> HipExecutableDef:
    """Parse a ``HIP1`` executable (header + FlatBuffer)."""
    fb, root = open_headed_flatbuffer(data, HIP1_MAGIC, "HIP1 (ROCm)")
    modules = []
    for t in root.tables(1, "modules"):
        image = t.byte_vector(0, "hsaco_image")  # a string's bytes: the code object is binary
        if image is None or len(image) == 0:
            raise ExecutableFormatError("malformed HIP1 executable: a module has no HSACO image", where=t.path)
        modules.append(HipModuleDef(bytes(image)))
    exe = HipExecutableDef(read_exports(fb, root, "HIP1"), tuple(modules), read_source_files(root))
    check_exports(exe.exports, len(exe.modules))
    return exe


def other_architectures(exe: HipExecutableDef, arch: str) -> list[str]:
    """The ``gfx`` targets of ``exe``'s code objects other than ``arch`` (a device's), which will not load on
    it. A code object whose target this reader cannot name (not in ``_AMDGPU_MACH``) is left to the load."""
    named = {m.architecture for m in exe.modules if (m.architecture or "").startswith("gfx")}
    return sorted(named - {arch})


def write_hip1(exe: HipExecutableDef) -> bytes:
    """``exe`` as a ``HIP1`` executable (what ``read_hip1`` keeps; per-stage debug locations are dropped)."""
    check_exports(exe.exports, len(exe.modules))
    return write_headed_executable(HIP1_MAGIC, exe.exports, [m.hsaco for m in exe.modules], exe.source_files)


# LLVM's EF_AMDGPU_MACH values (llvm/BinaryFormat/ELF.h), each read from a code object IREE 3.13's ROCm
# backend built for that target (tests/test_hip_executables.py checks them); any other is shown as its number.
_AMDGPU_MACH = {
    0x030: "gfx908", 0x03F: "gfx90a", 0x04C: "gfx942", 0x04F: "gfx950", 0x041: "gfx1100", 0x046: "gfx1101",
    0x044: "gfx1103", 0x043: "gfx1150", 0x04A: "gfx1151", 0x048: "gfx1200", 0x04E: "gfx1201",
}  # fmt: skip
_EF_AMDGPU_MACH_MASK = 0x0FF
_EM_AMDGPU = 224


def amdgpu_architecture(elf: bytes) -> str | None:
    """The ``gfx`` name of an AMDGPU code object (ELF64 little-endian, ``e_machine`` 224), from ``e_flags``."""
    if len(elf) < 64 or elf[:4] != ELF_MAGIC or elf[4] != 2 or elf[5] != 1:
        return None
    if int.from_bytes(elf[18:20], "little") != _EM_AMDGPU:
        return None
    flags = int.from_bytes(elf[48:52], "little")
    return _AMDGPU_MACH.get(flags & _EF_AMDGPU_MACH_MASK) or f"AMDGPU mach 0x{flags & _EF_AMDGPU_MACH_MASK:03x}"
