"""Two builds of one program side by side, by source line: what each line costs in A and in B.

Dispatches of the two builds are matched by the source line they came from (``by_source``: a fused
dispatch counts for each of its source ops' lines, so one dispatch of A can match several of B) and the
op written there. For each line: the dispatches of each build that hold it, their code size, the line's
time per call in each build (the median over the calls, its spread the interquartile range) and whether
it changed beyond noise: B's calls sit apart from A's (B's first quartile above A's third: slower; B's
third below A's first: faster), and the medians differ by more than ``CHANGE_RATIO`` and by more than
``MIN_CHANGE_NS``. The builds are profiled in alternating rounds (A, B,
A, B, ...: several processes each) and the calls of all rounds pooled, so the spread holds the noise
between processes too, not only between calls of one.
"""

from __future__ import annotations

import io
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.trace.by_source import NO_LOCATION, SourceMap, SourceShare, program_op
from engine.trace.model import Trace

CHANGE_RATIO = 0.10  # a line whose medians differ by less is "same", whatever the noise
# A CPU dispatch's profiled time moves by up to about 1 us between processes on a loaded machine
# (small_cnn's global-average-pool, the same build twice at load ~12: 0.47 us in one, 1.47 us in the other).
MIN_CHANGE_NS = 1000.0


@dataclass(frozen=True)
class LineTimes:
    """One build's view of one source line."""

    dispatches: tuple[str, ...]  # export names holding the line
    code_bytes: int | None  # machine code (or SPIR-V) of those dispatches; None where unknown
    per_call_ns: tuple[float, ...]  # the line's time in each call

    @property
    def median_ns(self) -> float:
        return float(np.median(self.per_call_ns)) if self.per_call_ns else 0.0

    @property
    def quartiles_ns(self) -> tuple[float, float]:
        if not self.per_call_ns:
            return (0.0, 0.0)
        q1, q3 = np.percentile(self.per_call_ns, [25, 75])
        return float(q1), float(q3)

    @property
    def spread_ns(self) -> float:
        """The interquartile range."""
        q1, q3 = self.quartiles_ns
        return q3 - q1


@dataclass(frozen=True)
class LineComparison:
    loc: str  # FILE:LINE as build A's locations name it (B's where only B has it)
    op: str | None
    a: LineTimes | None
    b: LineTimes | None
    change: str  # slower | faster | same | only in A | only in B
    outputs: str | None = None  # the worst verdict of the line's dispatches (lockstep), when judged

    def as_dict(self) -> dict:
        def side(t: LineTimes | None):
            if t is None:
                return None
            return {"dispatches": list(t.dispatches), "dispatch_count": len(t.dispatches),
                    "code_bytes": t.code_bytes, "time_ns": round(t.median_ns), "spread_ns": round(t.spread_ns),
                    "calls": len(t.per_call_ns)}  # fmt: skip

        return {"loc": self.loc, "op": self.op, "a": side(self.a), "b": side(self.b), "change": self.change,
                "outputs": self.outputs}  # fmt: skip


@dataclass
class BuildComparison:
    lines: list[LineComparison]
    outputs: str | None = None  # the function's results, B against A (numerics verdict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "lines": [line.as_dict() for line in self.lines],
            "outputs": self.outputs,
            "notes": self.notes,
        }


def per_call_zones(trace: Trace, repeat: int) -> list[np.ndarray]:
    """The dispatch zones of each of ``repeat`` calls (time order): the last ``repeat`` equal runs of the
    same export sequence; what precedes them (the module's initializer) is left out."""
    order = trace.zones_in_time_order("dispatch")
    names = [int(n) for n in trace.zones.name[order]]
    if repeat < 1 or len(order) < repeat:
        return [order]
    per_call = len(order) // repeat
    while per_call > 0:
        calls = [
            order[len(order) - (repeat - k) * per_call : len(order) - (repeat - k - 1) * per_call]
            for k in range(repeat)
        ]
        first = names[len(order) - repeat * per_call : len(order) - (repeat - 1) * per_call]
        if all(names[len(order) - (repeat - k) * per_call : len(order) - (repeat - k - 1) * per_call] == first
               for k in range(repeat)):  # fmt: skip
            return calls
        per_call -= 1
    return [order]


def line_times(
    traces: list[Trace], sources: SourceMap, repeat: int
) -> dict[str, tuple[list[str], list[float]]]:
    """Source line -> (exports holding it, its time in each call of every trace)."""
    calls = [(trace, zones) for trace in traces for zones in per_call_zones(trace, repeat)]
    out: dict[str, tuple[dict[str, None], list[float]]] = defaultdict(lambda: ({}, [0.0] * len(calls)))
    for k, (trace, zones) in enumerate(calls):
        for index in zones:
            export = trace.names[int(trace.zones.name[index])]
            duration = float(trace.zones.end[index] - trace.zones.start[index])
            for part in sources.locations_of(export) or (SourceShare(NO_LOCATION, 1.0),):
                names, times = out[part.loc]
                names[export] = None
                times[k] += duration * part.share
    return {loc: (list(names), times) for loc, (names, times) in out.items()}


def code_sizes(module_path: str | Path) -> dict[str, int]:
    """Export name -> bytes of its code: the function's size in the CPU library's debug info (DWARF), or
    the SPIR-V module of a Vulkan pipeline."""
    from engine.runtime.vmfb.module import open_vmfb
    from engine.runtime.vmfb.vke1 import is_vke1, read_vke1

    out: dict[str, int] = {}
    for executable in open_vmfb(str(module_path)).executables:
        data = bytes(executable.data)
        try:
            if (executable.format or "").startswith("embedded-elf"):
                from elftools.elf.elffile import ELFFile

                elf = ELFFile(io.BytesIO(data))
                if not elf.has_dwarf_info():
                    continue
                for cu in elf.get_dwarf_info().iter_CUs():
                    for die in cu.iter_DIEs():
                        if die.tag == "DW_TAG_subprogram" and "DW_AT_name" in die.attributes:
                            high = die.attributes.get("DW_AT_high_pc")
                            if high is not None and high.form.startswith("DW_FORM_data"):
                                out[die.attributes["DW_AT_name"].value.decode("utf-8", "replace")] = int(
                                    high.value
                                )
            elif is_vke1(memoryview(data)):
                definition = read_vke1(memoryview(data))
                for pipeline in definition.pipelines:
                    out[pipeline.entry_point] = definition.shader_modules[
                        pipeline.shader_module_ordinal
                    ].byte_size
        except Exception:  # noqa: BLE001 - pyelftools raises many kinds of errors on a damaged ELF
            continue  # its dispatches' size is unknown, and said so
    return out


def _key(loc: str) -> str:
    # Two builds of one program may name it by different paths (a copy, another folder): match by the
    # file's name and line.
    path, _, line = loc.rpartition(":")
    return f"{Path(path).name}:{line}" if path else loc


def compare_lines(
    trace_a: list[Trace],
    sources_a: SourceMap,
    sizes_a: dict[str, int],
    trace_b: list[Trace],
    sources_b: SourceMap,
    sizes_b: dict[str, int],
    repeat: int,
) -> list[LineComparison]:
    """Per source line, A against B (largest time in either build first)."""
    a = line_times(trace_a, sources_a, repeat)
    b = line_times(trace_b, sources_b, repeat)
    a_by_key = {_key(loc): loc for loc in a}
    b_by_key = {_key(loc): loc for loc in b}
    rows: list[LineComparison] = []
    for key in dict.fromkeys([*a_by_key, *b_by_key]):
        la, lb = a_by_key.get(key), b_by_key.get(key)
        ta = _times(a[la], sizes_a) if la is not None else None
        tb = _times(b[lb], sizes_b) if lb is not None else None
        loc = la or lb
        rows.append(LineComparison(loc, program_op(loc), ta, tb, change_of(ta, tb)))
    rows.sort(key=lambda r: -max(r.a.median_ns if r.a else 0.0, r.b.median_ns if r.b else 0.0))
    return rows


def _times(entry: tuple[list[str], list[float]], sizes: dict[str, int]) -> LineTimes:
    names, times = entry
    known = [sizes[n] for n in names if n in sizes]
    return LineTimes(tuple(names), sum(known) if len(known) == len(names) else None, tuple(times))


def change_of(a: LineTimes | None, b: LineTimes | None) -> str:
    """slower/faster when B's calls sit apart from A's (quartiles that do not overlap) and the medians differ
    by more than CHANGE_RATIO and MIN_CHANGE_NS; else same. (A rule of twice the larger spread called a line
    1,000x slower on VMVX "same": its calls spread as widely as they were slow.)"""
    if a is None:
        return "only in B"
    if b is None:
        return "only in A"
    difference = b.median_ns - a.median_ns
    if abs(difference) <= max(CHANGE_RATIO * max(a.median_ns, 1.0), MIN_CHANGE_NS):
        return "same"
    (a1, a3), (b1, b3) = a.quartiles_ns, b.quartiles_ns
    if difference > 0 and b1 > a3:
        return "slower"
    if difference < 0 and b3 < a1:
        return "faster"
    return "same"


def with_output_verdicts(
    lines: list[LineComparison], verdicts: dict[str, str], sources_b: SourceMap
) -> list[LineComparison]:
    """``lines`` with each line's worst verdict over the B dispatches holding it (``verdicts``: export -> verdict)."""
    from engine.dispatch.numerics import Verdict, worst_verdict

    out = []
    for line in lines:
        judged = [Verdict(verdicts[n]) for n in (line.b.dispatches if line.b else ()) if n in verdicts]
        outputs = str(worst_verdict(judged)) if judged else None
        out.append(LineComparison(line.loc, line.op, line.a, line.b, line.change, outputs))
    return out
