"""The trace model: zones, instant events and counters on tracks, as columnar numpy arrays.

A zone is a named interval ``[start, end)`` in integer nanoseconds on one track (a thread, a queue, a
device), nested by ``depth``. Zones are stored struct-of-arrays (29 bytes each: two int64 times, int32
name and payload ids, uint16 track and category, uint8 depth), sorted by ``(track, depth, start)``: one
*lane* (a track at one depth) is then a contiguous slice whose zones do not overlap, so a time range is
found with two ``searchsorted`` calls per lane and never a loop over zones (``engine.trace.query``).

Names and categories are ids into string tables; ``payload`` is an index into ``payloads`` (per-zone
arguments such as a dispatch's executable and workgroup count), or -1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.errors import FormatError

MAX_DEPTH = 255  # depth is a uint8: deeper zones are clamped (no real trace nests that far)


class TraceFormatError(FormatError):
    """A trace file cannot be read: not JSON, not a trace, truncated, or too large."""


class StringTable:
    """Interned strings: ``intern`` gives a stable id, ``strings[id]`` the text."""

    def __init__(self, strings: Sequence[str] = ()) -> None:
        self.strings: list[str] = []
        self._ids: dict[str, int] = {}
        for s in strings:
            self.intern(s)

    def intern(self, text: str) -> int:
        i = self._ids.get(text)
        if i is None:
            i = self._ids[text] = len(self.strings)
            self.strings.append(text)
        return i

    def id_of(self, text: str) -> int | None:
        return self._ids.get(text)

    @property
    def ids(self) -> dict[str, int]:
        """The id of each interned text (read it, do not change it: ``intern`` adds)."""
        return self._ids

    def __getitem__(self, i: int) -> str:
        return self.strings[i]

    def __len__(self) -> int:
        return len(self.strings)


@dataclass(frozen=True)
class Track:
    """One row of the timeline: a thread, a queue or a device (``kind``), in a process/device group."""

    id: int
    name: str
    kind: str = "thread"  # thread | queue | device | compiler | vm
    group: str = ""  # the process (Chrome pid) or physical device it belongs to
    pid: int = 0
    tid: int = 0


@dataclass(frozen=True)
class Zones:
    """Zone columns, all the same length, sorted by (track, depth, start); ``lanes`` index them.

    ``lane_track``, ``lane_depth`` and ``lane_offsets`` (length lanes + 1) describe the slices;
    ``lane_max_end`` is the running maximum of ``end`` inside each lane (equal to ``end`` when zones nest
    properly) so ``searchsorted`` on it finds the first zone that reaches a time even in odd traces.
    """

    start: np.ndarray  # int64 ns
    end: np.ndarray  # int64 ns
    depth: np.ndarray  # uint8
    track: np.ndarray  # uint16
    name: np.ndarray  # int32, id into Trace.names
    category: np.ndarray  # uint16, id into Trace.categories
    payload: np.ndarray  # int32, index into Trace.payloads or -1
    lane_track: np.ndarray
    lane_depth: np.ndarray
    lane_offsets: np.ndarray
    lane_max_end: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @property
    def duration(self) -> np.ndarray:
        return self.end - self.start

    @property
    def nbytes(self) -> int:
        return (
            sum(
                a.nbytes
                for a in (
                    self.start,
                    self.end,
                    self.depth,
                    self.track,
                    self.name,
                    self.category,
                    self.payload,
                )
            )
            + self.lane_max_end.nbytes
        )


@dataclass(frozen=True)
class Instants:
    """Instant events (Chrome ``ph: i``): a time, a track, a name id, a payload index."""

    time: np.ndarray
    track: np.ndarray
    name: np.ndarray
    payload: np.ndarray


@dataclass(frozen=True)
class Counters:
    """Counter samples (Chrome ``ph: C``): per sample a time, a series id and a value; ``series`` names them."""

    time: np.ndarray
    series: np.ndarray
    value: np.ndarray
    series_names: tuple[str, ...]


@dataclass
class Trace:
    """A whole trace. ``time_unit`` is always nanoseconds; ``origin_ns`` is the time the source's zero had."""

    zones: Zones
    tracks: list[Track]
    names: StringTable
    categories: StringTable
    payloads: list[dict]
    instants: Instants
    counters: Counters
    source: str = ""  # what it was read from (a path or "debug run")
    metadata: dict = field(default_factory=dict)

    @property
    def span(self) -> tuple[int, int]:
        """(first start, last end) over zones and instants; (0, 0) when empty."""
        lo, hi = [], []
        if len(self.zones):
            lo.append(int(self.zones.start.min()))
            hi.append(int(self.zones.end.max()))
        if len(self.instants.time):
            lo.append(int(self.instants.time.min()))
            hi.append(int(self.instants.time.max()))
        if len(self.counters.time):
            lo.append(int(self.counters.time.min()))
            hi.append(int(self.counters.time.max()))
        return (min(lo), max(hi)) if lo else (0, 0)

    def zone(self, index: int) -> ZoneInfo:
        """One zone as plain data (for a tooltip, a selection, a signal)."""
        z = self.zones
        p = int(z.payload[index])
        return ZoneInfo(
            index=index,
            name=self.names[int(z.name[index])],
            category=self.categories[int(z.category[index])],
            track=self.tracks[int(z.track[index])].name,
            start_ns=int(z.start[index]),
            end_ns=int(z.end[index]),
            depth=int(z.depth[index]),
            args=dict(self.payloads[p]) if p >= 0 else {},
        )

    def name_ids(self, category: str | None = None) -> np.ndarray:
        """Zone indices (sorted order) whose category is ``category`` (all when None)."""
        if category is None:
            return np.arange(len(self.zones))
        cid = self.categories.id_of(category)
        if cid is None:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(self.zones.category == cid)

    def zones_in_time_order(self, category: str | None = None) -> np.ndarray:
        """Zone indices sorted by start time (ties by track, then depth), optionally of one category."""
        idx = self.name_ids(category)
        order = np.lexsort((self.zones.depth[idx], self.zones.track[idx], self.zones.start[idx]))
        return idx[order]


@dataclass(frozen=True)
class ZoneInfo:
    index: int
    name: str
    category: str
    track: str
    start_ns: int
    end_ns: int
    depth: int
    args: dict

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def _time_order(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Zone indices in (track, start, -end) order.

    Usually one unstable argsort of ``track << 47 | start`` (times within 39 hours of each other), then
    the few zones that share a track and start (a parent and its first child) are ordered by -end; else
    stable argsorts from the last key to the first.
    """
    n = start.shape[0]
    lo = int(start.min())
    if int(start.max()) - lo < (1 << 47):
        key = (track.astype(np.int64) << 47) | (start - lo)
        order = np.argsort(key)
        ks = key[order]
        tie = np.flatnonzero(ks[1:] == ks[:-1])
        if tie.shape[0]:
            mark = np.zeros(n, bool)
            mark[tie] = True
            mark[tie + 1] = True
            pos = np.flatnonzero(mark)  # each tie group is a contiguous run of these positions
            group = np.cumsum(np.concatenate(([True], ks[pos[1:]] != ks[pos[:-1]])))
            members = order[pos]
            order[pos] = members[np.lexsort((-end[members], group))]
        return order
    order = np.argsort(-end, kind="stable")
    order = order[np.argsort(start[order], kind="stable")]
    return order[np.argsort(track[order], kind="stable")]


def _nesting_depth(track: np.ndarray, start: np.ndarray, end: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Depth of each zone in its track: how many zones of the track enclose it (vectorised).

    In (track, start, -end) ``order`` a zone's rank among its track's zones counts the zones that began
    no later; those that ended at or before its start are closed, the rest enclose it.
    """
    n = start.shape[0]
    depth = np.zeros(n, dtype=np.int64)
    if n == 0:
        return depth.astype(np.uint8)
    t_sorted = track[order]
    bounds = np.flatnonzero(np.diff(t_sorted)) + 1
    segments = np.concatenate(([0], bounds, [n]))
    for a, b in zip(segments[:-1], segments[1:]):  # one iteration per track
        idx = order[a:b]
        s = start[idx]
        ends_sorted = np.sort(end[idx])
        closed = np.searchsorted(ends_sorted, s, side="right")
        # A zero-length zone at s counts itself as closed; never let that make a depth negative.
        depth[idx] = np.maximum(np.arange(b - a) - closed, 0)
    return np.minimum(depth, MAX_DEPTH).astype(np.uint8)


def build_zones(
    start: np.ndarray,
    end: np.ndarray,
    track: np.ndarray,
    name: np.ndarray,
    category: np.ndarray | None = None,
    payload: np.ndarray | None = None,
    depth: np.ndarray | None = None,
) -> Zones:
    """Sort zone columns into lanes; depth is computed from nesting when not given."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    n = start.shape[0]
    end = np.maximum(end, start)  # a reversed zone would break the lane search; make it zero-length
    track = np.asarray(track, dtype=np.uint16)
    name = np.asarray(name, dtype=np.int32)
    category = np.zeros(n, np.uint16) if category is None else np.asarray(category, dtype=np.uint16)
    payload = np.full(n, -1, np.int32) if payload is None else np.asarray(payload, dtype=np.int32)
    order = _time_order(track, start, end) if n else np.zeros(0, np.int64)
    if depth is None:
        depth = _nesting_depth(track, start, end, order)
    else:
        depth = np.minimum(np.asarray(depth), MAX_DEPTH).astype(np.uint8)
    if n:
        # Lanes: (track, depth) over the time order; a stable sort on the small lane key keeps time order.
        lane_of = track[order].astype(np.int32) * 256 + depth[order]
        if int(lane_of.max()) < 65536:
            lane_of = lane_of.astype(np.uint16)  # numpy's stable sort of 16-bit keys is a radix sort
        order = order[np.argsort(lane_of, kind="stable")]
        if not bool(np.all(order[1:] > order[:-1])):
            start, end, depth, track, name, category, payload = (
                a[order] for a in (start, end, depth, track, name, category, payload)
            )
    lane_key = track.astype(np.int64) * 256 + depth
    if n:
        change = np.flatnonzero(np.diff(lane_key)) + 1
        offsets = np.concatenate(([0], change, [n])).astype(np.int64)
    else:
        offsets = np.zeros(1, dtype=np.int64)
    firsts = offsets[:-1]
    max_end = end.copy()
    for a, b in zip(offsets[:-1], offsets[1:]):  # one iteration per lane (a track at one depth)
        np.maximum.accumulate(end[a:b], out=max_end[a:b])
    return Zones(
        start=start,
        end=end,
        depth=depth,
        track=track,
        name=name,
        category=category,
        payload=payload,
        lane_track=track[firsts] if n else np.zeros(0, np.uint16),
        lane_depth=depth[firsts] if n else np.zeros(0, np.uint8),
        lane_offsets=offsets,
        lane_max_end=max_end,
    )


def empty_instants() -> Instants:
    return Instants(
        np.zeros(0, np.int64), np.zeros(0, np.uint16), np.zeros(0, np.int32), np.zeros(0, np.int32)
    )


def empty_counters() -> Counters:
    return Counters(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float64), ())


class TraceBuilder:
    """Collects zones, instants and counters from a reader, then builds a sorted ``Trace``.

    Readers append per event (their input is parsed event by event anyway) or whole arrays at once
    (``add_zone_arrays``); ``build`` does the sorting and nesting with numpy.
    """

    def __init__(self, source: str = "") -> None:
        self.source = source
        self.names = StringTable()
        self.categories = StringTable([""])
        self.tracks: list[Track] = []
        self._track_ids: dict[tuple, int] = {}
        self.payloads: list[dict] = []
        self._z: list[list] = [[], [], [], [], [], []]  # start, end, track, name, category, payload
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._i: list[list] = [[], [], [], []]
        self._c: list[list] = [[], [], []]
        self._series = StringTable()
        self.metadata: dict = {}

    @property
    def zone_columns(self) -> list[list]:
        """The pending zones' column lists (start, end, track, name, category, payload): a reader that adds
        millions of zones appends to them directly instead of calling ``zone`` for each."""
        return self._z

    def track(
        self, key: tuple, name: str, kind: str = "thread", group: str = "", pid: int = 0, tid: int = 0
    ) -> int:
        """The id of the track with ``key``, created on first use."""
        tid_ = self._track_ids.get(key)
        if tid_ is None:
            if len(self.tracks) >= 65535:
                raise TraceFormatError("more than 65535 tracks")
            tid_ = self._track_ids[key] = len(self.tracks)
            self.tracks.append(Track(tid_, name, kind, group, pid, tid))
        return tid_

    def rename_track(self, key: tuple, name: str, group: str | None = None, kind: str | None = None) -> None:
        i = self._track_ids.get(key)
        if i is not None:
            t = self.tracks[i]
            self.tracks[i] = Track(
                t.id,
                name,
                t.kind if kind is None else kind,
                t.group if group is None else group,
                t.pid,
                t.tid,
            )

    def payload(self, args: dict | None) -> int:
        if not args:
            return -1
        self.payloads.append(args)
        return len(self.payloads) - 1

    def add_zone(
        self, start: int, end: int, track: int, name: str, category: str = "", args: dict | None = None
    ) -> None:
        z = self._z
        z[0].append(start)
        z[1].append(end)
        z[2].append(track)
        z[3].append(self.names.intern(name))
        z[4].append(self.categories.intern(category))
        z[5].append(self.payload(args))

    def add_zone_arrays(
        self,
        start: np.ndarray,
        end: np.ndarray,
        track: np.ndarray,
        name: np.ndarray,
        category: np.ndarray | None = None,
        payload: np.ndarray | None = None,
    ) -> None:
        """Append many zones at once; ``name``/``category`` are ids already interned in this builder."""
        n = len(start)
        self._chunks.append(
            (
                np.asarray(start, np.int64),
                np.asarray(end, np.int64),
                np.asarray(track, np.uint16),
                np.asarray(name, np.int32),
                np.zeros(n, np.uint16) if category is None else np.asarray(category, np.uint16),
                np.full(n, -1, np.int32) if payload is None else np.asarray(payload, np.int32),
            )
        )

    def add_instant(self, time: int, track: int, name: str, args: dict | None = None) -> None:
        self._i[0].append(time)
        self._i[1].append(track)
        self._i[2].append(self.names.intern(name))
        self._i[3].append(self.payload(args))

    def add_counter(self, time: int, series: str, value: float) -> None:
        self._c[0].append(time)
        self._c[1].append(self._series.intern(series))
        self._c[2].append(value)

    @property
    def zone_count(self) -> int:
        return len(self._z[0]) + sum(len(c[0]) for c in self._chunks)

    def build(self, *, rebase: bool = False) -> Trace:
        """The sorted trace; with ``rebase`` every time moves so the earliest event is at 0."""
        dtypes = (np.int64, np.int64, np.uint16, np.int32, np.uint16, np.int32)
        cols = [np.asarray(self._z[k], dtype=dtypes[k]) for k in range(6)]
        if self._chunks:
            cols = [np.concatenate([cols[k]] + [c[k] for c in self._chunks]) for k in range(6)]
        it = np.asarray(self._i[0], np.int64)
        ct = np.asarray(self._c[0], np.int64)
        origin = 0
        if rebase:
            firsts = [a.min() for a in (cols[0], it, ct) if a.size]
            origin = int(min(firsts)) if firsts else 0
            cols[0] = cols[0] - origin
            cols[1] = cols[1] - origin
            it = it - origin
            ct = ct - origin
        zones = build_zones(*cols)
        instants = Instants(
            it,
            np.asarray(self._i[1], np.uint16),
            np.asarray(self._i[2], np.int32),
            np.asarray(self._i[3], np.int32),
        )
        counters = Counters(
            ct,
            np.asarray(self._c[1], np.int32),
            np.asarray(self._c[2], np.float64),
            tuple(self._series.strings),
        )
        meta = dict(self.metadata)
        meta["origin_ns"] = origin
        return Trace(
            zones,
            self.tracks,
            self.names,
            self.categories,
            self.payloads,
            instants,
            counters,
            self.source,
            meta,
        )
