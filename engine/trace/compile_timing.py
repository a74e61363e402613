"""Compile timing (``iree-compile --mlir-timing --mlir-output-format=json``) as a trace.

MLIR reports durations, not start times, so passes are laid out one after another from their parent's
start (the order MLIR printed them), nested by pipeline: a zone per pass, named by the pass, on one
``compiler`` track. Statistics per name then add up a pass over every pipeline that ran it — the table
a compile-time regression hunt needs. Nested pipelines that ran in parallel can report more wall time
than their parent; their zones then reach past the parent's end (depth is kept from the report).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from engine.compiler.timing import PassTiming, TimingReport, parse_timing, split_timing_output
from engine.errors import FormatError
from engine.trace.model import (
    StringTable,
    Trace,
    TraceFormatError,
    Track,
    build_zones,
    empty_counters,
    empty_instants,
)

MAX_TIMING_BYTES = 256 << 20


def trace_from_timing_report(report: TimingReport, source: str = "") -> Trace:
    """The pass timing of one compilation as zones (times from 0, in ns of wall time)."""
    names = StringTable()
    categories = StringTable(["", "pass", "pipeline"])
    starts: list[int] = []
    ends: list[int] = []
    depths: list[int] = []
    name_ids: list[int] = []
    cats: list[int] = []
    payloads: list[dict] = []
    pay: list[int] = []

    def lay(passes: tuple[PassTiming, ...], t: int, depth: int) -> int:
        for p in passes:  # one iteration per pass of the report (hundreds), not per trace zone
            wall = int(round(p.wall_s * 1e9))
            starts.append(t)
            ends.append(t + wall)
            depths.append(depth)
            name_ids.append(names.intern(p.name))
            cats.append(2 if p.children else 1)
            payloads.append({"wall_s": p.wall_s, "user_s": p.user_s})
            pay.append(len(payloads) - 1)
            if p.children:
                lay(p.children, t, depth + 1)
            t += wall
        return t

    lay(report.passes, 0, 0)
    n = len(starts)
    zones = build_zones(
        np.asarray(starts, np.int64),
        np.asarray(ends, np.int64),
        np.zeros(n, np.uint16),
        np.asarray(name_ids, np.int32),
        np.asarray(cats, np.uint16),
        np.asarray(pay, np.int32),
        depth=np.asarray(depths, np.int64),
    )
    meta = {
        "kind": "compile-timing",
        "total_wall_s": report.total_wall_s,
        "total_user_s": report.total_user_s,
        "rest_wall_s": report.rest_wall_s,
    }
    return Trace(
        zones,
        [Track(0, "iree-compile", "compiler", "compiler")],
        names,
        categories,
        payloads,
        empty_instants(),
        empty_counters(),
        source,
        meta,
    )


def timing_json_of_text(text: str) -> list | None:
    """The timing JSON list from a timing.json file's text or from iree-compile's whole stderr."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, list):
            return data
    return split_timing_output(text)[1]


def looks_like_timing(data: object) -> bool:
    """True for a parsed JSON list shaped like MLIR's timing report (entries with wall/user/name)."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(e, dict) for e in data)
        and any(isinstance(e.get("wall"), dict) and "name" in e for e in data)
    )


def load_compile_timing(path: str | Path, max_bytes: int = MAX_TIMING_BYTES) -> Trace:
    """Read a compile's timing JSON (or iree-compile stderr that ends with it) as a trace."""
    path = Path(path)
    try:
        if os.path.getsize(path) > max_bytes:
            raise TraceFormatError(f"timing file is larger than {max_bytes >> 20} MiB", path=str(path))
        text = path.read_text(errors="replace")
    except OSError as e:
        raise TraceFormatError(f"cannot read timing file: {e.strerror}", path=str(path)) from None
    data = timing_json_of_text(text)
    if data is None:
        raise TraceFormatError(
            "no MLIR timing JSON found (expected --mlir-output-format=json output)", path=str(path)
        )
    try:
        report = parse_timing(data)
    except FormatError as e:
        raise TraceFormatError(e.message, path=str(path)) from None
    try:
        return trace_from_timing_report(report, str(path))
    except (OverflowError, ValueError, RecursionError) as e:
        raise TraceFormatError(
            f"timing values out of range ({type(e).__name__}: {e})", path=str(path)
        ) from None
