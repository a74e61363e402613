"""Dispatch time by source line: each dispatch's time attributed to the program ops it came from.

Where a dispatch came from is read two ways, the better first:

* the ``flow`` phase of the input program printed with locations (``source_ops``): every compute op of
  a fused dispatch with its line, so the dispatch's time is split among its source ops by their share of
  its work (loop-nest size, about their FLOPs; ``source_ops``'s docstring states the rule);
* the module alone: the source location IREE records for each export (the CPU library's export table,
  a Vulkan pipeline's location), the dispatch's root op; all of its time goes there.

A dispatch with neither is attributed to ``(no location)``, so the lines always sum to the total
dispatch time. Each line names the op it holds in the input program (``torch.aten.conv2d``,
``torch.operator "onnx.Conv"``) where the file is readable here.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.compiler.task import TaskState
from engine.errors import LensError
from engine.runtime.hal.formats import is_native_cpu
from engine.trace.model import Trace
from engine.trace.source_ops import SourceOp, dispatch_sites, dispatch_source_ops, flow_with_locations

NO_LOCATION = "(no location)"
# Ops the frontends write (torch-mlir's torch and ONNX ops, JAX's StableHLO, TFLite's TOSA): the lines the
# user's model is made of, as against what IREE itself added.
FRONTEND_OP_PREFIXES = ("torch.", "stablehlo.", "mhlo.", "chlo.", "tosa.")
FRONTEND_OPS_SAID = "torch, ONNX, StableHLO, TOSA"
# Where IREE records a function's line for its ops (StableHLO's public function is inlined into a wrapper, its
# ops' locations becoming ``callsite(op at function)``), the op's own line is its frontend's (Python), if any.
FUNCTION_DEFINITIONS = frozenset({"func.func", "util.func"})
# An op as a line writes it: torch-mlir's ``torch.operator "onnx.Conv"``, the custom form ``stablehlo.add``, or
# the generic form ``"stablehlo.sort"(...)`` (an op with regions, as StableHLO prints some).
_OP_AT_LINE = re.compile(r'(?:^|=\s*|^\s*)(torch\.operator\s+"[^"]+"|[a-z_][\w]*(?:\.[\w]+)+|"[a-z_]\w*(?:\.\w+)+"\()')


@dataclass(frozen=True)
class SourceShare:
    """A part of one dispatch: ``share`` of its time goes to ``loc`` (shares of a dispatch sum to 1)."""

    loc: str
    share: float
    python: str | None = None
    name: str | None = None  # the frontend's name for the op (``SourceOp.name``)


@dataclass
class SourceMap:
    """Export name -> the source lines its dispatches' time goes to; ``how`` says where each was found."""

    shares: dict[str, tuple[SourceShare, ...]] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)  # export -> "flow" | "dispatch site" | "export location"
    notes: list[str] = field(default_factory=list)  # how the lines were found (``notes_for`` adds the rest)
    # An export dispatched from several places of the program (a deduplicated executable): each place's
    # lines, in the flow phase's order (``place_shares``).
    sites: dict[str, tuple[tuple[SourceShare, ...], ...]] = field(default_factory=dict)
    dynamic: set[str] = field(default_factory=set)  # exports with dynamic shapes: their ops share equally
    unmatched: set[str] = field(default_factory=set)  # exports the flow phase does not hold (another build?)
    exported: int = 0  # exports with a recorded location

    def notes_for(self, ran: set[str] | None = None) -> list[str]:
        """``notes``, and what is said of particular exports (several places, dynamic shapes, not in the flow
        phase), counting only those in ``ran`` (the dispatches a run made; None: the whole module's)."""
        def count(exports) -> int:
            return len([e for e in exports if ran is None or e in ran])

        notes = list(self.notes)
        if placed := count(self.sites):
            notes.append(
                f"exports dispatched from several places of the program: {placed} (IREE deduplicated their "
                "executables, which keep one place's op locations); each run's time goes to its own place, the k-th "
                "run of a call to the k-th flow.dispatch, where the run count is a whole number of rounds of the places"
            )  # fmt: skip
        if dynamic := count(self.dynamic):
            notes.append(f"{dynamic} dispatches with dynamic shapes: their time shared equally by their ops")
        if unmatched := count(self.unmatched):
            which = f"{unmatched} of {self.exported} exports" if ran is None else f"{unmatched} exports the run dispatched"
            notes.append(f"{which} not in the flow phase (another build?): by their export's location")
        return notes

    def locations_of(self, export: str) -> tuple[SourceShare, ...]:
        return self.shares.get(export, ())

    def locations_of_run(self, export: str, index: int, runs: int) -> tuple[SourceShare, ...]:
        """The lines of the ``index``-th of ``runs`` dispatches of ``export`` in one call (time order): for an
        export dispatched from several places, the place that run came from, when ``runs`` is a whole number
        of rounds of its places (the k-th run the k-th place, in program order); else ``locations_of``."""
        places = self.sites.get(export)
        if places and runs % len(places) == 0:
            return places[index % len(places)]
        return self.locations_of(export)

    def locations_of_runs(self, exports: list[str]) -> list[tuple[SourceShare, ...]]:
        """The lines of each dispatch of one call, ``exports`` in time order (``locations_of_run`` for each);
        a dispatch with none found goes to ``NO_LOCATION`` whole."""
        runs: dict[str, int] = defaultdict(int)
        for export in exports:
            runs[export] += 1
        seen: dict[str, int] = defaultdict(int)
        placed = []
        for export in exports:
            placed.append(self.locations_of_run(export, seen[export], runs[export]) or (SourceShare(NO_LOCATION, 1.0),))
            seen[export] += 1
        return placed

    def line_of(self, export: str) -> str | None:
        """The dispatch's main source line: the one with the largest share (its root op)."""
        parts = self.shares.get(export)
        return max(parts, key=lambda s: s.share).loc if parts else None


@dataclass(frozen=True)
class SourceTime:
    """The time of one source line over a run."""

    loc: str
    op: str | None  # the op the line holds; None where the file is not readable here
    time_ns: int
    calls: int  # dispatch executions that gave this line time
    dispatches: tuple[str, ...]  # the export names of those dispatches
    python: str | None = None
    name: str | None = None  # the frontend's name for the op, where its location gave one (JAX's op path)

    @property
    def frontend_op(self) -> bool:
        """Whether the line holds an op the frontend wrote (a torch, ONNX, StableHLO or TOSA op), or the
        frontend named the op (JAX)."""
        return self.name is not None or (self.op is not None and self.op.startswith(FRONTEND_OP_PREFIXES))

    def op_said(self, unknown: str = "(op unknown)") -> str:
        """What the line holds, as shown: its op, the frontend's name for it, or that it is a function's line
        (IREE recorded no op's line: the dispatch's ops are located at their function)."""
        if self.op in FUNCTION_DEFINITIONS:
            return "(its function's line)"
        return self.op or self.name or unknown

    def as_dict(self) -> dict:
        out = {"loc": self.loc, "op": self.op, "time_ns": self.time_ns, "calls": self.calls,
               "dispatches": list(self.dispatches)}  # fmt: skip
        if self.python:
            out["python"] = self.python
        if self.name:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class Attribution:
    """A run's dispatch time by source line, largest first; the lines sum to ``dispatch_time_ns``."""

    dispatch_time_ns: int
    by_source: tuple[SourceTime, ...]
    rule: str
    notes: tuple[str, ...] = ()

    @property
    def frontend_op_time_ns(self) -> int:
        """Time on lines that hold a frontend's op (``torch.aten.*``, ``torch.operator "onnx.*"``,
        ``stablehlo.*``, ``tosa.*``) or ops the frontend named (``SourceTime.frontend_op``)."""
        return sum(s.time_ns for s in self.by_source if s.frontend_op)

    @property
    def coverage(self) -> float:
        """The share of dispatch time on lines holding the frontend's ops (0 when no time)."""
        return self.frontend_op_time_ns / self.dispatch_time_ns if self.dispatch_time_ns else 0.0

    def as_dict(self) -> dict:
        return {
            "dispatch_time_ns": self.dispatch_time_ns,
            "by_source": [s.as_dict() for s in self.by_source],
            "rule": self.rule,
            "frontend_op_share": round(self.coverage, 6),
            "notes": list(self.notes),
        }

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.as_dict(), indent=1))


SPLIT_RULE = (
    "a fused dispatch's time is split among its source ops by their share of its work (loop-nest size: "
    "iteration points from the ops' indexing maps and operand shapes, about their FLOPs; equal shares where a "
    "shape is dynamic); a dispatch known only by its export's location gives it all its time"
)


# ------------------------------------------------------------------------------ where dispatches came from


def export_locations(module_path: str | Path) -> dict[str, str]:
    """Export name -> ``FILE:LINE`` IREE recorded for it in the module's executables (its root op)."""
    from engine.runtime.vmfb.module import open_vmfb
    from engine.runtime.vmfb.vke1 import is_vke1, read_vke1

    out: dict[str, str] = {}
    module = open_vmfb(str(module_path))
    for executable in module.executables:
        fmt = executable.format or ""
        data = executable.data
        try:
            if is_native_cpu(fmt):
                from engine.runtime.hal.cpu_library import CpuExecutableLibrary

                with CpuExecutableLibrary.load(bytes(data), executable.name) as library:
                    for export in library.exports:
                        loc = export.source_location
                        if loc is not None and loc.path:
                            out.setdefault(export.name, f"{loc.path}:{loc.line}")
            else:
                raw = memoryview(np.ascontiguousarray(data)).cast("B")
                if is_vke1(raw):
                    for pipeline in read_vke1(raw).pipelines:
                        if pipeline.location is not None and pipeline.location.filename:
                            out.setdefault(pipeline.entry_point,
                                           f"{pipeline.location.filename}:{pipeline.location.line}")  # fmt: skip
        except (LensError, ValueError, TypeError, OSError):
            continue  # an executable this machine cannot read: its dispatches fall to their other locations
    return out


def readable_export_locations(module_path: str | Path) -> tuple[dict[str, str], Path | None]:
    """``export_locations``, the input program's lines named as it is readable here (a relative name made
    whole: found beside the module), and that program (None where it is not readable here)."""
    exported = export_locations(module_path)
    found = input_program_of(exported, module_path)
    if found is not None:
        exported = {e: _renamed(loc, found) for e, loc in exported.items()}
    return exported, found


def input_program_of(locations: dict[str, str], module_path: str | Path | None = None) -> Path | None:
    """The input program the module's locations name (the file most of them are in), if readable here: as
    named, or beside the module when the name is relative (compiled as ``iree-compile model.mlir``)."""
    counts: dict[str, int] = defaultdict(int)
    for loc in locations.values():
        counts[loc.rpartition(":")[0]] += 1
    for path, _ in sorted(counts.items(), key=lambda kv: -kv[1]):
        if not path.endswith((".mlir", ".mlirbc")):
            continue
        if Path(path).is_file():
            return Path(path)
        if module_path is not None and not Path(path).is_absolute():
            beside = Path(module_path).resolve().parent / path
            if beside.is_file():
                return beside
    return None


def target_flags_of(module_path: str | Path) -> list[str]:
    """The iree-compile target flags that build executables of the module's format."""
    from engine.compiler.targets import target_flags
    from engine.runtime.vmfb.module import open_vmfb

    formats = {e.format or "" for e in open_vmfb(str(module_path)).executables}
    if any(f.startswith("vulkan") for f in formats):
        return target_flags("vulkan-spirv")
    if any(f.startswith("vmvx") for f in formats):
        return target_flags("vmvx")
    return target_flags("llvm-cpu")


def source_map(
    module_path: str | Path,
    *,
    source: str | Path | None = None,
    flow_text: str | None = None,
    flags: list[str] | None = None,
    timeout_s: float = 600.0,
    task: TaskState | None = None,
) -> SourceMap:
    """Where each export of the module came from: its source ops from the flow phase with locations
    (``flow_text``, else ``source`` compiled to flow, else the input program the module names), each
    dispatch the flow phase does not hold by its export's recorded location."""
    result = SourceMap()
    exported, found = readable_export_locations(module_path)
    ops: dict[str, tuple[SourceOp, ...]] = {}
    if flow_text is None:
        program = Path(source) if source is not None else found
        if program is None and not exported:
            result.notes.append(
                "the module records no source locations (a VMVX build, or locations stripped): "
                "name its input program with --source"
            )
        elif program is None:
            result.notes.append(
                "the input program is not readable here: each dispatch by its export's location"
            )
        else:
            try:
                flow_text = flow_with_locations(program, flags if flags is not None else target_flags_of(module_path),
                                                timeout_s, task)  # fmt: skip
                result.notes.append(f"source ops from the flow phase of {program}")
            except LensError as e:
                result.notes.append(f"{e}: each dispatch by its export's location")
    sites: dict[str, tuple[str | None, ...]] = {}
    if flow_text is not None:
        ops = {export: tuple(map(own_line, found)) for export, found in dispatch_source_ops(flow_text).items()}
        sites = dispatch_sites(flow_text)
    dynamic: list[str] = []
    for export in set(exported) | set(ops):
        found = ops.get(export, ())
        if any(o.work is None for o in found):  # a dynamic shape: the ops' sizes are the run's; share equally
            found = tuple(replace(o, work=1.0) for o in found)
            dynamic.append(export)
        total = sum(o.work for o in found)
        if found and total > 0:
            merged: dict[tuple[str, str | None], float] = defaultdict(float)
            names: dict[tuple[str, str | None], str | None] = {}
            for o in found:
                merged[(o.loc, o.python)] += o.work / total
                names.setdefault((o.loc, o.python), o.name)
            result.shares[export] = tuple(
                SourceShare(loc, share, py, names[(loc, py)]) for (loc, py), share in merged.items()
            )
            result.how[export] = "flow"
        elif any(sites.get(export, ())):
            # No compute op (a copy: a convolution's padding, a concatenation): the line it was dispatched from
            # (several: each run its own, below).
            result.shares[export] = (SourceShare(next(p for p in sites[export] if p), 1.0),)
            result.how[export] = "dispatch site"
        elif export in exported:
            result.shares[export] = (SourceShare(exported[export], 1.0),)
            result.how[export] = "export location"
    for export, locs in sites.items():
        if export in result.shares and len(set(locs)) > 1:
            result.sites[export] = place_shares(result.shares[export], locs)
    result.dynamic = set(dynamic)
    result.unmatched = {e for e in exported if e not in ops} if ops else set()
    result.exported = len(exported)
    return result


def own_line(op: SourceOp) -> SourceOp:
    """``op`` at its own line: the frontend's (Python) where the program line IREE recorded is its function's
    (``FUNCTION_DEFINITIONS``), which every op of that function shares."""
    if op.python and op.loc != op.python and program_op(op.loc) in FUNCTION_DEFINITIONS:
        return replace(op, loc=op.python)
    return op


def place_shares(shares: tuple[SourceShare, ...], places: tuple[str | None, ...]) -> tuple[tuple[SourceShare, ...], ...]:
    """Each place's lines of a dispatch whose ops' locations (``shares``) are those of one of its ``places``
    (the ``flow.dispatch`` ops' own lines): that place's shares as they are; another place's moved by the
    distance between the two places, where every moved line holds the same op as the original one (repeated
    blocks of a model: the fire modules' conv and ReLU); else all of it on the place's own line, as a
    dispatch known only by its location is attributed."""
    lines = {share.loc for share in shares}
    reference = next((p for p in places if p in lines), None)
    out = []
    for place in places:
        if place is None or reference is None:
            out.append(shares)
            continue
        ref_path, _, ref_line = reference.rpartition(":")
        path, _, line = place.rpartition(":")
        delta = int(line) - int(ref_line)
        moved = []
        for share in shares:
            share_path, _, share_line = share.loc.rpartition(":")
            target = f"{share_path}:{int(share_line) + delta}" if share_line.isdigit() else ""
            op = program_op(share.loc)
            if delta and (share_path != path or op is None or program_op(target) != op):
                moved = None
                break
            moved.append(share if not delta else replace(share, loc=target))
        out.append(tuple(moved) if moved is not None else (SourceShare(place, 1.0),))
    return tuple(out)


def _renamed(loc: str, program: Path) -> str:
    path, _, line = loc.rpartition(":")
    return (
        f"{program}:{line}" if path and Path(path).name == program.name and not Path(path).is_file() else loc
    )


# ------------------------------------------------------------------------------ attributing a run's time


def attribute(trace: Trace, sources: SourceMap) -> Attribution:
    """Split every dispatch zone of ``trace`` among the source lines ``sources`` gives its export."""
    times: dict[tuple[str, str | None], float] = defaultdict(float)
    calls: dict[tuple[str, str | None], int] = defaultdict(int)
    names: dict[tuple[str, str | None], dict[str, None]] = defaultdict(dict)
    frontend_names: dict[tuple[str, str | None], str | None] = {}
    total = 0
    order = trace.zones_in_time_order("dispatch")
    exports = dispatched(trace)
    for index, export, parts in zip(order, exports, sources.locations_of_runs(exports)):
        duration = int(trace.zones.end[index] - trace.zones.start[index])
        total += duration
        for part in parts:
            key = (part.loc, part.python)
            times[key] += duration * part.share
            calls[key] += 1
            names[key][export] = None
            frontend_names.setdefault(key, part.name)
    rounded = _round_to_total(times, total)
    rows = [
        SourceTime(loc, program_op(loc), rounded[(loc, py)], calls[(loc, py)], tuple(names[(loc, py)]), py,
                   frontend_names.get((loc, py)))  # fmt: skip
        for loc, py in times
    ]
    rows.sort(key=lambda r: (-r.time_ns, r.loc))
    return Attribution(total, tuple(rows), SPLIT_RULE, tuple(sources.notes_for(set(exports))))


def dispatched(trace: Trace) -> list[str]:
    """The export of every dispatch zone of ``trace``, in time order."""
    return [trace.names[int(trace.zones.name[index])] for index in trace.zones_in_time_order("dispatch")]


def _round_to_total(times: dict, total: int) -> dict:
    """Whole nanoseconds per line that sum to ``total`` exactly (largest remainders get the rest)."""
    floors = {k: int(np.floor(v)) for k, v in times.items()}
    rest = total - sum(floors.values())
    for k in sorted(times, key=lambda k: floors[k] - times[k])[: max(0, rest)]:
        floors[k] += 1
    return floors


# (path, mtime) -> lines: an edited file is read again.
_lines_cache: dict[tuple[str, int], list[str] | None] = {}


def program_op(loc: str) -> str | None:
    """The op written at ``FILE:LINE`` (``torch.aten.conv2d``, ``torch.operator "onnx.Conv"``), or None
    where the file is not readable here or the line holds no op."""
    path, _, line = loc.rpartition(":")
    if not path or not line.isdigit() or path.endswith(".py"):  # a Python line holds no op of the program
        return None
    try:
        key = (path, Path(path).stat().st_mtime_ns)
        if key not in _lines_cache:
            _lines_cache[key] = Path(path).read_text(errors="replace").splitlines()
        lines = _lines_cache[key]
    except OSError:
        return None
    number = int(line)
    if lines is None or not 1 <= number <= len(lines):
        return None
    text = lines[number - 1].strip()
    m = _OP_AT_LINE.search(text.split("=", 1)[1] if re.match(r"^%[\w#:, %]+=", text) else text)
    if m is None:
        return None
    op = m.group(1)
    return op[1:-2] if op.startswith('"') else op.replace("  ", " ")
