"""Executable substitution: replace one executable of a compilation, keep the replacement map, revert.

Two routes, both producing a new ``Compilation`` whose ``parent`` is the base and whose
``substitutions`` is the replacement map:

* ``binary``: swap the bytes of an executable's ``hal.executable.binary`` in the ``hal`` phase snapshot
  and resume from ``hal``. This is the route for llvm-cpu, where IREE's
  ``--iree-hal-substitute-executable-object`` crashes the compiler (IREE 3.10–3.13); it works for any
  target whose binary format you supply (an embedded ELF ``.so`` for llvm-cpu, VMVX's flatbuffer, ...).
* ``source``: IREE's ``--iree-hal-substitute-executable-source=<executable>=<file.mlir>``, an MLIR
  ``hal.executable`` (such as an edited dump from ``executables/sources``) compiled in its place.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.compiler.compilation import Compilation, Replacement
from engine.compiler.executables import collect_executables
from engine.compiler.job import compile_program
from engine.compiler.resume import resume_from_phase
from engine.compiler.task import TaskState
from engine.errors import FormatError
from engine.temp_caches import scratch_dir

_EXECUTABLE_OPEN = re.compile(
    r"^  hal\.executable(?: (?:private|public|nested))? @(?P<name>[\w$.-]+) \{$", re.MULTILINE
)
_BINARY = re.compile(
    r'hal\.executable\.binary (?:(?:private|public|nested) )?@(?P<variant>[\w$.-]+) <format = "(?P<format>[^"]*)", '
    r'data = dense<"0x(?P<hex>[0-9A-Fa-f]*)"> : vector<(?P<size>\d+)xi8>'
)


@dataclass(frozen=True)
class HalBinary:
    """One ``hal.executable.binary`` in a ``hal`` phase snapshot; ``start``/``end`` bound its hex payload."""

    executable: str
    variant: str
    format: str
    size: int
    start: int
    end: int

    def data(self, hal_text: str) -> bytes:
        return bytes.fromhex(hal_text[self.start : self.end])


def hal_binaries(hal_text: str) -> list[HalBinary]:
    """Every executable binary embedded in a ``hal`` phase snapshot, in order."""
    opens = [(m.start(), m["name"]) for m in _EXECUTABLE_OPEN.finditer(hal_text)]
    found = []
    for m in _BINARY.finditer(hal_text):
        owners = [name for pos, name in opens if pos < m.start()]
        if not owners:
            raise FormatError("hal.executable.binary outside any hal.executable", where=f"offset {m.start()}")
        found.append(
            HalBinary(owners[-1], m["variant"], m["format"], int(m["size"]), m.start("hex"), m.end("hex"))
        )
    return found


def replace_hal_binary(hal_text: str, executable: str, data: bytes, variant: str | None = None) -> str:
    """``hal_text`` with the payload of ``executable``'s binary (``variant``, or its only one) set to ``data``."""
    candidates = [b for b in hal_binaries(hal_text) if b.executable == executable]
    if variant is not None:
        candidates = [b for b in candidates if b.variant == variant]
    if not candidates:
        known = sorted({f"{b.executable}/{b.variant}" for b in hal_binaries(hal_text)})
        raise KeyError(
            f"no binary of executable {executable!r} (variant {variant}); binaries: {', '.join(known)}"
        )
    if len(candidates) > 1:
        raise ValueError(f"executable {executable!r} has several binaries; name the variant")
    b = candidates[0]
    prefix = hal_text[: b.start]
    # The element count sits right after the payload: `"> : vector<Nxi8>`.
    suffix = hal_text[b.end :].replace(f"vector<{b.size}xi8>", f"vector<{len(data)}xi8>", 1)
    return prefix + data.hex().upper() + suffix


def substitute_executables(
    base: Compilation,
    replacements: Sequence[Replacement],
    *,
    out_dir: Path | str | None = None,
    task: TaskState | None = None,
    timeout_s: float | None = None,
) -> Compilation:
    """A new compilation: ``base`` with ``replacements`` applied (``base`` itself when there are none).

    Source replacements recompile ``base``'s request (or its resume) with IREE's substitution flag;
    binary replacements then swap bytes in the ``hal`` snapshot and resume from ``hal``.
    """
    if not replacements:
        return base
    out = Path(out_dir) if out_dir is not None else scratch_dir("iree-lens-subst-")
    sources = [r for r in replacements if r.kind == "source"]
    binaries = [r for r in replacements if r.kind == "binary"]
    for r in replacements:
        if r.kind not in ("source", "binary"):
            raise ValueError(f"unknown replacement kind {r.kind!r}")
    current = base
    if sources:
        flags = tuple(f"--iree-hal-substitute-executable-source={r.executable}={r.path}" for r in sources)
        target = out / "sources" if binaries else out
        if base.resumed_from is None or base.parent is None:
            request = dataclasses.replace(base.request, extra_flags=base.request.extra_flags + flags)
            current = compile_program(request, out_dir=target, task=task, timeout_s=timeout_s)
        else:
            edited = base.phase(base.resumed_from).text()
            current = resume_from_phase(
                base.parent,
                base.resumed_from,
                edited,
                out_dir=target,
                task=task,
                timeout_s=timeout_s,
                extra_flags=flags,
            )
        current.raise_if_failed()
    if binaries:
        hal_text = current.phase("hal").text()
        for r in binaries:
            hal_text = replace_hal_binary(hal_text, r.executable, r.path.read_bytes(), r.variant)
        current = resume_from_phase(current, "hal", hal_text, out_dir=out, task=task, timeout_s=timeout_s)
        _show_replaced_binaries(current, binaries)
        current = dataclasses.replace(
            current,
            executables=tuple(
                collect_executables(current.out_dir / "executables", [e.name for e in current.executables])
            ),
        )
    return dataclasses.replace(current, parent=base, resumed_from=None, substitutions=tuple(replacements))


def _show_replaced_binaries(compilation: Compilation, binaries: list[Replacement]) -> None:
    # The dumped binaries were copied from the parent: put the replacements in their place so the
    # compilation's files show what it really contains.
    for r in binaries:
        try:
            artifacts = compilation.executable(r.executable)
        except KeyError:
            continue
        matching = [p for p in artifacts.binaries if r.variant is None or r.variant in p.name]
        if len(matching) == 1:
            matching[0].write_bytes(r.path.read_bytes())


class ExecutableSubstitutions:
    """The replacement map of one base compilation: add, revert, apply (RenderDoc's replacement registry).

    Not thread-safe: owned by one session; ``apply`` is the long job (run it off the GUI thread).
    Replacement bytes and texts are written under ``work_dir`` so each stays on disk while mapped.
    """

    def __init__(self, base: Compilation, work_dir: Path | str | None = None):
        self.base = base
        self.work_dir = (
            Path(work_dir) if work_dir is not None else scratch_dir("iree-lens-repl-")
        )
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._map: dict[str, Replacement] = {}
        self._counter = 0

    @property
    def replacements(self) -> Mapping[str, Replacement]:
        return dict(self._map)

    def _store(self, data: bytes | str, suffix: str) -> Path:
        self._counter += 1
        path = self.work_dir / f"replacement_{self._counter}{suffix}"
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        return path

    def replace_binary(self, executable: str, data: bytes | Path, variant: str | None = None) -> Replacement:
        """Replace the binary of ``executable`` (a ``hal.executable`` of the ``hal`` phase)."""
        payload = data.read_bytes() if isinstance(data, Path) else data
        replace_hal_binary(
            self.base.phase("hal").text(), executable, payload, variant
        )  # validate the name now
        r = Replacement(executable, "binary", self._store(payload, ".bin"), variant)
        self._map[executable] = r
        return r

    def replace_llvm_ir(self, executable: str, llvm_ir: str | Path, variant: str | None = None) -> Replacement:
        """Replace a CPU executable's binary by one built from its edited LLVM IR (``engine.substitute.llvm_ir``:
        IREE 3.13's syntax normalised for llvmlite, linked by iree-lld); raises ``EditCompileError`` with the
        line of a syntax error."""
        from engine.dispatch.rebuild_sources import cpu_targets
        from engine.substitute.llvm_ir import build_from_llvm_ir

        text, name = (llvm_ir.read_text(), str(llvm_ir)) if isinstance(llvm_ir, Path) else (llvm_ir, "<llvm ir>")
        # Built for the CPU the compile targeted (IREE keeps it out of the IR; the host's may contract more).
        cpus = cpu_targets([self.base.phase("hal").text().encode()])
        cpu = next(iter(cpus)) if len(cpus) == 1 else None
        return self.replace_binary(executable, build_from_llvm_ir(text, name, cpu=cpu).library, variant)

    def replace_spirv(self, executable: str, spirv: str | bytes | Path, variant: str | None = None) -> Replacement:
        """Replace the SPIR-V of a Vulkan executable's only shader module: words (``.spv`` bytes) or text
        (assembled by ``spirv-as``); descriptor layouts and pipelines stay the compiled ones."""
        import numpy as np

        from engine.runtime.vmfb.vke1 import read_vke1
        from engine.substitute.binary_patch import replace_shader_module
        from engine.substitute.spirv import assemble, spirv_version_env, words_of

        candidates = [b for b in hal_binaries(self.base.phase("hal").text()) if b.executable == executable]
        if variant is not None:
            candidates = [b for b in candidates if b.variant == variant]
        if len(candidates) != 1:
            raise KeyError(f"executable {executable!r} has {len(candidates)} binaries (variant {variant})")
        vke1 = candidates[0].data(self.base.phase("hal").text())
        modules = read_vke1(vke1).shader_modules
        if len(modules) != 1:
            raise ValueError(f"executable {executable!r} has {len(modules)} shader modules; expected one")
        if isinstance(spirv, Path):
            spirv = spirv.read_bytes() if spirv.suffix == ".spv" else spirv.read_text()
        if isinstance(spirv, str):
            words = assemble(spirv, f"{executable}.spvasm", spirv_version_env(modules[0].spirv))
        else:
            words = words_of(spirv, executable)
        return self.replace_binary(executable, replace_shader_module(vke1, 0, np.asarray(words)), candidates[0].variant)

    def replace_source(self, executable: str, mlir: str | Path) -> Replacement:
        """Replace ``executable`` (a dispatch executable such as ``main_dispatch_0``) by an MLIR ``hal.executable``."""
        text = mlir.read_text() if isinstance(mlir, Path) else mlir
        r = Replacement(executable, "source", self._store(text, ".mlir"))
        self._map[executable] = r
        return r

    def revert(self, executable: str) -> Replacement:
        """Drop the replacement of ``executable``; the next ``apply`` builds without it."""
        try:
            return self._map.pop(executable)
        except KeyError:
            raise KeyError(f"executable {executable!r} is not replaced") from None

    def revert_all(self) -> None:
        self._map.clear()

    def apply(
        self,
        *,
        out_dir: Path | str | None = None,
        task: TaskState | None = None,
        timeout_s: float | None = None,
    ) -> Compilation:
        """The base compilation with the current replacements (the base itself when there are none)."""
        return substitute_executables(
            self.base, list(self._map.values()), out_dir=out_dir, task=task, timeout_s=timeout_s
        )
