"""Executable sources for a ``.vmfb`` that came without them: rebuilt from the program its debug locations
name, and kept only when the rebuild's executables are byte for byte the module's own.

A module keeps the file its host code came from in its debug database (``"model.mlir":12:3``). When that
file is still there, IREE Lens compiles it again for the target the module's executables were built for
(``engine.compiler``, which keeps the executables' sources beside its ``.vmfb``) and compares every embedded
executable with the rebuild's. Equal bytes mean the same kernels, so the rebuild's sources describe the
module's dispatches; any difference (other flags, another IREE, an edited program) and the rebuild is not
used: a source that does not match would present a guess as the tensor.

The rebuild tries the CPUs a user's llvm-cpu module most likely came from: IREE's default (a plain
``iree-compile``, no ``--iree-llvmcpu-target-cpu``), then ``host`` (IREE Lens's own compiles), then, where neither
gives the module's bytes, the CPU and features the module's host code records (``module_cpu_targets``; ``host``
is recorded resolved, as the machine's CPU name and features: a ``host`` build from another machine is rebuilt
for that machine's CPU). Each try is judged as the compiler writes its executables
(``--iree-hal-dump-executable-binaries-to``): the first binary that differs from the module's stops that
compile at once (``BinaryWatch``) instead of letting it write its phases and ``.vmfb``. That saves most where a
module has several executables (Vulkan, VMVX); llvm-cpu links every dispatch into one executable whose binary
comes near the end (transformer96: 293 s into a 296 s compile), so there the gain is the verdict, not the time.
A module whose executables no single target builds is not rebuilt at all.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from collections import Counter
from pathlib import Path

from engine.dispatch.typed_tensors import NO_SOURCES, ExecutableSources, read_sources
from engine.errors import CompileCancelled, LensError
from engine.kernel.executable_objects import search_folders, search_path_flags
from engine.runtime.hal.formats import EMBEDDED_ELF_X86_64, STATIC_LIBRARY, SYSTEM_ELF_X86_64, VMVX_BYTECODE

# The executable formats IREE Lens's compile targets produce (engine.compiler.targets keys).
FORMAT_TARGETS = {
    EMBEDDED_ELF_X86_64: "llvm-cpu",
    SYSTEM_ELF_X86_64: "llvm-cpu",  # rebuilt with SYSTEM_LINK_FLAG
    VMVX_BYTECODE: "vmvx",
    "vulkan-spirv-fb": "vulkan-spirv",
    STATIC_LIBRARY: "llvm-cpu",  # rebuilt with STATIC_FLAGS, judged by the object it writes
}
SYSTEM_LINK_FLAG = "--iree-llvmcpu-link-embedded=false"  # what builds system-elf libraries
STATIC_FLAGS = (SYSTEM_LINK_FLAG, "--iree-llvmcpu-link-static")
STATIC_OBJECT = "static_library.o"  # a rebuild's object, in its folder
_FILE = re.compile(r'^"([^"]+\.mlir(?:bc)?)":\d+')
# llvm-cpu target CPUs a rebuild tries, in order: IREE's default (no CPU flag: an empty value is the same),
# then IREE Lens's own default; then the CPU and features the module records (``_cpu_tries``).
CPU_CANDIDATES = ("", "host")
WATCH_INTERVAL_S = 0.25
WAIT_SAID_AFTER_S = 3.0  # a wait for a rebuild longer than this is said (SessionSources.wait)


def cpu_label(cpu: str) -> str:
    return "IREE's default CPU" if not cpu else f"target CPU {cpu}"


def _cpu_tries(module_path: Path, rebuilt_for: set[tuple[str, str]]):
    """``(cpu, features)`` of each llvm-cpu try, ``features`` None for the CPU's own: ``CPU_CANDIDATES``, then
    the one CPU and its features the module records when no try so far built for them (``rebuilt_for``, read
    as the tries go): a module compiled with ``--iree-llvmcpu-target-cpu=host`` on another machine records
    that machine's CPU, which neither candidate gives here."""
    for cpu in CPU_CANDIDATES:
        yield cpu, None
    recorded = module_cpu_targets(module_path)
    if len(recorded) == 1 and not recorded & rebuilt_for:
        [(cpu, features)] = recorded
        if cpu:  # an empty CPU is IREE's default, tried first
            yield cpu, features


class BinaryWatch:
    """Compares each executable binary a compile dumps (``module_<executable>_<format>.so``...) with the
    module's executable of that name as soon as it is written; the first that differs cancels the compile's
    ``task``. ``differs`` then names it. ``outer`` (a caller's task) cancels the compile too."""

    def __init__(self, folder: Path, original: dict[str, tuple[str, bytes]], task, outer=None):
        import threading

        self.folder, self.original, self.task, self.outer = folder, original, task, outer
        self.differs: str | None = None
        self.matched: set[str] = set()
        self._seen: set[str] = set()
        self._done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lens-rebuild-watch", daemon=True)

    def __enter__(self) -> BinaryWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self.thread.join()
        self.check()  # binaries written in the last moments

    def _run(self) -> None:
        while not self._done.wait(WATCH_INTERVAL_S):
            if self.outer is not None and self.outer.cancelled:
                self.task.cancel()
                return
            if self.check() is not None:
                self.task.cancel()
                return

    def executable_of(self, file_name: str) -> str | None:
        """The module's executable a dumped binary is (IREE names it ``<module>_<executable>_<format>.<ext>``)."""
        stem = Path(file_name).stem
        names = [n for n, (fmt, _) in self.original.items() if stem.endswith(f"_{n}_{fmt.replace('-', '_')}")]
        return max(names, key=len) if names else None

    def check(self) -> str | None:
        """Compare the binaries written since the last look; the first differing executable's name, if any."""
        if self.differs is not None or not self.folder.is_dir():
            return self.differs
        for path in sorted(self.folder.iterdir()):
            if path.name in self._seen:
                continue
            name = self.executable_of(path.name)
            if name is None:
                self._seen.add(path.name)
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue  # still being written: next look
            if len(data) < len(self.original[name][1]):
                continue  # still being written
            self._seen.add(path.name)
            if data != self.original[name][1]:
                self.differs = name
                return name
            self.matched.add(name)
        return None


def _none(note: str) -> ExecutableSources:
    return ExecutableSources({}, "none", None, {}, note)


def program_named_by(module_path: str | Path) -> Path | None:
    """The source file the module's debug locations name most often, if it exists (absolute, or relative
    to the module's folder or the current folder)."""
    found = program_as_named(module_path)
    return found[0] if found is not None else None


def program_as_named(module_path: str | Path) -> tuple[Path, Path | None] | None:
    """``program_named_by``'s file, absolute, and the folder its compile ran in when the module names it by
    a relative path (None for an absolute one): IREE records the path as the compile was given it in the
    kernels' debug information, so a rebuild that names it otherwise gives other executables (a plain
    ``iree-compile model.mlir`` in the model's folder was never rebuilt byte for byte)."""
    from engine.runtime.vmfb.module import open_vmfb

    try:
        db = open_vmfb(module_path).debug_database
        texts = db.location_texts if db is not None else []
    except LensError:
        return None
    names = Counter(m[1] for t in texts if (m := _FILE.match(t)))
    for name, _ in names.most_common():
        # Absolute, or relative to the current folder; else beside the module.
        path = Path(name)
        if path.is_absolute():
            if path.is_file():
                return path, None
            continue
        for folder in (Path.cwd(), Path(module_path).parent.absolute()):
            if (folder / path).is_file():
                return folder / path, folder
    return None


def _executables(module_path: str | Path) -> dict[str, tuple[str, bytes]]:
    """Each executable's (format, bytes); a static library's bytes are its name and its object's digest (the
    code is in the object the build wrote, found as the debug engine finds it)."""
    from engine.runtime.hal.static_libraries import static_object
    from engine.runtime.vmfb.module import open_vmfb

    module = open_vmfb(module_path)
    digest = b""  # of the static libraries' one object, read once for all of them
    if any(e.format == STATIC_LIBRARY for e in module.executables):
        obj = static_object(module, module_path)[0]
        digest = b"\0object " + (hashlib.sha256(obj.read_bytes()).hexdigest().encode() if obj else b"none")
    return {e.name: (e.format, bytes(e.data) + (digest if e.format == STATIC_LIBRARY else b""))
            for e in module.executables}  # fmt: skip


def _calls_modules_only(module_path: str | Path) -> bool:
    """Whether the module holds no executables and calls compiled modules (a pipeline of IREE's
    samples/multiple_modules): its dispatches are theirs."""
    from engine.runtime.module_dependencies import called_modules
    from engine.runtime.vmfb.module import open_vmfb

    try:
        module = open_vmfb(module_path)
        return not module.executables and bool(called_modules(module))
    except LensError:
        return False


def called_modules_sources(module_path: str | Path, timeout_s: float | None = 900, task=None) -> ExecutableSources:
    """The sources of a module with no executables of its own: those of the compiled modules it calls (each
    found beside it or rebuilt and checked, as its own would be: ``found_or_rebuilt``), one export table. An
    export name two of them declare is left out, untyped (which module a dispatch of that name ran is not
    known from its name)."""
    from engine.runtime.module_dependencies import linked_modules

    try:
        linked = linked_modules(module_path)
    except LensError as e:
        return _none(f"the module holds no executables, and the modules it calls are not here: {e}")
    interfaces: dict = {}
    files: dict[str, str] = {}
    seen: dict[str, str] = {}
    twice: set[str] = set()
    notes, paths = [], []
    for module in linked:
        found = found_or_rebuilt(module.path, timeout_s, task)
        if not found.found:
            notes.append(f"@{module.name}: {found.note}")
            continue
        paths.append(f"@{module.name}: {found.path}")
        for export, interface in found.interfaces.items():
            if export in seen and seen[export] != module.name:
                twice.add(export)
            seen[export] = module.name
            interfaces[export] = interface
            if export in found.files:
                files[export] = found.files[export]
    for export in twice:
        interfaces.pop(export, None)
        files.pop(export, None)
    if twice:
        notes.append(f"{len(twice)} export names declared by two modules are left untyped ({', '.join(sorted(twice)[:4])})")
    if not interfaces:
        return _none("the module holds no executables: " + ("; ".join(notes) or "the modules it calls hold none"))
    note = f"the sources of the modules it calls ({'; '.join(paths)})" + (f"; {'; '.join(notes)}" if notes else "")
    return ExecutableSources(interfaces, "of the modules it calls", "; ".join(paths), files, note)


def found_or_rebuilt(module_path: str | Path, timeout_s: float | None = 900, task=None) -> ExecutableSources:
    """The module's executable sources as the debugger finds them: a sources folder beside it, else a rebuild
    of the program its debug locations name (``rebuild_sources``; ``task`` cancels it); none, with a note
    saying why, else."""
    from engine.dispatch.typed_tensors import find_sources

    found = find_sources(module_path)
    return found if found.found else rebuild_sources(module_path, timeout_s=timeout_s, task=task)


def other_build_sources(
    module_a: str | Path, module_b: str | Path, sources_a: ExecutableSources
) -> tuple[ExecutableSources, str]:
    """The sources that type build B's dispatches where it is compared with A (typed by ``sources_a``), and a
    sentence saying which. A's, where B dispatches exactly A's exports: the same dispatches were formed (the
    same program and flags for another target, or a kernel edited or substituted), and an export's interface
    is fixed before any target's code generation. Else B formed its dispatches otherwise (another optimization
    level, fusion flags), and an export of A's name may bind other tensors (a layout propagated, a producer
    fused): B's own sources found beside it, else none; the lockstep then types by A's only a B dispatch that
    binds the same ranges as its counterpart in A (``lockstep.run_lockstep``'s ``interfaces_b``). B is not
    rebuilt: built with other flags than its program's defaults, a rebuild would not give its executables, and
    would learn that only at the end of up to three whole compiles (minutes for transformer96)."""
    from engine.dispatch.typed_tensors import dispatched_exports, find_sources

    if Path(module_a).resolve() == Path(module_b).resolve():
        return sources_a, ""
    exports_a, exports_b = dispatched_exports(Path(module_a)), dispatched_exports(Path(module_b))
    if exports_a and exports_a == exports_b:
        said = f"B's as A's (B dispatches the same {len(exports_b)} exports)" if sources_a.found else ""
        return sources_a, said
    own = find_sources(module_b)
    other = len(exports_b - exports_a)
    why = f"B dispatches {other} exports A does not (of {len(exports_b)}): it formed its dispatches otherwise"
    if own.found:
        return own, f"B's by {own.describe()} ({why})"
    return own, (f"B's by A's sources only where a dispatch binds the same ranges as its counterpart in A, else "
                 f"as their bytes ({why}; none of its own beside it, as {Path(module_b).stem}.sources/ from "
                 "--iree-hal-dump-executable-sources-to, and such a build is not rebuilt)")  # fmt: skip


def rebuild_sources(
    module_path: str | Path, cache_dir: str | Path | None = None, timeout_s: float | None = 900, task=None
) -> ExecutableSources:
    """Sources for ``module_path`` rebuilt from the program its debug locations name (``origin``
    ``rebuilt``), or none with a ``note`` saying why. The rebuild is kept in ``cache_dir`` (by default a
    folder of the temporary directory named after the module's bytes), so a module is rebuilt once.
    ``task`` (an ``engine.compiler.task.TaskState``) cancels the rebuild: its compiler is killed at once."""
    module_path = Path(module_path)
    if _calls_modules_only(module_path):
        return called_modules_sources(module_path, timeout_s, task)
    found = program_as_named(module_path)
    if found is None:
        return _none("the program the module's debug locations name is not here")
    program, named_in = found
    try:
        original = _executables(module_path)
    except LensError as e:
        return _none(f"cannot read the module's executables: {e}")
    if not original:
        return _none("the module holds no executables")
    targets = {FORMAT_TARGETS.get(fmt) for fmt, _ in original.values()}
    if len(targets) != 1 or None in targets:
        formats = ", ".join(sorted({fmt for fmt, _ in original.values()})) or "none"
        return _none(f"no single IREE Lens target builds these executables ({formats})")
    target = targets.pop()
    # Keyed by the module's bytes and the program's path and time: an edited program is rebuilt again.
    key = hashlib.sha256(module_path.read_bytes())
    key.update(f"{program}\n{program.stat().st_mtime_ns}".encode())
    digest = key.hexdigest()[:20]
    from engine.folder_lock import folder_lock
    from engine.temp_caches import cache_root

    out = Path(cache_dir).absolute() if cache_dir is not None else cache_root("iree-lens-rebuilt") / digest

    # The flags the module records (microkernels, data tiling) are read from it, not known: where a rebuild with
    # them differs, one without them is tried too (in a folder of its own, its verdict kept apart).
    recorded = recorded_flags(module_path)
    tries = [(out, recorded), (out.with_name(out.name + "-plain"), ())] if recorded else [(out, ())]
    # Object files the program's executables link (hal.executable.object) are looked for as they would be.
    objects = tuple(search_path_flags(search_folders(module_path, program)))
    found = NO_SOURCES
    for folder, extra in tries:
        # Two processes debugging the same module (two windows, a test run's workers) share ``folder``: the
        # second waits for the first's verdict instead of emptying its rebuild half way.
        with folder_lock(folder, (lambda: task.cancelled) if task is not None else None) as held:
            if not held:
                return _none("the rebuild was stopped while another process was rebuilding the same module")
            flags = (*_build_flags(original, folder), *extra, *objects)
            found = _rebuild_or_reuse(module_path, program, named_in, target, original, folder, task, timeout_s, flags)
        if found.found or (task is not None and task.cancelled):
            return found
    return found


def _build_flags(original, out: Path) -> tuple[str, ...]:
    """The flags besides the target that the rebuild needs to give the module's executables, as far as the
    module shows them: a system link of its CPU libraries; a static link, its object written in ``out``.
    (An inline-HAL build, ``--iree-execution-model=inline-dynamic``, is rebuilt without that flag: IREE's
    inline pipeline dumps no sources, and the default one gives the same kernels under other executable
    names, which ``_same_executables`` allows.)"""
    formats = {fmt for fmt, _ in original.values()}
    if STATIC_LIBRARY in formats:
        return (*STATIC_FLAGS, f"--iree-llvmcpu-static-library-output-path={out / STATIC_OBJECT}")
    return (SYSTEM_LINK_FLAG,) if SYSTEM_ELF_X86_64 in formats else ()


_UKERNELS = re.compile(rb'\bukernels = "([\w,-]+)"')  # in an llvm-cpu executable target the host code records
# The exports of the dispatches data tiling adds (``mm_dispatch_0`` stays; ``_encoding_0_encode_...`` is new).
_ENCODING_EXPORT = re.compile(rb"_encoding_\d+_(?:encode|set_encoding|unset_encoding)_")
DATA_TILING_FLAG = "--iree-dispatch-creation-data-tiling"


def recorded_flags(module_path: str | Path) -> tuple[str, ...]:
    """Flags the module's build was given, as far as the module records them: microkernels (its llvm-cpu target
    keeps ``ukernels = "all"``), data tiling (its encoding dispatches). A rebuild is judged by its bytes, so
    a flag read wrongly costs a compile, never a wrong type."""
    import mmap

    try:
        with open(module_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            found = _UKERNELS.search(data)
            ukernels = bytes(found[1]).decode() if found else None
            tiled = _ENCODING_EXPORT.search(data) is not None
    except (OSError, ValueError):
        return ()
    flags = (f"--iree-llvmcpu-enable-ukernels={ukernels}",) if ukernels else ()
    return (*flags, DATA_TILING_FLAG) if tiled else flags


def _same_executables(rebuilt: dict[str, tuple[str, bytes]], original: dict[str, tuple[str, bytes]]) -> bool:
    """Whether a rebuild gave the module's executables: the same (format, bytes) under the same names, or under
    other names (an inline-HAL build names its executables after the variant: the kernels' export names, which
    the sources are read by, are inside the bytes)."""
    return rebuilt == original or sorted(rebuilt.values()) == sorted(original.values())


def _rebuild_or_reuse(
    module_path: Path, program: Path, named_in: Path | None, target: str, original, out: Path, task, timeout_s,
    build_flags: tuple[str, ...] = (),
):
    """The verdict kept in ``out`` if there is one, else a rebuild judged now (``rebuild_sources``)."""
    sources = out / "executables" / "sources"
    verdict, differs = out / "identical", out / "differs"
    if differs.exists():
        return _none(differs.read_text().strip())
    if not verdict.exists():
        tried, rebuilt_for = [], set()
        for cpu, features in _cpu_tries(module_path, rebuilt_for) if target == "llvm-cpu" else ((None, None),):
            outcome = _rebuild_once(program, named_in, target, cpu, original, out, task, timeout_s, features,
                                    build_flags)  # fmt: skip
            if isinstance(outcome, ExecutableSources) and (features is None or (task is not None and task.cancelled)):
                return outcome  # stopped by the caller, or the compiler failed: no verdict kept
            if isinstance(outcome, ExecutableSources):  # the recorded CPU's features unknown to this LLVM, say
                outcome = outcome.note
            if outcome is None:
                break  # identical
            tried.append(outcome)
            rebuilt_for |= cpu_targets(_phase_heads(out))
        else:
            note = (
                f"{program.name} rebuilt for {target} gives other executables than the module's "
                f"({'; '.join(tried)}: other flags or another IREE): its sources are not used"
            )
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True, exist_ok=True)
            differs.write_text(note + "\n")
            return _none(note)
        verdict.write_text(f"{module_path}\n{program}\n")
    found = read_sources([sources], "rebuilt") if sources.is_dir() else NO_SOURCES
    if not found.found:
        return _none(f"the rebuild of {program.name} kept no executable sources")
    return ExecutableSources(found.interfaces, "rebuilt", str(program), found.files,
                             f"rebuilt from {program} ({target}); executables identical to the module's",
                             str(out))  # fmt: skip


# An llvm-cpu executable target as the module and IREE's dumped sources spell it (IREE resolves ``host`` to
# the machine's CPU name and features when it compiles).
_CPU_TARGET = re.compile(rb'#hal\.executable\.target<"llvm-cpu", "[^"]*", \{cpu = "([^"]*)", cpu_features = "([^"]*)"')


def cpu_targets(texts) -> set[tuple[str, str]]:
    """The llvm-cpu ``(cpu, cpu_features)`` pairs of the executable targets written in ``texts`` (bytes)."""
    return {(m[1].decode(), m[2].decode()) for text in texts for m in _CPU_TARGET.finditer(text)}


def module_cpu_targets(module_path: str | Path) -> set[tuple[str, str]]:
    """The llvm-cpu targets a module records (its host code keeps the device target it was built for, in the
    message it gives where no device can run it); empty when none is read."""
    import mmap

    try:
        with open(module_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return cpu_targets([data])
    except (OSError, ValueError):  # unreadable, or empty (mmap refuses a file of no bytes)
        return set()


def _phase_heads(out: Path):
    """The beginnings of a try's phase snapshots (``<module>.<n>.<phase>.mlir``, written as the compile goes, so
    there even where the watch stopped it): the device target, IREE's ``host`` resolved, comes first."""
    for path in sorted(out.glob("*.mlir")):
        with path.open("rb") as f:
            yield f.read(1 << 18)


def _rebuild_once(
    program: Path,
    named_in: Path | None,
    target: str,
    cpu: str | None,
    original,
    out: Path,
    task,
    timeout_s,
    features: str | None = None,
    build_flags: tuple[str, ...] = (),
):
    """One compile of ``program`` into ``out`` (run in ``named_in``, the program named relative to it, where
    the module's locations name it so; for ``cpu`` with its ``features`` if given): None when its executables
    are the module's; else what differed (a short text); an ``ExecutableSources`` with a note when it could
    not be judged (cancelled, failed)."""
    from engine.compiler.job import compile_program
    from engine.compiler.request import CompileRequest
    from engine.compiler.task import TaskState

    if out.exists():  # an interrupted or refused rebuild: start again (compile_program wants an empty folder)
        shutil.rmtree(out, ignore_errors=True)
    how = f"{target}, {cpu_label(cpu)}" if cpu is not None else target
    if features is not None:
        how += " with the module's recorded features"
    own = TaskState()
    flags = (f"--iree-llvmcpu-target-cpu-features={features}",) if features is not None else ()
    flags += build_flags
    request = CompileRequest.from_file(program, target=target, target_cpu=cpu, named_in=named_in, extra_flags=flags)
    with BinaryWatch(out / "executables" / "binaries", original, own, outer=task) as watch:
        try:
            compilation = compile_program(request, out_dir=out, task=own, timeout_s=timeout_s)
        except CompileCancelled as e:
            compilation = None
            if watch.differs is None and not watch.check():
                shutil.rmtree(out, ignore_errors=True)  # not a verdict: the next session rebuilds again
                return _none(f"rebuilding {program.name} stopped: {e}")
        except LensError as e:
            return _none(f"rebuilding {program.name} failed: {e}")
    if watch.differs is not None:
        return f"{how}: executable {watch.differs} differs, compile stopped there"
    if compilation is None or not compilation.ok or compilation.vmfb_path is None:
        return _none(f"rebuilding {program.name} for {how} failed")
    rebuilt = _executables(compilation.vmfb_path)
    if not _same_executables(rebuilt, original):
        return f"{how}: {sum(rebuilt.get(n) != v for n, v in original.items())} of {len(original)} executables differ"
    return None


class SessionSources:
    """The executable sources of a session's module: those named or found beside it at open; else, the
    first time a dispatch's tensors are asked for, rebuilt on a thread (``rebuild_sources``). Until then,
    and if the rebuild is not used, tensors are untyped and say why (``ExecutableSources.note``).
    ``tell(text)`` reports the rebuild's outcome (a session's ``Log``); ``holder`` (the debug session's
    ``DispatchSnapshots``, which types every dispatch by them) gets each new value as its ``sources`` too."""

    def __init__(self, module_path: str | Path, given=(), rebuild: bool = True, tell=None, holder=None):
        from engine.dispatch.typed_tensors import find_sources

        self.module_path = Path(module_path)
        self.rebuild = rebuild
        self.tell = tell
        self.holder = holder
        self.thread = None
        self._task = None  # the rebuild's TaskState: ``close`` cancels it
        self.sources = find_sources(module_path, given)

    @property
    def sources(self) -> ExecutableSources:
        return self._sources

    @sources.setter
    def sources(self, found: ExecutableSources) -> None:
        self._sources = found
        if self.holder is not None:
            self.holder.sources = found

    @property
    def may_come(self) -> bool:
        """Whether the sources are here or a rebuild may yet bring them (not tried, or running): what is
        followed from the start of a run for them (the device's transfers) must be followed until then."""
        return self.sources.found or (self.rebuild and (self.thread is None or bool(self.thread and self.thread.is_alive())))

    def ensure(self) -> None:
        """Start the rebuild if it may help and has not started (cheap to call at every request)."""
        import threading

        if self.sources.found or not self.rebuild or self.thread is not None:
            return
        program = program_named_by(self.module_path)
        if program is None and not _calls_modules_only(self.module_path):
            self.sources = _none("no sources beside the module, and the program its debug locations "
                                           "name is not here")  # fmt: skip
            self.thread = False  # nothing to rebuild
            return
        from engine.compiler.task import TaskState

        what = program if program is not None else "the programs of the modules it calls"
        self.sources = _none(
            f"rebuilding the executables' sources from {what} to check they are the module's; until that "
            "is known the tensors are untyped (a rebuild whose executables differ is not used)"
        )
        self._task = TaskState()
        self.thread = threading.Thread(target=self._rebuild, name="lens-rebuild-sources", daemon=True)
        self.thread.start()

    def wait(self, given_up=None, why: str = "to type the tensors") -> bool:
        """Until a rebuild in progress is done (it is bounded by ``rebuild_sources``'s own time limit); one that
        takes more than a moment is said, so a script waiting on it is not silent for minutes. ``given_up()``,
        asked a few times a second, ends the wait early (a user's Stop): False then, the rebuild going on."""
        if not self.thread:
            return True
        said = False
        started = time.monotonic()
        while self.thread.is_alive():
            if given_up is not None and given_up():
                return False
            if not said and time.monotonic() - started >= WAIT_SAID_AFTER_S:
                said = True
                if self.tell is not None:
                    program = program_named_by(self.module_path) or "the programs of the modules it calls"
                    self.tell(f"waiting for the rebuild of the executables' sources from {program} {why} "
                              "(minutes on a large model; kept for the next time)")  # fmt: skip
            self.thread.join(0.2)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Stop a rebuild still running (its compiler is killed) and wait for its thread: a session that
        ends must leave no compiler behind, nor a thread that outlives the process's exit."""
        if self._task is not None:
            self._task.cancel()
        if self.thread:
            self.thread.join(timeout)

    def _rebuild(self) -> None:
        try:
            found = rebuild_sources(self.module_path, task=self._task)
        except Exception as e:  # noqa: BLE001 - a failed rebuild leaves the tensors untyped, said so
            found = _none(f"rebuilding the sources failed: {type(e).__name__}: {e}")
        self.sources = found
        if self.tell is not None:
            self.tell(found.note if found.found else f"tensors stay untyped: {found.note}")
