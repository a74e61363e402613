"""Source locations of a module's debug database as MLIR-like text, in time linear in the table.

A location-table entry may refer to other entries (a fused location's children, a call site's callee
and caller, a name's child). In a valid module these references form a DAG; in a damaged one they may
form cycles or fan out so that a naive recursive printer takes exponential time and memory (k children
per entry, 32 levels deep: k^32 calls). So the table is rendered once, bottom up, with an explicit stack:

* every entry is rendered exactly once and its text memoised, so the work is linear in the table size;
* an entry reached again while it is still being rendered (a cycle) reads ``<bad location N>``;
* every text is cut at :data:`MAX_LOCATION_CHARS` characters, so the output is bounded too;
* an entry that cannot be read (bad offsets, an unknown kind, an index outside the table) reads
  ``<bad location N>`` rather than failing the whole table.

Entries are rendered in index order from a fresh state, so the text of an entry never depends on which
location a caller asked for first.
"""

from __future__ import annotations

from engine.errors import FormatError
from engine.runtime.vmfb.flatbuffer import Table

MAX_LOCATION_CHARS = 1024
ELLIPSIS = "…"

CALL_SITE, FILE_LINE_COL, FUSED, NAME = 1, 2, 3, 4
LOCATION_KINDS = {
    CALL_SITE: "CallSiteLoc",
    FILE_LINE_COL: "FileLineColLoc",
    FUSED: "FusedLoc",
    NAME: "NameLoc",
}


def bad_location(index: int) -> str:
    return f"<bad location {index}>"


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LOCATION_CHARS else text[: MAX_LOCATION_CHARS - 1] + ELLIPSIS


class _Entry:
    """One location-table entry read into its parts: literal text pieces and child indices."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[str | int]):
        self.parts = parts  # str: literal text; int: the text of that location index


def _read_entry(tag: int, t: Table | None) -> _Entry:
    """The parts of one entry (raises FormatError on damaged fields)."""
    if t is None:
        return _Entry(["unknown"])
    if tag == FILE_LINE_COL:
        return _Entry([f'"{t.string(0) or ""}":{t.scalar(1, "i32")}:{t.scalar(2, "i32")}'])
    if tag == NAME:
        parts: list[str | int] = [f'"{t.string(0) or ""}"']
        if t.has(1):
            parts += ["(", int(t.scalar(1, "i32")), ")"]
        return _Entry(parts)
    if tag == CALL_SITE:
        return _Entry(["callsite(", int(t.scalar(0, "i32")), " at ", int(t.scalar(1, "i32")), ")"])
    if tag == FUSED:
        meta = t.string(0)
        parts = [f"fused<{meta}>[" if meta else "fused["]
        children = t.scalars(1, "i32")
        # More children than fit in the output are never printed: read only as many as could show.
        for k, child in enumerate(children[: MAX_LOCATION_CHARS // 2]):
            if k:
                parts.append(", ")
            parts.append(int(child))
        if len(children) > MAX_LOCATION_CHARS // 2:
            parts.append(", " + ELLIPSIS)
        parts.append("]")
        return _Entry(parts)
    return _Entry([LOCATION_KINDS.get(tag, f"unknown({tag})")])


class LocationTable:
    """The location table of a ``DebugDatabaseDef``: ``texts[i]`` is entry i as text."""

    def __init__(self, db: Table):
        self._db = db

    def _raw(self) -> tuple[list[int], object]:
        tags = [int(x) for x in self._db.scalars(0, "u8", "location_table_type")]
        values = self._db.tables(1, "location_table")
        return tags, values

    def render_all(self) -> list[str]:
        try:
            tags, values = self._raw()
        except FormatError:
            return []
        n = len(tags)
        entries: list[_Entry | None] = [None] * n

        def entry(i: int) -> _Entry | None:
            """Entry i, or None when it is damaged (read once; a failure is remembered too)."""
            e = entries[i]
            if e is None:
                try:
                    if i >= len(values) and tags[i]:
                        raise FormatError("location value missing")
                    e = _read_entry(tags[i], values[i] if tags[i] else None)
                except FormatError:
                    e = _Entry([bad_location(i)])
                entries[i] = e
            return e

        texts: list[str | None] = [None] * n
        in_progress = bytearray(n)  # 1 while an entry is on the stack: reaching it again is a cycle
        for root in range(n):
            if texts[root] is not None:
                continue
            stack = [[root, 0]]  # (entry, index of the next part to look at): each part is seen once
            in_progress[root] = 1
            while stack:
                top = stack[-1]
                i = top[0]
                parts = entry(i).parts  # type: ignore[union-attr]
                pending = None
                while top[1] < len(parts):
                    p = parts[top[1]]
                    top[1] += 1
                    if isinstance(p, int) and 0 <= p < n and texts[p] is None and not in_progress[p]:
                        pending = p
                        break
                if pending is not None:
                    in_progress[pending] = 1
                    stack.append([pending, 0])
                    continue
                # Every child is rendered (or is a cycle / out of range): render i.
                out: list[str] = []
                size = 0
                for p in parts:
                    if isinstance(p, int):
                        s = texts[p] if 0 <= p < n and texts[p] is not None else bad_location(p)
                    else:
                        s = p
                    out.append(s)
                    size += len(s)
                    if size > MAX_LOCATION_CHARS:
                        break
                texts[i] = _clip("".join(out))
                in_progress[i] = 0
                stack.pop()
        return [t if t is not None else bad_location(i) for i, t in enumerate(texts)]
