"""Run a program on the debug engine up to one dispatch and keep what a kernel stepper needs: the
dispatch's executable, export, workgroup count, constants, and each binding's bytes before and after."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import LensError
from engine.runtime.hal.device import DispatchObserver, DispatchRecord


class KernelStepError(LensError):
    """Stepping a workgroup is not possible (no such dispatch or workgroup, no sources, a Vulkan build)."""


@dataclass
class CapturedDispatch:
    """One dispatch of a run: what ran and its bindings' bytes before and after (copies)."""

    ordinal: int
    executable_label: str
    executable_format: str
    export_ordinal: int
    export_name: str
    workgroup_count: tuple[int, int, int]
    constants: tuple[int, ...]
    before: list[np.ndarray] = field(repr=False)
    after: list[np.ndarray] = field(default_factory=list, repr=False)


class _Keep(DispatchObserver):
    """Copies the bindings of dispatch ``ordinal`` before and after it runs."""

    def __init__(self, ordinal: int):
        self.ordinal = ordinal
        self.seen = 0
        self.found: CapturedDispatch | None = None

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.seen = max(self.seen, record.sequence + 1)
        if record.sequence != self.ordinal:
            return
        self.found = CapturedDispatch(
            record.sequence, record.executable, record.executable_format, record.export_ordinal,
            record.export_name, record.workgroup_count, record.constants,
            [np.array(b.data, dtype=np.uint8, copy=True) for b in record.bindings],
        )  # fmt: skip

    def after_dispatch(self, record: DispatchRecord) -> None:
        if record.sequence == self.ordinal and self.found is not None:
            self.found.after = [np.array(b.data, dtype=np.uint8, copy=True) for b in record.bindings]


def executable_formats(module_path: str | Path) -> set[str]:
    from engine.runtime.vmfb.module import open_vmfb

    return {e.format for e in open_vmfb(module_path).executables}


def run_to_dispatch(
    module_path: str | Path, function: str, inputs: Sequence[str], ordinal: int, parameters: Sequence[str] = ()
) -> CapturedDispatch:
    """Run ``function`` of the module on ``inputs`` (``--input`` strings) on the CPU debug device and keep
    dispatch ``ordinal``; ``KernelStepError`` when the run has no such dispatch."""
    from engine.runtime.debug_runner import INITIALIZER, DebugRunner
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.hal.formats import CPU_FORMATS, STATIC_LIBRARY

    formats = executable_formats(module_path)
    if formats and not formats & {*CPU_FORMATS, STATIC_LIBRARY}:
        raise KernelStepError(
            f"the module's executables are {', '.join(sorted(formats))}: stepping a workgroup needs the "
            "llvm-cpu or VMVX build of the same program (build it with: iree-lens sources PROGRAM.mlir "
            "--target=llvm-cpu --out=DIR, or iree-compile --iree-hal-target-device=local "
            "--iree-hal-local-target-device-backends=vmvx)"
        )
    from engine.runtime.parameters import ParameterArchives

    # ``parameters``: the [SCOPE=]FILE archives a program compiled with external parameters loads.
    runner = DebugRunner(module_path, "local-sync", parameters=ParameterArchives.open_given(parameters),
                         run_init=function != INITIALIZER)
    # Ordinals count the call's dispatches, as the debugger's do (``break dispatch N``, the window's
    # "Dispatch #N"): those the module's initializer ran are not counted.
    base = runner.device.dispatch_count
    keep = _Keep(base + ordinal)
    runner.device.add_observer(keep)
    arg_kinds, _ = split_cconv(runner.cconv(function))
    runner.invoke(function, parse_inputs(list(inputs), arg_kinds))
    if keep.found is None or not keep.found.after:
        made = max(keep.seen - base, 0)
        raise KernelStepError(f"no dispatch {ordinal}: the call made {made} dispatches"
                              + (f" (0 to {made - 1})" if made else ""))  # fmt: skip
    keep.found.ordinal = ordinal
    return keep.found


def executable_data(module_path: str | Path, captured: CapturedDispatch) -> bytes:
    """The embedded bytes of the executable the dispatch ran (by its ``rodata N`` label, else by export)."""
    from engine.runtime.vmfb.module import open_vmfb

    executables = open_vmfb(module_path).executables
    label = captured.executable_label
    for e in executables:
        if label == f"rodata {e.rodata_ordinal}" and e.format == captured.executable_format:
            return bytes(e.data)
    same = [e for e in executables if e.format == captured.executable_format]
    if len(same) == 1:
        return bytes(same[0].data)
    raise KernelStepError(f"cannot find executable {label!r} ({captured.export_name}) in {module_path}")
