"""Chrome trace-event JSON in and out (what chrome://tracing, Perfetto and PyTorch's profiler read and write).

Read: a list of events or ``{"traceEvents": [...]}``; ``ph`` X (complete), B/E (begin/end, matched per
thread), i/I (instant), C (counter: one series per key of ``args``), M (``thread_name``/``process_name``,
``thread_sort_index`` ignored), b/e (async slices, matched by category, id and name, one track per
category). Other phases (flows, samples, object events) are counted in
``trace.metadata["skipped_events"]``. Times are microseconds (floats) in the file, integer nanoseconds in
the model. Each ``(pid, tid)`` is a track.

Write: the same format, one ``M`` per track, one ``X`` per zone (args = the zone's payload), ``i`` per
instant, ``C`` per counter sample; reading the output back gives the same trace.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.trace.model import Trace, TraceBuilder, TraceFormatError

MAX_JSON_BYTES = 1 << 30
Progress = Callable[[float, str], None]  # json.load needs ~10x the file in memory; refuse what cannot fit


_NUMBERS = (int, float)


def _ns(us: Any) -> int:
    return int(round(float(us) * 1000.0))


def _key(value: Any) -> Any:
    # pid/tid are ints in Chrome's own traces, strings in some exporters (PyTorch's "Stream 7").
    return value if isinstance(value, (int, str)) else str(value)


def load_chrome_json(path: str | Path, max_bytes: int = MAX_JSON_BYTES) -> Trace:
    """Read a Chrome trace-event JSON file; ``TraceFormatError`` when it is not one."""
    path = Path(path)
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise TraceFormatError(f"cannot read trace: {e.strerror}", path=str(path)) from None
    if size > max_bytes:
        raise TraceFormatError(
            f"trace JSON is {size / 2**20:.0f} MiB; the limit is {max_bytes / 2**20:.0f} MiB", path=str(path)
        )
    return chrome_trace_from_data(read_json(path), source=str(path))


def read_json(path: str | Path) -> Any:
    """The JSON document at ``path``; ``TraceFormatError`` when it is not JSON or nests too deeply."""
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise TraceFormatError(f"not valid JSON ({e})", path=str(path)) from None
    except RecursionError:
        raise TraceFormatError("JSON nested too deeply", path=str(path)) from None


def chrome_trace_from_data(data: Any, source: str = "", progress: Progress | None = None) -> Trace:
    """Build a trace from already-parsed Chrome trace JSON (a list of events or an object).

    ``progress(fraction, message)`` is called every 65,536 events; it may raise to cancel."""
    events = _events_of(data, source)
    reader = _ChromeEventReader(source)
    if isinstance(data, dict):
        reader.builder.metadata.update(
            {k: v for k, v in data.items() if k != "traceEvents" and isinstance(v, (str, int, float))}
        )
    reader.read(events, progress)
    return reader.finish()


def _events_of(data: Any, source: str) -> list:
    """The event list of a Chrome trace document (a list, or an object's ``traceEvents``)."""
    if isinstance(data, dict):
        events = data.get("traceEvents")
        if events is None:
            raise TraceFormatError(
                "a JSON object without 'traceEvents' is not a Chrome trace", path=source or None
            )
    else:
        events = data
    if not isinstance(events, list):
        raise TraceFormatError("Chrome trace events must be a JSON list", path=source or None)
    return events


class _ChromeEventReader:
    """One pass over a trace's events into a ``TraceBuilder``: complete (X) events straight into its
    columns, begin/end and async pairs matched on their stacks, instants, counters and track names."""

    def __init__(self, source: str):
        self.source = source
        self.builder = TraceBuilder(source)
        self.stacks: dict[tuple, list] = {}  # open B events per (pid, tid), open b events per async key
        self.process_names: dict[Any, str] = {}
        self.thread_names: dict[tuple, str] = {}
        self.known: dict[tuple, int] = {}  # track of each (pid, tid) seen
        self.skipped = 0

    def track_of(self, pid: Any, tid: Any) -> int:
        t = self.known.get((pid, tid))
        if t is None:
            name = self.thread_names.get((pid, tid), f"{pid}:{tid}")
            t = self.known[(pid, tid)] = self.builder.track((pid, tid), name, pid=_int(pid), tid=_int(tid))
        return t

    def read(self, events: list, progress: Progress | None) -> None:
        b, known = self.builder, self.known
        total = max(len(events), 1)
        z_start, z_end, z_track, z_name, z_cat, z_payload = b.zone_columns
        name_ids, cat_ids = b.names.ids, b.categories.ids
        intern_name, intern_cat, payload = b.names.intern, b.categories.intern, b.payload
        for k, ev in enumerate(events):
            if progress is not None and not k & 0xFFFF:
                progress(k / total, f"{k:,} of {total:,} events")
            if not isinstance(ev, dict):
                raise TraceFormatError(f"event {k} is not a JSON object", path=self.source or None)
            ph = ev.get("ph")
            try:
                if ph == "X":  # the common event: appended to the builder's columns without calls
                    get = ev.get
                    track = known.get((get("pid", 0), get("tid", 0)))
                    if track is None:
                        track = self.track_of(_key(get("pid", 0)), _key(get("tid", 0)))
                    ts = ev["ts"]
                    start = round(ts * 1000) if type(ts) in _NUMBERS else _ns(ts)
                    dur = get("dur", 0)
                    z_start.append(start)
                    z_end.append(start + (round(dur * 1000) if type(dur) in _NUMBERS else _ns(dur)))
                    z_track.append(track)
                    name = get("name", "")
                    nid = name_ids.get(name) if type(name) is str else None
                    z_name.append(nid if nid is not None else intern_name(str(name)))
                    cat = get("cat", "")
                    cid = cat_ids.get(cat) if type(cat) is str else None
                    z_cat.append(cid if cid is not None else intern_cat(str(cat)))
                    args = get("args")
                    z_payload.append(payload(args) if args else -1)
                elif ph == "B":
                    pid, tid = _key(ev.get("pid", 0)), _key(ev.get("tid", 0))
                    self.stacks.setdefault((pid, tid), []).append(ev)
                elif ph == "E":
                    self.end(ev)
                elif ph in ("b", "e"):
                    self.async_slice(ph, ev)
                elif ph in ("i", "I", "R"):
                    pid, tid = _key(ev.get("pid", 0)), _key(ev.get("tid", 0))
                    track = self.track_of(pid, tid)
                    b.add_instant(_ns(ev["ts"]), track, str(ev.get("name", "")), ev.get("args") or None)
                elif ph == "C":
                    self.counter(ev)
                elif ph == "M":
                    self.metadata_event(ev)
                else:
                    self.skipped += 1
            except (KeyError, TypeError, ValueError, OverflowError) as e:
                raise TraceFormatError(
                    f"event {k} (ph {ph!r}) is malformed: {type(e).__name__}: {e}", path=self.source or None
                ) from None

    def end(self, ev: dict) -> None:
        """An E event: the zone from the (pid, tid)'s last open B, with both events' args."""
        pid, tid = _key(ev.get("pid", 0)), _key(ev.get("tid", 0))
        stack = self.stacks.get((pid, tid))
        if not stack:
            self.skipped += 1  # an end without a begin (a trace cut at its start)
            return
        begin = stack.pop()
        args = dict(begin.get("args") or {})
        args.update(ev.get("args") or {})
        track = self.track_of(pid, tid)
        self.builder.add_zone(
            _ns(begin["ts"]),
            _ns(ev["ts"]),
            track,
            str(begin.get("name", ev.get("name", ""))),
            str(begin.get("cat", "")),
            args or None,
        )

    def async_slice(self, ph: str, ev: dict) -> None:
        """Async (nestable) slices: matched by category, id and name; one track per category."""
        pid = _key(ev.get("pid", 0))
        cat = str(ev.get("cat", ""))
        ident = ev.get("id", ev.get("id2", ""))
        key = ("async", pid, cat, str(ident), str(ev.get("name", "")))
        if ph == "b":
            self.stacks.setdefault(key, []).append(ev)
            return
        stack = self.stacks.get(key)
        if not stack:
            self.skipped += 1
            return
        begin = stack.pop()
        args = dict(begin.get("args") or {})
        args.update(ev.get("args") or {})
        lane = f"async {cat}".strip()
        self.thread_names.setdefault((pid, lane), lane)
        track = self.track_of(pid, lane)
        self.builder.add_zone(_ns(begin["ts"]), _ns(ev["ts"]), track, key[4], cat, args or None)

    def counter(self, ev: dict) -> None:
        """A C event: one sample per key of its args (``name`` alone for ``value`` or the name itself)."""
        name = str(ev.get("name", ""))
        t = _ns(ev["ts"])
        for key, value in (ev.get("args") or {}).items():
            self.builder.add_counter(t, name if key in ("value", name) else f"{name}.{key}", float(value))

    def metadata_event(self, ev: dict) -> None:
        """An M event: a thread's name (and IREE Lens's track kind) or a process's name."""
        pid, tid = _key(ev.get("pid", 0)), _key(ev.get("tid", 0))
        label = str((ev.get("args") or {}).get("name", ""))
        if ev.get("name") == "thread_name":
            self.thread_names[(pid, tid)] = label
            kind = str((ev.get("args") or {}).get("lens_kind", "thread"))
            b = self.builder
            b.track((pid, tid), label, kind, self.process_names.get(pid, ""), _int(pid), _int(tid))
            b.rename_track((pid, tid), label, kind=kind)
        elif ev.get("name") == "process_name":
            self.process_names[pid] = label

    def finish(self) -> Trace:
        """Count what never matched, group tracks by their process's name and build the trace."""
        b, process_names = self.builder, self.process_names
        for stack in self.stacks.values():
            self.skipped += len(stack)  # begins never ended (a trace cut at its end)
        for i, t in enumerate(b.tracks):
            if t.pid in process_names or str(t.pid) in process_names:
                group = process_names.get(t.pid, process_names.get(str(t.pid), ""))
                b.tracks[i] = type(t)(t.id, t.name, t.kind, group, t.pid, t.tid)
        b.metadata["skipped_events"] = self.skipped
        try:
            return b.build()
        except OverflowError:
            raise TraceFormatError(
                "a time does not fit in 64-bit nanoseconds", path=self.source or None
            ) from None


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def chrome_events(trace: Trace) -> list[dict]:
    """The trace as Chrome trace events (metadata first, then zones in time order)."""
    events: list[dict] = []
    groups: dict[str, int] = {}
    ids: list[tuple[int, int]] = []
    for t in trace.tracks:
        pid = t.pid if (t.pid or t.tid) else groups.setdefault(t.group, len(groups) + 1)
        tid = t.tid if (t.pid or t.tid) else t.id + 1
        ids.append((pid, tid))
        if t.group:
            events.append(
                {"ph": "M", "name": "process_name", "pid": pid, "tid": tid, "args": {"name": t.group}}
            )
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": tid,
                "args": {"name": t.name, "lens_kind": t.kind},
            }
        )
    z = trace.zones
    order = trace.zones_in_time_order()
    names, cats, payloads = trace.names.strings, trace.categories.strings, trace.payloads
    starts, ends, tracks, nm, ct, pl = (
        a[order].tolist() for a in (z.start, z.end, z.track, z.name, z.category, z.payload)
    )
    for s, e, tr, n, c, p in zip(starts, ends, tracks, nm, ct, pl):
        pid, tid = ids[tr]
        ev = {
            "ph": "X",
            "name": names[n],
            "cat": cats[c],
            "ts": s / 1000,
            "dur": (e - s) / 1000,
            "pid": pid,
            "tid": tid,
        }
        if p >= 0:
            ev["args"] = payloads[p]
        events.append(ev)
    ins = trace.instants
    for t, tr, n, p in zip(ins.time.tolist(), ins.track.tolist(), ins.name.tolist(), ins.payload.tolist()):
        pid, tid = ids[tr]
        ev = {"ph": "i", "s": "t", "name": names[n], "ts": t / 1000, "pid": pid, "tid": tid}
        if p >= 0:
            ev["args"] = payloads[p]
        events.append(ev)
    cs = trace.counters
    for t, sid, v in zip(cs.time.tolist(), cs.series.tolist(), cs.value.tolist()):
        events.append(
            {"ph": "C", "name": cs.series_names[sid], "ts": t / 1000, "pid": 0, "args": {"value": v}}
        )
    return events


def write_chrome_json(trace: Trace, path: str | Path, extra_events: list[dict] | None = None) -> None:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ns"}``."""
    events = chrome_events(trace) + list(extra_events or [])
    with open(path, "w") as f:
        json.dump(
            {"traceEvents": events, "displayTimeUnit": "ns"}, f, separators=(",", ":"), default=_jsonable
        )


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (tuple, set)):
        return list(v)
    return str(v)
