"""The trace model: nesting, lanes, the visible-range query, statistics, compare, Chrome JSON in/out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.trace.chrome import chrome_trace_from_data, load_chrome_json, write_chrome_json
from engine.trace.model import TraceBuilder, TraceFormatError
from engine.trace.open import load_trace
from engine.trace.query import ZoneIndex
from engine.trace.stats import compare, durations_of, histogram, self_times, zone_statistics


def random_nested_trace(seed: int = 0, n_roots: int = 2000, tracks: int = 3):
    """Properly nested zones built recursively in Python (an independent way to know each depth)."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder("random")
    expected = []  # (track, start, end, depth, name)

    def fill(track: int, t0: int, t1: int, depth: int) -> None:
        t = t0
        while t < t1 and depth < 4:
            length = int(rng.integers(1, max(2, (t1 - t) // 2 + 1)))
            s, e = t, min(t + length, t1)
            name = f"z{int(rng.integers(0, 5))}"
            expected.append((track, s, e, depth, name))
            b.add_zone(s, e, track, name, "test")
            if e - s > 8 and rng.random() < 0.6:
                fill(track, s + 1, e - 1, depth + 1)
            t = e + int(rng.integers(0, 5))

    for k in range(tracks):
        tid = b.track(("t", k), f"thread {k}")
        fill(tid, 0, n_roots * 50, 0)
    return b.build(), expected


def test_depth_from_nesting_and_lanes_sorted():
    trace, expected = random_nested_trace()
    z = trace.zones
    got = sorted(
        zip(
            z.track.tolist(),
            z.start.tolist(),
            z.end.tolist(),
            z.depth.tolist(),
            [trace.names[i] for i in z.name],
        )
    )
    assert got == sorted(expected)
    key = z.track.astype(np.int64) * 1_000_000_000_000 + z.depth.astype(np.int64) * 10_000_000_000 + z.start
    assert np.all(np.diff(key) >= 0)
    # Within a lane properly nested zones never overlap.
    for a, b in zip(z.lane_offsets[:-1], z.lane_offsets[1:]):
        assert np.all(z.start[a + 1 : b] >= z.end[a : b - 1])


def test_visible_boxes_cover_exactly_the_overlapping_zones():
    trace, _ = random_nested_trace(1)
    index = ZoneIndex(trace)
    z = trace.zones
    t0, t1 = 30_000, 41_000
    # res 1: no merging, the boxes are the zones overlapping the range (brute force as the oracle).
    boxes = index.visible(t0, t1, 1)
    brute = np.flatnonzero((z.start < t1) & (z.end > t0))
    assert sorted(boxes.index.tolist()) == brute.tolist()
    # Coarse: every overlapping zone is in exactly one box, and the boxes per lane are few.
    res = 500
    boxes = index.visible(t0, t1, res)
    assert int(boxes.count.sum()) >= len(brute)
    assert len(boxes) < len(brute)
    lanes = len(set(zip(boxes.track.tolist(), boxes.depth.tolist())))
    assert len(boxes) <= lanes * ((t1 - t0) // res + 2) * 2


def test_lod_levels_give_bounded_boxes_for_a_big_lane():
    b = TraceBuilder()
    t = b.track(("x",), "x")
    n = 200_000
    starts = np.arange(n, dtype=np.int64) * 100
    b.add_zone_arrays(starts, starts + 60, np.full(n, t), np.zeros(n, np.int32))
    b.names.intern("tiny")
    trace = b.build()
    index = ZoneIndex(trace)
    boxes = index.visible(0, n * 100, n * 100 // 1000)
    assert len(boxes) <= 1000
    assert int(boxes.count.sum()) == n  # every zone accounted for once
    deep = index.visible(5_000_000, 5_000_500, 1)
    assert deep.index.tolist() == list(range(50_000, 50_005))


def test_statistics_against_numpy():
    trace, expected = random_nested_trace(2)
    rows = {r.name: r for r in zone_statistics(trace)}
    for name in {e[4] for e in expected}:
        d = np.array([e[2] - e[1] for e in expected if e[4] == name])
        r = rows[name]
        assert (r.count, r.total_ns, r.min_ns, r.max_ns) == (len(d), d.sum(), d.min(), d.max())
        assert r.mean_ns == pytest.approx(d.mean())
        for p in (50, 90, 99):
            assert getattr(r, f"p{p}_ns") == int(np.percentile(d, p, method="inverted_cdf"))
        assert durations_of(trace, name).sum() == d.sum()
    counts, edges = histogram(durations_of(trace, "z1"))
    assert counts.sum() == rows["z1"].count and len(edges) == len(counts) + 1


def test_self_time_subtracts_direct_children_only():
    b = TraceBuilder()
    t = b.track(("a",), "a")
    b.add_zone(0, 100, t, "root")
    b.add_zone(10, 40, t, "child")
    b.add_zone(15, 20, t, "leaf")
    b.add_zone(50, 60, t, "child")
    trace = b.build()
    selfs = dict(zip([trace.names[i] for i in trace.zones.name], self_times(trace).tolist()))
    assert selfs["root"] == 100 - 30 - 10 and selfs["leaf"] == 5
    rows = {r.name: r for r in zone_statistics(trace)}
    assert rows["child"].self_ns == 25 + 10


def test_compare_orders_slower_first():
    def make(durs: dict):
        b = TraceBuilder()
        t = b.track(("a",), "a")
        at = 0
        for name, ds in durs.items():
            for d in ds:
                b.add_zone(at, at + d, t, name)
                at += d + 1
        return b.build()

    a = make({"cse": [10, 10], "canonicalize": [100], "gone": [5]})
    b = make({"cse": [10, 10, 10], "canonicalize": [400], "new": [7]})
    diffs = compare(zone_statistics(a), zone_statistics(b))
    assert [d.name for d in diffs][:2] == ["canonicalize", "cse"]
    d = {x.name: x for x in diffs}
    assert d["canonicalize"].total_diff_ns == 300 and d["cse"].count_diff == 1
    assert d["gone"].count_b == 0 and d["new"].count_a == 0


def test_chrome_round_trip(tmp_path):
    trace, _ = random_nested_trace(3, n_roots=200)
    b = TraceBuilder()
    t = b.track(("p", 1), "worker")
    b.add_zone(
        1_234_567_891, 1_234_999_000, t, "dispatch", "dispatch", {"ordinal": 0, "workgroup_count": [4, 1, 1]}
    )
    b.add_instant(1_234_600_000, t, "fence")
    b.add_counter(1_234_700_000, "memory", 4096.0)
    for src in (trace, b.build()):
        p = tmp_path / "t.json"
        write_chrome_json(src, p)
        back = load_chrome_json(p)
        for col in ("start", "end", "depth", "track", "category", "payload"):
            assert np.array_equal(getattr(src.zones, col), getattr(back.zones, col)), col
        assert [src.names[i] for i in src.zones.name] == [back.names[i] for i in back.zones.name]
        assert [(t.name, t.kind, t.group) for t in src.tracks] == [
            (t.name, t.kind, t.group) for t in back.tracks
        ]
        assert src.payloads == back.payloads
        assert np.array_equal(src.instants.time, back.instants.time)
        assert np.array_equal(src.counters.value, back.counters.value)
        p2 = tmp_path / "t2.json"
        write_chrome_json(back, p2)
        assert json.loads(p.read_text()) == json.loads(p2.read_text())


def test_chrome_begin_end_and_pytorch_shapes():
    events = [
        {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "python"}},
        {"ph": "B", "name": "forward", "pid": 7, "tid": "stream 1", "ts": 10.0},
        {
            "ph": "X",
            "name": "aten::mm",
            "cat": "cpu_op",
            "pid": 7,
            "tid": "stream 1",
            "ts": 11.5,
            "dur": 2.25,
        },
        {"ph": "E", "pid": 7, "tid": "stream 1", "ts": 20.0},
        {"ph": "E", "pid": 7, "tid": 3, "ts": 21.0},  # an end without a begin
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": "stream 1", "args": {"name": "main"}},
        {"ph": "C", "name": "mem", "pid": 7, "ts": 12, "args": {"used": 10, "free": 5}},
        {"ph": "s", "name": "flow", "pid": 7, "tid": 1, "ts": 1, "id": 3},
        {"ph": "b", "name": "request", "cat": "net", "id": "0x1", "pid": 7, "ts": 30},
        {"ph": "b", "name": "request", "cat": "net", "id": "0x2", "pid": 7, "ts": 31},
        {"ph": "e", "name": "request", "cat": "net", "id": "0x1", "pid": 7, "ts": 35},
        {"ph": "e", "name": "request", "cat": "net", "id": "0x2", "pid": 7, "ts": 40, "args": {"ok": 1}},
    ]
    trace = chrome_trace_from_data({"traceEvents": events})
    names = [trace.names[i] for i in trace.zones.name]
    assert names == ["forward", "aten::mm", "request", "request"]
    assert trace.zones.depth.tolist() == [0, 1, 0, 1]
    assert trace.zones.start.tolist() == [10_000, 11_500, 30_000, 31_000]
    assert trace.zones.end.tolist() == [20_000, 13_750, 35_000, 40_000]
    assert trace.tracks[int(trace.zones.track[2])].name == "async net"
    assert trace.zone(3).args == {"ok": 1}
    assert trace.tracks[0].name == "main" and trace.tracks[0].group == "python"
    assert trace.counters.series_names == ("mem.used", "mem.free")
    assert trace.metadata["skipped_events"] == 2


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"traceEvents": [{"ph": "X", "ts": 1', "not valid JSON"),
        ('{"foo": 1}', "without 'traceEvents'"),
        ('{"traceEvents": [{"ph": "X", "name": "a"}]}', "event 0"),
        ('{"traceEvents": [{"ph": "X", "ts": "soon", "dur": 1}]}', "malformed"),
        ('{"traceEvents": [3]}', "not a JSON object"),
        ("[" * 100000, "nested too deeply"),
    ],
)
def test_chrome_bad_input_is_a_clear_error(tmp_path, content, message):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(TraceFormatError, match=message):
        load_chrome_json(p)


@pytest.mark.parametrize("content, message", [('{"traceEvents": [1', "not valid JSON"), ("[" * 100000, "nested too deeply")])
def test_any_trace_that_is_not_json_is_a_clear_error(tmp_path, content, message):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(TraceFormatError, match=message):
        load_trace(p)  # what the window opens: sniffed as JSON, then read


def test_chrome_size_limit(tmp_path):
    p = tmp_path / "big.json"
    p.write_text('{"traceEvents": []}' + " " * 2000)
    with pytest.raises(TraceFormatError, match="limit"):
        load_chrome_json(p, max_bytes=1000)


def test_chrome_progress_and_cancel():
    events = [{"ph": "X", "name": "z", "ts": k, "dur": 0.5, "pid": 1, "tid": 1} for k in range(70_000)]
    seen = []
    trace = chrome_trace_from_data(events, progress=lambda f, m: seen.append(f))
    assert len(trace.zones) == 70_000 and seen == [0.0, 65536 / 70_000]

    class Stop(Exception):
        pass

    def cancel(f, m):
        if f > 0:
            raise Stop

    with pytest.raises(Stop):
        chrome_trace_from_data(events, progress=cancel)


def test_zones_starting_together_nest_by_length():
    b = TraceBuilder()
    t = b.track(("a",), "a")
    for s, e, name in [(0, 2, "leaf"), (0, 10, "root"), (5, 9, "late"), (0, 5, "mid"), (5, 7, "late-leaf")]:
        b.add_zone(s, e, t, name)
    trace = b.build()
    depth = {trace.names[n]: d for n, d in zip(trace.zones.name.tolist(), trace.zones.depth.tolist())}
    assert depth == {"root": 0, "mid": 1, "leaf": 2, "late": 1, "late-leaf": 2}
