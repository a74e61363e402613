"""Two builds of one program side by side, by source line: what each line costs in A and in B.

Dispatches of the two builds are matched by the source line they came from (``by_source``: a fused
dispatch counts for each of its source ops' lines, so one dispatch of A can match several of B) and the
op written there. For each line: the dispatches of each build that hold it, their code size, the line's
time per call in each build (the median over the calls, its spread the interquartile range) and whether
it changed beyond noise. The builds are profiled in alternating rounds (A, B, B, A, A, B, ...: one
process each, neither build always first) and a line is slower (faster) only when all of these hold:

* the medians over every round's calls differ by more than ``CHANGE_RATIO`` and ``MIN_CHANGE_NS``;
* B's calls sit apart from A's (B's first quartile above A's third: slower; B's third below A's first:
  faster);
* B was slower (faster) than A in every round, or nearly (``AGREEING_ROUNDS``: 3 of 3, 4 of 5, 8 of 10),
  each round against the same round, by its median and by its fastest call: a process lands on a faster
  or a slower core for its whole life (small_cnn's convolution, one build twice under load: 2.7 us in two
  processes, 3.8 us in three), so calls pooled over rounds can sit apart on a few processes alone, and
  preemption only adds time (a 1.5 ms kernel read 5.6, 9.3 and 21 ms beside two busy loops on 2 cores);
* every round of B is apart from every round of A by the bar, by medians and by fastest calls (as many
  outlying rounds of each left out as may disagree): a difference no larger than one build's own rounds
  spread is not the build's.

SqueezeNet against itself, 3 rounds of 3 calls beside two busy loops on the 2-core machine, six times (336
line judgements): the pooled rule with the per-round agreement of medians called 28 lines changed, the
rounds apart by medians 6, apart by medians and by fastest calls 1 (``tests/test_compare_builds.py`` keeps
measured lines). At the default 10 calls a round, three such comparisons called none changed.

A line whose medians differ beyond the first rule and fail another is ``same`` with a ``noise`` sentence
saying so (the difference seen, and the calls that overlapped, the rounds that disagreed or the spread of
one build's rounds).
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.runtime.hal.formats import is_cpu_elf
from engine.trace.by_source import SourceMap, program_op
from engine.trace.model import Trace

CHANGE_RATIO = 0.10  # a line whose medians differ by less is "same", whatever the noise
# A CPU dispatch's profiled time moves by up to about 1 us between processes on a loaded machine
# (small_cnn's global-average-pool, the same build twice at load ~12: 0.47 us in one, 1.47 us in the other).
MIN_CHANGE_NS = 1000.0
# The share of rounds whose own medians must differ in the line's direction (rounded up: every round of up
# to four, then all but one in five).
AGREEING_ROUNDS = 0.8


@dataclass(frozen=True)
class LineTimes:
    """One build's view of one source line."""

    dispatches: tuple[str, ...]  # export names holding the line
    code_bytes: int | None  # machine code (or SPIR-V) of those dispatches; None where unknown
    per_call_ns: tuple[float, ...]  # the line's time in each call
    call_rounds: tuple[int, ...] = ()  # the round (profiled process) of each call; () when one round

    def _by_round(self) -> dict[int, list[float]]:
        rounds = self.call_rounds or (0,) * len(self.per_call_ns)
        by_round: dict[int, list[float]] = defaultdict(list)
        for k, t in zip(rounds, self.per_call_ns):
            by_round[k].append(t)
        return dict(sorted(by_round.items()))

    def round_medians_ns(self) -> dict[int, float]:
        """Round -> the median of the line's calls in that round."""
        return {k: float(np.median(v)) for k, v in self._by_round().items()}

    def round_minima_ns(self) -> dict[int, float]:
        """Round -> the line's fastest call in that round (what a round measures with the least noise)."""
        return {k: float(min(v)) for k, v in self._by_round().items()}

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
    # Why a difference beyond CHANGE_RATIO and MIN_CHANGE_NS is "same": within noise (None otherwise).
    noise: str | None = None
    rounds_slower: int = 0  # rounds whose B median is above A's (both builds in the line)
    rounds_faster: int = 0
    rounds: int = 0  # rounds holding the line in both builds

    def as_dict(self) -> dict:
        def side(t: LineTimes | None):
            if t is None:
                return None
            return {"dispatches": list(t.dispatches), "dispatch_count": len(t.dispatches),
                    "code_bytes": t.code_bytes, "time_ns": round(t.median_ns), "spread_ns": round(t.spread_ns),
                    "calls": len(t.per_call_ns)}  # fmt: skip

        return {"loc": self.loc, "op": self.op, "a": side(self.a), "b": side(self.b), "change": self.change,
                "noise": self.noise, "rounds": {"count": self.rounds, "slower": self.rounds_slower,
                                                "faster": self.rounds_faster},
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
) -> dict[str, tuple[list[str], list[float], list[int]]]:
    """Source line -> (exports holding it, its time in each call of every trace, each call's trace)."""
    calls = [(r, trace, zones) for r, trace in enumerate(traces) for zones in per_call_zones(trace, repeat)]
    rounds = [r for r, _, _ in calls]
    out: dict[str, tuple[dict[str, None], list[float]]] = defaultdict(lambda: ({}, [0.0] * len(calls)))
    for k, (_, trace, zones) in enumerate(calls):
        exports = [trace.names[int(trace.zones.name[index])] for index in zones]
        # a deduplicated executable run from several places: each run's own place (by_source)
        for index, export, parts in zip(zones, exports, sources.locations_of_runs(exports)):
            duration = float(trace.zones.end[index] - trace.zones.start[index])
            for part in parts:
                names, times = out[part.loc]
                names[export] = None
                times[k] += duration * part.share
    return {loc: (list(names), times, rounds) for loc, (names, times) in out.items()}


def code_sizes(module_path: str | Path) -> dict[str, int]:
    """Export name -> bytes of its code: the function's size in the CPU library's debug info (DWARF), or
    the SPIR-V module of a Vulkan pipeline."""
    from engine.runtime.vmfb.module import open_vmfb
    from engine.runtime.vmfb.vke1 import is_vke1, read_vke1

    out: dict[str, int] = {}
    for executable in open_vmfb(str(module_path)).executables:
        data = bytes(executable.data)
        try:
            if is_cpu_elf(executable.format):
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
        judged = judge_change(ta, tb)
        rows.append(LineComparison(loc, program_op(loc), ta, tb, judged.change, None, judged.noise,
                                   judged.rounds_slower, judged.rounds_faster, judged.rounds))  # fmt: skip
    rows.sort(key=lambda r: -max(r.a.median_ns if r.a else 0.0, r.b.median_ns if r.b else 0.0))
    return rows


def _times(entry: tuple[list[str], list[float], list[int]], sizes: dict[str, int]) -> LineTimes:
    names, times, rounds = entry
    known = [sizes[n] for n in names if n in sizes]
    return LineTimes(tuple(names), sum(known) if len(known) == len(names) else None, tuple(times), tuple(rounds))


@dataclass(frozen=True)
class ChangeJudgement:
    change: str  # slower | faster | same | only in A | only in B
    noise: str | None = None  # why a difference beyond the medians' bar is "same"
    rounds_slower: int = 0
    rounds_faster: int = 0
    rounds: int = 0


def agreeing_rounds_needed(rounds: int) -> int:
    """How many of ``rounds`` must agree on a line's direction (every round up to four, then 80 %)."""
    return max(1, math.ceil(AGREEING_ROUNDS * rounds - 1e-9))


def judge_change(a: LineTimes | None, b: LineTimes | None) -> ChangeJudgement:
    """The line's change and, where its medians differ beyond the bar but the difference is not a change,
    why it is within noise (see the module's docstring). (A rule of twice the larger spread called a line
    1,000x slower on VMVX "same": its calls spread as widely as they were slow; the quartiles alone called
    a line of one build against itself 1 us faster under load: one round's processes were faster.)"""
    if a is None:
        return ChangeJudgement("only in B")
    if b is None:
        return ChangeJudgement("only in A")
    medians_a, medians_b = a.round_medians_ns(), b.round_medians_ns()
    paired = [k for k in medians_a if k in medians_b]
    slower = sum(medians_b[k] > medians_a[k] for k in paired)
    faster = sum(medians_b[k] < medians_a[k] for k in paired)
    counts = {"rounds_slower": slower, "rounds_faster": faster, "rounds": len(paired)}
    difference = b.median_ns - a.median_ns
    if abs(difference) <= _bar(a.median_ns):
        return ChangeJudgement("same", **counts)
    direction = "slower" if difference > 0 else "faster"
    seen = (f"B {difference / 1e3:+.2f} us ({difference / max(a.median_ns, 1.0):+.0%}) on the medians")
    (a1, a3), (b1, b3) = a.quartiles_ns, b.quartiles_ns
    if (difference > 0 and not b1 > a3) or (difference < 0 and not b3 < a1):
        return ChangeJudgement("same", f"within noise: {seen}, but B's calls overlap A's (quartiles)", **counts)
    needed = agreeing_rounds_needed(len(paired))
    lows_a, lows_b = a.round_minima_ns(), b.round_minima_ns()
    # Each round by its median and by its fastest call (preemption only adds time: a 1.5 ms kernel read 5.6,
    # 9.3 and 21 ms in processes sharing two cores with two busy loops, and a median of a few calls keeps it).
    for what, side_a, side_b in (("median", medians_a, medians_b), ("fastest call", lows_a, lows_b)):
        agreeing = sum((side_b[k] > side_a[k]) if difference > 0 else (side_b[k] < side_a[k]) for k in paired)
        if agreeing < needed:
            return ChangeJudgement(
                "same", f"within noise: {seen}, but {direction} in only {agreeing} of {len(paired)} rounds "
                f"(each round's {what}; a change holds in {needed})", **counts,
            )  # fmt: skip
        # Every round of B apart from every round of A by the bar (as many outlying rounds of each left out as
        # may disagree): a difference no larger than one build's own rounds spread is not the build's.
        spare = len(paired) - needed
        ranked_a, ranked_b = sorted(side_a[k] for k in paired), sorted(side_b[k] for k in paired)
        near_a = ranked_a[len(ranked_a) - 1 - spare] if difference > 0 else ranked_a[spare]
        near_b = ranked_b[spare] if difference > 0 else ranked_b[len(ranked_b) - 1 - spare]
        if (near_b - near_a) * difference <= 0 or abs(near_b - near_a) <= _bar(float(np.median(ranked_a))):
            return ChangeJudgement(
                "same", f"within noise: {seen}, but B's rounds are not apart from A's by the bar (each round's "
                f"{what}: A {ranked_a[0] / 1e3:.2f}-{ranked_a[-1] / 1e3:.2f} us, B {ranked_b[0] / 1e3:.2f}-"
                f"{ranked_b[-1] / 1e3:.2f} us)", **counts,
            )  # fmt: skip
    return ChangeJudgement(direction, **counts)


def _bar(time_ns: float) -> float:
    """The least difference from ``time_ns`` that can be a change (CHANGE_RATIO of it, MIN_CHANGE_NS)."""
    return max(CHANGE_RATIO * max(time_ns, 1.0), MIN_CHANGE_NS)


def change_of(a: LineTimes | None, b: LineTimes | None) -> str:
    """slower | faster | same | only in A | only in B (``judge_change``'s verdict alone)."""
    return judge_change(a, b).change


def with_output_verdicts(
    lines: list[LineComparison], runs: list[tuple[str, str | None]], sources_b: SourceMap
) -> list[LineComparison]:
    """``lines`` with each line's worst verdict over the B dispatches run from it. ``runs``: (export, verdict)
    of every dispatch of B's call in order, verdict None where it was not judged. A deduplicated executable
    run from several places gives each run's verdict to its own place (``SourceMap.locations_of_runs``), not
    the worst of all its runs to every line it holds."""
    from engine.dispatch.numerics import Verdict, worst_verdict

    judged: dict[str, list[Verdict]] = defaultdict(list)
    for (_, verdict), parts in zip(runs, sources_b.locations_of_runs([name for name, _ in runs])):
        if verdict is not None:
            for part in parts:
                judged[_key(part.loc)].append(Verdict(verdict))
    out = []
    for line in lines:
        found = judged.get(_key(line.loc))
        out.append(replace(line, outputs=str(worst_verdict(found)) if found and line.b else None))
    return out
