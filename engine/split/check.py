"""``split --check``: every test of a split folder compiled with IREE's own ``iree-compile`` (the given
flags), run with ``iree-run-module`` on the given device, and each result judged against ``expected/`` with
the project's one floating-point-aware comparison (``engine.dispatch.numerics``).

A test's verdict is the worst of its outputs' (``exact``, ``within_rounding``, ``within_tolerance``,
``diverged``), or ``failed`` with the reason when it did not compile or run. The plain tools, not the
in-process runtime, so that what is checked is exactly what a user's ``iree-compile``/``iree-run-module``
would do, and a crash of either is that test's verdict, not the checker's end.

The tests are compiled together first: one module holding every test's program (each test's symbols renamed
apart), one ``iree-compile``, since most of a small program's compile is the compiler's fixed cost per
invocation (EfficientViT's 123 tests: 13 s for llvm-cpu instead of 61 s one by one). A test judged
``diverged`` or ``failed`` from that module is compiled and judged again alone, so that every verdict that
reports a problem is what that test's own ``iree-compile`` gives; a merged module that does not compile is
dropped and every test compiled alone.

A check that is the split's own build (``engine.split.build``: the same flags, compiler, host CPU and device,
a local CPU one) re-runs each dispatch's own kernel on its recorded inputs: every occurrence of 1,345
dispatches of four models (small_cnn, SqueezeNet 1.1, EfficientViT-M0, transformer96) re-ran bit for bit on
local-sync and on local-task (and VMVX builds of small_cnn and attention_block; on Vulkan only lavapipe was
measured, so a GPU keeps the default rule). Such a check is judged within
``SAME_BUILD_EPS`` epsilons of each tensor's scale (f32: 1.9e-6; the default rule allows 2048, 2.4e-4, and
widens it for a long reduction), so a kernel that went wrong by less than the default allowance is not
passed as rounding. Another build (flags, device, CPU) keeps the default rule.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.compiler.job import iree_compile_path
from engine.dispatch.numerics import (
    Comparison,
    Tolerance,
    Verdict,
    compare,
    finite_scale,
    float_info,
    reduction_length_from_name,
    rounding_allowance,
    worst_verdict,
)
from engine.dispatch.tensor_types import from_storage, packed_type, stored_as_bits
from engine.split.build import CPU_DEVICES, read_build, this_build
from engine.split.splitter import SplitTest, occurrence_dir, read_manifest
from engine.trace.ireeprof import iree_tool

FAILED = "failed"
# The split's own build re-runs a dispatch's kernel on its recorded inputs: bit for bit in every case measured
# (see the module's docstring). A few epsilons of room, against each tensor's scale, for what was not.
SAME_BUILD_EPS = 16.0
SAME_BUILD_RULE = f"the split's own build: within {SAME_BUILD_EPS:g} eps of the tensor's scale"


@dataclass
class TestVerdict:
    """How one test fared: ``verdict`` and, per output (of the worst occurrence), the comparison's metrics."""

    dir: str
    verdict: str
    reason: str = ""
    outputs: list[dict] = field(default_factory=list)
    occurrences: int = 0  # occurrences checked

    @property
    def agrees(self) -> bool:
        return self.verdict not in (FAILED, "diverged")

    def to_json(self) -> dict:
        """The verdict, the metrics of the worst output at the top level (max_abs_error, max_ulps,
        mismatches...), and every output's under ``outputs``."""
        order = ["exact", "within_rounding", "within_tolerance", "diverged"]
        worst = max(self.outputs, key=lambda o: (order.index(o["verdict"]) if o.get("verdict") in order else 0,
                                                 _number(o.get("max_scaled_error"))), default=None)  # fmt: skip
        metrics = {k: v for k, v in (worst or {}).items() if k not in ("ok", "verdict", "name")}
        return {"dir": self.dir, "verdict": self.verdict, "reason": self.reason, "occurrences": self.occurrences,
                **metrics, **({"worst_output": worst["name"]} if worst else {}), "outputs": self.outputs}  # fmt: skip


def _number(value) -> float:
    """A metric as JSON holds it (a float, or "inf"/"nan" as text) as a float that orders; NaN as 0."""
    try:
        number = float(value or 0)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if number != number else number


@dataclass(frozen=True)
class ToolRun:
    ok: bool
    message: str  # the tool's last lines when it failed


def _tail(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in (proc.stderr or proc.stdout or "").strip().splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors[0] if errors else " ".join(lines[-2:]) if lines else f"exit code {proc.returncode}")[:500]


def compile_test(source: Path, flags: list[str], vmfb: Path, timeout_s: float = 300) -> ToolRun:
    """``iree-compile source flags -o vmfb``."""
    cmd = [iree_compile_path(), str(source), *flags, "-o", str(vmfb)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return ToolRun(False, f"iree-compile ran past {timeout_s:g} s")
    if proc.returncode != 0:
        crashed = " (crashed)" if proc.returncode < 0 else ""
        return ToolRun(False, f"iree-compile failed{crashed}: {_tail(proc)}")
    return ToolRun(True, "")


def run_test(
    vmfb: Path, device: str, inputs: list[Path | str], outputs: list[Path], timeout_s: float = 300,
    function: str = "main",
) -> ToolRun:  # fmt: skip
    """``iree-run-module --function=FUNCTION`` with ``inputs`` as ``--input=@file`` (a ``str``: the whole
    ``--input`` value, ``64x16xi4=@arg0.bin``), results to ``outputs`` (``.npy``; ``.bin``: the bytes)."""
    cmd = [iree_tool("iree-run-module"), f"--module={vmfb}", f"--device={device}", f"--function={function}"]
    cmd += [f"--input={p}" if isinstance(p, str) else f"--input=@{p}" for p in inputs]
    cmd += [f"--output=@{p}" for p in outputs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return ToolRun(False, f"iree-run-module ran past {timeout_s:g} s")
    if proc.returncode != 0 or not all(p.exists() for p in outputs):
        crashed = " (crashed)" if proc.returncode < 0 else ""
        return ToolRun(False, f"iree-run-module failed{crashed}: {_tail(proc)}")
    return ToolRun(True, "")


def tolerance_for(test: SplitTest, inputs: list[np.ndarray], explicit: Tolerance | None) -> Tolerance:
    """The explicit rule if given; else the default rounding rule, widened for a reduction by its length and
    the scale of what it summed (as the divergence finder judges a dispatch)."""
    if explicit is not None and explicit.explicit:
        return explicit
    length = reduction_length_from_name(test.dispatch)
    if length is None:
        return Tolerance()
    return Tolerance(reduction_length=length, input_scale=finite_scale([a for a in inputs if a.dtype.kind == "f"]))


def judge_output(actual: np.ndarray, expected: np.ndarray, rule: Tolerance, same_build: bool = False) -> Comparison:
    """One output against its expectation: by ``rule``, or, for the split's own build (and no explicit rule),
    within ``SAME_BUILD_EPS`` of the expected tensor's scale (the comparison says that rule and its allowance;
    a float output within it is ``within_rounding``, as the default rule's would be)."""
    info = float_info(expected.dtype)
    if not same_build or rule.explicit or info is None:
        return compare(actual, expected, tolerance=rule)
    allowance = min(rounding_allowance(expected.dtype), SAME_BUILD_EPS * float(info.eps))
    scale = finite_scale([expected])
    judged = compare(actual, expected, tolerance=Tolerance(atol=allowance * scale, rtol=0.0))
    verdict = Verdict.WITHIN_ROUNDING if judged.verdict is Verdict.WITHIN_TOLERANCE else judged.verdict
    # Said against the comparison's scale (the larger of both sides'), as the default rule's rounding is.
    rounding = allowance * scale / judged.scale if judged.scale > 0 else allowance
    return replace(judged, verdict=verdict, atol=None, rtol=None, rounding=rounding, rounding_scale=scale,
                   tolerance_text=SAME_BUILD_RULE)  # fmt: skip


def same_build_as_split(folder: Path, flags: list[str], device: str) -> str | None:
    """None when checking ``folder`` with ``flags`` on ``device`` is the split's own build; else why not (what
    differs, or that the folder does not say its build)."""
    recorded = read_build(folder)
    if recorded is None:
        return "the split folder does not say which build made it"
    differs = this_build(flags, device).differs_from(recorded)
    if differs is None and device not in CPU_DEVICES:
        # lavapipe re-ran small_cnn's and attention_block's 18 dispatches bit for bit too; a GPU's were not measured
        return f"{device} is not a local CPU device, where re-runs were measured bit for bit"
    return differs


def check_test(
    folder: Path, test: SplitTest, flags: list[str], device: str, *, tolerance: Tolerance | None = None,
    max_occurrences: int | None = 1, work: Path | None = None, batch: BatchModule | None = None,
    same_build: bool = False,
) -> TestVerdict:  # fmt: skip
    """Compile and run one test, judging every kept occurrence (up to ``max_occurrences``); with ``batch``,
    run its function of that already compiled module instead; ``same_build``: judged by the split's own
    build's rule (``judge_output``)."""
    test_dir = folder / test.dir
    if test.error:
        return TestVerdict(test.dir, FAILED, f"split wrote no program: {test.error}")
    if test.kept < 1:  # IREE's 'unable to open file ... inputs/arg0.npy' would say less
        return TestVerdict(test.dir, FAILED, "split kept no inputs or expected outputs of it (--max-occurrences=0)")
    with tempfile.TemporaryDirectory(prefix="lens-check-", dir=work) as tmp:
        if batch is not None:
            vmfb, function = batch.vmfb, batch.functions[test.dir]
        else:
            vmfb, function = Path(tmp) / "test.vmfb", "main"
            built = compile_test(test_dir / "dispatch.mlir", flags, vmfb)
            if not built.ok:
                return TestVerdict(test.dir, FAILED, built.message)
        count = test.kept if max_occurrences is None else min(test.kept, max_occurrences)
        worst, worst_outputs, verdicts = None, [], []
        argument_types, result_types = _signature(test_dir / "dispatch.mlir")
        for occurrence in range(max(count, 1)):
            where = occurrence_dir(test_dir, occurrence)
            inputs = [where / "inputs" / name for name in test.inputs]
            given = [_packed_input(p, argument_types[k] if k < len(argument_types) else "", Path(tmp))
                     for k, p in enumerate(inputs)]  # fmt: skip
            types = (result_types + [""] * len(test.outputs))[: len(test.outputs)]
            results = [Path(tmp) / f"out{occurrence}_{i}.{'bin' if _as_bytes(t) else 'npy'}" for i, t in enumerate(types)]
            ran = run_test(vmfb, device, given, results, function=function)
            if not ran.ok:
                return TestVerdict(test.dir, FAILED, ran.message, occurrences=occurrence + 1)
            arrays = [np.load(p) for p in inputs]
            rule = tolerance_for(test, arrays, tolerance)
            comparisons = [judge_output(*_result_and_expected(r, where / "expected" / name, t), rule, same_build)
                           for r, name, t in zip(results, test.outputs, types)]  # fmt: skip
            verdict = worst_verdict(c.verdict for c in comparisons)
            verdicts.append(verdict)
            if worst is None or worst_verdict([worst, verdict]) == verdict:
                worst = verdict
                worst_outputs = [dict(c.to_json(), name=name) for c, name in zip(comparisons, test.outputs)]
        return TestVerdict(test.dir, str(worst_verdict(verdicts)), "", worst_outputs, len(verdicts))


_MAIN = re.compile(r"func\.func\s+@main\((.*?)\)\s*->\s*(\(.*?\)|tensor<[^>]*>|[\w<>]+)\s*\{", re.S)
_TENSOR = re.compile(r"tensor<([^>]*)>")


def _signature(source: Path) -> tuple[list[str], list[str]]:
    """The argument and result tensor types of a test's ``@main`` (``64x16xi4``; "" for a scalar), as written."""
    try:
        m = _MAIN.search(source.read_text(errors="replace"))
    except OSError:
        return [], []
    if not m:
        return [], []
    arguments = [(_TENSOR.search(a) or [None, ""])[1] for a in m[1].split(",") if a.strip()]
    return arguments, _TENSOR.findall(m[2])


def _packed(tensor_type: str) -> bool:
    """Whether IREE packs the type's elements several to a byte (``i4``), which .npy cannot hold."""
    return packed_type(tensor_type) is not None


def _as_bytes(tensor_type: str) -> bool:
    """Whether IREE's tools must read and write the type as bytes: a packed type, or one the split keeps as
    its bits (bf16, f8: a .npy of them holds ui16/ui8, which IREE's tools would pass as that, and they write
    no .npy of them: "unsupported data encoding")."""
    return _packed(tensor_type) or stored_as_bits(tensor_type.rpartition("x")[2])


def _packed_input(path: Path, tensor_type: str, tmp: Path) -> Path | str:
    """An input as iree-run-module takes it: a type read as bytes (``_as_bytes``) from a binary file of them,
    ``64x16xi4=@arg0.bin`` (IREE's tools parse no i4 values and read no i4 .npy); else the .npy itself."""
    if not _as_bytes(tensor_type):
        return path
    data = tmp / f"{path.parent.parent.name}_{path.stem}.bin"
    np.load(path).tofile(data)
    return f"{tensor_type}=@{data}"


def _load_result(path: Path) -> np.ndarray:
    """A result file: a .npy, or a packed result's bytes (.bin, as the split keeps them)."""
    return np.fromfile(path, np.uint8) if path.suffix == ".bin" else np.load(path)


def _result_and_expected(result: Path, expected_path: Path, tensor_type: str) -> tuple[np.ndarray, np.ndarray]:
    """A test's result and its expected values, both as their element type (a bf16 result's bytes and the
    split's .npy of its bits seen as bf16)."""
    expected = _load_result(expected_path)
    element = tensor_type.rpartition("x")[2]
    if not stored_as_bits(element) or result.suffix != ".bin":
        return _load_result(result), expected
    got = np.fromfile(result, expected.dtype).reshape(expected.shape)
    return from_storage(got, element), from_storage(expected, element)


def check_split(
    folder: Path, flags: list[str], device: str, *, tolerance: Tolerance | None = None,
    max_occurrences: int | None = 1, jobs: int = 2, on_test=None,
) -> list[TestVerdict]:  # fmt: skip
    """Every test of ``folder`` checked (``jobs`` at a time); ``on_test(verdict)`` as each one ends. The
    split's own build (``same_build_as_split``) is judged by its tight rule, unless an explicit one is given."""
    folder = Path(folder)
    tests = read_manifest(folder)
    same_build = same_build_as_split(folder, flags, device) is None
    with tempfile.TemporaryDirectory(prefix="lens-check-batch-") as work:
        batch = compile_batch(folder, tests, flags, Path(work)) if len(tests) > 1 else None

        def one(test: SplitTest) -> TestVerdict:
            verdict = None
            if batch is not None and test.dir in batch.functions:
                verdict = check_test(folder, test, flags, device, tolerance=tolerance,
                                     max_occurrences=max_occurrences, batch=batch, same_build=same_build)  # fmt: skip
            if verdict is None or not verdict.agrees:  # a problem is reported as the test's own compile gives it
                verdict = check_test(folder, test, flags, device, tolerance=tolerance, max_occurrences=max_occurrences,
                                     same_build=same_build)  # fmt: skip
            if on_test is not None:
                on_test(verdict)
            return verdict

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, tests))


@dataclass(frozen=True)
class BatchModule:
    """Several tests compiled as one module: its file, and each test's (folder name's) function in it."""

    vmfb: Path
    functions: dict[str, str]


def compile_batch(folder: Path, tests: list[SplitTest], flags: list[str], work: Path) -> BatchModule | None:
    """The tests' programs merged into one module and compiled once, or None when fewer than two merge or the
    merged module does not compile. Each test's top-level symbols get the prefix ``tN_`` (its function
    ``main`` becomes ``tN_main``); a program that does not parse, or whose module carries attributes of its
    own, stays out (it is compiled alone)."""
    from iree.compiler import ir  # the compiler's MLIR bindings: loaded only for a check

    functions: dict[str, str] = {}
    with ir.Context(), ir.Location.unknown():
        merged = ir.Module.create()
        for k, test in enumerate(tests):
            if test.error:
                continue
            try:
                module = ir.Module.parse((folder / test.dir / "dispatch.mlir").read_text())
            except (OSError, ValueError, ir.MLIRError):  # compiled alone, where iree-compile says what is wrong
                continue
            ops = list(module.body.operations)
            if len(module.operation.attributes) or not all("sym_name" in op.attributes for op in ops):
                continue
            prefix = f"t{k}_"
            for op in ops:
                name = ir.StringAttr(op.attributes["sym_name"]).value
                ir.SymbolTable.replace_all_symbol_uses(name, prefix + name, module.operation)
                op.attributes["sym_name"] = ir.StringAttr.get(prefix + name)
            for op in ops:
                merged.body.append(op)  # moved; dense_resource names are the one program's, so never two blobs under one
            functions[test.dir] = f"{prefix}main"
        try:
            if len(functions) < 2 or not merged.operation.verify():
                return None
        except ir.MLIRError:
            return None
        source = work / "tests.mlirbc"
        with open(source, "wb") as f:
            merged.operation.write_bytecode(f)
    vmfb = work / "tests.vmfb"
    if not compile_test(source, flags, vmfb, timeout_s=600).ok:
        return None
    return BatchModule(vmfb, functions)


CHECKS = "checks"  # the split folder's sub-folder of saved check reports, one per build


def build_label(flags: list[str], device: str) -> str:
    """A short name for a build: its backends or target devices and the runtime device."""
    picked = [f.split("=", 1)[1] for f in flags if f.startswith(("--iree-hal-local-target-device-backends=",
                                                                  "--iree-hal-target-backends="))]  # fmt: skip
    if not picked:
        picked = [f.split("=", 1)[1] for f in flags if f.startswith("--iree-hal-target-device=")]
    others = [f for f in flags if not f.startswith(("--iree-hal-", "--iree-llvmcpu-target-cpu="))]
    label = "+".join(picked) or "default"
    if others:
        label += " " + " ".join(others)
    return f"{label} on {device}"


def save_check(folder: Path, flags: list[str], device: str, verdicts: list[TestVerdict]) -> Path:
    """Keep a check's verdicts in ``folder/checks/`` (one file per build, replaced by a later check of the
    same build), so that the folder shows them per build when it is opened again."""
    label = build_label(flags, device)
    directory = Path(folder) / CHECKS
    directory.mkdir(exist_ok=True)
    path = directory / (re.sub(r"[^A-Za-z0-9_.+-]+", "_", label)[:100] + ".json")
    path.write_text(json.dumps({"label": label, "flags": flags, "device": device,
                                "tests": [v.to_json() for v in verdicts]}, indent=1) + "\n")  # fmt: skip
    return path


def read_checks(folder: Path) -> dict[str, dict[str, TestVerdict]]:
    """The saved checks of ``folder``: build label -> test dir -> its verdict (unreadable files skipped)."""
    found: dict[str, dict[str, TestVerdict]] = {}
    for path in sorted((Path(folder) / CHECKS).glob("*.json")):
        try:
            data = json.loads(path.read_text())
            found[data["label"]] = {
                t["dir"]: TestVerdict(t["dir"], t["verdict"], t.get("reason", ""), t.get("outputs", []),
                                      t.get("occurrences", 0))  # fmt: skip
                for t in data["tests"]
            }
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found
