"""What an executable takes from the program: its exports, and each export's bindings and constants.

A replacement must take exactly what the module passes, or the first dispatch would read the wrong memory:
``check_interface`` compares the exports a substitution replaces and refuses with the reason before anything
runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.errors import LensError
from engine.substitute.errors import InterfaceMismatchError, SubstitutionError

ELF_MAGIC = b"\x7fELF"
VKE1_MAGIC = b"VKE1"
CDA1_MAGIC = b"CDA1"
HIP1_MAGIC = b"HIP1"


@dataclass(frozen=True)
class ExportInterface:
    name: str
    binding_count: int
    constant_count: int  # CPU: 32-bit push constants; Vulkan: push-constant bytes / 4
    dispatch_abi: int = 0  # Vulkan: descriptor sets (0) or buffer device addresses (1)


@dataclass(frozen=True)
class ExecutableInterface:
    kind: str  # "elf", "vke1", "cda1", "hip1" or "vmvx"
    exports: tuple[ExportInterface, ...]
    executable_constants: int = 0  # CPU: constants given to hal.executable.create

    @property
    def export_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.exports)

    def export(self, name: str) -> ExportInterface:
        for e in self.exports:
            if e.name == name:
                return e
        raise KeyError(name)


def binary_kind(data: bytes | memoryview) -> str:
    head = bytes(data[:4])
    if head == ELF_MAGIC:
        return "elf"
    if head == VKE1_MAGIC:
        return "vke1"
    if head == CDA1_MAGIC:
        return "cda1"
    if head == HIP1_MAGIC:
        return "hip1"
    if head == b"PK\x03\x04" or bytes(data[8:12]) == b"IREE":
        return "vmvx"  # a VM bytecode module (VMVX executables are one)
    return "unknown"


def read_interface(data: bytes | memoryview, label: str = "executable") -> ExecutableInterface:
    """The interface of an embedded-ELF library (loaded to ask it), a ``VKE1`` (Vulkan), ``CDA1`` (CUDA) or
    ``HIP1`` (HIP) executable, or a VMVX module."""
    kind = binary_kind(data)
    if kind == "elf":
        return _elf_interface(bytes(data), label)
    if kind == "vke1":
        from engine.runtime.vmfb.vke1 import read_vke1

        try:
            exe = read_vke1(bytes(data))
        except LensError as e:
            raise SubstitutionError(f"{label}: {e}") from None
        exports = []
        for i, p in enumerate(exe.pipelines):
            layout = exe.pipeline_layouts[p.pipeline_layout_ordinal]
            exports.append(
                ExportInterface(p.entry_point, exe.binding_count(i), layout.push_constant_bytes // 4, p.dispatch_abi)
            )
        return ExecutableInterface("vke1", tuple(exports))
    if kind in ("cda1", "hip1"):
        from engine.runtime.vmfb.cda1 import read_cda1
        from engine.runtime.vmfb.hip1 import read_hip1

        try:
            gpu = (read_cda1 if kind == "cda1" else read_hip1)(bytes(data))
        except LensError as e:
            raise SubstitutionError(f"{label}: {e}") from None
        return ExecutableInterface(
            kind, tuple(ExportInterface(e.kernel_name, e.binding_count, e.constant_count) for e in gpu.exports)
        )
    if kind == "vmvx":
        return _vmvx_interface(bytes(data), label)
    raise SubstitutionError(f"{label}: not an embedded-ELF, VKE1, CDA1, HIP1 or VMVX executable (starts with {bytes(data[:4])!r})")


def _vmvx_interface(data: bytes, label: str) -> ExecutableInterface:
    """A VMVX executable's exports, with the counts its reflection attributes give."""
    from engine.runtime.vmfb.module import VmfbModule

    try:
        module = VmfbModule.from_bytes(data, name=label)
        exports = []
        for e in module.exports:
            attrs = dict(e.signature.attrs)
            exports.append(
                ExportInterface(e.name, int(attrs.get("binding_count", 0)), int(attrs.get("constant_count", 0)))
            )
    except (LensError, ValueError) as e:
        raise SubstitutionError(f"{label}: {e}") from None
    return ExecutableInterface("vmvx", tuple(exports))


def _elf_interface(data: bytes, label: str) -> ExecutableInterface:
    from engine.runtime.hal.cpu_library import CpuExecutableLibrary

    constants: tuple[int, ...] = ()
    for _ in range(2):
        try:
            library = CpuExecutableLibrary.load(data, label, constants=constants)
            break
        except LensError as e:
            m = re.search(r"declares (\d+) constants", str(e))
            if m is None or constants:
                raise SubstitutionError(f"{label}: {e}") from None
            constants = (0,) * int(m.group(1))
    try:
        exports = tuple(
            ExportInterface(e.name, e.attributes.binding_count, e.attributes.constant_count)
            for e in library.exports
        )
        return ExecutableInterface("elf", exports, library.constant_count)
    finally:
        library.close()


def check_interface(
    original: ExecutableInterface, replacement: ExecutableInterface, exports: tuple[str, ...], what: str
) -> None:
    """Refuse (``InterfaceMismatchError``) unless ``replacement`` takes what ``original`` takes for ``exports``."""
    if original.kind != replacement.kind:
        raise InterfaceMismatchError(
            f"{what}: the module's executable is {_KIND[original.kind]} but the replacement is "
            f"{_KIND[replacement.kind]}"
        )
    problems = []
    for name in exports:
        old = original.export(name)
        try:
            new = replacement.export(name)
        except KeyError:
            problems.append(
                f"export {name!r} is missing (the replacement exports {', '.join(replacement.export_names) or 'nothing'})"
            )
            continue
        if old.binding_count != new.binding_count:
            problems.append(f"{name}: {new.binding_count} bindings, the module passes {old.binding_count}")
        if old.constant_count != new.constant_count:
            unit = "push constants" if original.kind == "elf" else "push-constant words"
            problems.append(f"{name}: {new.constant_count} {unit}, the module passes {old.constant_count}")
        if old.dispatch_abi != new.dispatch_abi:
            problems.append(f"{name}: dispatch ABI {new.dispatch_abi}, the module uses {old.dispatch_abi}")
    if original.executable_constants != replacement.executable_constants:
        problems.append(
            f"{replacement.executable_constants} executable constants, the module gives {original.executable_constants}"
        )
    if problems:
        raise InterfaceMismatchError(f"{what}: interface mismatch: " + "; ".join(problems))


_KIND = {
    "elf": "an embedded ELF (llvm-cpu)",
    "vke1": "a Vulkan SPIR-V executable (VKE1)",
    "vmvx": "a VMVX bytecode module",
    "cda1": "a CUDA PTX executable (CDA1)",
    "hip1": "a HIP code-object executable (HIP1)",
    "unknown": "unknown",
}
