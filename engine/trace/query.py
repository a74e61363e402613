"""Zones in a time range at a resolution: what a timeline draws, found without looping over zones.

At a resolution of ``res`` nanoseconds per pixel, zones shorter than ``res`` cannot be told apart, so runs
of them (separated by gaps shorter than ``res``) become one *merged* box, the way Tracy draws "zones too
small to display". Each lane (a track at one depth) is searched with ``searchsorted``; its visible slice is
merged with a few vectorised numpy operations. The number of boxes is bounded by the pixels, not the zones.

Lanes with many zones keep coarser levels of detail (runs merged at resolutions 4**k ns), built once when a
coarse view first asks, so a full zoom-out of ten million zones reads a few thousand boxes, not ten million.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.trace.model import Trace

LOD_MIN_ZONES = 20_000  # lanes smaller than this are always merged from the zones themselves


@dataclass(frozen=True)
class Boxes:
    """Drawable boxes: one zone each (``count == 1``, ``index`` is the zone) or a merged run of ``count``
    zones (``index`` is the run's first zone). All arrays have the same length."""

    start: np.ndarray
    end: np.ndarray
    track: np.ndarray
    depth: np.ndarray
    index: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])


def _merge(
    s: np.ndarray, e: np.ndarray, idx: np.ndarray | None, cnt: np.ndarray | None, res: int, base: int = 0
):
    """Merge runs of boxes narrower than ``res`` whose gaps are narrower than ``res``.

    ``idx``/``cnt`` None means plain zones: indices ``base + i`` and counts of 1 (not materialised)."""
    n = s.shape[0]
    if idx is None and (n == 0 or res <= 1):
        return s, e, np.arange(base, base + n), np.ones(n, np.int64)
    if n == 0 or res <= 1:
        return s, e, idx, cnt
    tiny = (e - s) < res
    new_run = np.ones(n, dtype=bool)
    if n > 1:
        close = (s[1:] - e[:-1]) < res
        new_run[1:] = ~(tiny[1:] & tiny[:-1] & close)
    firsts = np.flatnonzero(new_run)
    if idx is None:
        counts = np.diff(np.append(firsts, n))
        if firsts.shape[0] == n:
            return s, e, base + firsts, counts
        return s[firsts], np.maximum.reduceat(e, firsts), base + firsts, counts
    if firsts.shape[0] == n:
        return s, e, idx, cnt
    return s[firsts], np.maximum.reduceat(e, firsts), idx[firsts], np.add.reduceat(cnt, firsts)


class ZoneIndex:
    """Answers ``visible(t0, t1, res)`` for one trace; caches coarse levels of detail per lane."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._levels: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}

    def lane_count(self) -> int:
        return int(self.trace.zones.lane_offsets.shape[0] - 1)

    def _level(self, lane: int, k: int) -> tuple[np.ndarray, ...]:
        key = (lane, k)
        cached = self._levels.get(key)
        if cached is None:
            z = self.trace.zones
            a, b = int(z.lane_offsets[lane]), int(z.lane_offsets[lane + 1])
            # From the nearest finer level already built, else from the zones themselves: one pass,
            # not one per level in between.
            finer = next(
                (self._levels[(lane, j)] for j in range(k - 1, 0, -1) if (lane, j) in self._levels), None
            )
            if finer is None:
                cached = _merge(z.start[a:b], z.end[a:b], None, None, 4**k, a)
            else:
                cached = _merge(*finer[:4], 4**k)
            # Running max of ends (merged runs may end after the next box starts in odd traces).
            cached = (*cached, np.maximum.accumulate(cached[1]) if cached[1].shape[0] else cached[1])
            self._levels[key] = cached
        return cached

    def visible(self, t0: int, t1: int, res: int, tracks: set[int] | None = None) -> Boxes:
        """Boxes for zones that overlap ``[t0, t1)`` at ``res`` ns per pixel (tracks: only these)."""
        z = self.trace.zones
        res = max(int(res), 1)
        parts = []
        # The coarsest cached level whose resolution is still finer than what the view can show.
        k = max(0, int(np.floor(np.log(res) / np.log(4))) - 1) if res > 16 else 0
        for lane in range(self.lane_count()):
            tr = int(z.lane_track[lane])
            if tracks is not None and tr not in tracks:
                continue
            a, b = int(z.lane_offsets[lane]), int(z.lane_offsets[lane + 1])
            if b - a >= LOD_MIN_ZONES and k > 0:
                s_all, e_all, i_all, c_all, m_all = self._level(lane, k)
            else:
                s_all, e_all, m_all = z.start[a:b], z.end[a:b], z.lane_max_end[a:b]
                i_all, c_all = None, None
            i0 = int(np.searchsorted(m_all, t0, side="right"))
            i1 = int(np.searchsorted(s_all, t1, side="left"))
            if i1 <= i0:
                continue
            s, e = s_all[i0:i1], e_all[i0:i1]
            if i_all is None:
                s, e, idx, cnt = _merge(s, e, None, None, res, a + i0)
            else:
                s, e, idx, cnt = _merge(s, e, i_all[i0:i1], c_all[i0:i1], res)
            parts.append((s, e, idx, cnt, tr, int(z.lane_depth[lane])))
        if not parts:
            empty = np.zeros(0, np.int64)
            return Boxes(empty, empty, empty.astype(np.uint16), empty.astype(np.uint8), empty, empty)
        return Boxes(
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([np.full(p[0].shape[0], p[4], np.uint16) for p in parts]),
            np.concatenate([np.full(p[0].shape[0], p[5], np.uint8) for p in parts]),
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]),
        )

    def zone_at(self, track: int, depth: int, t: int) -> int | None:
        """The zone of ``track`` at ``depth`` that contains time ``t`` (or the nearest within none: None)."""
        z = self.trace.zones
        lanes = np.flatnonzero((z.lane_track == track) & (z.lane_depth == depth))
        if lanes.shape[0] == 0:
            return None
        lane = int(lanes[0])
        a, b = int(z.lane_offsets[lane]), int(z.lane_offsets[lane + 1])
        i = int(np.searchsorted(z.start[a:b], t, side="right")) - 1
        if i < 0:
            return None
        # In an odd (overlapping) lane an earlier zone may still cover t; nested traces end here.
        if z.end[a + i] >= t:
            return a + i
        return None

    def zones_overlapping(self, t0: int, t1: int) -> np.ndarray:
        """Indices of every zone overlapping ``[t0, t1)`` (all lanes), exact (no merging)."""
        z = self.trace.zones
        out = []
        for lane in range(self.lane_count()):
            a, b = int(z.lane_offsets[lane]), int(z.lane_offsets[lane + 1])
            i0 = int(np.searchsorted(z.lane_max_end[a:b], t0, side="right"))
            i1 = int(np.searchsorted(z.start[a:b], t1, side="left"))
            if i1 > i0:
                sel = np.arange(a + i0, a + i1)
                out.append(sel[z.end[sel] > t0] if t1 > t0 else sel)
        return np.concatenate(out) if out else np.zeros(0, np.int64)
