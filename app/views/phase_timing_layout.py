"""Lays IREE's pass timing out on a time axis: phases on row 0, passes nested below, as numpy columns.

MLIR's timing report gives durations, not start times. Passes are laid end to end inside their parent,
in report order, on an axis of wall time (the compile's total: when the top-level passes add up to more,
they are scaled down to fit it). Nested pipelines that ran in parallel (``'hal.executable' Pipeline`` on several
threads) add up to more than their parent; their children are then scaled down to fit the parent and
marked ``scaled``. ``Rest`` (negative when threads overlapped) and ``Total`` are not passes.

Phases are found from the ``DumpModulePass`` entries that ``--dump-compilation-phases-to`` adds at the
end of each phase: the passes up to and including the k-th dump belong to the k-th phase written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PHASE_MARKER = "DumpModulePass"
ROW_PHASE = 0


@dataclass
class TimelineLayout:
    """Every rectangle of the timeline, sorted by start. Row 0 holds phases, row d the passes at depth d.

    ``parent[i]`` is the index of the rectangle containing rectangle ``i`` (-1 for phases), ``phase[i]``
    the index (into ``phase_names``) of the phase a rectangle belongs to.
    """

    names: list[str]
    start: np.ndarray  # float64 seconds
    duration: np.ndarray
    row: np.ndarray  # int32
    phase: np.ndarray  # int32
    parent: np.ndarray  # int32
    scaled: np.ndarray  # bool: drawn shorter than measured (ran in parallel with siblings)
    measured: np.ndarray  # float64 seconds: the wall time IREE measured
    phase_names: list[str] = field(default_factory=list)
    total_wall_s: float = 0.0
    rest_wall_s: float = 0.0

    @property
    def end(self) -> np.ndarray:
        return self.start + self.duration

    @property
    def span(self) -> float:
        return float(self.end.max()) if len(self.start) else 0.0

    @property
    def max_duration(self) -> float:
        return float(self.duration.max()) if len(self.start) else 0.0

    @property
    def rows(self) -> int:
        return int(self.row.max()) + 1 if len(self.row) else 1

    def phase_rect(self, name: str) -> int:
        """Index of the rectangle of phase ``name``."""
        for i in np.flatnonzero(self.row == ROW_PHASE).tolist():
            if self.names[i] == name:
                return i
        raise KeyError(name)

    def visible(self, x0: float, x1: float) -> np.ndarray:
        """Indices of the rectangles overlapping ``[x0, x1]``: a searchsorted window, then a mask."""
        lo = int(np.searchsorted(self.start, x0 - self.max_duration, side="left"))
        hi = int(np.searchsorted(self.start, x1, side="right"))
        idx = np.arange(lo, hi)
        return idx[(self.start[lo:hi] + self.duration[lo:hi]) >= x0]

    def hit(self, x: float, row: int) -> int | None:
        """The rectangle on ``row`` covering time ``x`` (the innermost when several), or None."""
        idx = self.visible(x, x)
        idx = idx[(self.row[idx] == row) & (self.start[idx] <= x) & (self.end[idx] >= x)]
        return int(idx[-1]) if len(idx) else None


def _children(node):
    return getattr(node, "children", None) or ()


def layout_timing(passes, phase_names, total_wall_s: float = 0.0, rest_wall_s: float = 0.0) -> TimelineLayout:
    """Lay out ``passes`` (objects with ``name``, ``wall_s``, ``children``: ``engine.compiler.PassTiming``).

    ``phase_names`` names the phases whose dumps appear in the report, in order; passes after the last
    dump (a compile that failed in the middle of a phase) go to the next name if one is given, else to a
    phase called ``output`` (after the vm dump IREE still serializes executables and the module).
    """
    names: list[str] = []
    cols: dict[str, list] = {
        k: [] for k in ("start", "duration", "row", "phase", "parent", "scaled", "measured")
    }

    def add(name, start, duration, row, phase, parent, scaled, measured) -> int:
        names.append(name)
        for k, v in zip(cols, (start, duration, row, phase, parent, scaled, measured)):
            cols[k].append(v)
        return len(names) - 1

    # split the top-level passes into phases at each dump marker
    groups: list[list] = [[]]
    for p in passes:
        groups[-1].append(p)
        if p.name == PHASE_MARKER:
            groups.append([])
    if not groups[-1]:
        groups.pop()
    phase_list = list(phase_names)
    while len(phase_list) < len(groups):
        phase_list.append("output")

    def place(node, start: float, width: float, row: int, phase: int, parent: int, scaled: bool) -> None:
        i = add(node.name, start, width, row, phase, parent, scaled, max(0.0, float(node.wall_s)))
        kids = [c for c in _children(node) if c.wall_s > 0]
        total = sum(c.wall_s for c in kids)
        factor = min(1.0, width / total) if total > 0 else 1.0
        t = start
        for c in kids:
            w = c.wall_s * factor
            place(c, t, w, row + 1, phase, i, scaled or factor < 1.0)
            t += w

    # The axis is wall time: when the top-level passes add up to more than the compile's total wall time
    # (threads overlapped), everything is scaled down to fit it (and marked scaled).
    top = sum(max(0.0, float(p.wall_s)) for group in groups for p in group)
    squeeze = min(1.0, total_wall_s / top) if total_wall_s > 0 and top > 0 else 1.0
    t = 0.0
    for k, group in enumerate(groups):
        measured = sum(max(0.0, p.wall_s) for p in group)
        pi = add(phase_list[k], t, measured * squeeze, ROW_PHASE, k, -1, squeeze < 1.0, measured)
        for p in group:
            w = max(0.0, float(p.wall_s)) * squeeze
            place(p, t, w, 1, k, pi, squeeze < 1.0)
            t += w

    order = np.lexsort((np.asarray(cols["row"]), np.asarray(cols["start"], dtype=np.float64)))
    remap = np.empty(len(order), np.int64)
    remap[order] = np.arange(len(order))
    parent = np.asarray(cols["parent"], np.int64)[order]
    parent = np.where(parent >= 0, remap[np.maximum(parent, 0)], -1)
    return TimelineLayout(
        names=[names[i] for i in order.tolist()],
        start=np.asarray(cols["start"], np.float64)[order],
        duration=np.asarray(cols["duration"], np.float64)[order],
        row=np.asarray(cols["row"], np.int32)[order],
        phase=np.asarray(cols["phase"], np.int32)[order],
        parent=parent.astype(np.int32),
        scaled=np.asarray(cols["scaled"], bool)[order],
        measured=np.asarray(cols["measured"], np.float64)[order],
        phase_names=phase_list[: len(groups)],
        total_wall_s=float(total_wall_s),
        rest_wall_s=float(rest_wall_s),
    )


def layout_report(report, phase_names) -> TimelineLayout:
    """``layout_timing`` for an ``engine.compiler.TimingReport``."""
    return layout_timing(report.passes, phase_names, report.total_wall_s, report.rest_wall_s)
