"""Resume a compilation from one of its phase snapshots, edited or not (IREE's ``--compile-from``)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from engine.compiler.compilation import Compilation, Replacement
from engine.compiler.executables import collect_executables
from engine.compiler.job import Lineage, compile_program
from engine.compiler.phases import PHASES, phase_index, snapshot_file_name
from engine.compiler.task import TaskState
from engine.temp_caches import scratch_dir


def resume_from_phase(
    parent: Compilation,
    phase: str,
    text: str | None = None,
    *,
    out_dir: Path | str | None = None,
    task: TaskState | None = None,
    timeout_s: float | None = None,
    extra_flags: tuple[str, ...] = (),
    _substitutions: tuple[Replacement, ...] = (),
) -> Compilation:
    """A new compilation that continues ``parent`` from its snapshot of ``phase``, replaced by ``text``
    when given (the user's edit), with the same target and options.

    The new compilation's folder holds a complete set of snapshots: those before ``phase`` copied from
    the parent (origin ``inherited``), ``phase`` itself (origin ``edited``) and the ones the compiler
    wrote after it (``compiled``). It records ``parent`` and ``resumed_from=phase``.
    """
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; phases: {', '.join(PHASES)}")
    if phase == PHASES[-1]:
        raise ValueError(f"nothing follows phase {phase!r}: resume from an earlier one")
    base = parent.phase(phase)  # KeyError when the parent never reached it
    out = Path(out_dir) if out_dir is not None else scratch_dir("iree-lens-compile-")
    out.mkdir(parents=True, exist_ok=True)
    module = parent.module_name
    for snapshot in parent.phases:
        if snapshot.index < phase_index(phase):
            shutil.copyfile(snapshot.path, out / snapshot.path.name)
    edited = out / snapshot_file_name(module, phase)
    edited.write_text(text if text is not None else base.text())
    # The compiler's input is the snapshot under the module's own name: IREE derives the module name
    # (and so the snapshot names and the vmfb's module) from the input file's stem.
    source = out / "source" / f"{module}.mlir"
    source.parent.mkdir(exist_ok=True)
    shutil.copyfile(edited, source)
    request = dataclasses.replace(
        parent.request,
        source_path=source,
        source_text=None,
        name=None,
        compile_from=phase,
        extra_flags=parent.request.extra_flags + tuple(extra_flags),
    )
    result = compile_program(
        request,
        out_dir=out,
        task=task,
        timeout_s=timeout_s,
        _lineage=Lineage(parent=parent, resumed_from=phase, substitutions=_substitutions),
    )
    if phase_index(phase) >= phase_index("executable-targets"):
        # From here on the compiler only serialises executables it no longer dumps: they are the parent's.
        copied = False
        for kind in ("intermediates", "binaries"):
            theirs, ours = parent.out_dir / "executables" / kind, out / "executables" / kind
            if theirs.is_dir() and not ours.exists():
                shutil.copytree(theirs, ours)
                copied = True
        if copied:
            names = [e.name for e in result.executables] + [e.name for e in parent.executables]
            executables = collect_executables(out / "executables", list(dict.fromkeys(names)))
            result = dataclasses.replace(result, executables=tuple(executables))
    return result
