"""Per-pass timing from ``--mlir-timing --mlir-output-format=json``.

IREE prints a JSON list of ``{"user": {"duration", "percentage"}, "wall": {...}, "name", "passes": [...]}``
ending with ``Rest`` and ``Total``. Nested lists end with an empty ``{}`` entry. ``Rest`` can be negative:
nested pipelines run in parallel, so the passes' wall times add up to more than the total.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.errors import FormatError


@dataclass(frozen=True)
class PassTiming:
    """One timed pass (or pipeline) with the passes nested in it."""

    name: str
    wall_s: float
    user_s: float
    children: tuple[PassTiming, ...] = ()


@dataclass(frozen=True)
class TimingReport:
    """The whole pass timing of one compilation. ``sum(p.wall_s for p in passes) + rest_wall_s == total_wall_s``
    (up to the 0.1 ms rounding of IREE's output)."""

    passes: tuple[PassTiming, ...]
    rest_wall_s: float
    rest_user_s: float
    total_wall_s: float
    total_user_s: float


def _node(entry: dict) -> PassTiming:
    children = tuple(_node(c) for c in entry.get("passes", ()) if c)
    return PassTiming(
        entry["name"], float(entry["wall"]["duration"]), float(entry["user"]["duration"]), children
    )


def parse_timing(data: list) -> TimingReport:
    """The report from IREE's parsed JSON list; ``FormatError`` when it is not shaped like one."""
    try:
        return _parse_timing(data)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
        raise FormatError(f"pass timing is not MLIR's timing JSON: {type(e).__name__}: {e}") from None


def _parse_timing(data: list) -> TimingReport:
    passes: list[PassTiming] = []
    rest = total = None
    for entry in data:
        if not entry:
            continue
        if entry.get("name") == "Rest" and "passes" not in entry:
            rest = entry
        elif entry.get("name") == "Total" and "passes" not in entry:
            total = entry
        else:
            passes.append(_node(entry))
    if total is None:
        raise ValueError("timing report has no Total entry")
    rest = rest or {"wall": {"duration": 0.0}, "user": {"duration": 0.0}}
    return TimingReport(
        tuple(passes),
        float(rest["wall"]["duration"]),
        float(rest["user"]["duration"]),
        float(total["wall"]["duration"]),
        float(total["user"]["duration"]),
    )


def split_timing_output(stderr: str) -> tuple[str, list | None]:
    """Split iree-compile's stderr into (everything else, the timing JSON list or ``None``).

    The timing report is the last thing printed: a line ``[`` up to the end, valid JSON.
    """
    candidates = []
    if stderr.startswith("[\n"):
        candidates.append(0)
    pos = stderr.find("\n[\n")
    while pos != -1:
        candidates.append(pos + 1)
        pos = stderr.find("\n[\n", pos + 1)
    for start in candidates:
        try:
            data = json.loads(stderr[start:])
        except ValueError:
            continue
        if isinstance(data, list):
            return stderr[:start], data
    return stderr, None
