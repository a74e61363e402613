"""Putting built replacements to use: in the emulated HAL (debug engine) or in a patched ``.vmfb`` (IREE's runtime).

* ``install_on_device``: the device swaps each replaced executable as the program creates it, so the first
  dispatch already runs the edited code (whole executables swapped, single exports overlaid).
* ``patched_module``: the module's bytes with each replaced executable's rodata segment rewritten; an edit of
  one export of a linked CPU library is merged into the library first (``elf_merge``), of a CUDA executable
  as a PTX module of its own (``ptx.merge_exports``).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.runtime.hal.device import Device, HalExecutable
from engine.runtime.hal.executable_swap import registry, swap
from engine.runtime.hal.formats import is_native_cpu
from engine.runtime.vmfb.module import VmfbModule
from engine.substitute.build import (
    Replacement,
    SubstitutionSpec,
    build_replacement,
    executable_interfaces,
    finish_replacement,
    resolve,
)
from engine.substitute.errors import SubstitutionError


def build_all(module: VmfbModule, specs: Sequence[SubstitutionSpec], interfaces=None) -> list[Replacement]:
    """Build every ``--substitute`` for ``module`` (the first failure raises, naming its file).

    Several MLIR sources are built by one ``iree-compile`` (``sources_batch``); replacements that came out
    of one linked library for one executable become one replacement of all their exports.
    """
    interfaces = executable_interfaces(module) if interfaces is None else interfaces
    together = _build_sources_together(module, [s for s in specs if s.path.suffix == ".mlir"], interfaces)
    replacements = []
    for spec in specs:
        if spec in together:
            data, build_s, counts, llvm_ir = together[spec]
            built = finish_replacement(spec, resolve(module, spec.name, interfaces), data, build_s)
            mine = tuple((e, counts.get(e)) for e in built.exports)
            replacements.append(dataclasses.replace(built, workgroup_counts=mine, llvm_ir=llvm_ir))
        else:
            replacements.append(build_replacement(module, spec, interfaces))
    return _merge_shared_libraries(replacements)


def _build_sources_together(
    module: VmfbModule, specs: list[SubstitutionSpec], interfaces
) -> dict[SubstitutionSpec, tuple[bytes, float, dict, str | None]]:
    """The binary each of ``specs`` (MLIR sources) gets from one compile of them all; empty when they
    cannot be built together (each is then built alone, which reports a broken file at its own lines)."""
    from engine.substitute.interface import read_interface
    from engine.substitute.sources_batch import (
        BatchCompileError,
        combine_sources,
        compile_combined,
        export_names_in_source,
        flags_beside,
    )

    if not specs:
        return {}

    def order(spec: SubstitutionSpec) -> tuple[int, int]:
        # The module's own export order, so that a full set links into the executable's own layout.
        target = resolve(module, spec.name, interfaces)
        return target.executable.ordinal, target.interface.export_names.index(target.exports[0])

    specs = sorted(dict.fromkeys(specs), key=order)
    texts = [s.path.read_text(errors="replace") for s in specs]
    combined = combine_sources(texts)
    if combined is None:
        return {}
    t0 = time.perf_counter()
    flags = flags_beside([s.path for s in specs])
    try:
        try:
            batch = compile_combined(combined.text, flags=flags)
        except BatchCompileError as e:
            if not flags or e.lines:
                raise
            batch = compile_combined(combined.text)  # a recorded flag this IREE does not take here
    except BatchCompileError as e:
        # Build the files IREE's errors point into alone: that raises with the diagnostics at their own lines
        # (without compiling every other file alone too).
        for i in combined.files_at(e.lines):
            build_replacement(module, specs[i], interfaces)
        return {}
    except SubstitutionError:
        return {}
    build_s = time.perf_counter() - t0
    libraries = []
    for i, data in enumerate(batch.binaries):
        try:
            libraries.append((data, set(read_interface(data).export_names), batch.llvm_ir.get(i)))
        except SubstitutionError:
            continue
    found = {}
    for spec, text in zip(specs, texts, strict=True):
        exports = set(export_names_in_source(text))
        match = next(((data, ir) for data, names, ir in libraries if exports and exports <= names), None)
        if match is not None:
            found[spec] = (match[0], build_s, batch.workgroup_counts, match[1])
    return found


def _merge_shared_libraries(replacements: list[Replacement]) -> list[Replacement]:
    # One library providing the exports of several files for one executable: load and patch it once.
    position: dict[tuple[int, int], int] = {}
    out: list[Replacement] = []
    for r in replacements:
        key = (r.target.executable.ordinal, id(r.data))
        if key not in position:
            position[key] = len(out)
            out.append(r)
            continue
        first = out[position[key]]
        exports = tuple(n for n in r.target.interface.export_names if n in first.exports or n in r.exports)
        out[position[key]] = dataclasses.replace(
            first,
            exports=exports,
            notes=(*first.notes, str(r.spec.path)),
            workgroup_counts=first.workgroup_counts + r.workgroup_counts,
        )
    return out


def rodata_label(replacement: Replacement) -> str:
    """The label the debug VM gives the executable's data (``VmBuffer.origin`` of its rodata segment)."""
    return f"rodata {replacement.target.executable.rodata_ordinal}"


def swap_into(executable: HalExecutable, replacement: Replacement) -> HalExecutable:
    """Load ``replacement`` on ``executable``'s device and make ``executable`` run it; returns the loaded one."""
    device = executable.device
    loaded = device.load_executable_binary(  # type: ignore[attr-defined]
        executable.format,
        np.frombuffer(replacement.data, dtype=np.uint8),
        getattr(executable, "constants", ()),
        f"{executable.label} <- {replacement.spec.path.name}",
    )
    counts = {e: c for e, c in replacement.workgroup_counts if c is not None}
    if counts and is_native_cpu(executable.format):
        # Honour the edit's own workgroup count (its tiling may differ from the compiled one's): the CPU
        # library is called with it whatever the host code computed.
        loaded.impl = WorkgroupCountOverride(loaded.impl, loaded.export_names, counts)
    swap(executable, loaded, None if replacement.whole else replacement.exports)
    return loaded


class WorkgroupCountOverride:
    """A loaded CPU library whose exports run with fixed workgroup counts (an edit's own, by export name)."""

    def __init__(self, base, export_names: tuple[str, ...], counts: dict[str, tuple[int, int, int]]):
        self.base = base
        self.by_ordinal = {export_names.index(n): c for n, c in counts.items() if n in export_names}

    def dispatch(self, ordinal: int, workgroup_count, *args, **kwargs):
        return self.base.dispatch(ordinal, self.by_ordinal.get(ordinal, workgroup_count), *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.base, name)


@dataclass(frozen=True)
class WorkgroupCountChange:
    """An edit whose tiling asks for another workgroup count than the module's host code passes."""

    export: str
    module_count: tuple[int, int, int]
    edited_count: tuple[int, int, int]
    function: str
    pc: int

    def __str__(self) -> str:
        return (
            f"{self.export}: the edit runs on {self.edited_count} workgroups; the module's host code "
            f"(@{self.function} pc {self.pc}) dispatches {self.module_count}"
        )


def workgroup_count_changes(module: VmfbModule, replacements: Sequence[Replacement]) -> list[WorkgroupCountChange]:
    """Dispatches whose constant workgroup count (the host code's) differs from what an edit's build wants."""
    from engine.runtime.vmfb.call_sites import dispatch_call_sites

    wanted = {e: c for r in replacements for e, c in r.workgroup_counts if c is not None and e in r.exports}
    if not wanted:
        return []
    changes = []
    for site in dispatch_call_sites(module):
        want = wanted.get(site.export or "")
        if want is not None and None not in site.workgroups and tuple(site.workgroups) != want:
            changes.append(
                WorkgroupCountChange(site.export, tuple(site.workgroups), want, site.function_name, site.pc)  # type: ignore[arg-type]
            )
    return changes


def retile_for_host_counts(module: VmfbModule, replacements: Sequence[Replacement]) -> list[Replacement]:
    """Replacements whose edits want other workgroup counts than the host code's constant ones, rebuilt with
    trampolines (``workgroup_trampoline``) that run the edit's grid within the host's; each keeps only its
    other counts. Left as they are where a count is not constant, differs between call sites, or the edit
    has no LLVM IR (the caller then refuses)."""
    from engine.substitute.build import source_cpu
    from engine.substitute.workgroup_trampoline import retiled_library

    changes = workgroup_count_changes(module, replacements)
    if not changes:
        return list(replacements)
    by_export: dict[str, set] = {}
    for c in changes:
        by_export.setdefault(c.export, set()).add((c.module_count, c.edited_count))
    out = []
    for r in replacements:
        mine = {e: next(iter(v)) for e, v in by_export.items() if e in r.exports and len(v) == 1}
        if not mine or r.llvm_ir is None or r.interface.kind != "elf":
            out.append(r)
            continue
        data = retiled_library(r.llvm_ir, mine, source_cpu(r.spec.path))
        counts = tuple((e, None if e in mine else c) for e, c in r.workgroup_counts)
        out.append(dataclasses.replace(r, data=data, workgroup_counts=counts, notes=(*r.notes, "retiled")))
    return out


def refuse_workgroup_count_changes(module: VmfbModule, replacements: Sequence[Replacement], engine: str) -> None:
    """``SubstitutionError`` naming each dispatch whose workgroup count an edit changes, for runs that cannot
    honour it (IREE's runtime runs the host code as compiled; a Vulkan device takes the host's count)."""
    changes = workgroup_count_changes(module, replacements)
    if changes:
        raise SubstitutionError(
            f"the edit changes the workgroup count, which {engine} cannot follow: "
            + "; ".join(str(c) for c in changes)
            + ". Rebuild the program with iree-compile --iree-hal-substitute-executable-source=EXECUTABLE=FILE "
            "(IREE then computes the new count in the host code), or run it with --engine=debug on the CPU, "
            "which dispatches the edit with its own count."
        )


def install_on_device(device: Device, replacements: Sequence[Replacement]) -> None:
    """Swap each replacement into its executable when the program creates it (and into any already created)."""
    by_label: dict[str, list[Replacement]] = {}
    for r in replacements:
        by_label.setdefault(rodata_label(r), []).append(r)

    def hook(executable: HalExecutable) -> None:
        for r in by_label.get(executable.label, ()):
            swap_into(executable, r)

    hook.substitutes = True  # type: ignore[attr-defined]  # what a replay recorder refuses before the run
    reg = registry(device)
    for executable in list(reg.loaded):
        hook(executable)
    reg.hooks.append(hook)


def patched_module(module: VmfbModule, replacements: Sequence[Replacement]) -> bytes:
    """The module's bytes with every replacement in its executable's place (``SubstitutionError`` when an
    edit changes a workgroup count that no trampoline can bridge)."""
    replacements = retile_for_host_counts(module, replacements)
    refuse_workgroup_count_changes(module, replacements, "IREE's runtime")
    from engine.substitute.binary_patch import replace_rodata

    data = bytes(module.data) if hasattr(module, "data") else None
    if data is None:
        raise SubstitutionError("cannot read the module's bytes")
    current: dict[int, bytes] = {}
    for r in replacements:
        ordinal = r.target.executable.rodata_ordinal
        base = current.get(ordinal, bytes(r.target.executable.data))
        if r.whole:
            current[ordinal] = r.data
            continue
        if r.target.interface.kind in ("cda1", "hip1"):
            from engine.substitute.ptx import merge_exports as merge_gpu_exports

            current[ordinal] = merge_gpu_exports(base, r.data, r.exports)
            continue
        if r.target.interface.kind != "elf":
            raise SubstitutionError(
                f"{r.spec.path}: replaces {', '.join(r.exports)} of {r.target.executable.name} but not its other "
                "exports; give a replacement for the whole executable"
            )
        from engine.substitute.elf_merge import merge_exports

        current[ordinal] = merge_exports(base, r.data, r.exports)
    # Patch the later segments first, so growing one does not move the ones still to patch.
    for ordinal in sorted(current, reverse=True):
        data = replace_rodata(data, ordinal, current[ordinal])
    return data


def write_patched_module(module: VmfbModule, replacements: Sequence[Replacement], out: Path | None = None) -> Path:
    """``patched_module`` written to ``out`` (a temporary file by default)."""
    if out is None:
        fd, name = tempfile.mkstemp(prefix="iree-lens-substituted-", suffix=".vmfb")
        out = Path(name)
        import os

        os.close(fd)
    out.write_bytes(patched_module(module, replacements))
    return out
