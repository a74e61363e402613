"""Source locations of recorded statements: location text -> ``SourceLocation``, and the MLIR op written at
that place of the source file (``%6 = math.log %in : f32`` -> ``math.log``) when the file can be read."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from engine.kernel.trace import SourceLocation

# The first file:line:col of a location's text: a callsite names its callee first, a fused location its
# first part (IREE fuses an op folded into another, e.g. a multiply-add).
_FILE_LINE_COL = re.compile(r'"([^"]+)":(\d+):(\d+)')
# An op at a column: optional results (``%a, %b = ``, ``%x:2 = ``), then ``dialect.op`` or a quoted generic op.
_OP_AT = re.compile(r'\s*(?:%[\w.#$-]+(?::\d+)?(?:\s*,\s*%[\w.#$-]+(?::\d+)?)*\s*=\s*)?"?([a-z_][\w]*\.[\w.]+)')

_GENERIC_OPS = ("torch.operator",)
_NAMED_OP = re.compile(r'\s*"([\w.]+)"')


def location_of(text: str) -> SourceLocation | None:
    """The first ``"file":line:col`` in a location's text, or None (``unknown``, a name only)."""
    m = _FILE_LINE_COL.search(text)
    return SourceLocation(m.group(1), int(m.group(2)), int(m.group(3))) if m else None


class SourceFiles:
    """Reads the source files locations name, looked up as given, then in each of ``roots``."""

    def __init__(self, roots: Sequence[str | Path] = ()):
        self.roots = [Path(r) for r in roots]
        self._lines: dict[str, list[str] | None] = {}
        self.found: dict[str, str] = {}  # location file -> path read

    def lines(self, file: str) -> list[str] | None:
        if file not in self._lines:
            self._lines[file] = None
            candidates = [Path(file), *(r / file for r in self.roots), *(r / Path(file).name for r in self.roots)]
            for path in candidates:
                try:
                    if path.is_file() and path.stat().st_size < (64 << 20):
                        self._lines[file] = path.read_text(errors="replace").splitlines()
                        self.found[file] = str(path)
                        break
                except OSError:
                    continue
        return self._lines[file]

    def op_at(self, location: SourceLocation | None) -> str | None:
        """The MLIR op written at ``location`` (its column, else the start of its line), or None."""
        if location is None:
            return None
        lines = self.lines(location.file)
        if lines is None or not 1 <= location.line <= len(lines):
            return None
        line = lines[location.line - 1]
        for start in (max(location.column - 1, 0), 0):
            m = _OP_AT.match(line, start)
            if m:
                # A frontend's generic op says what it is in its first string: torch.operator "onnx.Conv".
                named = _NAMED_OP.match(line, m.end()) if m.group(1) in _GENERIC_OPS else None
                return f"{m.group(1)} {named.group(1)}" if named else m.group(1)
        return None
