"""The executables of a compilation and the files IREE dumped for each (``--iree-hal-dump-executable-*-to``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

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


def extract_executables(snapshot_text: str) -> dict[str, str]:
    """Each ``hal.executable`` of a phase snapshot as a standalone MLIR file, by name.

    The op is taken as printed in the snapshot, preceded by the snapshot's attribute aliases
    (``#map = ...``) it may refer to, so the text parses on its own (and can be given to
    ``--iree-hal-substitute-executable-source``).
    """
    lines = snapshot_text.splitlines()
    aliases = []
    for line in lines:
        if line.startswith("#"):
            aliases.append(line)
        elif line.startswith("module"):
            break
    found: dict[str, str] = {}
    i = 0
    while i < len(lines):
        m = re.match(r"^  hal\.executable(?: (?:private|public|nested))? @([\w$.-]+) \{$", lines[i])
        if not m:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end] != "  }":
            end += 1
        body = [line[2:] for line in lines[i : end + 1]]
        found[m[1]] = "\n".join([*aliases, *body]) + "\n"
        i = end + 1
    return found
