"""Putting built replacements to use: in the emulated HAL (debug engine) or in a patched ``.vmfb`` (IREE's runtime).

* ``install_on_device``: the device swaps each replaced executable as the program creates it, so the first
  dispatch already runs the edited code (whole executables swapped, single exports overlaid).
* ``patched_module``: the module's bytes with each replaced executable's rodata segment rewritten; an edit of
  one export of a linked CPU library is merged into the library first (``elf_merge``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.runtime.hal.device import Device, HalExecutable
from engine.runtime.hal.executable_swap import registry, swap
from engine.runtime.vmfb.module import VmfbModule
from engine.substitute.build import Replacement, SubstitutionSpec, build_replacement, executable_interfaces
from engine.substitute.errors import SubstitutionError


def build_all(module: VmfbModule, specs: Sequence[SubstitutionSpec]) -> list[Replacement]:
    """Build every ``--substitute`` for ``module`` (the first failure raises, naming its file)."""
    interfaces = executable_interfaces(module)
    return [build_replacement(module, spec, interfaces) for spec in specs]


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
    swap(executable, loaded, None if replacement.whole else replacement.exports)
    return loaded


def install_on_device(device: Device, replacements: Sequence[Replacement]) -> None:
    """Swap each replacement into its executable when the program creates it (and into any already created)."""
    by_label: dict[str, list[Replacement]] = {}
    for r in replacements:
        by_label.setdefault(rodata_label(r), []).append(r)

    def hook(executable: HalExecutable) -> None:
        for r in by_label.get(executable.label, ()):
            swap_into(executable, r)

    reg = registry(device)
    for executable in list(reg.loaded):
        hook(executable)
    reg.hooks.append(hook)


def patched_module(module: VmfbModule, replacements: Sequence[Replacement]) -> bytes:
    """The module's bytes with every replacement in its executable's place."""
    from engine.substitute.binary_patch import replace_rodata

    data = bytes(module._buf) if hasattr(module, "_buf") else None
    if data is None:
        raise SubstitutionError("cannot read the module's bytes")
    current: dict[int, bytes] = {}
    for r in replacements:
        ordinal = r.target.executable.rodata_ordinal
        base = current.get(ordinal, bytes(r.target.executable.data))
        if r.whole:
            current[ordinal] = r.data
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
