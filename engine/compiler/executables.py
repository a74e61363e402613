"""The executables of a compilation and the files IREE dumped for each (``--iree-hal-dump-executable-*-to``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engine.errors import FormatError

# Sub-folders of a compilation's ``executables/`` folder, one per IREE dump flag.
DUMP_KINDS = ("sources", "configurations", "intermediates", "binaries")

_EXECUTABLE_DECL = re.compile(r"^\s*hal\.executable(?: (?:private|public|nested))? @([\w$.-]+)", re.MULTILINE)


@dataclass(frozen=True)
class ExecutableArtifacts:
    """One executable by IREE's name and its dumped files (``None``/empty where IREE wrote none).

    Before linking each dispatch is its own executable (``main_dispatch_0``): it has a source and a
    configuration. CPU and VMVX targets then link them into one (``<module>_linked``...), which has the
    intermediates (``.ll``, ``.s``, ``.o``) and the binary. Unlinked targets (SPIR-V) have all four.
    """

    name: str
    source: Path | None
    configuration: Path | None
    intermediates: tuple[Path, ...]
    binaries: tuple[Path, ...]


def executable_names(ir: str) -> list[str]:
    """The names of the ``hal.executable`` ops in a phase snapshot, in order."""
    return list(dict.fromkeys(_EXECUTABLE_DECL.findall(ir)))


def _owner(file_name: str, names: list[str]) -> str | None:
    # IREE names dumps `<prefix>_<executable>[_<variant or export>].<ext>`: match the longest name first so
    # `main_dispatch_1` does not claim `main_dispatch_10`'s files.
    for name in sorted(names, key=len, reverse=True):
        if re.search(rf"(?:^|_){re.escape(name)}(?:[_.]|$)", file_name):
            return name
    return None


def collect_executables(dump_dir: Path, names: list[str]) -> list[ExecutableArtifacts]:
    """Group the files under ``dump_dir/<kind>/`` by the executable they belong to.

    ``names`` are the executables known from the phase snapshots; files that match none of them (a
    failed compile stops before those phases) get a name derived from the file (``module_X.mlir`` → ``X``).
    """
    files: dict[str, dict[str, list[Path]]] = {}
    known = list(names)
    for kind in DUMP_KINDS:
        folder = dump_dir / kind
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            owner = _owner(path.name, known)
            if owner is None and kind in ("sources", "configurations"):
                stem = path.name.split(".")[0].removeprefix("configured_")
                owner = stem.split("_", 1)[1] if "_" in stem else stem
                known.append(owner)
            if owner is None:
                owner = path.name.split(".")[0]
            files.setdefault(owner, {}).setdefault(kind, []).append(path)
    order = [n for n in known if n in files] + [n for n in files if n not in known]
    result = []
    for name in order:
        kinds = files[name]
        result.append(
            ExecutableArtifacts(
                name=name,
                source=(kinds.get("sources") or [None])[0],
                configuration=(kinds.get("configurations") or [None])[0],
                intermediates=tuple(kinds.get("intermediates", ())),
                binaries=tuple(kinds.get("binaries", ())),
            )
        )
    return result


# Attribute (#name) and type (!name) aliases, keyed with their sigil.
_ALIAS_REF = re.compile(r"[#!][A-Za-z_][\w$.-]*")
_RESOURCE_REF = re.compile(r"dense_resource<([^>]+)>")
_ALIAS_DEF = re.compile(r"^([#!][\w$.-]+) = ")
_TOP_LEVEL_OPS = ("module", "builtin.module", "hal.executable", "func.func", "util.")
_EXECUTABLE_OPEN = re.compile(r"^  hal\.executable(?: (?:private|public|nested))? @([\w$.-]+) \{$")


@dataclass(frozen=True)
class SnapshotParts:
    """A phase snapshot cut into what a standalone executable file needs: the attribute aliases printed
    before the module (each whole, also when it spans lines), the ``hal.executable`` ops by name (as
    printed, one indentation level removed), and the ``builtin`` resource blobs of the file's trailing
    ``{-# dialect_resources ... #-}`` section by key (each its printed ``key: "0x..."`` entry)."""

    aliases: dict[str, str]
    executables: dict[str, str]
    resources: dict[str, str]


def split_snapshot(snapshot_text: str) -> SnapshotParts:
    """Cut a phase snapshot (``executable-sources`` and later) into ``SnapshotParts``."""
    lines = snapshot_text.splitlines()
    aliases: dict[str, str] = {}
    i = 0
    # Aliases: a line `#name = ...` starts one, which runs to the next alias or the module (IREE prints
    # big aliases such as `#composite_of_9559552b = #util.composite<9559552xi8, [` over many lines).
    while i < len(lines) and not lines[i].startswith(_TOP_LEVEL_OPS):
        m = _ALIAS_DEF.match(lines[i])
        if m:
            end = i + 1
            while end < len(lines) and not (_ALIAS_DEF.match(lines[end]) or lines[end].startswith(_TOP_LEVEL_OPS)):
                end += 1
            aliases[m[1]] = "\n".join(lines[i:end]).rstrip()
            i = end
        else:
            i += 1
    executables: dict[str, str] = {}
    while i < len(lines):
        m = _EXECUTABLE_OPEN.match(lines[i])
        if not m:
            if lines[i].startswith("{-#"):
                break
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end] != "  }":
            end += 1
        op = [line[2:] for line in lines[i : end + 1]]
        # Public, as IREE's own dump (--iree-hal-dump-executable-sources-to) prints it: a private
        # executable that nothing refers to is dropped when the file is compiled alone.
        op[0] = re.sub(r"^hal\.executable (?:private |nested )?@", "hal.executable public @", op[0])
        executables[m[1]] = "\n".join(op) + "\n"
        i = end + 1
    return SnapshotParts(aliases, executables, _builtin_resources(lines[i:]))


def _builtin_resources(lines: list[str]) -> dict[str, str]:
    # The section as MLIR prints it: `{-#`, `  dialect_resources: {`, `    builtin: {`, one
    # `      key: "0x...",` line per blob, closing braces, `#-}`.
    found: dict[str, str] = {}
    in_builtin = False
    for line in lines:
        stripped = line.strip()
        if stripped == "builtin: {":
            in_builtin = True
            continue
        if not in_builtin:
            continue
        if stripped.startswith("}"):
            break
        key, sep, _ = stripped.partition(": ")
        if sep:
            found[key.strip('"')] = stripped.rstrip(",")
    return found


def standalone_executable(parts: SnapshotParts, name: str) -> str:
    """The executable ``name`` as a file that parses alone: the aliases it refers to (also through other
    aliases), its op, and the resource blobs its ``dense_resource`` constants hold (weights that IREE
    folded into the dispatch). Such a file can be given to ``--iree-hal-substitute-executable-source`` or
    to ``iree-compile --compile-mode=hal-executable`` unmodified."""
    body = parts.executables[name]
    used: list[str] = []
    pending = [body]
    while pending:
        text = pending.pop()
        for ref in _ALIAS_REF.findall(text):
            if ref in parts.aliases and ref not in used:
                used.append(ref)
                pending.append(parts.aliases[ref])
    # Keep the snapshot's order: an alias must be defined before an alias that uses it.
    alias_text = [parts.aliases[a] for a in parts.aliases if a in used]
    keys: list[str] = []
    for text in [body, *alias_text]:
        keys += [k for k in (r.strip('"') for r in _RESOURCE_REF.findall(text)) if k not in keys]
    missing = [k for k in keys if k not in parts.resources]
    if missing:
        raise FormatError(
            f"executable {name} uses resource blob(s) the snapshot does not hold: {', '.join(missing)}"
        )
    out = "\n".join([*alias_text, body.rstrip("\n")]) + "\n"
    if keys:
        entries = ",\n".join(f"      {parts.resources[k]}" for k in keys)
        out += "\n{-#\n  dialect_resources: {\n    builtin: {\n" + entries + "\n    }\n  }\n#-}\n"
    return out


def extract_executables(snapshot_text: str) -> dict[str, str]:
    """Each ``hal.executable`` of a phase snapshot as a standalone MLIR file, by name (see
    ``standalone_executable``)."""
    parts = split_snapshot(snapshot_text)
    return {name: standalone_executable(parts, name) for name in parts.executables}


def sources_beside(vmfb_path: Path | str) -> dict[str, Path]:
    """The self-contained executable sources kept beside a compiled ``.vmfb``, by executable name.

    Two layouts hold them: a compile job's folder (``<dir>/<module>.vmfb`` with
    ``<dir>/executables/sources/module_<executable>.mlir``) and ``iree-lens sources --out=<dir>``
    (``<dir>/<module>.vmfb`` with ``<dir>/<executable>.mlir``). Empty when neither is there.
    """
    folder = Path(vmfb_path).parent
    found: dict[str, Path] = {}
    for path in sorted((folder / "executables" / "sources").glob("*.mlir")) + sorted(folder.glob("*.mlir")):
        try:
            head = path.read_text(errors="replace")[:200_000]
        except OSError:
            continue
        names = executable_names(head)
        if names and names[0] not in found:
            found[names[0]] = path
    return found
