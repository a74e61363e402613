"""Record one workgroup of an llvm-cpu dispatch: the kernel's LLVM IR (IREE's own, kept with the module's
executable sources) is instrumented (``llvm_instrument``), built with llvmlite and IREE's linker like a
substitution, and run for that one workgroup on copies of the dispatch's input bytes. The trace buffer is
decoded into ``KernelStep``s, each mapped to the MLIR source through the IR's ``!DILocation``s."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.errors import LensError
from engine.kernel.dispatch_run import CapturedDispatch, KernelStepError
from engine.kernel.executable_objects import executable_source_of, search_folders, search_path_flags
from engine.kernel.llvm_instrument import Probe, TraceBuffer, defines_function, instrument
from engine.kernel.program_rebuild import compiles, program_and_cache_folder
from engine.kernel.source_lines import SourceFiles
from engine.kernel.trace import KernelStep, KernelStore, KernelTrace, SourceLocation, StopAt, check_workgroup

TRACE_BYTES = 256 << 20
_META = re.compile(r"^!(\d+) = (?:distinct )?!(\w+)\((.*)\)\s*$")
_FIELD = re.compile(r'(\w+): (?:"((?:[^"\\]|\\.)*)"|(!\d+|[\w-]+))')


def debug_locations(text: str) -> dict[int, SourceLocation]:
    """Each ``!DILocation`` of the IR as a source location (file from its scope's ``!DIFile``)."""
    meta: dict[int, tuple[str, dict[str, str]]] = {}
    for line in text.splitlines():
        if not line.startswith("!"):
            continue
        m = _META.match(line)
        if m:
            fields = {f.group(1): f.group(2) if f.group(2) is not None else f.group(3) for f in _FIELD.finditer(m.group(3))}
            meta[int(m.group(1))] = (m.group(2), fields)

    def file_of(ref: str | None, depth: int = 0) -> str | None:
        if ref is None or not ref.startswith("!") or depth > 32:
            return None
        kind, fields = meta.get(int(ref[1:]), ("", {}))
        if kind == "DIFile":
            name, directory = fields.get("filename", ""), fields.get("directory", "")
            return name if not directory or directory == "." or name.startswith("/") else f"{directory}/{name}"
        return file_of(fields.get("file"), depth + 1) or file_of(fields.get("scope"), depth + 1)

    out = {}
    for number, (kind, fields) in meta.items():
        if kind == "DILocation":
            file = file_of(fields.get("scope"))
            if file is not None and file != "-":  # "-": IREE kept no source (see has_source_locations)
                out[number] = SourceLocation(file, int(fields.get("line", 0)), int(fields.get("column", 0)))
    return out


def _defines(path: Path, export: str) -> bool:
    try:
        with open(path, errors="replace") as f:
            return any(defines_function(line, export) for line in f)
    except OSError:
        return False


def has_source_locations(path: Path) -> bool:
    """Whether the IR's debug information names a source file. IREE 3.13 writes ``!DIFile(filename: "-")``
    (every location line 1) unless the program was compiled with ``--iree-hal-dump-executable-sources-to``:
    then each instruction's ``!DILocation`` is its op's line in the dumped executable source."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    return any(m.group(1) not in ("-", "") and not m.group(1).endswith(".h")
               for m in re.finditer(r'!DIFile\(filename: "([^"]*)"', text))  # fmt: skip


def _ir_files(folders: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for folder in folders:
        if folder.is_file():
            found.append(folder)
        elif folder.is_dir():
            found += sorted(folder.glob("*.ll")) + sorted(folder.glob("*/*.ll"))
    return found


def _pick(candidates: list[Path], export: str) -> Path | None:
    # IREE's stages: optimized (what was compiled), then linked; ``iree-lens sources`` writes optimized IR.
    rank = {".optimized": 0, ".linked": 1}
    candidates = sorted(candidates, key=lambda p: next((v for k, v in rank.items() if k in p.name), 2))
    return next((p for p in candidates if ".codegen." not in p.name and _defines(p, export)), None)


def rebuild_with_locations(module_path: str | Path, timeout_s: float = 900) -> Path | None:
    """The program the module's debug locations name, compiled again for llvm-cpu with its executables'
    sources and LLVM IR dumped (so the IR's locations are the sources' lines), into a cache folder named
    after the module's and the program's bytes; the folder of IR files, or None when the program is gone or
    does not compile. The kernels are IREE Lens's llvm-cpu build of the program: whether they are the
    module's is judged afterwards, store by store, against the dispatch's real output."""
    from engine.folder_lock import folder_lock

    found = program_and_cache_folder(module_path)
    if found is None:
        return None
    program, out = found
    with folder_lock(out):  # another process rebuilding the same module: wait for its build
        return _rebuild_into(out, Path(module_path), program, timeout_s)


def _rebuild_into(out: Path, module_path: Path, program: Path, timeout_s: float) -> Path | None:
    from engine.compiler.job import iree_compile_path
    from engine.compiler.targets import target_flags

    ir = out / "intermediates"
    if (out / "done").exists():
        return ir
    out.mkdir(parents=True, exist_ok=True)
    cmd = [iree_compile_path(), str(program), *target_flags("llvm-cpu"),
           f"--iree-hal-dump-executable-sources-to={out / 'sources'}",
           f"--iree-hal-dump-executable-intermediates-to={ir}", "-o", str(out / "rebuilt.vmfb")]  # fmt: skip
    if not compiles(cmd, timeout_s):
        return None
    (out / "done").write_text(f"{module_path}\n{program}\n")
    return ir


def find_llvm_ir(module_path: str | Path, export: str, given: Sequence[str | Path] = ()) -> Path | None:
    """``llvm_ir_and_note``'s IR alone."""
    return llvm_ir_and_note(module_path, export, given)[0]


def llvm_ir_and_note(module_path: str | Path, export: str, given: Sequence[str | Path] = ()) -> tuple[Path | None, str]:
    """IREE's LLVM IR that defines ``export``, preferring IR whose debug locations name its sources: in
    ``given`` files or folders, beside the module (IREE Lens's compile folder ``executables/intermediates``,
    ``iree-lens sources`` output, IREE's dump folders); else compiled from the executable's own source
    (``executable_llvm_ir``: one executable, under a second, where the debugger finds it: given, beside, or the
    session's checked rebuild of the program); else the whole program rebuilt (``rebuild_with_locations``,
    minutes on a large model), with a note that says the kernel is that rebuild's, not the module's own;
    IR without locations is the last resort."""
    module = Path(module_path)
    folders = [Path(g) for g in given] or [
        module.parent / "executables" / "intermediates", module.parent, module.parent / f"{module.stem}.sources",
        module.parent / "sources", module.parent / "intermediates",
    ]  # fmt: skip
    found = _pick(_ir_files(folders), export)
    if found is not None and _located_in_executable_sources(found):  # (located, in the kernel's own source)
        return found, ""
    # IR located in the program itself (IREE Lens's compile folder: the ops of a whole kernel on one line of
    # an ONNX or torch import) steps better from the executable's source, when that is at hand.
    alone = executable_llvm_ir(module, export, given, rebuild=False)
    if alone is not None:
        return alone, ""
    if found is not None and has_source_locations(found):
        return found, ""
    alone = executable_llvm_ir(module, export, given) if not given else None
    if alone is not None:
        return alone, ""
    rebuilt = rebuild_with_locations(module) if not given else None
    picked = _pick(_ir_files([rebuilt]), export) if rebuilt is not None else None
    if picked is not None:
        program = program_and_cache_folder(module)
        return picked, (
            f"the kernel is IREE Lens's llvm-cpu rebuild of {program[0].name if program else 'the program'}, not "
            "the module's own executable (its sources are not here, or a rebuild found its executables other "
            "than the module's): what it records is checked against what the dispatch wrote"
        )
    return found, ""


def _located_in_executable_sources(ir: Path) -> bool:
    """Whether the IR's debug locations name ``hal.executable`` sources (lines of the kernel's own ops), not
    the program the executables came from."""
    return executable_source_of(ir) is not None


def executable_llvm_ir(module_path: str | Path, export: str, given: Sequence[str | Path] = (),
                       timeout_s: float = 300, rebuild: bool = True) -> Path | None:  # fmt: skip
    """The LLVM IR of ``export`` compiled from its executable's source alone (``iree-compile
    --compile-mode=hal-executable``: its variant names the target; its IR's locations are that file's lines),
    into a cache folder named after the source's bytes. The source is the one the debugger types tensors
    with: ``given``, else beside the module, else the checked rebuild of its program (found in its cache when
    the session made it; with ``rebuild`` False only if the sources are at hand). None when there is none, or
    it does not compile alone (an IREE dump whose weights were elided)."""
    import hashlib

    from engine.compiler.job import iree_compile_path
    from engine.dispatch.typed_tensors import find_sources, read_sources
    from engine.folder_lock import folder_lock
    from engine.temp_caches import cache_root

    if given:
        try:
            sources = read_sources(given, "given")
        except LensError:
            return None
    else:
        from engine.dispatch.rebuild_sources import found_or_rebuilt

        sources = found_or_rebuilt(module_path) if rebuild else find_sources(module_path)
    source = sources.files.get(export)
    if source is None or not Path(source).is_file():
        return None
    source = Path(source).resolve()  # the IR's !DIFile names it as given
    key = hashlib.sha256(source.read_bytes() + str(source).encode() + iree_compile_path().encode()).hexdigest()[:20]
    out = cache_root("iree-lens-kernel") / f"executable-{key}"
    ir = out / "intermediates"
    with folder_lock(out):  # another process compiling the same source: wait for its IR
        if (out / "failed").exists():  # the same source and compiler: it fails again
            return None
        if not (out / "done").exists():
            out.mkdir(parents=True, exist_ok=True)
            cmd = [iree_compile_path(), "--compile-mode=hal-executable", str(source), "-o",
                   str(out / "executable.so"), f"--iree-hal-dump-executable-intermediates-to={ir}",
                   *search_path_flags(search_folders(module_path, source))]  # the objects it may link  # fmt: skip
            if not compiles(cmd, timeout_s):
                (out / "failed").write_text(f"{source}\n")
                return None
            (out / "done").write_text(f"{source}\n")
    found = _pick(_ir_files([ir]), export)
    return found if found is not None and has_source_locations(found) else None


def record_llvm(
    captured: CapturedDispatch,
    ir_path: Path,
    workgroup: tuple[int, int, int],
    files: SourceFiles,
    stop_at: StopAt | None = None,
    objects: Sequence[Path] = (),
    module_path: str | Path | None = None,
) -> KernelTrace:
    """Build ``ir_path`` instrumented for the captured dispatch's export (linked with the ``objects`` its
    executable names), run ``workgroup`` and decode it (up to the first statement ``stop_at`` is true of)."""
    from engine.runtime.hal.cpu_library import CpuExecutableLibrary, aligned_copy
    from engine.substitute.errors import SubstitutionError
    from engine.substitute.llvm_ir import build_from_llvm_ir, normalize_llvm24

    try:
        check_workgroup(workgroup, captured.workgroup_count)
    except ValueError as e:
        raise KernelStepError(str(e)) from None
    text = _standard_query(normalize_llvm24(ir_path.read_text(errors="replace")))
    buffer = TraceBuffer(TRACE_BYTES)
    instrumented, probes = instrument(text, captured.export_name, buffer.address)
    try:
        build = build_from_llvm_ir(instrumented, f"{ir_path.name} (instrumented)", optimize=False, objects=objects,
                                   cpu=_built_for(ir_path, module_path))  # fmt: skip
    except SubstitutionError as e:
        raise KernelStepError(f"cannot build the instrumented kernel from {ir_path}: {e}") from None
    library = CpuExecutableLibrary.load(build.library, f"{captured.export_name} (recording)")
    imported = [i.name for i in library.imports]
    try:
        bindings = [aligned_copy(b) for b in captured.before]
        prepared = library.prepare_dispatch(captured.export_name, captured.workgroup_count, captured.constants, bindings)
        prepared.run_workgroup(*workgroup)
    finally:
        library.close()
    locations = debug_locations(text)
    spans = [(int(b.ctypes.data), b.nbytes) for b in bindings]
    steps, notes, complete = _decode(buffer, probes, locations, spans, files, stop_at)
    if buffer.overflowed:
        notes.append(f"the record stops after {len(steps)} statements: the {TRACE_BYTES >> 20} MiB trace buffer is full")
    if imported:
        from engine.runtime.hal.executable_plugins import registered_plugins

        plugins = ", ".join(f"{p.name} ({p.path.name})" for p in registered_plugins())
        notes.append(f"its executable imports {', '.join(imported)} from executable plugins ({plugins}): their code "
                     "runs, unrecorded (what it stores is in the bindings after the workgroup)")  # fmt: skip
    return KernelTrace("llvm-cpu", captured.ordinal, captured.export_name, workgroup, captured.workgroup_count,
                       tuple(steps), dict(files.found), tuple(notes), complete)  # fmt: skip


def _lanes(probe: Probe, payload: np.ndarray) -> list:
    if probe.dtype == "bfloat":
        values = (payload.view("<u2").astype("<u4") << 16).view("<f4")
    elif probe.dtype == "|u1":
        values = payload[: probe.lanes].astype(np.int64)
    else:
        values = payload.view(probe.dtype)
    return [float(v) if np.issubdtype(values.dtype, np.floating) else int(v) for v in values[: probe.lanes]]


def _llvm_op(text: str) -> str:
    m = re.match(r"(?:%[\w.$-]+ = )?(?:tail |musttail |notail )?(\w+)", text)
    call = re.search(r"@([\w.$-]+)\(", text)
    if m and m.group(1) == "call" and call:
        return f"llvm.call @{call.group(1)}"
    return f"llvm.{m.group(1)}" if m else "llvm"


def _decode(buffer: TraceBuffer, probes: list[Probe], locations, spans, files: SourceFiles, stop_at=None):
    steps: list[KernelStep] = []
    notes: list[str] = []
    unmapped = 0
    ops: dict[int, str] = {}
    complete = True
    for pid, address, payload in buffer.records():
        probe = probes[pid]
        # Stop before the next statement (a masked store's lanes, the record after it, still belong to it).
        if stop_at is not None and steps and probe.kind != "mask" and stop_at(steps[-1]):
            complete = False
            break
        if probe.kind == "mask":
            last = steps[-1] if steps else None
            if last is None or last.store is None:
                continue
            mask = _lanes(probe, payload)
            enabled = sum(1 for v in mask if v)
            if all(mask[:enabled]) and isinstance(last.store.value, list):
                store = KernelStore(last.store.binding, last.store.offset, last.store.value[:enabled], last.store.element_bytes)
                steps[-1] = replace(last, values=last.values[:enabled], store=store)
            else:
                notes.append(f"step {last.index}: a masked store with lanes off in the middle is shown whole")
            continue
        values = _lanes(probe, payload)
        location = locations.get(probe.dbg) if probe.dbg is not None else None
        if pid not in ops:
            ops[pid] = files.op_at(location) or _llvm_op(probe.text)
        store = None
        if probe.kind == "store":
            binding = next((k for k, (base, n) in enumerate(spans) if base <= address < base + n), None)
            if binding is None:
                unmapped += 1
            else:
                size = np.dtype(probe.dtype).itemsize if probe.dtype != "bfloat" else 2
                value = values[0] if probe.lanes == 1 else values
                store = KernelStore(binding, address - spans[binding][0], value, size)
        steps.append(KernelStep(len(steps), location, ops[pid], probe.text, tuple(values), store, probe.llvm_type))
    if unmapped:
        notes.append(f"{unmapped} stores went to the kernel's own memory (stack or workgroup memory), not a binding")
    return steps, notes, complete


_STATIC_QUERY = re.compile(r"@([\w$.-]+)_library_query\(")


def _standard_query(text: str) -> str:
    """IR of a static library (``--iree-llvmcpu-link-static``) names its query after its executable
    (``@mm_dispatch_0_library_query``): renamed to the one query every library built here exports."""
    if "@iree_hal_executable_library_query(" in text:
        return text
    m = _STATIC_QUERY.search(text)
    return text.replace(f"@{m[1]}_library_query(", "@iree_hal_executable_library_query(") if m else text


def _built_for(ir_path: Path, module_path: str | Path | None = None):
    """The ``(cpu, cpu_features)`` the kernel's executable was built for (IREE keeps them out of the IR): from
    the ``hal.executable`` source its locations name, else the module's record of its target; None (this
    host's) when neither says one."""
    from engine.dispatch.rebuild_sources import cpu_targets, module_cpu_targets

    source = executable_source_of(ir_path)
    try:
        found = cpu_targets([source.read_bytes()]) if source is not None else set()
    except OSError:
        found = set()
    if not found and module_path is not None:
        found = module_cpu_targets(module_path)
    return next(iter(found)) if len(found) == 1 else None

