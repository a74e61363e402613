"""Building many executable sources with one ``iree-compile``: a model's every executable substituted at once.

Compiling each ``hal.executable`` alone (``--compile-mode=hal-executable``) costs a compiler start and a
pipeline setup per file: about a second each, two minutes for the 123 executables of a mid-size model. IREE
also takes a module that holds nothing but ``hal.executable`` ops from its ``executable-sources`` phase on
(``--compile-from=executable-sources --compile-to=hal``): it configures, translates, links (llvm-cpu puts
every export into one library, as for the whole program) and serialises them all in one run. The files are
put into one such module: their attribute aliases (shared when identical), their ops (made public, so that
nothing is dropped as unused), and their ``dense_resource`` blobs.

Files that cannot share a module (an alias or blob name defined differently in two files, two files of one
executable, a file that is not one top-level ``hal.executable``) make ``combine_sources`` return ``None``; the
caller then builds each alone, which also gives each file's diagnostics at its own lines.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from engine.substitute.errors import SubstitutionError

# Beside sources written by ``iree-lens sources``: the IREE flags they were made with, one a line. A batch
# of sources that all have the same file beside them is built with those flags (code generation options).
FLAGS_FILE = "iree-compile-flags.txt"
# Flags that make no sense for a module of executables alone (it has no devices to assign).
_NOT_FOR_EXECUTABLES = ("--compile-from", "--compile-to", "--iree-hal-target-device", "--iree-hal-target-devices")

_ALIAS = re.compile(r"^([#!][\w$.-]+) = ")
_OPEN = re.compile(r"^hal\.executable(?: (?:private|public|nested))? @([\w$.-]+) \{$")
_EXPORT = re.compile(r"hal\.executable\.export (?:public |private )?@([\w$.-]+)")


@dataclass(frozen=True)
class SourceParts:
    """One executable source file cut into its aliases (name -> text), its op, and its blobs (key -> entry)."""

    aliases: dict[str, str]
    executable: str
    op: str
    resources: dict[str, str]


def export_names_in_source(text: str) -> tuple[str, ...]:
    """The ``hal.executable.export`` names an executable source declares, in order."""
    return tuple(dict.fromkeys(_EXPORT.findall(text)))


def split_source(text: str) -> SourceParts | None:
    """Cut a file holding one top-level ``hal.executable`` (IREE's dump, or ``iree-lens sources``'s file);
    ``None`` for any other shape."""
    lines = text.splitlines()
    aliases: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("//"):
            i += 1
            continue
        m = _ALIAS.match(line)
        if not m:
            break
        end = i + 1
        while end < len(lines) and not (_ALIAS.match(lines[end]) or _OPEN.match(lines[end])):
            end += 1
        aliases[m[1]] = "\n".join(lines[i:end]).rstrip()
        i = end
    if i >= len(lines):
        return None
    m = _OPEN.match(lines[i])
    if m is None:
        return None
    end = i + 1
    while end < len(lines) and lines[end] != "}":
        end += 1
    if end >= len(lines):
        return None
    op = lines[i : end + 1]
    op[0] = re.sub(r"^hal\.executable (?:private |nested )?@", "hal.executable public @", op[0])
    rest = [line for line in lines[end + 1 :] if line.strip()]
    resources: dict[str, str] = {}
    if rest:
        if rest[0].strip() != "{-#" or rest[-1].strip() != "#-}":
            return None
        in_builtin = False
        for line in rest[1:-1]:
            stripped = line.strip()
            if stripped == "builtin: {":
                in_builtin = True
            elif in_builtin and stripped.startswith("}"):
                in_builtin = False
            elif in_builtin:
                key, sep, _ = stripped.partition(": ")
                if not sep:
                    return None
                resources[key.strip('"')] = stripped.rstrip(",")
            elif stripped not in ("dialect_resources: {", "}"):
                return None  # another dialect's resources: not ours to merge
    return SourceParts(aliases, m[1], "\n".join(op), resources)


@dataclass(frozen=True)
class Combined:
    """A combined module's text and, for each file given, the lines (1-based, inclusive) its op occupies."""

    text: str
    op_lines: tuple[tuple[int, int], ...]

    def files_at(self, lines: list[int]) -> list[int]:
        """The indices of the files whose ops hold any of ``lines`` (diagnostics of the combined module)."""
        return [i for i, (a, b) in enumerate(self.op_lines) if any(a <= n <= b for n in lines)]


def combine_sources(texts: list[str], module_name: str = "lens_sources") -> Combined | None:
    """One module holding every executable of ``texts``, or ``None`` when they cannot share one."""
    aliases: dict[str, str] = {}
    resources: dict[str, str] = {}
    ops: list[str] = []
    names: set[str] = set()
    for text in texts:
        parts = split_source(text)
        if parts is None or parts.executable in names:
            return None
        names.add(parts.executable)
        for table, new in ((aliases, parts.aliases), (resources, parts.resources)):
            for key, value in new.items():
                if table.setdefault(key, value) != value:
                    return None
        ops.append(parts.op)
    head = [*aliases.values(), f"module @{module_name} {{"]
    line = sum(a.count("\n") + 1 for a in head) + 1
    spans = []
    for op in ops:
        n = op.count("\n") + 1
        spans.append((line, line + n - 1))
        line += n
    out = [*head, *ops, "}"]
    if resources:
        entries = ",\n".join(f"      {e}" for e in resources.values())
        out.append("{-#\n  dialect_resources: {\n    builtin: {\n" + entries + "\n    }\n  }\n#-}")
    return Combined("\n".join(out) + "\n", tuple(spans))


class BatchCompileError(SubstitutionError):
    """The combined module did not compile; ``lines`` are where IREE's errors point in it (its first stage)."""

    def __init__(self, message: str, lines: list[int]):
        super().__init__(message)
        self.lines = lines


@dataclass(frozen=True)
class BatchBuild:
    """What one compile of a combined module gives: the binaries (one per executable after linking) and each
    export's workgroup count where IREE resolved it to constants (``None`` where it depends on the workload)."""

    binaries: list[bytes]
    workgroup_counts: dict[str, tuple[int, int, int] | None]
    # IREE's optimized LLVM IR of each CPU library, by the position of its binary (what a trampoline for a
    # changed workgroup count is built from, ``workgroup_trampoline``).
    llvm_ir: dict[int, str] = field(default_factory=dict)


_EXPORT_HEAD = re.compile(r"^\s*hal\.executable\.export (?:public |private )?@([\w$.-]+) .*count\(.*\{$")
_INDEX_CONSTANT = re.compile(r"^\s*(%[\w$.-]+) = arith\.constant (\d+) : index$")
_RETURN = re.compile(r"^\s*hal\.return (%[\w$.-]+), (%[\w$.-]+), (%[\w$.-]+) : index, index, index$")


def workgroup_counts(targets_text: str) -> dict[str, tuple[int, int, int] | None]:
    """Each export's workgroup count in an ``executable-targets`` snapshot: IREE has replaced the count region
    by what the chosen tiling gives, constants for static shapes."""
    counts: dict[str, tuple[int, int, int] | None] = {}
    lines = targets_text.splitlines()
    for i, line in enumerate(lines):
        m = _EXPORT_HEAD.match(line)
        if m is None:
            continue
        values: dict[str, int] = {}
        found = None
        for body in lines[i + 1 :]:
            c = _INDEX_CONSTANT.match(body)
            if c:
                values[c[1]] = int(c[2])
                continue
            r = _RETURN.match(body)
            if r:
                if all(v in values for v in r.groups()):
                    found = tuple(values[v] for v in r.groups())
                break
            if body.lstrip().startswith("}"):
                break
        counts[m[1]] = found  # type: ignore[assignment]
    return counts


def _iree_compile(args: list[str], timeout_s: float, source: Path | None = None) -> None:
    from engine.compiler.diagnostics import parse_diagnostics
    from engine.compiler.job import iree_compile_path

    cmd = [iree_compile_path(), "--mlir-print-op-on-diagnostic=false", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SubstitutionError(f"iree-compile ran past {timeout_s:.0f} s building the sources") from None
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        lines = [
            d.line
            for d in parse_diagnostics(proc.stderr)
            if source is not None and d.file and Path(d.file).name == source.name and d.line and d.severity == "error"
        ]
        raise BatchCompileError(f"iree-compile could not build the sources together: {tail[0]}", lines)


def flags_beside(paths: list[Path]) -> list[str]:
    """The IREE flags recorded beside every one of ``paths`` (the same file content for all), else none."""
    contents = set()
    for path in paths:
        file = path.parent / FLAGS_FILE
        contents.add(file.read_text() if file.is_file() else "")
    if len(contents) != 1:
        return []
    flags = [line.strip() for line in contents.pop().splitlines() if line.strip().startswith("-")]
    return [f for f in flags if not any(f == p or f.startswith(p + "=") for p in _NOT_FOR_EXECUTABLES)]


# Built combined modules, by the compiler's version, the flags and the text: the same edits applied again (the
# reference engine and then the debug one, a rerun, a second window) are not built again.
BUILDS_DIR = "iree-lens-batch-builds"


def compile_combined(text: str, *, flags: list[str] | tuple[str, ...] = (), timeout_s: float = 900.0) -> BatchBuild:
    """Build a combined module: translate (``executable-targets``, where the workgroup counts are read),
    then link and serialise (``hal``), where the binaries are. Kept in the temporary directory's
    ``iree-lens-batch-builds/KEY`` (one process builds, another asking for the same waits and reads it)."""
    from engine.compiler.job import compiler_version
    from engine.folder_lock import folder_lock
    from engine.temp_caches import cache_root, mark_used

    key = hashlib.sha256("\0".join([compiler_version(), *flags, text]).encode()).hexdigest()[:32]
    out = cache_root(BUILDS_DIR) / key
    with folder_lock(out):
        kept = _read_build(out)
        if kept is not None:
            mark_used(out)
            return kept
        build = _compile_combined(text, flags, timeout_s)
        _write_build(build, out)
        return build


def _write_build(build: BatchBuild, out: Path) -> None:
    """``build`` as plain files in ``out`` (written whole under another name, then renamed)."""
    import shutil

    part = out.with_name(out.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    for i, binary in enumerate(build.binaries):
        (part / f"{i}.bin").write_bytes(binary)
    for i, ll in build.llvm_ir.items():
        (part / f"{i}.ll").write_text(ll)
    counts = {name: list(c) if c is not None else None for name, c in build.workgroup_counts.items()}
    (part / "build.json").write_text(json.dumps({"binaries": len(build.binaries), "workgroup_counts": counts,
                                                 "llvm_ir": sorted(build.llvm_ir)}))  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    part.rename(out)


def _read_build(out: Path) -> BatchBuild | None:
    """The build kept in ``out``, or None when there is none (or it cannot be read: it is built again)."""
    try:
        meta = json.loads((out / "build.json").read_text())
        binaries = [(out / f"{i}.bin").read_bytes() for i in range(meta["binaries"])]
        counts = {name: tuple(c) if c is not None else None for name, c in meta["workgroup_counts"].items()}
        llvm_ir = {i: (out / f"{i}.ll").read_text() for i in meta["llvm_ir"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return BatchBuild(binaries, counts, llvm_ir)


def _compile_combined(text: str, flags: list[str] | tuple[str, ...], timeout_s: float) -> BatchBuild:
    from engine.compiler.substitution import hal_binaries

    with tempfile.TemporaryDirectory(prefix="iree-lens-batch-") as d:
        source = Path(d) / "lens_sources.mlir"
        source.write_text(text)
        targets = Path(d) / "lens_sources.targets.mlir"
        hal = Path(d) / "lens_sources.hal.mlir"
        _iree_compile(
            ["--compile-from=executable-sources", "--compile-to=executable-targets", *flags, str(source), "-o",
             str(targets)],
            timeout_s,
            source,
        )
        inter = Path(d) / "intermediates"
        _iree_compile(
            ["--compile-from=executable-targets", "--compile-to=hal", f"--iree-hal-dump-executable-intermediates-to={inter}",
             *flags, str(targets), "-o", str(hal)],
            timeout_s,
        )  # fmt: skip
        hal_text = hal.read_text()
        found = hal_binaries(hal_text)
        llvm_ir = {}
        for i, b in enumerate(found):
            ll = sorted(inter.glob(f"*_{b.executable}_*.optimized.ll"))
            if len(ll) == 1:
                llvm_ir[i] = ll[0].read_text()
        return BatchBuild([b.data(hal_text) for b in found], workgroup_counts(targets.read_text()), llvm_ir)
