"""Where each dispatch of a compilation appears: phase snapshots, executable files, host-code call sites.

A dispatch is known by IREE's name for its executable (``main_dispatch_0``) and by the names of its
exports (entry points, ``main_dispatch_0_matmul_4x16x8_f32``). The index finds, by reading the phase
snapshots as text:

* ``dispatch-creation``: the ``flow.dispatch.workgroups`` regions, which have no name yet. They are named
  by position: inside one host function, the k-th region is outlined into the k-th ``flow.dispatch`` of
  the same function in the ``flow`` snapshot (outlining and deduplication keep the op order; deduplication
  only renames the callee, so two regions can map to one executable). When the counts differ the regions
  are left unnamed rather than guessed.
* ``flow`` / ``stream``: the ``flow.executable`` / ``stream.executable`` definitions, their exports, and the
  uses ``flow.dispatch @exe::@export`` / ``stream.cmd.dispatch @exe::@export`` (by name).
* ``executable-sources`` … ``executable-targets``: the ``hal.executable`` definitions and export lines.
* ``hal``: the executable an export ended up in after linking (``<module>_linked`` on CPU targets), from
  the ``hal.executable.lookup.function ... function(@exe::@variant::@export)`` lines.

The files come from the compilation's executable dumps: the dispatch's own source and configuration,
and the intermediates / binaries of the executable it was linked into (LLVM IR, assembly, SPIR-V as
``spirv-dis`` text when the tool is installed, SPIR-V dialect MLIR).

Call sites in a loaded ``.vmfb`` come from ``engine.runtime.vmfb.call_sites``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.compiler.executables import ExecutableArtifacts
from engine.compiler.phases import PHASES
from engine.runtime.vmfb.call_sites import CallSite, dispatch_call_sites

if TYPE_CHECKING:
    from engine.compiler.compilation import Compilation
    from engine.runtime.vmfb.module import VmfbModule

# The phases the index reads, in order. The first three are where dispatches are formed and scheduled.
INDEXED_PHASES: tuple[str, ...] = PHASES[PHASES.index("dispatch-creation") : PHASES.index("hal") + 1]

_SYM = r"[\w$.-]+"
_HOST_FUNCTION = re.compile(rf"^  (?:util\.func|func\.func) (?:(?:public|private|nested) )?@({_SYM})")
_EXECUTABLE = re.compile(rf"^  (flow|stream|hal)\.executable (?:(?:public|private|nested) )?@({_SYM})")
_EXPORT = re.compile(rf"^\s+(?:flow|stream|hal)\.executable\.export (?:(?:public|private) )?@({_SYM})")
_NESTED_REF = re.compile(rf"@({_SYM})::@({_SYM})(?:::@({_SYM}))?")
_USE_OPS = (
    "flow.dispatch @",
    "stream.cmd.dispatch",
    "stream.async.dispatch",
    "hal.executable.lookup.function",
)
_TEXT_LIMIT = 240
_CACHE_SIZE = 4
_CACHE: OrderedDict[tuple, DispatchIndex] = OrderedDict()
_CACHE_LOCK = threading.Lock()


@dataclass(frozen=True)
class IrLocation:
    """One line of a phase snapshot that belongs to a dispatch (lines count from 1).

    ``role``: ``region`` (a ``flow.dispatch.workgroups`` in dispatch-creation), ``executable`` (the
    definition of its executable), ``export`` (an export line inside it), ``dispatch`` (a use in host code)
    or ``lookup`` (``hal.executable.lookup.function``). ``end_line`` is the last line of the op's region.
    ``function`` is the host function a use or region is in.
    """

    phase: str
    line: int
    end_line: int
    role: str
    text: str
    function: str | None = None


@dataclass(frozen=True)
class CodeFile:
    """One file of generated code for a dispatch: ``kind`` is ``source``, ``configuration``, ``llvm-ir``,
    ``assembly``, ``spirv`` (a ``.spv`` binary, shown through ``spirv-dis``) or ``spirv-mlir``."""

    kind: str
    label: str
    path: Path

    def text(self) -> str:
        """The file as text; a SPIR-V binary as ``spirv-dis`` prints it (a note when the tool is missing)."""
        if self.kind == "spirv":
            import numpy as np

            from engine.runtime.vmfb.executables import spirv_disassembly

            words = np.frombuffer(self.path.read_bytes(), dtype="<u4")
            text = spirv_disassembly(words)
            return text if text is not None else "; spirv-dis is not installed or failed on this binary\n"
        return self.path.read_text(errors="replace")

    def symbol_line(self, text: str, export: str) -> int | None:
        """The 1-based line of ``text`` (this file's text) where ``export``'s code starts, if found."""
        return symbol_line(text, self.kind, export)


@dataclass(frozen=True)
class Dispatch:
    """One dispatch (an executable of the ``flow`` phase) and everything the index found for it."""

    name: str
    exports: tuple[str, ...]
    hal_executable: str | None  # the executable it is in after linking (itself when unlinked)
    locations: tuple[IrLocation, ...]
    source: Path | None
    configuration: Path | None
    code_files: tuple[CodeFile, ...] = ()

    def in_phase(self, phase: str) -> tuple[IrLocation, ...]:
        return tuple(loc for loc in self.locations if loc.phase == phase)

    def line_in(self, phase: str) -> int | None:
        """The line to show for this dispatch in ``phase``: its executable's definition, else its first
        region or use; None when it does not appear there."""
        found = self.in_phase(phase)
        for role in ("executable", "region", "dispatch", "lookup", "export"):
            for loc in found:
                if loc.role == role:
                    return loc.line
        return None


@dataclass
class DispatchIndex:
    """The dispatches of one compilation, by IREE's names (see the module docstring for how)."""

    dispatches: tuple[Dispatch, ...]
    # Notes about what could not be matched (e.g. regions whose count differs from the flow phase).
    notes: tuple[str, ...] = ()
    _by_export: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_export = {e: d.name for d in self.dispatches for e in d.exports}

    # -- building ---------------------------------------------------------------------------------------

    @classmethod
    def from_compilation(cls, compilation: Compilation) -> DispatchIndex:
        texts = {}
        for snapshot in compilation.phases:
            if snapshot.phase in INDEXED_PHASES and snapshot.path.exists():
                texts[snapshot.phase] = snapshot.text()
        return cls.from_phase_texts(texts, compilation.executables)

    @classmethod
    def cached(cls, compilation: Compilation) -> DispatchIndex:
        """``from_compilation``, remembered for the last few compilations (views that follow one
        compilation share one index; an edited snapshot file, by modification time and size, rebuilds it)."""
        key = (
            str(compilation.out_dir),
            tuple(
                (s.phase, str(s.path), *_stamp(s.path))
                for s in compilation.phases
                if s.phase in INDEXED_PHASES
            ),
        )
        with _CACHE_LOCK:
            found = _CACHE.get(key)
            if found is not None:
                _CACHE.move_to_end(key)
                return found
        index = cls.from_compilation(compilation)
        with _CACHE_LOCK:
            _CACHE[key] = index
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        return index

    @classmethod
    def from_phase_texts(
        cls, texts: Mapping[str, str], executables: Iterable[ExecutableArtifacts] = ()
    ) -> DispatchIndex:
        """Build the index from phase snapshot texts (by phase name); absent phases are skipped."""
        locations: dict[str, list[IrLocation]] = {}
        exports: dict[str, list[str]] = {}
        order: list[str] = []
        hal_of_export: dict[str, str] = {}
        notes: list[str] = []

        def add(name: str, loc: IrLocation) -> None:
            if name not in locations:
                locations[name] = []
                order.append(name)
            locations[name].append(loc)

        flow_uses: dict[str, list[str]] = {}
        later_exports: dict[str, list[str]] = {}
        for phase in INDEXED_PHASES:
            text = texts.get(phase)
            if text is None or phase == "dispatch-creation":
                continue
            lines = text.splitlines()
            for loc, names in _scan(phase, lines):
                exe, export = names
                if phase == "hal" and loc.role == "lookup":
                    hal_of_export.setdefault(export, exe)
                    add(exe, loc)  # filed under the hal executable; regrouped below
                    continue
                if phase == "hal" and loc.role == "executable":
                    add(exe, loc)
                    continue
                add(exe, loc)
                if export and loc.role == "export" and phase not in ("flow", "stream"):
                    later = later_exports.setdefault(exe, [])
                    if export not in later:
                        later.append(export)
                if export and loc.role == "export" and phase in ("flow", "stream"):
                    exports.setdefault(exe, [])
                    if export not in exports[exe]:
                        exports[exe].append(export)
                if phase == "flow" and loc.role == "dispatch":
                    flow_uses.setdefault(loc.function or "", []).append(exe)

        # Exports seen only after the flow phase (a compilation resumed from a later phase).
        for name, later in later_exports.items():
            exports.setdefault(name, later)

        creation = texts.get("dispatch-creation")
        if creation is not None:
            notes += _name_regions(creation.splitlines(), flow_uses, add)

        # The hal phase names the linked executable; its lookups belong to the dispatch of the export.
        linked_names = set(hal_of_export.values()) - set(exports)
        artifacts = {a.name: a for a in executables}
        result = []
        for name in order:
            if name in linked_names:
                continue
            own = [loc for loc in locations[name] if not (loc.phase == "hal" and loc.role == "lookup")]
            hal_exe = next((hal_of_export[e] for e in exports.get(name, ()) if e in hal_of_export), None)
            if hal_exe is None and any(loc.phase == "hal" for loc in locations[name]):
                hal_exe = name
            for linked in {hal_exe} & linked_names:
                own += [loc for loc in locations[linked] if loc.role == "executable"]
            lookups = [
                loc
                for exe in ({name, hal_exe} - {None})
                for loc in locations.get(exe, ())
                if loc.phase == "hal"
                and loc.role == "lookup"
                and _lookup_export(loc.text) in exports.get(name, ())
            ]
            own += lookups
            own.sort(key=lambda loc: (INDEXED_PHASES.index(loc.phase), loc.line))
            mine = artifacts.get(name)
            linked_art = artifacts.get(hal_exe) if hal_exe else None
            result.append(
                Dispatch(
                    name=name,
                    exports=tuple(exports.get(name, ())),
                    hal_executable=hal_exe,
                    locations=tuple(own),
                    source=mine.source if mine else None,
                    configuration=mine.configuration if mine else None,
                    code_files=_code_files(mine, linked_art, exports.get(name, ())),
                )
            )
        return cls(tuple(result), tuple(notes))

    # -- queries ----------------------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dispatches]

    def __len__(self) -> int:
        return len(self.dispatches)

    def __iter__(self):
        return iter(self.dispatches)

    def __contains__(self, name: object) -> bool:
        return any(d.name == name for d in self.dispatches)

    def get(self, name: str) -> Dispatch:
        """A dispatch by its executable name or one of its export names (KeyError if none)."""
        name = self._by_export.get(name, name)
        for d in self.dispatches:
            if d.name == name:
                return d
        raise KeyError(f"no dispatch named {name!r}")

    def dispatch_of_export(self, export: str) -> str | None:
        return self._by_export.get(export)

    def call_sites(self, module: VmfbModule, name: str | None = None) -> list[CallSite]:
        """The dispatch calls in ``module``'s host code for dispatch ``name`` (all resolved ones if None)."""
        sites = dispatch_call_sites(module)
        if name is None:
            return [s for s in sites if s.export in self._by_export]
        wanted = set(self.get(name).exports)
        return [s for s in sites if s.export in wanted]


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


# -- phase scanning ---------------------------------------------------------------------------------------


def _clip(line: str) -> str:
    s = line.strip()
    return s if len(s) <= _TEXT_LIMIT else s[:_TEXT_LIMIT] + "…"


def _end_line(lines: list[str], i: int) -> int:
    """The 1-based last line of the op starting at index ``i`` (its closing ``}`` at the same indent)."""
    line = lines[i].rstrip()
    if not (line.endswith("{") or line.endswith("=")):
        return i + 1
    indent = len(line) - len(line.lstrip())
    for j in range(i + 1, len(lines)):
        other = lines[j]
        stripped = other.strip()
        if not stripped:
            continue
        own = len(other) - len(other.lstrip())
        if own < indent:
            return j  # malformed: the enclosing region closed first
        if own == indent and stripped.startswith("}") and not stripped.endswith("{"):
            return j + 1
    return len(lines)


def _scan(phase: str, lines: list[str]):
    """Yield (IrLocation, (executable, export)) for definitions, exports and uses in one snapshot."""
    current_exe: str | None = None
    host: str | None = None
    initializers = 0
    for i, line in enumerate(lines):
        if line.startswith("  ") and not line.startswith("   "):
            m = _EXECUTABLE.match(line)
            if m:
                current_exe, host = m[2], None
                yield IrLocation(phase, i + 1, _end_line(lines, i), "executable", _clip(line)), (m[2], None)
                continue
            m = _HOST_FUNCTION.match(line)
            if m:
                current_exe, host = None, m[1]
                continue
            if line.startswith("  util.initializer"):
                current_exe, host = None, f"util.initializer#{initializers}"
                initializers += 1
                continue
        if current_exe is not None and ".executable.export" in line:
            m = _EXPORT.match(line)
            if m:
                yield (
                    IrLocation(phase, i + 1, _end_line(lines, i), "export", _clip(line)),
                    (current_exe, m[1]),
                )
            continue
        if host is None or "@" not in line or not any(op in line for op in _USE_OPS):
            continue
        role = "lookup" if "hal.executable.lookup.function" in line else "dispatch"
        seen = set()
        for m in _NESTED_REF.finditer(line):
            exe, export = m[1], (m[3] or m[2])
            if (exe, export) in seen:
                continue
            seen.add((exe, export))
            loc = IrLocation(phase, i + 1, _end_line(lines, i), role, _clip(line), host)
            yield loc, (exe, export)


def _lookup_export(text: str) -> str | None:
    m = _NESTED_REF.search(text)
    return (m[3] or m[2]) if m else None


def _name_regions(lines: list[str], flow_uses: dict[str, list[str]], add) -> list[str]:
    """Name the dispatch-creation regions by position against the flow phase's uses (see module doc)."""
    per_function: dict[str, list[tuple[int, str | None]]] = {}
    host: str | None = None
    initializers = 0
    for i, line in enumerate(lines):
        if line.startswith("  ") and not line.startswith("   "):
            m = _HOST_FUNCTION.match(line)
            if m:
                host = m[1]
            elif line.startswith("  util.initializer"):
                host = f"util.initializer#{initializers}"
                initializers += 1
            elif _EXECUTABLE.match(line):
                host = None
        if host is None:
            continue
        if "flow.dispatch.workgroups" in line:
            per_function.setdefault(host, []).append((i, None))
        elif "flow.dispatch @" in line:
            m = _NESTED_REF.search(line)
            if m:
                per_function.setdefault(host, []).append((i, m[1]))
    notes = []
    for function, entries in per_function.items():
        named = flow_uses.get(function, [])
        if len(named) != len(entries):
            notes.append(
                f"dispatch-creation: {len(entries)} dispatch regions in @{function} but {len(named)} "
                "flow.dispatch ops in the flow phase; regions left unnamed"
            )
            continue
        for (i, own_name), name in zip(entries, named):
            role = "region" if own_name is None else "dispatch"
            add(
                own_name or name,
                IrLocation("dispatch-creation", i + 1, _end_line(lines, i), role, _clip(lines[i]), function),
            )
    return notes


# -- generated code files -------------------------------------------------------------------------------

_CODE_SUFFIXES = (
    (".linked.ll", "llvm-ir", "LLVM IR (linked)"),
    (".optimized.ll", "llvm-ir", "LLVM IR (optimized)"),
    (".codegen.ll", "llvm-ir", "LLVM IR (codegen)"),
    (".ll", "llvm-ir", "LLVM IR"),
    (".s", "assembly", "Assembly"),
    (".spirv.mlir", "spirv-mlir", "SPIR-V dialect"),
    (".spv", "spirv", "SPIR-V"),
)


def _code_kind(path: Path) -> tuple[str, str] | None:
    for suffix, kind, label in _CODE_SUFFIXES:
        if path.name.endswith(suffix):
            return kind, label
    return None


def _code_files(
    own: ExecutableArtifacts | None, linked: ExecutableArtifacts | None, exports: Iterable[str]
) -> tuple[CodeFile, ...]:
    files: list[CodeFile] = []
    if own is not None and own.source is not None:
        files.append(CodeFile("source", "Source", own.source))
    if own is not None and own.configuration is not None:
        files.append(CodeFile("configuration", "Configuration", own.configuration))
    holder = linked or own
    if holder is None:
        return tuple(files)
    exports = list(exports)
    paths = [*holder.intermediates, *holder.binaries]
    # An unlinked SPIR-V executable dumps one file per export; keep this dispatch's own.
    for path in paths:
        kind = _code_kind(path)
        if kind is None:
            continue
        per_export = [e for e in exports if e in path.name]
        if (
            kind[0].startswith("spirv")
            and exports
            and not per_export
            and any("_dispatch_" in p.name for p in paths)
        ):
            continue
        label = kind[1] if holder is own or linked is None else f"{kind[1]} · {holder.name}"
        files.append(CodeFile(kind[0], label, path))
    order = {k: n for n, (_, k, _) in enumerate(_CODE_SUFFIXES)}
    head = [f for f in files if f.kind in ("source", "configuration")]
    rest = [f for f in files if f.kind not in ("source", "configuration")]
    rest.sort(key=lambda f: (order.get(f.kind, 99), _suffix_rank(f.path)))
    return tuple(head + rest)


def _suffix_rank(path: Path) -> int:
    for n, (suffix, _, _) in enumerate(_CODE_SUFFIXES):
        if path.name.endswith(suffix):
            return n
    return 99


def symbol_line(text: str, kind: str, export: str) -> int | None:
    """The 1-based line where ``export``'s code starts in a file of ``kind`` (see ``CodeFile``)."""
    e = re.escape(export)
    patterns = {
        "llvm-ir": [rf"^define\b.*@\"?{e}\"?\("],
        "assembly": [rf"^\"?{e}\"?:"],
        "spirv": [rf"^\s*%{e} = OpFunction\b", rf"OpEntryPoint \w+ %\S+ \"{e}\""],
        "spirv-mlir": [rf"spirv\.func @{e}\b"],
        "source": [rf"\.executable\.export\b.*@{e}\b"],
        "configuration": [rf"\.executable\.export\b.*@{e}\b"],
    }.get(kind, [])
    for pattern in patterns:
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            return text.count("\n", 0, m.start()) + 1
    return None
