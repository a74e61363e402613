"""An IR text held as bytes with numpy indexes: line offsets, brace regions, search, definitions.

Nothing here imports Qt; the viewer paints from it. Every index is built with numpy over the raw bytes,
so a 50 MB dump is indexed in a fraction of a second and no per-line Python objects exist until a line
is shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Ops whose first @symbol is the symbol they define (not a use): func.func, util.global, hal.executable,
# hal.executable.export/variant, vm.rodata, vm.import, vm.global.ref, module, flow/stream.executable...
_DEF_OPS = r"(?:module|[\w.]*func|[\w.]*\.global(?:\.(?!load|store|address)[\w]+)*|[\w.]*executable(?:\.export|\.variant)?|[\w.]*rodata|[\w.]*import|[\w.]*\.module|[\w.]*initializer|[\w.]*\.func)"
_DEF_PREFIX = (
    rb"(?m)^[ \t]*" + _DEF_OPS.encode() + rb"(?:[ \t]+(?:public|private|nested|mutable|immutable))*[ \t]+"
)
_FUNC_LINE = re.compile(rb"^\s*(?:[\w.]*func|[\w.]*initializer)\b")


@dataclass(frozen=True)
class Match:
    """One search hit: its line (0-based) and column range in characters of that line."""

    line: int
    start: int
    end: int


class IrDocument:
    """Read-only text of an IR file with a line index and its foldable brace regions."""

    def __init__(self, data: bytes):
        self.data = bytes(data)
        buf = np.frombuffer(self.data, dtype=np.uint8)
        newlines = np.flatnonzero(buf == 10)
        # line i spans data[starts[i]:ends[i]] (without its newline).
        self.starts = np.concatenate(([0], newlines + 1)).astype(np.int64)
        self.ends = np.concatenate((newlines, [len(self.data)])).astype(np.int64)
        if len(self.data) and self.data.endswith(b"\n"):  # no empty phantom line after the last newline
            self.starts, self.ends = self.starts[:-1], self.ends[:-1]
        self.max_line_length = int((self.ends - self.starts).max()) if len(self.starts) else 0
        self.fold_start, self.fold_end = self._brace_regions(buf)
        self._fold_by_start = dict(zip(self.fold_start.tolist(), self.fold_end.tolist()))

    @classmethod
    def from_text(cls, text: str) -> IrDocument:
        return cls(text.encode("utf-8"))

    @classmethod
    def from_file(cls, path: str | Path) -> IrDocument:
        return cls(Path(path).read_bytes())

    # -- lines -------------------------------------------------------------------------------------------
    @property
    def line_count(self) -> int:
        return len(self.starts)

    def line_bytes(self, i: int, limit: int | None = None) -> bytes:
        a, b = int(self.starts[i]), int(self.ends[i])
        if limit is not None:
            b = min(b, a + limit)
        return self.data[a:b]

    def line(self, i: int, limit: int | None = None) -> str:
        """Line ``i`` (0-based) as text; at most ``limit`` bytes of it when given (megabyte-long constants)."""
        return self.line_bytes(i, limit).decode("utf-8", "replace").replace("\t", "    ")

    def line_of_offset(self, offset: int) -> int:
        return int(np.searchsorted(self.starts, offset, side="right") - 1)

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    # -- folding -----------------------------------------------------------------------------------------
    def _brace_regions(self, buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Line pairs (open, close) of brace regions that span more than one line, sorted by open line.

        Braces inside strings and comments are counted too; IREE's dumps keep braces out of strings in
        practice, and an unbalanced count only makes some region unfoldable, never hides text wrongly
        (a region's lines are exactly those between its braces' lines).
        """
        pos = np.flatnonzero((buf == 123) | (buf == 125))  # '{' '}'
        if len(pos) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        step = np.where(buf[pos] == 123, 1, -1)
        after = np.cumsum(step)
        # an open brace has level = depth after it; a close brace has level = depth before it.
        level = np.where(step > 0, after, after + 1)
        order = np.lexsort((pos, level))  # by level, then position: opens and closes alternate per level
        lv, ps, st = level[order], pos[order], step[order]
        is_open = st > 0
        nxt_ok = np.zeros(len(order), bool)
        nxt_ok[:-1] = is_open[:-1] & ~is_open[1:] & (lv[:-1] == lv[1:])
        opens, closes = ps[:-1][nxt_ok[:-1]], ps[1:][nxt_ok[:-1]]
        lo = np.searchsorted(self.starts, opens, side="right") - 1
        hi = np.searchsorted(self.starts, closes, side="right") - 1
        keep = hi > lo
        lo, hi = lo[keep], hi[keep]
        # one region per opening line: the outermost (largest) one when a line opens several
        o = np.lexsort((-hi, lo))
        lo, hi = lo[o], hi[o]
        first = np.ones(len(lo), bool)
        first[1:] = lo[1:] != lo[:-1]
        return lo[first].astype(np.int64), hi[first].astype(np.int64)

    def fold_end_of(self, line: int) -> int | None:
        """The closing line of the region opened on ``line``, or None if no region opens there."""
        return self._fold_by_start.get(line)

    def enclosing_region(self, line: int, predicate=None) -> tuple[int, int] | None:
        """The innermost region (open, close) containing ``line`` whose opening line satisfies ``predicate``."""
        idx = int(np.searchsorted(self.fold_start, line, side="right"))
        for j in range(idx - 1, -1, -1):
            a, b = int(self.fold_start[j]), int(self.fold_end[j])
            if a <= line <= b and (predicate is None or predicate(a)):
                return a, b
        return None

    # -- search ------------------------------------------------------------------------------------------
    def _pattern(self, needle: str, regex: bool, case: bool) -> re.Pattern[bytes]:
        body = needle.encode("utf-8") if regex else re.escape(needle.encode("utf-8"))
        return re.compile(body, 0 if case else re.IGNORECASE)

    def find(
        self,
        needle: str,
        line: int,
        col: int,
        *,
        backward: bool = False,
        regex: bool = False,
        case: bool = False,
    ) -> Match | None:
        """The next (or previous) match of ``needle`` after (before) ``line:col``, wrapping around."""
        if not needle:
            return None
        rx = self._pattern(needle, regex, case)
        here = int(self.starts[line]) + len(self.line(line)[:col].encode("utf-8")) if self.line_count else 0
        if not backward:
            m = rx.search(self.data, here) or rx.search(self.data, 0)
        else:
            m = None
            # search windows backwards so that a previous match costs in proportion to the distance
            end, window = here, 1 << 16
            while m is None and end > 0:
                start = max(0, end - window)
                for m2 in rx.finditer(self.data, start, end):
                    m = m2
                end, window = start, window * 4
            if m is None:
                for m2 in rx.finditer(self.data, here):
                    m = m2
        if m is None:
            return None
        return self._match_at(m.start(), m.end())

    def _match_at(self, a: int, b: int) -> Match:
        ln = self.line_of_offset(a)
        ls = int(self.starts[ln])
        c0 = len(self.data[ls:a].decode("utf-8", "replace"))
        c1 = c0 + len(self.data[a : min(b, int(self.ends[ln]))].decode("utf-8", "replace"))
        return Match(ln, c0, c1)

    def count(self, needle: str, *, regex: bool = False, case: bool = False) -> int:
        if not needle:
            return 0
        return sum(1 for _ in self._pattern(needle, regex, case).finditer(self.data))

    # -- definitions -------------------------------------------------------------------------------------
    def symbol_definition(self, symbol: str) -> int | None:
        """Line of the op defining ``@symbol`` (func.func, util.global, hal.executable, vm.rodata, ...)."""
        name = symbol.lstrip("@").encode("utf-8")
        rx = re.compile(_DEF_PREFIX + b"@" + re.escape(name) + rb"(?![\w$.\-])")
        m = rx.search(self.data)
        return None if m is None else self.line_of_offset(m.start())

    def value_definition(self, value: str, line: int) -> int | None:
        """Line defining ``%value`` as seen from ``line``: its first occurrence in the enclosing function.

        In MLIR's printed form a value is defined before it is used (results, block and function
        arguments), so the first textual occurrence inside the function that contains ``line`` is its
        definition; at module level the whole text is searched.
        """
        region = self.enclosing_region(line, lambda a: bool(_FUNC_LINE.match(self.line_bytes(a, 400))))
        lo, hi = region if region else (0, self.line_count - 1)
        rx = re.compile(re.escape(value.encode("utf-8")) + rb"(?![\w$.\-])")
        m = rx.search(self.data, int(self.starts[lo]), int(self.ends[hi]))
        return None if m is None else self.line_of_offset(m.start())
