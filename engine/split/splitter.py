"""``split``: a program made into one standalone test per distinct dispatch.

One compile in two legs: to IREE's flow phase (with debug locations), where a trace point is put around
every dispatch (``extract.instrument_dispatches``: IREE's ``--iree-flow-trace-dispatch-tensors`` misses the
dispatches inside loops), then from the flow phase to the ``.vmfb``. One run on IREE's runtime, whose
trace points hand over every dispatch's tensor operands and results, and the flow phase's executables
rewritten as plain tensor functions (``extract.standalone_test``). Layout of the
output folder::

    DIR/manifest.json               {"tests": [{"dir", "function", "dispatch", "ordinal", "loc",
                                                "inputs", "outputs", "occurrences", ...}],
                                     "not_written": [the same, with "error": why no program]}
    DIR/<test>/dispatch.mlir        func.func @main(the dispatch's tensor operands) -> its results
    DIR/<test>/inputs/argN.npy      the first occurrence's operands (manifest "inputs": these names)
    DIR/<test>/expected/resultN.npy its results (manifest "outputs")
    DIR/<test>/occurrences/K/{inputs,expected}/  the K-th later occurrence (K from 1), if kept

A dispatch run several times with the same executable and operand shapes is one test; every occurrence's
data is kept unless ``max_occurrences`` says how many.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.compiler import CompileRequest, compile_program
from engine.errors import LensError
from engine.split.extract import (
    SplitError,
    dispatch_signatures,
    executable_functions,
    instrument_dispatches,
    standalone_test,
)

MANIFEST = "manifest.json"


@dataclass
class SplitTest:
    """One test of a split folder (a manifest entry)."""

    dir: str
    dispatch: str  # IREE's export name
    executable: str
    ordinal: int  # the first occurrence's position among the run's dispatches (from 0)
    loc: str | None
    inputs: list[str]  # file names under inputs/, in argument order
    outputs: list[str]  # file names under expected/, in result order
    input_shapes: list[list[int]] = field(default_factory=list)
    output_shapes: list[list[int]] = field(default_factory=list)
    occurrences: list[int] = field(default_factory=list)  # ordinals of every occurrence
    kept: int = 0  # how many occurrences' data are written
    error: str | None = None  # why no dispatch.mlir could be written

    def to_json(self) -> dict:
        return {
            "dir": self.dir,
            "function": "main",
            "dispatch": self.dispatch,
            "executable": self.executable,
            "ordinal": self.ordinal,
            "loc": self.loc,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "input_shapes": self.input_shapes,
            "output_shapes": self.output_shapes,
            "occurrences": self.occurrences,
            "kept_occurrences": self.kept,
            **({"error": self.error} if self.error else {}),
        }

    @classmethod
    def from_json(cls, entry: dict) -> SplitTest:
        return cls(
            dir=entry["dir"], dispatch=entry.get("dispatch", ""), executable=entry.get("executable", ""),
            ordinal=int(entry.get("ordinal", 0)), loc=entry.get("loc"), inputs=list(entry["inputs"]),
            outputs=list(entry["outputs"]), input_shapes=entry.get("input_shapes", []),
            output_shapes=entry.get("output_shapes", []), occurrences=entry.get("occurrences", []),
            kept=int(entry.get("kept_occurrences", 1)), error=entry.get("error"),
        )  # fmt: skip


@dataclass(frozen=True)
class SplitResult:
    directory: Path
    tests: list[SplitTest]
    dispatches: int  # dispatches the run made
    compile_s: float
    run_s: float
    write_s: float


def occurrence_dir(test_dir: Path, occurrence: int) -> Path:
    """Where occurrence ``occurrence`` (0: the first) keeps its ``inputs/`` and ``expected/``."""
    return test_dir if occurrence == 0 else test_dir / "occurrences" / str(occurrence)


def read_manifest(directory: Path) -> list[SplitTest]:
    path = Path(directory) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise LensError(f"{directory} is not a split folder (no {MANIFEST})") from None
    except json.JSONDecodeError as e:
        raise LensError(f"{path} is not JSON: {e}") from None
    return [SplitTest.from_json(t) for t in data.get("tests", [])]


def _test_name(export: str, taken: set[str]) -> str:
    # ``model$async_dispatch_3_conv_...``: the part from ``dispatch_`` on names it in its program
    found = re.search(r"dispatch_\d+.*", export)
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", found.group(0) if found else export)[:120]
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


class _Collector:
    """The trace-point sink: groups dispatches into tests and writes their tensors as they come."""

    def __init__(self, out: Path, max_occurrences: int | None, only: set[str] | None = None):
        self.out = out
        self.max_occurrences = max_occurrences
        self.only = only
        self.tests: dict[tuple, SplitTest] = {}
        self.names: set[str] = set()
        self.ordinal = 0
        self.pending: tuple[SplitTest, int] | None = None
        self.errors: list[str] = []
        self.runner = None

    def __call__(self, key: str, buffer_views: list) -> None:
        try:
            self._take(key, buffer_views)
        except Exception as e:  # an exception must not cross into IREE's runtime
            self.errors.append(f"{key}: {e}")

    def _arrays(self, buffer_views) -> list[np.ndarray]:
        return [self.runner.read_buffer_view(bv) for bv in buffer_views]

    def _take(self, key: str, buffer_views: list) -> None:
        head, _, kind = key.rpartition(" ")
        executable, _, export = head.partition("::")
        if self.only is not None and export not in self.only:
            self.ordinal += kind == "inputs"  # counted, not kept
            return
        arrays = self._arrays(buffer_views)
        if kind == "inputs":
            shapes = tuple((a.shape, a.dtype.str) for a in arrays)
            test = self.tests.get((head, shapes))
            if test is None:
                test = SplitTest(
                    _test_name(export, self.names), export, executable, self.ordinal, None,
                    [f"arg{i}.npy" for i in range(len(arrays))], [],
                    input_shapes=[list(a.shape) for a in arrays],
                )  # fmt: skip
                self.tests[(head, shapes)] = test
            occurrence = len(test.occurrences)
            test.occurrences.append(self.ordinal)
            self.ordinal += 1
            self.pending = (test, occurrence)
            if self.max_occurrences is None or occurrence < self.max_occurrences:
                test.kept = occurrence + 1
                self._save(test, occurrence, "inputs", test.inputs, arrays)
        elif kind == "outputs" and self.pending is not None:
            test, occurrence = self.pending
            self.pending = None
            if occurrence == 0:
                test.outputs = [f"result{i}.npy" for i in range(len(arrays))]
                test.output_shapes = [list(a.shape) for a in arrays]
            if occurrence < test.kept:
                self._save(test, occurrence, "expected", test.outputs, arrays)

    def _save(self, test: SplitTest, occurrence: int, kind: str, names: list[str], arrays) -> None:
        folder = occurrence_dir(self.out / test.dir, occurrence) / kind
        folder.mkdir(parents=True, exist_ok=True)
        for name, array in zip(names, arrays):
            np.save(folder / name, array)


def split_program(
    request: CompileRequest,
    function: str,
    input_specs: list[str],
    out: Path,
    *,
    device: str | None = None,
    max_occurrences: int | None = None,
    timeout_s: float | None = None,
    work_dir: Path | None = None,
    only: set[str] | None = None,
) -> SplitResult:
    """Compile ``request`` (with dispatch trace points), run ``function`` on ``input_specs`` once with IREE's
    runtime, and write one test per distinct dispatch into ``out`` (see the module doc); ``only``: the
    tests of these dispatches (IREE's export names) alone (the window's Export as test)."""
    from engine.compiler.targets import TARGETS, find_target
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.reference import ReferenceRunner

    out = Path(out)
    _clear_previous(out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="lens-split-", dir=work_dir))
    try:
        start = time.perf_counter()
        module, vmfb = _compile_with_trace_points(request, scratch, timeout_s)
        compile_s = time.perf_counter() - start

        start = time.perf_counter()
        import iree.runtime as rt

        collector = _Collector(out, max_occurrences, only)
        runner_device = device or (find_target(request.target).device if request.target in TARGETS else "local-sync")
        runner = ReferenceRunner(vmfb, runner_device, debug_sink=rt.HalModuleDebugSink(collector))
        collector.runner = runner
        try:
            args = parse_inputs(input_specs, split_cconv(runner.cconv(function))[0])
            runner.invoke(function, args)
        finally:
            collector.runner = None  # the sink refers to the runner: break the cycle
        del runner
        if collector.errors:
            raise LensError("reading trace points failed: " + "; ".join(collector.errors[:3]))
        run_s = time.perf_counter() - start

        start = time.perf_counter()
        tests = sorted(collector.tests.values(), key=lambda t: t.ordinal)
        _write_programs(module, tests, out)
        # "tests" lists only tests with a program (what a checker compiles); the rest say why not.
        manifest = {"tests": [t.to_json() for t in tests if not t.error],
                    "not_written": [t.to_json() for t in tests if t.error]}  # fmt: skip
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        write_s = time.perf_counter() - start
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return SplitResult(out, tests, collector.ordinal, compile_s, run_s, write_s)


def _clear_previous(out: Path) -> None:
    """An earlier split in ``out`` goes (its tests and saved checks, which judged other programs); a folder
    holding anything else is refused rather than mixed with tests."""
    if not out.exists() or not any(out.iterdir()):
        return
    if not (out / MANIFEST).is_file():
        raise LensError(f"{out} is not empty and holds no split: give an empty or new folder")
    try:
        previous = json.loads((out / MANIFEST).read_text())
    except ValueError:
        previous = {}
    for entry in [*previous.get("tests", []), *previous.get("not_written", [])]:
        name = str(entry.get("dir", ""))
        if name and "/" not in name and name not in (".", ".."):
            shutil.rmtree(out / name, ignore_errors=True)
    shutil.rmtree(out / "checks", ignore_errors=True)
    (out / MANIFEST).unlink()


def _compile_with_trace_points(request: CompileRequest, scratch: Path, timeout_s: float | None):
    """The program compiled to the flow phase (with debug locations, for each test's ``loc``), a trace point
    put around every dispatch (``extract.instrument_dispatches``: IREE's own flag misses those in loops),
    and the rest compiled from there. Returns the parsed flow module and the ``.vmfb``."""
    from iree.compiler import ir

    to_flow = replace(request, compile_to="flow", trace_dispatch_tensors=False, dump_executables=False,
                      timing=False, extra_flags=(*request.extra_flags, "--mlir-print-debuginfo"))  # fmt: skip
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    flow = compile_program(to_flow, out_dir=scratch / "flow", timeout_s=timeout_s)
    flow.raise_if_failed()
    context = ir.Context()
    module = ir.Module.parse(flow.phase("flow").text(), context)
    instrument_dispatches(module)
    traced = scratch / "traced.flow.mlir"
    with open(traced, "w") as fh:
        module.operation.print(file=fh, enable_debug_info=False)
    rest = replace(request, source_path=traced, source_text=None, name=None, compile_from="flow", dump_executables=False,
                   timing=False)  # fmt: skip
    left = None if deadline is None else max(1.0, deadline - time.monotonic())
    compiled = compile_program(rest, out_dir=scratch / "rest", timeout_s=left)
    compiled.raise_if_failed()
    return module, compiled.vmfb_path


def _write_programs(module, tests: list[SplitTest], out: Path) -> None:
    signatures = dispatch_signatures(module)
    functions = executable_functions(module)
    for test in tests:
        entry = f"{test.executable}::{test.dispatch}"
        sig = signatures.get(entry)
        if sig is None or entry not in functions:
            test.error = f"{entry} is not a flow.dispatch of the flow phase"
            continue
        test.loc = sig.loc
        try:
            program = standalone_test(functions[entry], sig, [tuple(s) for s in test.output_shapes])
        except SplitError as e:
            test.error = str(e)
            continue
        except (ValueError, RuntimeError, TypeError) as e:  # a form of IR the rewrite does not know
            test.error = f"{entry}: {type(e).__name__}: {e}"
            continue
        (out / test.dir).mkdir(parents=True, exist_ok=True)
        (out / test.dir / "dispatch.mlir").write_text(program.text)
