"""``.lenstrace``: the trace model's own columns in an uncompressed ``numpy.savez`` archive.

Reopening a big trace then costs a read of its columns (tens of bytes per zone), no parsing and no
sorting: the lanes are stored already built. Loading checks shapes and order, so a damaged file is a
``TraceFormatError``, not a wrong picture. Strings, tracks and payloads travel as one JSON document.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from engine.trace.model import Counters, Instants, StringTable, Trace, TraceFormatError, Track, Zones

LENSTRACE_MAGIC = b"PK\x03\x04"
FORMAT_VERSION = 1
_ZONE_COLUMNS = {
    "start": np.int64,
    "end": np.int64,
    "depth": np.uint8,
    "track": np.uint16,
    "name": np.int32,
    "category": np.uint16,
    "payload": np.int32,
    "lane_track": np.uint16,
    "lane_depth": np.uint8,
    "lane_offsets": np.int64,
    "lane_max_end": np.int64,
}


def save_lenstrace(trace: Trace, path: str | Path) -> None:
    z = trace.zones
    meta = {
        "version": FORMAT_VERSION,
        "names": trace.names.strings,
        "categories": trace.categories.strings,
        "tracks": [[t.id, t.name, t.kind, t.group, t.pid, t.tid] for t in trace.tracks],
        "payloads": trace.payloads,
        "counter_series": list(trace.counters.series_names),
        "source": trace.source,
        "metadata": trace.metadata,
    }
    arrays = {f"zones_{k}": getattr(z, k) for k in _ZONE_COLUMNS}
    arrays.update(
        instants_time=trace.instants.time,
        instants_track=trace.instants.track,
        instants_name=trace.instants.name,
        instants_payload=trace.instants.payload,
        counters_time=trace.counters.time,
        counters_series=trace.counters.series,
        counters_value=trace.counters.value,
        meta=np.frombuffer(json.dumps(meta, default=str).encode(), dtype=np.uint8),
    )
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def load_lenstrace(path: str | Path) -> Trace:
    path = Path(path)
    try:
        # The file opened here, not by np.load: np.load leaks its own handle when the archive is not a zip.
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise TraceFormatError(f"not a readable .lenstrace archive ({e})", path=str(path)) from None
    try:
        meta = json.loads(bytes(data["meta"]).decode())
        if meta.get("version") != FORMAT_VERSION:
            raise TraceFormatError(f"unsupported .lenstrace version {meta.get('version')}", path=str(path))
        cols = {}
        for k, dt in _ZONE_COLUMNS.items():
            a = data[f"zones_{k}"]
            if a.dtype != dt or a.ndim != 1:
                raise TraceFormatError(f"column {k} has type {a.dtype}{a.shape}", path=str(path))
            cols[k] = a
        n = cols["start"].shape[0]
        if any(
            cols[k].shape[0] != n
            for k in ("end", "depth", "track", "name", "category", "payload", "lane_max_end")
        ):
            raise TraceFormatError("zone columns differ in length", path=str(path))
        offsets = cols["lane_offsets"]
        if offsets.shape[0] != cols["lane_track"].shape[0] + 1 or offsets[0] != 0 or offsets[-1] != n:
            raise TraceFormatError("lane offsets do not cover the zones", path=str(path))
        if np.any(np.diff(offsets) < 0):
            raise TraceFormatError("lane offsets are not increasing", path=str(path))
        names = StringTable(meta["names"])
        if n and (cols["name"].min() < 0 or cols["name"].max() >= len(names)):
            raise TraceFormatError("a zone names a string outside the table", path=str(path))
        tracks = [Track(*t) for t in meta["tracks"]]
        if n and int(cols["track"].max()) >= len(tracks):
            raise TraceFormatError("a zone is on a track that does not exist", path=str(path))
        payloads = meta["payloads"]
        if n and int(cols["payload"].max()) >= len(payloads):
            raise TraceFormatError("a zone refers to a payload that does not exist", path=str(path))
        # Search needs start sorted inside each lane: check it (one vectorised pass).
        inner = np.ones(n, bool)
        inner[offsets[1:-1]] = False
        if n > 1 and np.any(np.diff(cols["start"])[inner[1:]] < 0):
            raise TraceFormatError("zones are not sorted inside their lanes", path=str(path))
        zones = Zones(**cols)
        instants = Instants(
            data["instants_time"], data["instants_track"], data["instants_name"], data["instants_payload"]
        )
        counters = Counters(
            data["counters_time"],
            data["counters_series"],
            data["counters_value"],
            tuple(meta["counter_series"]),
        )
        return Trace(
            zones,
            tracks,
            names,
            StringTable(meta["categories"]),
            payloads,
            instants,
            counters,
            str(path),
            dict(meta.get("metadata") or {}),
        )
    except KeyError as e:
        raise TraceFormatError(f".lenstrace archive lacks {e}", path=str(path)) from None
    except (TypeError, ValueError, UnicodeDecodeError) as e:
        raise TraceFormatError(f"damaged .lenstrace ({type(e).__name__}: {e})", path=str(path)) from None
