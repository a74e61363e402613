"""One call from a program to a recorded workgroup: run to the dispatch, record the workgroup with the
recorder of the executable's format, and check the record's stores against what the dispatch really wrote."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.kernel.dispatch_run import CapturedDispatch, KernelStepError, executable_data, run_to_dispatch
from engine.kernel.source_lines import SourceFiles
from engine.kernel.trace import KernelTrace, StopAt
from engine.runtime.hal.formats import runs_natively


def record_workgroup(
    module_path: str | Path,
    function: str,
    inputs: Sequence[str],
    dispatch: int,
    workgroup: tuple[int, int, int],
    sources: Sequence[str | Path] = (),
    stop_at: StopAt | None = None,
    parameters: Sequence[str] = (),
) -> tuple[KernelTrace, CapturedDispatch]:
    """Record ``workgroup`` of dispatch ``dispatch`` of ``function`` run on ``inputs`` (up to the first
    statement ``stop_at`` is true of, when given); ``KernelStepError`` (one line) when it cannot be done."""
    captured = run_to_dispatch(module_path, function, inputs, dispatch, parameters)
    return record_captured(module_path, captured, workgroup, sources, stop_at), captured


def record_captured(
    module_path: str | Path,
    captured: CapturedDispatch,
    workgroup: tuple[int, int, int],
    sources: Sequence[str | Path] = (),
    stop_at: StopAt | None = None,
) -> KernelTrace:
    """Record ``workgroup`` of an already captured dispatch of the module at ``module_path``."""
    module = Path(module_path)
    roots = [*(Path(s) if Path(s).is_dir() else Path(s).parent for s in sources), module.parent, Path.cwd()]
    files = SourceFiles(roots)
    provenance = ""  # set where the kernel recorded is a rebuild, not the module's own executable
    if captured.executable_format == "vmvx-bytecode-fb":
        from engine.kernel.vmvx_stepper import record_vmvx

        trace = record_vmvx(captured, executable_data(module, captured), workgroup, files, module, stop_at)
    elif runs_natively(captured.executable_format):  # a static library too: its IR is an llvm-cpu kernel
        from engine.kernel.llvm_recorder import llvm_ir_and_note, record_llvm

        ir, provenance = llvm_ir_and_note(module, captured.export_name, sources)
        if ir is None:
            raise KernelStepError(
                f"no LLVM IR of {captured.export_name}: keep the module's executable sources beside it "
                "(iree-lens sources PROGRAM.mlir --out=DIR) or keep the program its debug locations name"
            )
        objects, linked_note = _linked_objects(module, captured, ir)
        trace = record_llvm(captured, ir, workgroup, files, stop_at, objects, module)
        notes = tuple(n for n in (linked_note, provenance) if n)
        if notes:
            trace = replace(trace, notes=(*trace.notes, *notes))
    else:
        raise KernelStepError(
            f"dispatch {captured.ordinal} runs a {captured.executable_format} executable: stepping needs the "
            "llvm-cpu or VMVX build of the same program"
        )
    # A record stopped early may hold stores a later statement overwrote: only a whole one is judged.
    places, differ = store_agreement(trace, captured) if trace.complete else (0, 0)
    verdict = None
    if differ:
        verdict = (f"{differ} recorded stores differ from what the dispatch wrote: the recorded kernel is not the "
                   "module's (other sources or flags)")  # fmt: skip
    elif provenance and not trace.complete:  # a rebuild, said to be checked: say it was not, and why
        verdict = "not checked against the dispatch: the record stopped before the workgroup's end"
    elif provenance and places:
        verdict = f"checked: the {places} places it stores to hold what the dispatch wrote there"
    if verdict is not None:
        trace = KernelTrace(trace.backend, trace.dispatch, trace.export, trace.workgroup, trace.workgroup_count,
                            trace.steps, trace.source_files, (*trace.notes, verdict))
    return trace


_FLOAT = {2: np.float16, 4: np.float32, 8: np.float64}
_INT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def stored_bytes(value, element_bytes: int, is_float: bool) -> bytes:
    values = value if isinstance(value, list) else [value]
    dtype = (_FLOAT if is_float else _INT)[element_bytes]
    if not is_float:
        return np.asarray([int(v) for v in values], dtype=np.int64).astype(dtype).tobytes()
    return np.asarray(values, dtype=np.float64).astype(dtype).tobytes()


def store_mismatches(trace: KernelTrace, captured: CapturedDispatch) -> int:
    """How many recorded stores are not what the dispatch left at their place (a later store of another
    workgroup or statement to the same bytes aside: only the last store to each place is judged)."""
    return store_agreement(trace, captured)[1]


def store_agreement(trace: KernelTrace, captured: CapturedDispatch) -> tuple[int, int]:
    """(places judged, places whose last recorded store is not what the dispatch left there)."""
    last: dict[tuple[int, int], tuple[bytes, int]] = {}
    for step in trace.stores():
        s = step.store
        values = s.value if isinstance(s.value, list) else [s.value]
        is_float = any(isinstance(v, float) for v in values)
        data = stored_bytes(s.value, s.element_bytes, is_float)
        for k in range(len(values)):
            last[(s.binding, s.offset + k * s.element_bytes)] = (data[k * s.element_bytes : (k + 1) * s.element_bytes], s.element_bytes)
    bad = 0
    for (binding, offset), (data, size) in last.items():
        real = captured.after[binding][offset : offset + size].tobytes()
        if real != data and not _both_nan(real, data, size):
            bad += 1
    return len(last), bad


def _both_nan(a: bytes, b: bytes, size: int) -> bool:
    if size not in _FLOAT or len(a) != size:
        return False
    x, y = np.frombuffer(a, _FLOAT[size])[0], np.frombuffer(b, _FLOAT[size])[0]
    return bool(np.isnan(x) and np.isnan(y))


def _linked_objects(module: Path, captured: CapturedDispatch, ir: Path) -> tuple[tuple[Path, ...], str]:
    """The object files the kernel's executable links in (``executable_objects``) and a note saying their code
    runs unrecorded; ``KernelStepError`` naming those not found here (the kernel cannot be built without)."""
    from engine.kernel.executable_objects import executable_source_of, find_objects, search_folders

    source = executable_source_of(ir)
    if source is None:
        return (), ""
    folders = search_folders(module, source)
    objects = find_objects(source, folders)
    if objects.missing or objects.embedded:
        named = ", ".join(objects.missing) or f"{objects.embedded} embedded in {source.name}"
        raise KernelStepError(
            f"{captured.export_name}'s executable links object files ({named}) that IREE Lens "
            + ("cannot link (their bytes are in the source)" if not objects.missing else
               f"did not find (looked in {', '.join(map(str, folders))})")
            + ": the kernel cannot be built without them"
        )  # fmt: skip
    if not objects.found:
        return (), ""
    return objects.found, (
        f"{captured.export_name} calls code linked from {', '.join(p.name for p in objects.found)}, which IREE did "
        "not generate: it runs, unrecorded (what it stores is in the bindings after the workgroup, not among "
        "the statements)"
    )

