"""``reduce``: a failing standalone test (``split``) shrunk by delta debugging to the few operations that
still fail.

Two builds judge each candidate: A (the flags and device under suspicion) and B (``--against``: other flags,
another device, or a reference program, e.g. the test as ``split`` wrote it before a hand edit). A
candidate keeps a subset of ``main``'s top-level operations; each removed operation's results become new
arguments, fed with the values B computed for them in the whole test (one run of B with every intermediate
tensor returned), so a kept operation sees exactly what it saw in the full test. What a kept operation
produces that nothing kept consumes is a result. A candidate still fails when A and B disagree beyond
rounding on some result (``numerics.compare``, by one rule decided once from the whole test), or, for a test that crashes A's compiler or runtime, when A
still fails with the same message (paths and numbers aside). ``ddmin`` removes chunks of operations, then
single ones, keeping each removal that still fails; each kept step is reported.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.dispatch.numerics import Verdict, compare, worst_verdict
from engine.errors import LensError
from engine.split.check import compile_test, run_test, tolerance_for
from engine.split.splitter import SplitTest, read_manifest

# Operations that are never candidates: they compute nothing worth isolating, and stay where something
# kept uses them.
_PLUMBING = ("arith.constant", "tensor.empty", "func.return")


class ReduceError(LensError):
    """The test cannot be reduced (it does not fail, B fails, the programs do not line up...)."""


class NothingToReduce(ReduceError):
    """A and B agree on the whole test: there is no failure to shrink (not trouble: the answer)."""


@dataclass(frozen=True)
class Build:
    """One side of the comparison: iree-compile flags, the runtime device, and the program it compiles
    (None: the test's own dispatch.mlir)."""

    flags: tuple[str, ...]
    device: str
    program: Path | None = None


@dataclass
class Outcome:
    """How a candidate fared: ``crash`` (A's message) or the worst verdict of A against B."""

    failing: bool
    kind: str  # "diverged", "crash", "agrees", "invalid"
    detail: str = ""


@dataclass
class ReduceStep:
    removed: list[str]  # the removed operations (``#index name``)
    remaining: int
    detail: str

    def to_json(self) -> dict:
        return {"removed": self.removed, "remaining": self.remaining, "detail": self.detail}


@dataclass
class ReduceResult:
    directory: Path  # DIR/<test>/reduced
    kept: list[str]  # the operations left (``#index name``)
    total: int  # candidate operations in the test
    failure: str  # what the reduced program still shows
    steps: list[ReduceStep] = field(default_factory=list)
    tries: int = 0

    def to_json(self) -> dict:
        return {"directory": str(self.directory), "kept": self.kept, "total": self.total, "failure": self.failure,
                "tries": self.tries, "steps": [s.to_json() for s in self.steps]}  # fmt: skip


def _ir():
    from iree.compiler import ir

    return ir


def _main_block(module):
    ir = _ir()
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == "main":
            return op.operation, op.operation.regions[0].blocks[0]
    raise ReduceError("the test has no func.func @main")


def candidate_names(text: str) -> list[str]:
    """``main``'s top-level operations that reduction may remove (``#index name``, in order)."""
    ir = _ir()
    with ir.Context():
        module = ir.Module.parse(text)
        _, block = _main_block(module)
        return [f"#{i} {op.operation.name}" for i, op in enumerate(_candidates(block))]


def _candidates(block) -> list:
    return [op for op in block.operations if op.operation.name not in _PLUMBING and len(op.operation.results)]


@dataclass(frozen=True)
class Candidate:
    text: str
    feeds: list[tuple[str, int, int]]  # per argument: ("input", n, 0) or ("value", op index, result number)
    results: list[tuple[int, int]]  # per result: (op index, result number); (-1, n) for an original result


def build_candidate(text: str, kept: set[int], *, expose_all: bool = False) -> Candidate:
    """``text``'s ``main`` keeping candidate operations ``kept`` (indices into ``candidate_names``).
    ``expose_all``: nothing removed, every candidate's results returned too (B's intermediate values)."""
    ir = _ir()
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        fn, block = _main_block(module)
        candidates = _candidates(block)
        n_inputs = len(block.arguments)
        feeds: list[tuple[str, int, int]] = [("input", i, 0) for i in range(n_inputs)]
        index_of = {}
        for i, op in enumerate(candidates):
            for r, value in enumerate(op.operation.results):
                index_of[value] = (i, r)
        ret = list(block.operations)[-1]
        original_results = list(ret.operation.operands)
        results: list[tuple[int, int]] = []
        values = []
        if expose_all:
            values = list(original_results)
            results = [(-1, n) for n in range(len(values))]
            for i, op in enumerate(candidates):
                for r, value in enumerate(op.operation.results):
                    if str(value.type).startswith("tensor<"):
                        values.append(value)
                        results.append((i, r))
        else:
            for i in reversed(range(len(candidates))):
                if i in kept:
                    continue
                op = candidates[i]
                for r, value in enumerate(op.operation.results):
                    if list(value.uses):
                        argument = block.add_argument(value.type, ir.Location.unknown())
                        value.replace_all_uses_with(argument)
                        feeds.append(("value", i, r))
                op.operation.erase()
            returned = {v for v in list(ret.operation.operands)}
            for i in sorted(kept):
                for r, value in enumerate(candidates[i].operation.results):
                    uses = [u for u in value.uses if u.owner.name != "func.return"]
                    if value in returned or not uses:
                        values.append(value)
                        results.append((i, r))
            if not values:
                raise ReduceError("nothing left to compare")
        with ir.InsertionPoint(ret):
            ir.Operation.create("func.return", operands=values)
        ret.operation.erase()
        # Arguments nothing uses any more leave the signature (last first, so positions hold).
        for position in reversed(range(len(block.arguments))):
            if not list(block.arguments[position].uses):
                block.erase_argument(position)
                del feeds[position]
        arg_types = [a.type for a in block.arguments]
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arg_types, [v.type for v in values]))
        if not module.operation.verify():
            raise ReduceError("the candidate does not verify")
        return Candidate(module.operation.get_asm(), feeds, results)


_NOISE = re.compile(r"(/[^\s:]+)|\b\d+\b")


def same_message(a: str, b: str) -> bool:
    """Two failure messages alike but for file paths and numbers (temporary folders, lines, sizes)."""
    return _NOISE.sub("", a).strip() == _NOISE.sub("", b).strip()


class Reducer:
    """Delta debugging of one test (see the module doc)."""

    def __init__(self, folder: Path, test: SplitTest, a: Build, b: Build, *, log: Callable[[str], None] | None = None):
        self.test_dir = folder / test.dir
        self.test = test
        self.a, self.b = a, b
        self.log = log or (lambda line: None)
        self.a_text = (a.program or self.test_dir / "dispatch.mlir").read_text()
        self.b_text = (b.program or self.test_dir / "dispatch.mlir").read_text()
        self.names = candidate_names(self.a_text)
        if [n.split(" ", 1)[1] for n in candidate_names(self.b_text)] != [n.split(" ", 1)[1] for n in self.names]:
            raise ReduceError("the reference program's operations do not line up with the test's")
        self.work = Path(tempfile.mkdtemp(prefix="lens-reduce-"))
        self.inputs = [self.test_dir / "inputs" / name for name in test.inputs]
        self.values: dict[tuple[int, int], Path] = {}
        self.tries = 0
        self.failure: Outcome | None = None
        # One rule for the whole reduction, from the test as split wrote it (its reduction length and the
        # scale of its inputs): judged by what each candidate is fed, an operation whose feed is an
        # intermediate value (a sum, hundreds of times the inputs' scale) would get a rule that many times
        # wider, and the same wrong output would agree in one candidate and diverge in another.
        self.rule = tolerance_for(test, [np.load(p) for p in self.inputs], None)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def _run(self, build: Build, text: str, inputs: list[Path], n_results: int, tag: str):
        """(output files, None) or (None, the failure message)."""
        source = self.work / f"{tag}.mlir"
        source.write_text(text)
        vmfb = self.work / f"{tag}.vmfb"
        built = compile_test(source, list(build.flags), vmfb)
        if not built.ok:
            return None, built.message
        outputs = [self.work / f"{tag}_out{i}.npy" for i in range(n_results)]
        ran = run_test(vmfb, build.device, inputs, outputs)
        return (outputs, None) if ran.ok else (None, ran.message)

    def reference_values(self) -> None:
        """B's value of every candidate's results in the whole test (the feeds of removed operations)."""
        exposed = build_candidate(self.b_text, set(), expose_all=True)
        outputs, error = self._run(self.b, exposed.text, self.inputs, len(exposed.results), "reference")
        if outputs is None:
            raise ReduceError(f"B fails on the whole test, so it cannot feed a reduction: {error}")
        for where, path in zip(exposed.results, outputs):
            if where[0] >= 0:
                self.values[where] = path

    def judge(self, kept: set[int]) -> Outcome:
        self.tries += 1
        try:
            a_candidate = build_candidate(self.a_text, kept)
            b_candidate = build_candidate(self.b_text, kept)
        except (ReduceError, ValueError, RuntimeError) as e:
            return Outcome(False, "invalid", str(e))
        inputs = [self.inputs[n] if kind == "input" else self.values[(n, r)] for kind, n, r in a_candidate.feeds]
        b_inputs = [self.inputs[n] if kind == "input" else self.values[(n, r)] for kind, n, r in b_candidate.feeds]
        tag = f"try{self.tries}"
        a_out, a_error = self._run(self.a, a_candidate.text, inputs, len(a_candidate.results), tag + "a")
        if a_out is None:
            return Outcome(True, "crash", a_error)
        b_out, b_error = self._run(self.b, b_candidate.text, b_inputs, len(b_candidate.results), tag + "b")
        if b_out is None:
            return Outcome(False, "invalid", f"B failed: {b_error}")
        comparisons = [compare(np.load(x), np.load(y), tolerance=self.rule) for x, y in zip(a_out, b_out)]
        verdict = worst_verdict(c.verdict for c in comparisons)
        if verdict is Verdict.DIVERGED:
            worst = next(c for c in comparisons if c.verdict is Verdict.DIVERGED)
            return Outcome(True, "diverged", worst.summary().removeprefix("diverged: "))  # said once
        return Outcome(False, "agrees", str(verdict))

    def _still_fails(self, outcome: Outcome) -> bool:
        assert self.failure is not None
        if not outcome.failing or outcome.kind != self.failure.kind:
            return False
        return outcome.kind != "crash" or same_message(outcome.detail, self.failure.detail)

    def reduce(self) -> ReduceResult:
        everything = set(range(len(self.names)))
        self.failure = self.judge(everything)  # nothing removed: no feeds needed yet
        if self.failure.kind == "invalid":  # trouble, not an agreement: B judges nothing
            detail = self.failure.detail
            if detail.startswith("B failed: "):
                raise ReduceError(f"B ({self._label(self.b)}) cannot run the whole test, so it judges nothing: "
                                  f"{detail.removeprefix('B failed: ')}")  # fmt: skip
            raise ReduceError(f"the whole test cannot be rewritten for reduction: {detail}")
        if not self.failure.failing:
            raise NothingToReduce(self._nothing_to_reduce())
        self.reference_values()
        self.log(f"whole test: {self.failure.kind}: {self.failure.detail}")
        kept = sorted(everything)
        steps: list[ReduceStep] = []
        chunks = 2
        while len(kept) >= 1:
            size = max(1, -(-len(kept) // chunks))
            removed_one = False
            for start in range(0, len(kept), size):
                chunk = kept[start : start + size]
                trial = [i for i in kept if i not in chunk]
                if not trial:
                    continue
                outcome = self.judge(set(trial))
                if self._still_fails(outcome):
                    kept = trial
                    step = ReduceStep([self.names[i] for i in chunk], len(kept), outcome.detail)
                    steps.append(step)
                    self.log(f"removed {', '.join(step.removed)}: {len(kept)} left, still {outcome.kind}: {outcome.detail}")
                    chunks = max(chunks - 1, 2)
                    removed_one = True
                    break
            if not removed_one:
                if size == 1:
                    break
                chunks = min(chunks * 2, len(kept))
        out = self._write(set(kept))
        final = self.judge(set(kept))
        return ReduceResult(out, [self.names[i] for i in kept], len(self.names), f"{final.kind}: {final.detail}",
                            steps, self.tries)  # fmt: skip

    def _nothing_to_reduce(self) -> str:
        """Why there is nothing to reduce, and, since ``split --check`` judges a test by its expected/
        outputs and reduce by B, what A makes of expected/ and how to reduce against it."""
        a, b = self._label(self.a), self._label(self.b)
        text = f"A ({a}) and B ({b}) agree on the whole test ({self.failure.detail}): nothing to reduce"
        outputs, error = self._run(self.a, self.a_text, self.inputs, len(self.test.outputs), "expected")
        if outputs is None:
            return text
        comparisons = [compare(np.load(x), np.load(self.test_dir / "expected" / name), tolerance=self.rule)
                       for x, name in zip(outputs, self.test.outputs)]  # fmt: skip
        differ = next((c for c in comparisons if not c.ok), None)
        if differ is None:
            return text
        # expected/ came from split's own run; reduce needs a build that computes every intermediate value
        # too (removed operations are fed B's), which saved outputs cannot, so it names the build to give.
        return (f"{text}.\nreduce compares two builds, not the test's expected/ outputs, and A disagrees with "
                f"expected/ ({differ.summary()}): to reduce against expected/, give as B the build that wrote it "
                f"(split's own flags and device: --against=...), with --reference=FILE if the program was edited")

    @staticmethod
    def _label(build: Build) -> str:
        from engine.split.check import build_label

        label = build_label(list(build.flags), build.device)
        return label + (f" compiling {build.program.name}" if build.program is not None else "")

    def _write(self, kept: set[int]) -> Path:
        """``<test>/reduced/``: reduced.mlir (A's program), inputs/, expected/ (B's results) and, when B
        compiles another program, reference.mlir."""
        out = self.test_dir / "reduced"
        shutil.rmtree(out, ignore_errors=True)
        (out / "inputs").mkdir(parents=True)
        (out / "expected").mkdir()
        a_candidate = build_candidate(self.a_text, kept)
        (out / "reduced.mlir").write_text(a_candidate.text)
        if self.b_text != self.a_text:
            (out / "reference.mlir").write_text(build_candidate(self.b_text, kept).text)
        inputs = []
        for position, (kind, n, r) in enumerate(a_candidate.feeds):
            source = self.inputs[n] if kind == "input" else self.values[(n, r)]
            target = out / "inputs" / f"arg{position}.npy"
            shutil.copyfile(source, target)
            inputs.append(target)
        b_candidate = build_candidate(self.b_text, kept)
        b_out, error = self._run(self.b, b_candidate.text, inputs, len(b_candidate.results), "final")
        if b_out is not None:
            for i, path in enumerate(b_out):
                shutil.copyfile(path, out / "expected" / f"result{i}.npy")
        return out


def reduce_test(test_dir: Path, a: Build, b: Build, *, log: Callable[[str], None] | None = None) -> ReduceResult:
    """Reduce the test in ``test_dir`` (a folder of a split folder) with builds ``a`` and ``b``."""
    test_dir = Path(test_dir).resolve()
    folder = test_dir.parent
    if (test_dir / "manifest.json").is_file():  # the split folder itself, not one of its tests
        first = next(iter(read_manifest(test_dir)), None)
        example = f" (e.g. {test_dir / first.dir})" if first is not None else ""
        raise ReduceError(f"{test_dir} is a split folder: give one of its tests{example}")
    tests = [t for t in read_manifest(folder) if t.dir == test_dir.name]
    if not tests:
        raise ReduceError(f"{test_dir.name} is not a test of {folder}")
    reducer = Reducer(folder, tests[0], a, b, log=log)
    try:
        result = reducer.reduce()
    finally:
        reducer.close()
    (result.directory / "steps.json").write_text(json.dumps(result.to_json(), indent=1) + "\n")
    return result
