"""IREE's compilation phases and the snapshots ``--dump-compilation-phases-to`` writes for them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# The phases in order, exactly as IREE 3.13 names them (``--compile-to``/``--compile-from`` values and the
# ``<module>.<N>.<phase>.mlir`` dump names, N counting from 1).
PHASES: tuple[str, ...] = (
    "input",
    "abi",
    "preprocessing",
    "global-optimization",
    "dispatch-creation",
    "flow",
    "stream",
    "executable-sources",
    "executable-configurations",
    "executable-targets",
    "hal",
    "vm",
)

# ``--compile-from`` also accepts ``start``; ``--compile-to`` also accepts ``end``.
COMPILE_FROM_PHASES = ("start", *PHASES)
COMPILE_TO_PHASES = (*PHASES, "end")

_SNAPSHOT_NAME = re.compile(r"^(?P<module>.+)\.(?P<index>\d+)\.(?P<phase>[a-z-]+)\.mlir$")


def phase_index(phase: str) -> int:
    """1-based position of ``phase`` in ``PHASES`` (the number in IREE's dump file names)."""
    try:
        return PHASES.index(phase) + 1
    except ValueError:
        raise ValueError(f"unknown phase {phase!r}; phases: {', '.join(PHASES)}") from None


def snapshot_file_name(module: str, phase: str) -> str:
    """The file name IREE gives the snapshot of ``phase`` for a module named ``module``."""
    return f"{module}.{phase_index(phase)}.{phase}.mlir"


@dataclass(frozen=True)
class PhaseSnapshot:
    """The program as IR after one phase, stored as a file in the compilation's directory.

    ``origin`` says where it came from: ``compiled`` (written by this compilation's compiler run),
    ``inherited`` (a phase before the resume point, copied from the parent compilation) or ``edited``
    (the user's text the compilation resumed from).
    """

    phase: str
    index: int
    path: Path
    origin: str = "compiled"

    def text(self) -> str:
        return self.path.read_text()


@dataclass(frozen=True)
class SnapshotFile:
    module: str
    index: int
    phase: str
    path: Path


def find_snapshot_files(directory: Path) -> list[SnapshotFile]:
    """The phase snapshot files IREE wrote into ``directory``, in phase order."""
    found: list[SnapshotFile] = []
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return found
    for entry in entries:
        m = _SNAPSHOT_NAME.match(entry.name)
        if m and m["phase"] in PHASES and int(m["index"]) == phase_index(m["phase"]):
            found.append(SnapshotFile(m["module"], int(m["index"]), m["phase"], entry))
    found.sort(key=lambda s: s.index)
    return found
