"""The dependency graph of a run's dispatches through the buffers they read and write (pypto's deps graph).

An edge ``a -> b`` says dispatch ``b`` read bytes that ``a`` was the last to write (same allocation,
overlapping byte ranges), from the bindings a debug-engine capture records per dispatch.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.dispatch.bundle import DispatchEntry


@dataclass(frozen=True)
class DependencyEdge:
    source: int  # ordinal of the writer
    target: int  # ordinal of the reader
    buffer: int
    bytes: int  # how many of the bytes read came from the writer


@dataclass(frozen=True)
class DependencyGraph:
    nodes: tuple[DispatchEntry, ...]
    edges: tuple[DependencyEdge, ...]

    def predecessors(self, ordinal: int) -> list[int]:
        return sorted({e.source for e in self.edges if e.target == ordinal})

    def successors(self, ordinal: int) -> list[int]:
        return sorted({e.target for e in self.edges if e.source == ordinal})

    def to_dot(self) -> str:
        """Graphviz DOT text: one box per dispatch (ordinal, export name, health), edges with byte counts."""
        lines = ["digraph dispatches {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
        for n in self.nodes:
            colour = "" if n.health == "ok" else ", color=red, fontcolor=red"
            label = f"{n.ordinal}: {n.name}\\n{'x'.join(str(w) for w in n.workgroups or [])} {n.health}"
            lines.append(f'  d{n.ordinal} [label="{_escape(label)}"{colour}];')
        for e in self.edges:
            lines.append(f'  d{e.source} -> d{e.target} [label="{e.bytes} B"];')
        lines.append("}")
        return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace('"', '\\"')


def _union(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def dependency_graph(dispatches: list[DispatchEntry]) -> DependencyGraph:
    """Edges from each read range to the latest earlier writers of its bytes."""
    # buffer -> list of (start, end, writer ordinal), newest last; older pieces are cut where newer overlap.
    written: dict[int, list[tuple[int, int, int]]] = {}
    edges: dict[tuple[int, int, int], int] = {}
    for d in dispatches:
        # Bindings of one buffer may overlap (two views of one allocation): each byte read counts once.
        reads: dict[int, list[tuple[int, int]]] = {}
        for b in d.bindings:
            if b.get("access") in ("read", "readwrite") and b.get("buffer", -1) >= 0:
                reads.setdefault(b["buffer"], []).append((b["offset"], b["offset"] + b["length"]))
        for buffer, ranges in reads.items():
            for start, end in _union(ranges):
                for s, e, writer in written.get(buffer, ()):
                    lo, hi = max(s, start), min(e, end)
                    if lo < hi and writer != d.ordinal:
                        key = (writer, d.ordinal, buffer)
                        edges[key] = edges.get(key, 0) + (hi - lo)
        for b in d.bindings:
            if b.get("access") in ("write", "readwrite") and b.get("buffer", -1) >= 0:
                start, end = b["offset"], b["offset"] + b["length"]
                kept = []
                for s, e, writer in written.get(b["buffer"], ()):
                    if e <= start or end <= s:
                        kept.append((s, e, writer))
                        continue
                    if s < start:
                        kept.append((s, start, writer))
                    if end < e:
                        kept.append((end, e, writer))
                kept.append((start, end, d.ordinal))
                written[b["buffer"]] = kept
    return DependencyGraph(
        tuple(dispatches), tuple(DependencyEdge(s, t, buf, n) for (s, t, buf), n in sorted(edges.items()))
    )
