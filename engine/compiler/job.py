"""The compile job: runs IREE's own ``iree-compile`` in a child process with every capture flag at once.

A child process, not the in-process API, because several capture flags (``--mlir-timing``,
``--compile-from``, ``--dump-compilation-phases-to``, substitution, dispatch tracing) are process-global
in IREE, a compiler crash must not take the application down, and IREE has no cancel: killing the
process is the cancel. Progress is the phase snapshot files appearing in the output folder.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from engine.compiler.compilation import Compilation, Replacement
from engine.compiler.diagnostics import Diagnostic, parse_diagnostics
from engine.compiler.executables import collect_executables, executable_names, extract_executables
from engine.compiler.phases import PHASES, PhaseSnapshot, find_snapshot_files, phase_index
from engine.compiler.request import CompileRequest
from engine.compiler.task import Progress, TaskState
from engine.compiler.timing import parse_timing, split_timing_output
from engine.errors import CompileCancelled, FormatError
from engine.temp_caches import scratch_dir

_POLL_S = 0.02  # cancel latency and progress granularity; a compile takes ~0.3 s and more


def iree_compile_path() -> str:
    """The native ``iree-compile`` of the installed ``iree-base-compiler`` package.

    Not the ``bin/iree-compile`` console script: that is a Python wrapper which starts the native tool
    as its own child, so killing it (cancel) would leave the compiler running.
    """
    try:
        from iree.compiler.tools.binaries import find_tool

        return str(Path(find_tool("iree-compile")).resolve())
    except Exception:  # the package is missing or broken: fall back to the tool on PATH
        found = shutil.which("iree-compile")
        if found is None:
            raise FileNotFoundError("iree-compile not found (install iree-base-compiler)") from None
        return found


@functools.cache
def compiler_version() -> str:
    """The installed ``iree-base-compiler``'s version (``unknown`` where the package is not installed): part
    of the key of anything kept from one compile for another (a build made by another IREE is not the same)."""
    from importlib import metadata

    try:
        return metadata.version("iree-base-compiler")
    except metadata.PackageNotFoundError:
        return "unknown"


def _start(cmd: list[str], **kwargs) -> subprocess.Popen:
    # Own process group, so a cancel also stops anything the compiler started (iree-lld).
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True, **kwargs
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _stop_if_cancelled(task: TaskState | None, start: float, timeout_s: float | None) -> None:
    """``CompileCancelled`` once the task is cancelled or the compile has run past ``timeout_s``."""
    if task is not None and task.cancelled:
        raise CompileCancelled("compile cancelled")
    if timeout_s is not None and time.monotonic() - start > timeout_s:
        raise CompileCancelled(f"compile ran past its {timeout_s:g} s limit")


@dataclass(frozen=True)
class Lineage:
    # Passed by resume/substitution: what the new compilation descends from.
    parent: Compilation | None = None
    resumed_from: str | None = None
    substitutions: tuple[Replacement, ...] = ()


def _write_source(request: CompileRequest, out_dir: Path) -> Path:
    if request.source_path is not None:
        if request.name is None:
            return request.source_path
        data: str | bytes = request.source_path.read_bytes()
        suffix = ".mlirbc" if request.source_path.suffix == ".mlirbc" else ".mlir"
    else:
        data = request.source_text
        suffix = ".mlirbc" if isinstance(data, bytes) else ".mlir"
    folder = out_dir / "source"
    folder.mkdir(parents=True, exist_ok=True)
    # The file's stem becomes the module name, which names the snapshots and the module in the vmfb.
    path = folder / f"{request.module_name}{suffix}"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def build_command(request: CompileRequest, source_path: Path, out_dir: Path) -> list[str]:
    """The full ``iree-compile`` command line of a job writing its results under ``out_dir``: the program
    named relative to ``request.named_in`` when set (as the module's debug locations name it; the compiler
    runs there)."""
    named = source_path.relative_to(request.named_in) if request.named_in is not None else source_path
    cmd = [iree_compile_path(), str(named), *request.compiler_flags()]
    cmd.append(f"--dump-compilation-phases-to={out_dir}")
    if request.dump_executables:
        # Not sources/configurations: IREE re-locates the executables at their dump files, which changes
        # the debug locations in the hal/vm phases and the .vmfb. Those two are cut out of the snapshots.
        for kind in ("intermediates", "binaries"):
            cmd.append(f"--iree-hal-dump-executable-{kind}-to={out_dir / 'executables' / kind}")
    if request.timing:
        cmd += ["--mlir-timing", "--mlir-output-format=json"]
    # A failing op is otherwise printed whole with its diagnostic: megabytes for a big module.
    cmd.append("--mlir-print-op-on-diagnostic=false")
    cmd += ["-o", str(out_dir / f"{request.module_name}.vmfb")]
    return cmd


def _report_new_phases(task: TaskState | None, out_dir: Path, seen: int, start: float) -> int:
    if task is None:
        return seen
    snapshots = find_snapshot_files(out_dir)
    reached = max((s.index for s in snapshots), default=0)
    if reached > seen:
        task.report(Progress(PHASES[reached - 1], reached, len(PHASES), time.monotonic() - start))
    return max(seen, reached)


def compile_program(
    request: CompileRequest,
    *,
    out_dir: Path | str | None = None,
    task: TaskState | None = None,
    timeout_s: float | None = None,
    _lineage: Lineage = Lineage(),
) -> Compilation:
    """Compile ``request`` with iree-compile and capture everything into ``out_dir`` (a new temporary
    folder when ``None``; it must be empty or absent).

    Returns the ``Compilation`` whether or not IREE accepted the program (check ``.ok`` or call
    ``.raise_if_failed()``); a compiler crash is a failed compilation too. Raises ``CompileCancelled``
    when ``task`` is cancelled or ``timeout_s`` passes (the compiler process is killed at once).
    """
    out = Path(out_dir).absolute() if out_dir is not None else scratch_dir("iree-lens-compile-")
    out.mkdir(parents=True, exist_ok=True)
    source_path = _write_source(request, out)
    cmd = build_command(request, source_path, out)
    returncode, raw, elapsed = _run_compiler(request, cmd, out, task, timeout_s)
    rest, timing_json = split_timing_output(raw)
    (out / "stderr.txt").write_text(rest)
    timing = None
    timing_problem = None
    if timing_json is not None:
        import json

        (out / "timing.json").write_text(json.dumps(timing_json, indent=1))
        try:
            timing = parse_timing(timing_json)
        except FormatError as e:  # the compile itself is fine; say why the timeline is missing
            timing_problem = str(e)
    diagnostics = parse_diagnostics(rest)
    if timing_problem:
        diagnostics.append(Diagnostic("warning", timing_problem))
    if returncode < 0:
        diagnostics.append(Diagnostic("error", f"iree-compile crashed (signal {-returncode})"))
    elif returncode != 0 and not any(d.severity == "error" for d in diagnostics):
        tail = rest.strip().splitlines()[-1:] or [f"exit code {returncode}"]
        diagnostics.append(Diagnostic("error", tail[0]))

    phases = _collect_phases(out, request)
    if request.dump_executables:
        _write_executable_files(out, request.module_name, phases)
    executables = _collect_executables(out, phases)
    vmfb = out / f"{request.module_name}.vmfb"
    executable_diagnostics: list[Diagnostic] = []
    failed: tuple[str, ...] = ()
    if returncode > 0 and any(p.phase == "executable-sources" for p in phases):
        executable_diagnostics, failed = _locate_failure(request, source_path, out, task, timeout_s)
    if returncode == 0 and vmfb.exists() and _lineage == Lineage():
        _write_record(out, request, cmd, source_path, elapsed)
    return Compilation(
        request=request,
        out_dir=out,
        module_name=request.module_name,
        source_path=source_path,
        command=tuple(cmd),
        returncode=returncode,
        elapsed_s=elapsed,
        phases=tuple(phases),
        executables=tuple(executables),
        timing=timing,
        diagnostics=tuple(diagnostics),
        vmfb_path=vmfb if returncode == 0 and vmfb.exists() else None,
        failed_executables=failed,
        executable_diagnostics=tuple(executable_diagnostics),
        parent=_lineage.parent,
        resumed_from=_lineage.resumed_from,
        substitutions=_lineage.substitutions,
    )


def _run_compiler(
    request: CompileRequest, cmd: list[str], out: Path, task: TaskState | None, timeout_s: float | None
) -> tuple[int, str, float]:
    """Run ``cmd`` (in ``request.named_in`` when set), reporting phases as they are written, until it ends or
    is cancelled (``CompileCancelled``, the compiler killed): its return code, stderr and seconds taken."""
    stderr_path = out / "stderr.raw.txt"
    start = time.monotonic()
    seen = phase_index(request.compile_from) if request.compile_from not in (None, "start") else 0
    with stderr_path.open("wb") as stderr_file:
        proc = _start(cmd, stderr=stderr_file, cwd=request.named_in)
        try:
            while True:
                try:
                    proc.wait(timeout=_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                _stop_if_cancelled(task, start, timeout_s)
                seen = _report_new_phases(task, out, seen, start)
        except CompileCancelled:
            _stop(proc)
            # iree-compile opens its output at the start: a killed compile leaves an empty .vmfb behind,
            # which would pass for a module. The snapshots it wrote stay; its stderr under the usual name.
            (out / f"{request.module_name}.vmfb").unlink(missing_ok=True)
            stderr_file.close()
            stderr_path.replace(out / "stderr.txt")
            raise
        finally:
            _stop(proc)
    elapsed = time.monotonic() - start
    _report_new_phases(task, out, seen, start)
    raw = stderr_path.read_text(errors="replace")
    stderr_path.unlink()
    return proc.returncode, raw, elapsed


RECORD = "compilation.json"  # written last, by a compile that succeeded: the folder is whole


def _collect_executables(out: Path, phases: list[PhaseSnapshot]):
    names: list[str] = []
    for phase in ("executable-sources", "hal"):
        snapshot = next((p for p in phases if p.phase == phase), None)
        if snapshot is not None:
            names += [n for n in executable_names(snapshot.text()) if n not in names]
    return collect_executables(out / "executables", names)


def _write_record(out: Path, request: CompileRequest, cmd: list[str], source_path: Path, elapsed: float) -> None:
    import json

    record = {"compiler": compiler_version(), "flags": list(request.compiler_flags()), "command": cmd,
              "source_path": str(source_path), "elapsed_s": elapsed}  # fmt: skip
    partial = out / f"{RECORD}.part"
    partial.write_text(json.dumps(record, indent=1))
    partial.replace(out / RECORD)


def load_compilation(request: CompileRequest, out_dir: Path | str) -> Compilation | None:
    """The successful compile of ``request`` that ``compile_program`` left in ``out_dir`` (its record names
    the same compiler and flags), read back from its files; None when there is none there, or not whole."""
    import json

    out = Path(out_dir)
    try:
        record = json.loads((out / RECORD).read_text())
        stderr = (out / "stderr.txt").read_text(errors="replace")
    except (OSError, ValueError):
        return None
    vmfb = out / f"{request.module_name}.vmfb"
    if record.get("compiler") != compiler_version() or record.get("flags") != list(request.compiler_flags()):
        return None
    if not vmfb.exists():
        return None
    timing = None
    diagnostics = parse_diagnostics(stderr)
    try:
        timing = parse_timing(json.loads((out / "timing.json").read_text()))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, FormatError) as e:
        diagnostics.append(Diagnostic("warning", f"timing.json: {e}"))
    phases = _collect_phases(out, request)
    return Compilation(
        request=request,
        out_dir=out,
        module_name=request.module_name,
        source_path=Path(record["source_path"]),
        command=tuple(record["command"]),
        returncode=0,
        elapsed_s=float(record["elapsed_s"]),
        phases=tuple(phases),
        executables=tuple(_collect_executables(out, phases)),
        timing=timing,
        diagnostics=tuple(diagnostics),
        vmfb_path=vmfb,
    )


def _collect_phases(out: Path, request: CompileRequest) -> list[PhaseSnapshot]:
    # Snapshots up to the resume point were placed there by resume_from_phase (copied or edited);
    # the compiler wrote the rest.
    start = phase_index(request.compile_from) if request.compile_from not in (None, "start") else 0
    phases = []
    found = find_snapshot_files(out)
    module = request.module_name
    if not any(s.module == module for s in found):
        # A bytecode source's module name cannot be read ahead: take the one module IREE wrote.
        modules = {s.module for s in found}
        if len(modules) == 1:
            module = modules.pop()
    for s in found:
        if s.module != module:
            continue
        origin = "compiled" if s.index > start else ("edited" if s.index == start else "inherited")
        phases.append(PhaseSnapshot(s.phase, s.index, s.path, origin))
    return phases


def _write_executable_files(out: Path, module: str, phases: list[PhaseSnapshot]) -> None:
    # IREE's file names: sources/module_<name>.mlir, configurations/configured_module_<name>.mlir, beside
    # <out>/<module>.vmfb (``executables.sources_beside`` finds them from the .vmfb). Each file is
    # self-contained: the op with the aliases and dense_resource blobs it uses (``extract_executables``).
    for phase, kind, prefix in (
        ("executable-sources", "sources", "module_"),
        ("executable-configurations", "configurations", "configured_module_"),
    ):
        snapshot = next((p for p in phases if p.phase == phase), None)
        if snapshot is None:
            continue
        folder = out / "executables" / kind
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in extract_executables(snapshot.text()).items():
            (folder / f"{prefix}{name}.mlir").write_text(text)


def _locate_failure(
    request: CompileRequest, source_path: Path, out: Path, task: TaskState | None, timeout_s: float | None
) -> tuple[list[Diagnostic], tuple[str, ...]]:
    """Compile again with IREE's executable dumps, which make IREE report an executable's errors at its
    dumped file: the diagnostics so located, and the executables they name."""
    dumps = out / "executables" / "failure"
    cmd = [iree_compile_path(), str(source_path), *request.compiler_flags()]
    cmd += [f"--iree-hal-dump-executable-{kind}-to={dumps / kind}" for kind in ("sources", "configurations")]
    cmd += ["--mlir-print-op-on-diagnostic=false", "-o", os.devnull]
    proc = _start(cmd, stderr=subprocess.PIPE, text=True)
    start = time.monotonic()
    try:
        while True:
            try:
                _, stderr = proc.communicate(timeout=_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            _stop_if_cancelled(task, start, timeout_s)
    finally:
        _stop(proc)
    located = []
    failed: list[str] = []
    for d in parse_diagnostics(stderr):
        if d.file is None or not Path(d.file).is_relative_to(dumps):
            continue
        located.append(d)
        name = Path(d.file).name.split(".")[0].removeprefix("configured_").removeprefix("module_")
        if d.severity == "error" and name not in failed:
            failed.append(name)
    return located, tuple(failed)
