"""Statistics per zone name and the comparison of two traces, all vectorised over the zone columns.

Self time is a zone's duration minus its direct children's (the zones one level deeper on the same track
that lie inside it). Percentiles use the nearest-rank rule (numpy's ``inverted_cdf``) on each name's sorted durations.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from engine.trace.model import Trace

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class ZoneStats:
    """One name's row of the statistics table (times in nanoseconds)."""

    name: str
    count: int
    total_ns: int
    self_ns: int
    mean_ns: float
    min_ns: int
    max_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int

    def as_dict(self) -> dict:
        return asdict(self)


def parent_index(trace: Trace) -> np.ndarray:
    """For each zone the index of its direct parent (the enclosing zone one level up), or -1."""
    z = trace.zones
    n = len(z)
    parent = np.full(n, -1, dtype=np.int64)
    lane_of = {(int(t), int(d)): k for k, (t, d) in enumerate(zip(z.lane_track, z.lane_depth))}
    for k in range(len(z.lane_track)):  # one iteration per lane
        d = int(z.lane_depth[k])
        up = lane_of.get((int(z.lane_track[k]), d - 1)) if d > 0 else None
        if up is None:
            continue
        a, b = int(z.lane_offsets[k]), int(z.lane_offsets[k + 1])
        pa, pb = int(z.lane_offsets[up]), int(z.lane_offsets[up + 1])
        j = np.searchsorted(z.start[pa:pb], z.start[a:b], side="right") - 1
        ok = j >= 0
        cand = pa + np.where(ok, j, 0)
        ok &= z.end[cand] >= z.end[a:b]
        parent[a:b] = np.where(ok, cand, -1)
    return parent


def self_times(trace: Trace) -> np.ndarray:
    """Each zone's duration minus the durations of its direct children (never below 0)."""
    dur = trace.zones.duration
    parent = parent_index(trace)
    has = parent >= 0
    child_sum = np.bincount(parent[has], weights=dur[has].astype(np.float64), minlength=len(dur))
    return np.maximum(dur - child_sum.astype(np.int64), 0)


def zone_statistics(trace: Trace, selection: np.ndarray | None = None) -> list[ZoneStats]:
    """Per-name statistics, sorted by total time (largest first), over all zones or ``selection``."""
    z = trace.zones
    idx = np.arange(len(z)) if selection is None else np.asarray(selection, dtype=np.int64)
    if idx.shape[0] == 0:
        return []
    dur = z.duration[idx]
    names = z.name[idx]
    selfs = self_times(trace)[idx]
    order = np.lexsort((dur, names))
    sd, sn = dur[order], names[order]
    firsts = np.concatenate(([0], np.flatnonzero(np.diff(sn)) + 1))
    counts = np.diff(np.concatenate((firsts, [sd.shape[0]])))
    totals = np.add.reduceat(sd, firsts)
    self_totals = np.add.reduceat(selfs[order], firsts)
    mins = sd[firsts]
    maxs = sd[firsts + counts - 1]
    pct = {p: sd[firsts + np.maximum((counts * p + 99) // 100 - 1, 0)] for p in PERCENTILES}
    rows = [
        ZoneStats(
            name=trace.names[int(sn[f])],
            count=int(c),
            total_ns=int(t),
            self_ns=int(st),
            mean_ns=float(t) / int(c),
            min_ns=int(lo),
            max_ns=int(hi),
            p50_ns=int(p50),
            p90_ns=int(p90),
            p99_ns=int(p99),
        )
        for f, c, t, st, lo, hi, p50, p90, p99 in zip(
            firsts, counts, totals, self_totals, mins, maxs, pct[50], pct[90], pct[99]
        )
    ]  # one iteration per name, not per zone
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows


def durations_of(trace: Trace, name: str) -> np.ndarray:
    """The durations (ns) of every zone called ``name``."""
    nid = trace.names.id_of(name)
    if nid is None:
        return np.zeros(0, np.int64)
    z = trace.zones
    return z.duration[z.name == nid]


def histogram(durations: np.ndarray, bins: int = 40, log: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(counts, edges) of a duration histogram; logarithmic bins when the durations span decades."""
    d = np.asarray(durations, dtype=np.float64)
    if d.shape[0] == 0:
        return np.zeros(bins, np.int64), np.linspace(0, 1, bins + 1)
    lo, hi = float(d.min()), float(d.max())
    if hi <= lo:
        hi = lo + 1
    if log and lo > 0 and hi / lo > 10:
        edges = np.geomspace(lo, hi, bins + 1)
    else:
        edges = np.linspace(lo, hi, bins + 1)
    counts, edges = np.histogram(d, bins=edges)
    return counts, edges


@dataclass(frozen=True)
class ZoneDiff:
    """One name in two traces: A's and B's count, total and mean, and B minus A."""

    name: str
    count_a: int
    count_b: int
    total_a_ns: int
    total_b_ns: int
    mean_a_ns: float
    mean_b_ns: float

    @property
    def count_diff(self) -> int:
        return self.count_b - self.count_a

    @property
    def total_diff_ns(self) -> int:
        return self.total_b_ns - self.total_a_ns

    @property
    def mean_diff_ns(self) -> float:
        return self.mean_b_ns - self.mean_a_ns

    @property
    def ratio(self) -> float:
        """B's total over A's (inf when A had none)."""
        return self.total_b_ns / self.total_a_ns if self.total_a_ns else float("inf")

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(count_diff=self.count_diff, total_diff_ns=self.total_diff_ns, mean_diff_ns=self.mean_diff_ns)
        return d


def compare(a: list[ZoneStats], b: list[ZoneStats]) -> list[ZoneDiff]:
    """Join two statistics tables by name; the names that got slower the most come first."""
    ra = {r.name: r for r in a}
    rb = {r.name: r for r in b}
    out = []
    for name in list(ra) + [n for n in rb if n not in ra]:
        x, y = ra.get(name), rb.get(name)
        out.append(
            ZoneDiff(
                name,
                x.count if x else 0,
                y.count if y else 0,
                x.total_ns if x else 0,
                y.total_ns if y else 0,
                x.mean_ns if x else 0.0,
                y.mean_ns if y else 0.0,
            )
        )
    out.sort(key=lambda d: (-d.total_diff_ns, d.name))
    return out

