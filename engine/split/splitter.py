"""``split``: a program made into one standalone test per distinct dispatch.

One compile in two legs: to IREE's flow phase (with debug locations), where a trace point is put around
every dispatch (``extract.instrument_dispatches``: IREE's ``--iree-flow-trace-dispatch-tensors`` misses the
dispatches inside loops), then from the flow phase to the ``.vmfb``. One run on IREE's runtime, whose
trace points hand over every dispatch's tensor operands and results, and the flow phase's executables
rewritten as plain tensor functions (``extract.standalone_test``). Layout of the
output folder::

    DIR/manifest.json               {"tests": [{"dir", "function", "dispatch", "ordinal", "loc",
                                                "inputs", "outputs", "occurrences", ...,
                                                "initializer": true where the module's
                                                initializer ran it (ordinals: its own count)}],
                                     "not_written": [the same, with "error": why no program],
                                     "build": {"flags", "device", "compiler", "host"}: what made
                                               the expected outputs (engine.split.build)}
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
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.compiler import CompileRequest, compile_program
from engine.errors import CompileCancelled, LensError
from engine.split.build import this_build
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
    # Run by the module's initializer (before the call; const-eval off leaves kernels there): ``ordinal`` and
    # ``occurrences`` then count the initializer's dispatches, as the call's count from its first.
    initializer: bool = False

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
            **({"initializer": True} if self.initializer else {}),
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
            initializer=bool(entry.get("initializer", False)),
        )  # fmt: skip


@dataclass(frozen=True)
class SplitResult:
    directory: Path
    tests: list[SplitTest]
    dispatches: int  # dispatches the call made
    compile_s: float
    run_s: float
    write_s: float
    initializer_dispatches: int = 0  # dispatches the module's initializer made before the call


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
    found = re.search(r"(initializer_\d+_)?dispatch_\d+.*", export)
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", found.group(0) if found else export)[:120]
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


class _Collector:
    """The trace-point sink: groups dispatches into tests and writes their tensors as they come.

    IREE's stream scheduling orders the trace points on the host, not around each dispatch: a dispatch's
    ``inputs`` can come after its ``outputs`` (EfficientViT: the outputs of two dispatches, two other
    dispatches whole, then the two inputs). So each dispatch (``exe::export``) pairs its own traces, first
    come first paired, and takes its ordinal when its first trace comes. A dispatch with no tensor operand
    (``without_inputs``) has no ``inputs`` trace point at all (an empty one is not valid IR): its outputs
    begin it."""

    def __init__(self, out: Path, max_occurrences: int | None, only: set[str] | None = None,
                 without_inputs: frozenset[str] = frozenset()):  # fmt: skip
        self.out = out
        self.max_occurrences = max_occurrences
        self.only = only
        self.without_inputs = without_inputs
        self.tests: dict[tuple, SplitTest] = {}
        self.names: set[str] = set()
        self.ordinal = 0  # of the call's dispatches (the initializer's: initializer_ordinal)
        self.initializer_ordinal = 0
        self.in_initializer = True  # until the call begins (``calling``)
        # Per dispatch, first in first out: occurrences whose inputs came and outputs have not (None: not
        # kept), and outputs that came before their inputs, with the ordinal they took.
        self.awaiting_outputs: dict[str, deque] = {}
        self.early_outputs: dict[str, deque] = {}
        self.errors: list[str] = []
        self.runner = None

    def __call__(self, key: str, buffer_views: list) -> None:
        try:
            self._take(key, buffer_views)
        except Exception as e:  # an exception must not cross into IREE's runtime
            self.errors.append(f"{key}: {e}")

    def _arrays(self, buffer_views) -> list[np.ndarray]:
        return [self.runner.read_buffer_view(bv) for bv in buffer_views]

    def calling(self) -> None:
        """The call begins: what comes now is the call's, numbered from its first dispatch."""
        self.in_initializer = False

    def unpaired(self) -> list[str]:
        """Dispatches one of whose traces never found its other half (said as an error: their data would be
        half a test)."""
        return sorted({h for q in (self.awaiting_outputs, self.early_outputs) for h, d in q.items() if d})

    def _count(self) -> int:
        """The ordinal of the dispatch seen now, in the initializer's count or the call's."""
        if self.in_initializer:
            self.initializer_ordinal += 1
            return self.initializer_ordinal - 1
        self.ordinal += 1
        return self.ordinal - 1

    def _kept(self, export: str) -> bool:
        return self.only is None or export in self.only

    def _take(self, key: str, buffer_views: list) -> None:
        head, _, kind = key.rpartition(" ")
        executable, _, export = head.partition("::")
        if kind == "inputs":
            early = self.early_outputs.get(head)
            if early:
                ordinal, outputs = early.popleft()
                self._outputs(self._begin(head, executable, export, buffer_views, ordinal), outputs)
            else:
                begun = self._begin(head, executable, export, buffer_views, self._count())
                self.awaiting_outputs.setdefault(head, deque()).append(begun)
        elif kind == "outputs":
            outputs = self._arrays(buffer_views) if self._kept(export) else []
            if head in self.without_inputs:
                self._outputs(self._begin(head, executable, export, [], self._count()), outputs)
            elif self.awaiting_outputs.get(head):
                self._outputs(self.awaiting_outputs[head].popleft(), outputs)
            else:  # its inputs come later
                self.early_outputs.setdefault(head, deque()).append((self._count(), outputs))

    def _begin(self, head: str, executable: str, export: str, buffer_views: list, ordinal: int):
        """An occurrence of dispatch ``head`` with these inputs: (its test, which occurrence), its inputs kept;
        None when ``only`` leaves it out."""
        if not self._kept(export):
            return None
        arrays = self._arrays(buffer_views)
        shapes = tuple((a.shape, a.dtype.str) for a in arrays)
        key_of_test = (self.in_initializer, head, shapes)
        test = self.tests.get(key_of_test)
        if test is None:
            test = SplitTest(
                _test_name(export, self.names), export, executable, ordinal, None,
                [f"arg{i}.npy" for i in range(len(arrays))], [],
                input_shapes=[list(a.shape) for a in arrays], initializer=self.in_initializer,
            )  # fmt: skip
            self.tests[key_of_test] = test
        occurrence = len(test.occurrences)
        test.occurrences.append(ordinal)
        test.ordinal = min(test.ordinal, ordinal)
        if self.max_occurrences is None or occurrence < self.max_occurrences:
            test.kept = occurrence + 1
            self._save(test, occurrence, "inputs", test.inputs, arrays)
        return test, occurrence

    def _outputs(self, begun, arrays: list[np.ndarray]) -> None:
        if begun is None:
            return
        test, occurrence = begun
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
    parameters: tuple[str, ...] = (),
) -> SplitResult:
    """Compile ``request`` (with dispatch trace points), run ``function`` on ``input_specs`` once with IREE's
    runtime, and write one test per distinct dispatch into ``out`` (see the module doc); ``only``: the
    tests of these dispatches (IREE's export names) alone (the window's Export as test); ``parameters``: the
    [SCOPE=]FILE archives a program compiled with external parameters loads (the tests hold their data)."""
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

        signatures = dispatch_signatures(module)  # read once: the collector's and the programs' (a walk of the IR)
        without_inputs = frozenset(k for k, sig in signatures.items() if not sig.tensor_operands)
        collector = _Collector(out, max_occurrences, only, without_inputs)
        runner_device = device or (find_target(request.target).device if request.target in TARGETS else "local-sync")
        # The collector reads the initializer's trace points as the runner loads the module.
        from engine.runtime.parameters import ParameterArchives

        runner = ReferenceRunner(vmfb, runner_device, debug_sink=rt.HalModuleDebugSink(collector),
                                 on_loading=lambda loading: setattr(collector, "runner", loading),
                                 parameters=ParameterArchives.open_given(parameters))  # fmt: skip
        try:
            args = parse_inputs(input_specs, split_cconv(runner.cconv(function))[0])
            collector.calling()
            runner.invoke(function, args)
        finally:
            collector.runner = None  # the sink refers to the runner: break the cycle
        del runner
        if collector.errors:
            raise LensError("reading trace points failed: " + "; ".join(collector.errors[:3]))
        unpaired = collector.unpaired()
        if unpaired:
            raise LensError("trace points without their other half (inputs or outputs) for " + ", ".join(unpaired[:3]))
        run_s = time.perf_counter() - start

        start = time.perf_counter()
        tests = sorted(collector.tests.values(), key=lambda t: (not t.initializer, t.ordinal))
        _write_programs(module, signatures, tests, out)
        # "tests" lists only tests with a program (what a checker compiles); the rest say why not.
        manifest = {"tests": [t.to_json() for t in tests if not t.error],
                    "not_written": [t.to_json() for t in tests if t.error],
                    "build": this_build(_build_flags(request), runner_device).to_json()}  # fmt: skip
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        write_s = time.perf_counter() - start
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return SplitResult(out, tests, collector.ordinal, compile_s, run_s, write_s, collector.initializer_ordinal)


def _build_flags(request: CompileRequest) -> list[str]:
    """The iree-compile flags of the split's build as ``split --check`` would give them: the target's and the
    options, not the phases it was compiled through."""
    return replace(request, compile_from=None, compile_to=None, trace_dispatch_tensors=False).compiler_flags()


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
    # As bytecode: IREE 3.13 prints a trace of two dynamically shaped tensors as text its own parser refuses
    # ("custom op 'flow.tensor.trace' expected 1 operands"; its --iree-flow-trace-dispatch-tensors output too).
    traced = scratch / "traced.flow.mlirbc"
    with open(traced, "wb") as fh:
        module.operation.write_bytecode(fh)
    rest = replace(request, source_path=traced, source_text=None, name=None, compile_from="flow", dump_executables=False,
                   timing=False)  # fmt: skip
    left = None if deadline is None else max(1.0, deadline - time.monotonic())
    try:
        compiled = compile_program(rest, out_dir=scratch / "rest", timeout_s=left)
        compiled.raise_if_failed()
    except CompileCancelled:
        if timeout_s is None:
            raise
        # the limit the user gave, not what the flow leg left of it
        raise CompileCancelled(f"compile ran past its {timeout_s:g} s limit") from None
    return module, compiled.vmfb_path


def _write_programs(module, signatures: dict, tests: list[SplitTest], out: Path) -> None:
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
