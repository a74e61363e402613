"""Static-library builds (``--iree-llvmcpu-link-static``, IREE's samples/static_library): the kernels are not in
the ``.vmfb`` but in an object file (``--iree-llvmcpu-static-library-output-path=model.o``, with a header) for
a host program to link; the module names each executable (format ``static``) and the host registers the
library query functions (``<executable>_library_query``) with IREE's static library loader.

IREE's tools cannot run such a build. The debug engine does what that host does: it links the object into a
shared library (IREE's linker) and loads each executable through its query function. The object is the one
the build wrote: the module records its path in its device target (``static_library_output``), where it is
looked for, then by the same name beside the module."""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from pathlib import Path

from engine.errors import ExecutableLoadError
from engine.runtime.hal.formats import STATIC_LIBRARY

_OUTPUT = re.compile(r'static_library_output\s*=\s*"((?:[^"\\]|\\.)*)"')


def is_static_build(module) -> bool:
    """Whether a ``VmfbModule``'s executables are static libraries (their code outside the module)."""
    return any(e.format == STATIC_LIBRARY for e in module.executables)


def recorded_outputs(module) -> list[str]:
    """The object paths a module's device targets record (its initializer's device-selection messages)."""
    from engine.runtime.vmfb.decoder import iter_instructions

    init = next((f for f in module.functions if f.name == "__init"), None)
    found: list[str] = []
    for ins in iter_instructions(init.code) if init is not None else ():
        if ins.symbol == "Fail" and len(ins.operands) >= 2 and isinstance(ins.operands[1], str):
            found += [m[1] for m in _OUTPUT.finditer(ins.operands[1]) if m[1] not in found]
    return found


def static_object(module, module_path: str | Path) -> tuple[Path | None, list[Path]]:
    """The object file with the module's kernels, and every place looked (for the message when none)."""
    folder = Path(module_path).absolute().parent
    looked: list[Path] = []
    for recorded in recorded_outputs(module):
        path = Path(recorded)
        looked += [path if path.is_absolute() else Path.cwd() / path, folder / path.name]
    looked.append(folder / f"{Path(module_path).stem}.o")
    looked = list(dict.fromkeys(looked))
    return next((p for p in looked if p.is_file()), None), looked


class StaticLibraries:
    """The executables of a static-library object, linked once into a shared library and loaded by name."""

    def __init__(self, object_path: Path):
        self.object_path = Path(object_path)
        self._shared: bytes | None = None

    def shared_library(self) -> bytes:
        if self._shared is None:
            self._shared = _linked(self.object_path.read_bytes(), self.object_path.name)
        return self._shared

    def load(self, name: str, constants, label: str):
        """``name``'s library (its ``<name>_library_query``), as IREE's static library loader finds it."""
        from engine.runtime.hal.cpu_library import CpuExecutableLibrary

        return CpuExecutableLibrary.load(self.shared_library(), f"{label} ({self.object_path.name})",
                                         constants=constants, query_symbol=f"{name}_library_query")  # fmt: skip


_linked_by_digest: dict[str, bytes] = {}


def _linked(data: bytes, name: str) -> bytes:
    """A shared library of the object ``data`` (IREE's iree-lld; libm's functions, which a system-linked kernel
    may call, resolve against the process's when it is loaded)."""
    from engine.substitute.errors import SubstitutionError
    from engine.substitute.llvm_ir import iree_lld

    digest = hashlib.sha256(data).hexdigest()
    if digest in _linked_by_digest:
        return _linked_by_digest[digest]
    try:
        lld = iree_lld()
    except SubstitutionError as e:
        raise ExecutableLoadError(f"cannot link {name}: {e}") from None
    with tempfile.TemporaryDirectory(prefix="iree-lens-static-") as d:
        obj, out = Path(d) / "library.o", Path(d) / "library.so"
        obj.write_bytes(data)
        proc = subprocess.run([str(lld), "-flavor", "gnu", "-shared", "--build-id=none", "-o", str(out), str(obj)],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        if proc.returncode != 0:
            raise ExecutableLoadError(f"cannot link {name} into a library: {(proc.stderr or proc.stdout).strip()}")
        shared = out.read_bytes()
    _linked_by_digest[digest] = shared
    return shared
