"""The first-divergence finder's report and reproducer.

The finder itself runs the two configurations in lockstep (``lockstep.run_lockstep``: every dispatch of B
given A's input bytes and compared as it finishes, nothing kept but the culprit's bindings); ``walk``
compares two capture bundles the same way after the fact (``--keep``). Both judge tensors with
``numerics`` (exact / within rounding / diverged). The culprit is the first dispatch whose outputs
diverged while its inputs agreed. Its reproducer holds its bindings as they were before and after it ran
in configuration A (``.npy``), the program inputs and module B (so it runs on its own), the executable's
source when known, and ``repro.json``; ``replay`` reruns the module up to that dispatch, gives it A's
input bytes, runs it, and compares what it wrote with A's.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.dispatch.bundle import Bundle, DispatchEntry
from engine.dispatch.numerics import Comparison, Tolerance, Verdict, compare, worst_verdict
from engine.dispatch.snapshot import DispatchSnapshot, DispatchSnapshots, SnapshotSubscriber
from engine.errors import LensError
from engine.runtime.hal.device import DispatchRecord


class DivergenceError(LensError):
    """The two runs cannot be compared, or a reproducer cannot be made or replayed."""


@dataclass(frozen=True)
class Divergence:
    ordinal: int
    name: str
    executable: str | None
    max_abs_error: float
    max_rel_error: float
    mismatches: int
    output_index: int  # which output of the dispatch diverged first
    first_mismatch: tuple[int, ...] | None
    workgroups: list[int] | None
    inputs_agreed: bool = True
    comparison: Comparison | None = None
    inputs_verdict: str = "exact"
    fed: bool = False  # judged on A's input bytes (same inputs)
    location: str | None = None  # the source location of the dispatch (the frontend's line)
    source_line: str | None = None  # that line's text, where the file is readable here
    call: int = 1  # which call of the runs (diverge --calls), from 1; ``ordinal`` counts from its first dispatch

    def to_json(self) -> dict:
        out = {
            "call": self.call,
            "ordinal": self.ordinal,
            "name": self.name,
            "executable": self.executable,
            "max_abs_error": _finite(self.max_abs_error),
            "max_rel_error": _finite(self.max_rel_error),
            "mismatches": self.mismatches,
            "output": self.output_index,
            "first_mismatch": list(self.first_mismatch) if self.first_mismatch is not None else None,
            "workgroups": self.workgroups,
            "inputs_agreed": self.inputs_agreed,
            "inputs": self.inputs_verdict,
            "same_inputs": self.fed,
            "location": self.location,
            "source_line": self.source_line,
        }
        if self.comparison is not None:
            out["comparison"] = self.comparison.to_json()
        return out

    @classmethod
    def from_comparison(cls, entry: DispatchEntry, index: int, c: Comparison, **more) -> Divergence:
        return cls(entry.ordinal, entry.name, entry.executable, c.max_abs_error, c.max_rel_error, c.mismatches,
                   index, c.first_mismatch, entry.workgroups, comparison=c, **more)  # fmt: skip


@dataclass
class WalkResult:
    first_divergence: Divergence | None
    compared: int
    notes: list[str] = field(default_factory=list)
    first_input_difference: int | None = None
    verdicts: list[tuple[int, str, str, str]] = field(default_factory=list)  # ordinal, name, outputs, inputs


def _finite(x: float) -> float | str:
    """JSON has no Inf/NaN: those are written as strings."""
    return x if math.isfinite(x) else str(x)


def _worst(comparisons: list[Comparison]) -> tuple[int, Comparison] | None:
    bad = [(i, c) for i, c in enumerate(comparisons) if not c.ok]
    return bad[0] if bad else None


def walk(a: Bundle, b: Bundle, atol: float | None = None, rtol: float | None = None,
         ulps: float | None = None) -> WalkResult:  # fmt: skip
    """Compare two captures dispatch by dispatch in execution order, each on its own inputs: the culprit is
    the first dispatch whose outputs diverged while its inputs agreed (within rounding counts as agreed)."""
    tolerance = Tolerance(atol, rtol, ulps)
    result = WalkResult(None, 0)
    n = min(len(a.dispatches), len(b.dispatches))
    if len(a.dispatches) != len(b.dispatches):
        result.notes.append(f"dispatch counts differ: {len(a.dispatches)} vs {len(b.dispatches)}")
    for da, db in zip(a.dispatches[:n], b.dispatches[:n]):
        if da.name != db.name:
            result.notes.append(f"dispatch {da.ordinal} differs: {da.name} vs {db.name}; stopped there")
            break
        result.compared += 1
        inputs = _compare_lists(a, da, b, db, "inputs", tolerance)
        outputs = _compare_lists(a, da, b, db, "outputs", tolerance)
        in_verdict = worst_verdict(c.verdict for c in inputs)
        out_verdict = worst_verdict(c.verdict for c in outputs)
        result.verdicts.append((da.ordinal, da.name, str(out_verdict), str(in_verdict)))
        inputs_ok = _worst(inputs) is None
        bad_out = _worst(outputs)
        if not inputs_ok and result.first_input_difference is None:
            result.first_input_difference = da.ordinal
        if bad_out is not None and inputs_ok and result.first_divergence is None:
            index, c = bad_out
            result.first_divergence = Divergence.from_comparison(da, index, c, inputs_verdict=str(in_verdict))
        if bad_out is not None and result.first_input_difference == da.ordinal and result.first_divergence is None:
            result.notes.append(
                f"dispatch {da.ordinal} ({da.name}) got different inputs already: a difference outside "
                "dispatches (a transfer or the program inputs)"
            )
    return result


def _compare_lists(a: Bundle, da: DispatchEntry, b: Bundle, db: DispatchEntry, which: str, tolerance: Tolerance):
    from engine.dispatch.lockstep import typed_by_name

    ta = typed_by_name(a.dispatch_tensors(da, which), da.name)
    tb = typed_by_name(b.dispatch_tensors(db, which), db.name)
    if len(ta) != len(tb):
        return [Comparison(False, 0, 1, math.inf, math.inf, None, note=f"{which} counts differ",
                           verdict=Verdict.DIVERGED)]  # fmt: skip
    return [compare(y, x, tolerance=tolerance) for x, y in zip(ta, tb)]  # B measured against A


def source_line(location: str | None, limit: int = 240) -> str | None:
    """The text of ``file:line`` where the file is readable (the imported model's op), clipped."""
    if not location or ":" not in location:
        return None
    path, _, line = location.rpartition(":")
    try:
        number = int(line)
        with open(path, errors="replace") as f:
            for i, text in enumerate(f, 1):
                if i == number:
                    text = text.strip()
                    return text if len(text) <= limit else text[: limit - 1] + "…"
    except (OSError, ValueError):
        return None
    return None


def dispatch_locations(module_path: str | Path) -> dict[str, str]:
    """Export name -> the source location of the host code's dispatch of it (the frontend's line, as the
    module's debug database has it); empty where the module has none."""
    from engine.runtime.vmfb.call_sites import dispatch_call_sites
    from engine.runtime.vmfb.disassembler import FunctionDisassembler
    from engine.runtime.vmfb.module import open_vmfb

    try:
        module = open_vmfb(str(module_path))
        sites = dispatch_call_sites(module)
        disassembler = FunctionDisassembler(module)
        by_function: dict[int, dict[int, str]] = {}
        out: dict[str, str] = {}
        for site in sites:
            if site.export is None or site.export in out:
                continue
            if site.function_ordinal not in by_function:
                function = module.functions[site.function_ordinal]
                by_function[site.function_ordinal] = disassembler.instruction_locations(function)
            text = by_function[site.function_ordinal].get(site.pc)
            if text and "unknown" not in text:
                out[site.export] = text
        return out
    except (LensError, OSError, IndexError, ValueError):
        return {}


# ------------------------------------------------------------------------------------ reproducer


class _Snapshot(SnapshotSubscriber):
    """Keeps every binding of dispatch ``ordinal`` of the call (counted from its first dispatch, as the finder
    and ``break dispatch N`` count) before and after it runs (or overwrites them first); the copies are the
    device's snapshot observer's. ``first_sequence`` is set when the call starts (None: the initializer)."""

    def __init__(self, ordinal: int, replace_before: list[np.ndarray] | None = None):
        self.ordinal = ordinal
        self.replace_before = replace_before
        self.bytes_before: list[np.ndarray] = []
        self.bytes_after: list[np.ndarray] = []
        self.record: DispatchRecord | None = None
        self.first_sequence: int | None = None

    def _is_it(self, sequence: int) -> bool:
        return self.first_sequence is not None and sequence - self.first_sequence == self.ordinal

    def wants_before(self, record: DispatchRecord) -> bool:
        return self._is_it(record.sequence)

    def before_copy(self, record: DispatchRecord) -> None:
        if not self._is_it(record.sequence) or self.replace_before is None:
            return
        if len(self.replace_before) != len(record.bindings):
            raise DivergenceError(
                f"dispatch {self.ordinal} has {len(record.bindings)} bindings here, "
                f"{len(self.replace_before)} in the reproducer"
            )
        for b, data in zip(record.bindings, self.replace_before):
            if data.nbytes != b.length:
                raise DivergenceError(f"binding {b.index}: {b.length} bytes here, {data.nbytes} saved")
            b.buffer.write_view(b.offset, b.length)[...] = data.reshape(-1).view(np.uint8)

    def after(self, snapshot: DispatchSnapshot) -> None:
        if self._is_it(snapshot.sequence):
            self.record = snapshot.record
            self.bytes_before = list(snapshot.before)
            self.bytes_after = [snapshot.after_copy(k) for k in range(len(snapshot.record.bindings))]


def _run_with(observer: _Snapshot, module: str, function: str, inputs: list[str], device: str) -> None:
    from engine.runtime.debug_runner import INITIALIZER, DebugRunner
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.hal.devices import create_device
    from engine.runtime.hal.module import HalModule

    hal_device = create_device(device)
    DispatchSnapshots.for_device(hal_device).subscribe(observer)
    runner = DebugRunner(module, device, hal_module=HalModule(hal_device), run_init=function != INITIALIZER)
    args = parse_inputs(inputs, split_cconv(runner.cconv(function))[0])
    observer.first_sequence = hal_device.dispatch_count  # the call's dispatches count from here
    runner.invoke(function, args)


def write_reproducer(
    directory: str | Path,
    divergence: Divergence,
    *,
    module_a: str,
    module_b: str,
    function: str,
    inputs: list[str],
    device_a: str,
    device_b: str,
    atol: float | None = None,
    rtol: float | None = None,
    ulps: float | None = None,
    sources: list[str] | None = None,
    before: list[np.ndarray] | None = None,
    after: dict[int, np.ndarray] | None = None,
    record: tuple[list[int], list[int]] | None = None,
    elements: dict[int, str] | None = None,
    tensors: dict[int, list[tuple[int, str]]] | None = None,
) -> Path:
    """Write the reproducer of ``divergence`` (see module doc); returns ``repro.json``. ``before``/``after``/
    ``record`` (A's bindings around the dispatch, its workgroups and constants), when the finder kept them,
    spare a rerun of configuration A."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    if before is None or after is None or record is None:
        snap = _Snapshot(divergence.ordinal)
        _run_with(snap, module_a, function, inputs, device_a)
        if snap.record is None:
            raise DivergenceError(f"dispatch {divergence.ordinal} did not run again in {module_a}")
        before = snap.bytes_before
        written = [i for i, (x, y) in enumerate(zip(snap.bytes_before, snap.bytes_after)) if not np.array_equal(x, y)]
        if not written:
            written = [len(snap.bytes_after) - 1]
        after = {i: snap.bytes_after[i] for i in written}
        record = (list(snap.record.workgroup_count), [int(c) for c in snap.record.constants])
    for i, data in enumerate(before):
        np.save(out / f"binding{i}_before.npy", data)
    for i, data in after.items():
        np.save(out / f"binding{i}_expected.npy", data)
    program_inputs = []
    for k, spec in enumerate(inputs):
        if spec.startswith("@") and Path(spec[1:]).is_file():
            target = out / f"program_input{k}{Path(spec[1:]).suffix}"
            shutil.copyfile(spec[1:], target)
            program_inputs.append("@" + target.name)
        else:
            program_inputs.append(spec)
    # The module travels with the reproducer, so it runs on its own (dynamic shapes included: the
    # program itself computes the dispatch's sizes from the inputs).
    module_copy = out / "module.vmfb"
    shutil.copyfile(module_b, module_copy)
    source_file = _copy_source(out, divergence, sources or []) or _source_from_model(out, divergence, module_b)
    repro = {
        "call": divergence.call,  # the dispatch is rerun in the first call, on these bytes
        "ordinal": divergence.ordinal,
        "name": divergence.name,
        "executable": divergence.executable,
        "location": divergence.location,
        "module": module_copy.name,
        "original_module": str(Path(module_b).resolve()),
        "reference_module": str(Path(module_a).resolve()),
        "function": function,
        "inputs": program_inputs,
        "device": device_b,
        "reference_device": device_a,
        "workgroups": record[0],
        "constants": record[1],
        "bindings": [
            {
                "index": i,
                "length": int(data.nbytes),
                "before": f"binding{i}_before.npy",
                "expected": f"binding{i}_expected.npy" if i in after else None,
                "element": (elements or {}).get(i),
                # the typed outputs the finder compared in this binding: byte offset and type
                **({"tensors": [{"offset": o, "type": t} for o, t in tensors[i]]} if tensors and i in tensors else {}),
            }
            for i, data in enumerate(before)
        ],
        "atol": atol,
        "rtol": rtol,
        "ulps": ulps,
        "source": source_file,
        "command": f"iree-lens diverge --replay={out.resolve()}",
    }
    (out / "repro.json").write_text(json.dumps(repro, indent=1) + "\n")
    where = f" ({divergence.location})" if divergence.location else ""
    (out / "README.txt").write_text(
        f"Dispatch {divergence.ordinal} ({divergence.name}){where} of {function} diverged: "
        f"max abs error {divergence.max_abs_error}.\n"
        f"Rerun it alone on {device_b} with configuration A's input bytes (exit status 1 while it still "
        f"diverges):\n  {repro['command']}\n"
    )
    return out / "repro.json"


def _copy_source(out: Path, divergence: Divergence, sources: list[str]) -> str | None:
    """The executable's source among ``sources`` (files or directories of dumped sources), copied."""
    exe = divergence.executable or ""
    for s in sources:
        p = Path(s)
        files = sorted(p.glob("*.mlir")) if p.is_dir() else [p]
        for f in files:
            stem = f.stem
            if stem == exe or stem.endswith("_" + exe) or stem.endswith(exe):
                target = out / f"{exe}.mlir"
                shutil.copyfile(f, target)
                return target.name
    return None


SOURCE_DUMP_SECONDS = 300

_TARGET_OF_FORMAT = {"embedded-elf": "llvm-cpu", "system-elf": "llvm-cpu", "vmvx": "vmvx", "vulkan-spirv": "vulkan-spirv"}


def _source_from_model(out: Path, divergence: Divergence, module: str) -> str | None:
    """The executable's MLIR when no dump was given: the dispatch's location names the model file it came
    from; ``iree-compile`` dumps that model's executable sources for the module's target (a best effort:
    None when the file is gone or the compile fails)."""
    import subprocess
    import tempfile

    from engine.compiler.targets import target_flags
    from engine.runtime.vmfb.module import open_vmfb

    location = divergence.location or ""
    model = Path(location.rpartition(":")[0]) if ":" in location else None
    if model is None or model.suffix != ".mlir" or not model.is_file():
        return None
    try:
        formats = {e.format or "" for e in open_vmfb(module).executables}
    except (LensError, OSError):
        return None
    target = next((t for f in formats for prefix, t in _TARGET_OF_FORMAT.items() if f.startswith(prefix)), None)
    if target is None:
        return None
    compiler = Path(__import__("sys").executable).parent / "iree-compile"
    with tempfile.TemporaryDirectory(prefix="iree-lens-repro-") as tmp:
        try:
            proc = subprocess.run(
                [str(compiler), str(model), *target_flags(target), "--compile-to=executable-sources",
                 f"--iree-hal-dump-executable-sources-to={tmp}", "-o", str(Path(tmp) / "out.mlir")],
                capture_output=True, text=True, timeout=SOURCE_DUMP_SECONDS,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            return None
        return _copy_source(out, divergence, [tmp])


@dataclass(frozen=True)
class ReplayResult:
    ordinal: int
    name: str
    comparisons: dict[int, Comparison]

    @property
    def reproduced(self) -> bool:
        return any(not c.ok for c in self.comparisons.values())


def replay(directory: str | Path, device: str | None = None) -> ReplayResult:
    """Rerun the reproduced dispatch with A's input bytes in B's module and compare with A's outputs."""
    d = Path(directory)
    try:
        repro = json.loads((d / "repro.json").read_text())
    except (OSError, ValueError) as e:
        raise DivergenceError(f"{d} is not a reproducer: {e}") from None
    before = [np.load(d / b["before"]) for b in repro["bindings"]]
    inputs = [("@" + str(d / s[1:])) if s.startswith("@") else s for s in repro["inputs"]]
    snap = _Snapshot(int(repro["ordinal"]), replace_before=before)
    module = d / repro["module"] if (d / repro["module"]).is_file() else Path(repro["module"])
    _run_with(snap, str(module), repro["function"], inputs, device or repro["device"])
    if snap.record is None:
        raise DivergenceError(f"dispatch {repro['ordinal']} was not reached in {repro['module']}")
    comparisons = {}
    for b in repro["bindings"]:
        if b["expected"]:
            expected = np.load(d / b["expected"])
            got = snap.bytes_after[b["index"]]
            tolerance = Tolerance(repro.get("atol"), repro.get("rtol"), repro.get("ulps"))
            if len(b.get("tensors") or ()) == 1:  # the one typed output the finder compared
                from engine.dispatch.tensor_types import TensorType, view_bytes

                [where] = b["tensors"]
                tt, start = TensorType.parse(where["type"]), int(where["offset"])
                raw_got = np.ascontiguousarray(got).reshape(-1).view(np.uint8)[start:]
                raw_expected = np.ascontiguousarray(expected).reshape(-1).view(np.uint8)[start:]
                (typed_got, t1), (typed_expected, t2) = view_bytes(raw_got, tt), view_bytes(raw_expected, tt)
                if t1 == tt and t2 == tt:
                    comparisons[b["index"]] = compare(typed_got, typed_expected, tolerance=tolerance)
                    continue
            if b.get("element"):
                from engine.dispatch.tensor_types import element_dtype

                dtype = element_dtype(b["element"])
                if got.nbytes % dtype.itemsize == 0:
                    got, expected = got.view(dtype), np.ascontiguousarray(expected).reshape(-1).view(dtype)
                    comparisons[b["index"]] = compare(got, expected, tolerance=Tolerance(
                        repro.get("atol"), repro.get("rtol"), repro.get("ulps")))
                    continue
            tolerance = Tolerance(repro.get("atol"), repro.get("rtol"), repro.get("ulps"))
            comparisons[b["index"]] = compare(
                _typed(got, repro["name"]), _typed(expected, repro["name"]), tolerance=tolerance
            )
    return ReplayResult(int(repro["ordinal"]), repro["name"], comparisons)


def _typed(raw: np.ndarray, export_name: str) -> np.ndarray:
    from engine.dispatch.tensor_types import type_from_name, view_bytes

    return view_bytes(raw, type_from_name(export_name, raw.nbytes))[0]
