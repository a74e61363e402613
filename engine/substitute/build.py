"""From ``NAME=FILE`` to a replacement binary for one executable of a module.

NAME is how IREE names things: an executable (``main_dispatch_0``, or a linked ``module_linked``), an export
(``main_dispatch_0_elementwise_4_f32``), or a dispatch executable that linking merged into a bigger one
(``main_dispatch_0`` inside ``module_linked``: its exports are ``main_dispatch_0_*``). FILE is, by suffix:

* ``.mlir``: a ``hal.executable`` as IREE dumps it (``--iree-hal-dump-executable-sources-to``), compiled
  alone with ``iree-compile --compile-mode=hal-executable`` (its variant names the target);
* ``.ll``: LLVM IR of a CPU executable (IREE's ``*.linked.ll``/``*.optimized.ll``), built by ``llvm_ir``;
* ``.spv``/``.spvasm``: SPIR-V of a Vulkan executable, put into the module's own ``VKE1`` in place of the
  shader module of the replaced pipeline;
* ``.ptx``: PTX of a CUDA executable, in place of the PTX module that holds the named exports (``ptx``).

The result says which exports it replaces: all of them (the binary replaces the executable whole) or some
(an executable of one dispatch built from the source of a linked executable's part: the debug engine
overlays those exports, the reference engine merges the libraries, see ``elf_merge``).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.runtime.vmfb.module import Executable, VmfbModule
from engine.substitute.errors import EditCompileError, SourceDiagnostic, SubstitutionError
from engine.substitute.interface import ExecutableInterface, check_interface, read_interface

SUFFIXES = (".mlir", ".ll", ".spv", ".spvasm", ".ptx")


@dataclass(frozen=True)
class SubstitutionSpec:
    """One ``--substitute=NAME=FILE``."""

    name: str
    path: Path

    @classmethod
    def parse(cls, text: str) -> SubstitutionSpec:
        name, sep, path = text.partition("=")
        if not sep or not name or not path:
            raise SubstitutionError(f"--substitute takes NAME=FILE, got {text!r}")
        p = Path(path)
        if p.suffix not in SUFFIXES:
            raise SubstitutionError(
                f"{path}: unknown kind of executable file {p.suffix!r} (expected {', '.join(SUFFIXES)})"
            )
        if not p.is_file():
            raise SubstitutionError(f"{path}: no such file")
        return cls(name, p)


@dataclass(frozen=True)
class Target:
    """The executable a NAME selects in a module, and which of its exports."""

    executable: Executable
    interface: ExecutableInterface
    exports: tuple[str, ...]

    @property
    def whole(self) -> bool:
        return self.exports == self.interface.export_names


@dataclass(frozen=True)
class Replacement:
    """A built replacement: ``data`` is an executable binary that provides ``exports`` of ``target``."""

    spec: SubstitutionSpec
    target: Target
    data: bytes
    interface: ExecutableInterface
    exports: tuple[str, ...]
    build_s: float = 0.0
    notes: tuple[str, ...] = field(default=())
    # Export -> the workgroup count the built code wants, where the build resolved it to constants (MLIR
    # sources built by ``sources_batch``); an export absent or None: unknown, the host code's count is used.
    workgroup_counts: tuple[tuple[str, tuple[int, int, int] | None], ...] = ()
    llvm_ir: str | None = None  # IREE's optimized LLVM IR of ``data`` (CPU builds of MLIR sources)

    def workgroup_count(self, export: str) -> tuple[int, int, int] | None:
        return dict(self.workgroup_counts).get(export)

    @property
    def whole(self) -> bool:
        """Whether ``data`` replaces the whole executable (same exports in the same order)."""
        return self.interface.export_names == self.target.interface.export_names


def executable_interfaces(module: VmfbModule) -> dict[int, ExecutableInterface]:
    """The interface of each of the module's executables (by ``Executable.ordinal``)."""
    out = {}
    for e in module.executables:
        try:
            out[e.ordinal] = read_interface(e.data, e.name)
        except SubstitutionError:
            continue  # VMVX and unknown formats: not substitutable
    return out


def resolve(module: VmfbModule, name: str, interfaces: dict[int, ExecutableInterface] | None = None) -> Target:
    """The executable and exports ``name`` selects (``SubstitutionError`` naming what exists when none)."""
    interfaces = executable_interfaces(module) if interfaces is None else interfaces
    executables = [e for e in module.executables if e.ordinal in interfaces]
    candidates = [name]
    for prefix in (f"{module.name}_", "module_"):
        if name.startswith(prefix) and name[len(prefix) :] not in candidates:
            # A dump file's stem: IREE's <module>_main_dispatch_0, the compile job's module_main_dispatch_0.
            candidates.append(name[len(prefix) :])
    # PTX has no '$' in names: IREE's CUDA kernels of `main$async_dispatch_0` are `main_async_dispatch_0_*`.
    candidates += [n.replace("$", "_") for n in candidates if "$" in n]
    for n in candidates:
        for e in executables:
            if e.name == n:
                return Target(e, interfaces[e.ordinal], interfaces[e.ordinal].export_names)
        hits = []
        for e in executables:
            names = interfaces[e.ordinal].export_names
            picked = tuple(x for x in names if x == n) or tuple(x for x in names if x.startswith(n + "_"))
            if picked:
                hits.append(Target(e, interfaces[e.ordinal], picked))
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise SubstitutionError(
                f"{name!r} names exports of several executables ({', '.join(h.executable.name for h in hits)})"
            )
    known = [f"{e.name} ({', '.join(interfaces[e.ordinal].export_names)})" for e in executables]
    raise SubstitutionError(
        f"no executable or export named {name!r} in module @{module.name}; executables: {'; '.join(known) or 'none'}"
    )


# -- building -------------------------------------------------------------------------------------------


def compile_executable_source(path: Path, *, timeout_s: float = 300.0, extra_flags: Sequence[str] = ()) -> bytes:
    """``iree-compile --compile-mode=hal-executable``: the binary of one ``hal.executable`` source."""
    from engine.compiler.diagnostics import parse_diagnostics
    from engine.compiler.job import iree_compile_path

    with tempfile.TemporaryDirectory(prefix="iree-lens-exe-") as d:
        out = Path(d) / "executable.bin"
        try:
            proc = subprocess.run(
                [
                    iree_compile_path(),
                    "--compile-mode=hal-executable",
                    "--mlir-print-op-on-diagnostic=false",
                    str(path),
                    "-o",
                    str(out),
                    *extra_flags,
                ],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise SubstitutionError(f"{path}: iree-compile ran past {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not out.exists():
            diagnostics = [
                SourceDiagnostic(d.file or str(path), d.line or 0, d.column or 0, d.severity, d.message)
                for d in parse_diagnostics(proc.stderr)
            ]
            if proc.returncode < 0:
                diagnostics.append(SourceDiagnostic(str(path), 0, 0, "error", f"iree-compile crashed (signal {-proc.returncode})"))
            raise EditCompileError(str(path), diagnostics, proc.stderr)
        return out.read_bytes()


def _spirv_replacement(target: Target, path: Path) -> bytes:
    from engine.runtime.vmfb.vke1 import read_vke1
    from engine.substitute.binary_patch import replace_shader_module
    from engine.substitute.spirv import assemble, entry_points, words_of

    if target.interface.kind != "vke1":
        raise SubstitutionError(f"{path}: SPIR-V replaces Vulkan executables; {target.executable.name} is not one")
    original = bytes(target.executable.data)
    exe = read_vke1(original)
    modules = {exe.pipelines[exe.pipeline_index(n)].shader_module_ordinal for n in target.exports}
    if len(modules) != 1:
        raise SubstitutionError(
            f"{path}: {target.executable.name} spreads {', '.join(target.exports)} over several shader modules; "
            "name one export"
        )
    index = modules.pop()
    if path.suffix == ".spvasm":
        from engine.substitute.spirv import spirv_version_env

        words = assemble(path.read_text(), str(path), spirv_version_env(exe.shader_modules[index].spirv))
    else:
        words = words_of(path.read_bytes(), str(path))
    needed = [p.entry_point for p in exe.pipelines if p.shader_module_ordinal == index]
    found = entry_points(words)
    missing = [n for n in needed if n not in found]
    from engine.substitute.errors import InterfaceMismatchError
    from engine.substitute.spirv import binding_decorations

    declared = {
        b.binding
        for p in exe.pipelines
        if p.shader_module_ordinal == index
        for s in exe.pipeline_layouts[p.pipeline_layout_ordinal].descriptor_set_layout_ordinals
        for b in exe.descriptor_set_layouts[s].bindings
    }
    extra = sorted(binding_decorations(words) - declared)
    if extra and all(p.dispatch_abi == 0 for p in exe.pipelines):
        raise InterfaceMismatchError(
            f"{path}: interface mismatch: the SPIR-V uses binding(s) {', '.join(map(str, extra))}; the module's "
            f"layout has {', '.join(map(str, sorted(declared))) or 'none'}"
        )
    if missing:
        raise InterfaceMismatchError(
            f"{path}: the SPIR-V has no entry point {', '.join(repr(m) for m in missing)} "
            f"(it has {', '.join(found) or 'none'})"
        )
    return replace_shader_module(original, index, words)


def build_replacement(module: VmfbModule, spec: SubstitutionSpec, interfaces=None) -> Replacement:
    """Build ``spec`` for ``module``: resolve the name, compile or assemble the file, check the interface."""
    target = resolve(module, spec.name, interfaces)
    t0 = time.perf_counter()
    suffix = spec.path.suffix
    # An executable may link object files (hal.executable.object): looked for where its compile most likely ran.
    from engine.kernel.executable_objects import (
        executable_source_of,
        find_objects,
        search_folders,
        search_path_flags,
    )

    folders = search_folders(module.source, spec.path) if module.source else [spec.path.parent, Path.cwd()]
    if suffix == ".mlir":
        data = compile_executable_source(spec.path, extra_flags=search_path_flags(folders))
    elif suffix == ".ll":
        if target.interface.kind != "elf":
            raise SubstitutionError(f"{spec.path}: LLVM IR replaces CPU executables; {target.executable.name} is not one")
        from engine.substitute.llvm_ir import build_from_llvm_ir

        source = executable_source_of(spec.path)
        objects = find_objects(source, folders).found if source is not None else ()
        data = build_from_llvm_ir(spec.path.read_text(errors="replace"), str(spec.path), objects=objects,
                                  cpu=_module_cpu(module)).library  # fmt: skip
    elif suffix == ".ptx":
        if target.interface.kind != "cda1":
            raise SubstitutionError(f"{spec.path}: PTX replaces CUDA executables; {target.executable.name} is not one")
        from engine.substitute.ptx import replace_module_ptx

        text = spec.path.read_text(errors="replace")
        data = replace_module_ptx(bytes(target.executable.data), target.exports, text, str(spec.path))
    else:
        data = _spirv_replacement(target, spec.path)
    return finish_replacement(spec, target, data, time.perf_counter() - t0)


def finish_replacement(spec: SubstitutionSpec, target: Target, data: bytes, build_s: float) -> Replacement:
    """Check a built binary against ``target`` and say which exports it replaces."""
    what = f"{spec.path} for {target.executable.name}"
    interface = read_interface(data, str(spec.path))
    if interface.export_names == target.interface.export_names:
        exports = target.interface.export_names
    else:
        # Only the exports NAME selected, which the replacement must all provide.
        exports = tuple(n for n in target.exports if n in interface.export_names) or target.exports
    check_interface(target.interface, interface, exports, what)
    return Replacement(spec, target, data, interface, exports, build_s)


_NAME = re.compile(r"^\s*hal\.executable(?:\s+(?:public|private))?\s+@([\w$.-]+)", re.M)


def executable_name_in_source(text: str) -> str | None:
    """The ``hal.executable`` name of an MLIR executable source (its first)."""
    m = _NAME.search(text)
    return m.group(1) if m else None


def _module_cpu(module: VmfbModule):
    """The ``(cpu, cpu_features)`` the module's CPU libraries were built for (an edit of their IR is built for
    the same CPU: the host's may contract what the build kept apart); None (the host's) when unknown."""
    from engine.dispatch.rebuild_sources import module_cpu_targets

    found = module_cpu_targets(module.source) if module.source else set()
    return next(iter(found)) if len(found) == 1 else None


def source_cpu(path: Path):
    """The ``(cpu, cpu_features)`` an executable source's llvm-cpu variant names; None when not exactly one."""
    from engine.dispatch.rebuild_sources import cpu_targets

    try:
        found = cpu_targets([path.read_bytes()]) if path.suffix == ".mlir" else set()
    except OSError:
        return None
    return next(iter(found)) if len(found) == 1 else None

