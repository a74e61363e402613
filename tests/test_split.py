"""``iree-lens split``: every dispatch of a run as a standalone test that IREE's own ``iree-compile`` and
``iree-run-module`` compile and run, and ``split --check`` judging such a folder on another target.

Expected values come from IREE's runtime (the program's own run, through its trace points) and, for the
hand-written program, from numpy."""

from __future__ import annotations

import json
import lzma
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import iree_compile, iree_tool, tiny_program
from support.session import PROGRAMS

from engine.compiler import CompileRequest
from engine.compiler.targets import TARGETS
from engine.errors import LensError
from engine.split.check import check_split, check_test, compile_batch, same_build_as_split
from engine.split.splitter import MANIFEST, read_manifest, split_program

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"

# A dynamic batch, a rank-0 operand, a reduction to rank 0, and the same executable dispatched twice.
DYNAMIC = """
#id = affine_map<(i) -> (i)>
#scalar = affine_map<(i) -> ()>
func.func @dyn(%a: tensor<?xf32>, %b: tensor<f32>) -> (tensor<?xf32>, tensor<f32>) {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %a, %c0 : tensor<?xf32>
  %e = tensor.empty(%d) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<?xf32>, tensor<f32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = math.exp %m : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %z = tensor.empty() : tensor<f32>
  %cst = arith.constant 0.0 : f32
  %zf = linalg.fill ins(%cst : f32) outs(%z : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
      ins(%r : tensor<?xf32>) outs(%zf : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r, %sum : tensor<?xf32>, tensor<f32>
}
"""

REPEATED = """
func.func @twice(%a: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%a : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = math.sin %x : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %b = util.optimization_barrier %r : tensor<8xf32>
  %r2 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%b : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = math.sin %x : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r2 : tensor<8xf32>
}
"""


LOOP = """
func.func @loop(%a: tensor<16xf32>) -> tensor<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%x = %a) -> tensor<16xf32> {
    %e = tensor.empty() : tensor<16xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
        ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
    ^bb0(%v: f32, %o: f32):
      %h = arith.constant 0.5 : f32
      %m = arith.mulf %v, %h : f32
      %s = math.tanh %m : f32
      linalg.yield %s : f32
    } -> tensor<16xf32>
    scf.yield %y : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}
"""


def _split(source: Path, function: str, inputs: list[str], out: Path, **options):
    return split_program(CompileRequest.from_file(source), function, inputs, out, **options)


def _run_with_iree(test_dir: Path, entry: dict, target: str, tmp: Path, program: str = "dispatch.mlir") -> list[np.ndarray]:
    """The test compiled by plain ``iree-compile`` and run by ``iree-run-module``: its outputs."""
    vmfb = tmp / f"{entry['dir']}_{target}.vmfb"
    compiled = iree_compile([str(test_dir / program), *TARGETS[target].flags,
                               "-o", str(vmfb)], text=True, timeout=300)  # fmt: skip
    assert compiled.returncode == 0, (entry["dir"], compiled.stderr[-2000:])
    outs = [tmp / f"{entry['dir']}_{target}_{i}.npy" for i in range(len(entry["outputs"]))]
    cmd = [iree_tool("iree-run-module"), f"--module={vmfb}", f"--device={TARGETS[target].device}",
           f"--function={entry['function']}"]  # fmt: skip
    cmd += [f"--input=@{test_dir / 'inputs' / name}" for name in entry["inputs"]]
    cmd += [f"--output=@{p}" for p in outs]
    ran = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, (entry["dir"], ran.stderr[-2000:])
    return [np.load(p) for p in outs]


def _assert_reproduces(out: Path, targets: tuple[str, ...], tmp: Path) -> int:
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["tests"]
    for entry in manifest["tests"]:
        assert "error" not in entry, entry
        test_dir = out / entry["dir"]
        expected = [np.load(test_dir / "expected" / name) for name in entry["outputs"]]
        for target in targets:
            got = _run_with_iree(test_dir, entry, target, tmp)
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g.shape == e.shape and g.dtype == e.dtype, (entry["dir"], g.shape, e.shape)
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(e).max(initial=0))))
    return len(manifest["tests"])


def test_split_dynamic_rank0_tests_compile_and_reproduce_numpy(tmp_path):
    source = tmp_path / "dyn.mlir"
    source.write_text(DYNAMIC)
    a = np.linspace(-1, 1, 6, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", np.array(1.5, dtype=np.float32))
    out = tmp_path / "split"
    result = _split(source, "dyn", [f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"], out)
    assert [t.error for t in result.tests] == [None, None]
    manifest = json.loads((out / MANIFEST).read_text())
    first, second = manifest["tests"]
    assert first["function"] == "main" and first["inputs"] == ["arg0.npy", "arg1.npy"]
    assert first["outputs"] == ["result0.npy"] and second["inputs"] == ["arg0.npy"]
    assert first["ordinal"] == 0 and second["ordinal"] == 1
    assert first["loc"].endswith("dyn.mlir:8") and second["loc"].endswith("dyn.mlir:18")  # the root ops' lines
    # The dispatch keeps its dynamic operand and the rank-0 one.
    text = (out / first["dir"] / "dispatch.mlir").read_text()
    assert "func.func @main(%arg0: tensor<?xf32>, %arg1: tensor<f32>) -> tensor<?xf32>" in text
    assert np.load(out / first["dir"] / "inputs" / "arg1.npy").shape == ()
    # The captured data are the program's: numpy computes the same.
    np.testing.assert_allclose(np.load(out / first["dir"] / "expected" / "result0.npy"), np.exp(a * 1.5), rtol=1e-6)
    np.testing.assert_allclose(np.load(out / second["dir"] / "expected" / "result0.npy"), np.exp(a * 1.5).sum(),
                               rtol=1e-5)  # fmt: skip
    _assert_reproduces(out, ("llvm-cpu", "vmvx"), tmp_path)


def test_split_repeated_dispatch_is_one_test_with_every_occurrence(tmp_path):
    source = tmp_path / "twice.mlir"
    source.write_text(REPEATED)
    a = np.arange(8, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    out = tmp_path / "all"
    result = _split(source, "twice", [f"@{tmp_path / 'a.npy'}"], out)
    assert result.dispatches == 2
    [test] = result.tests
    assert test.occurrences == [0, 1] and test.kept == 2
    np.testing.assert_array_equal(np.load(out / test.dir / "inputs" / "arg0.npy"), a)
    later = out / test.dir / "occurrences" / "1"
    np.testing.assert_allclose(np.load(later / "inputs" / "arg0.npy"), np.sin(a), rtol=1e-6)
    np.testing.assert_allclose(np.load(later / "expected" / "result0.npy"), np.sin(np.sin(a)), rtol=1e-6)
    verdicts = check_split(out, list(TARGETS["vmvx"].flags), "local-sync", max_occurrences=None)
    assert [(v.verdict in ("exact", "within_rounding"), v.occurrences) for v in verdicts] == [(True, 2)]
    # --max-occurrences: the first N keep their data
    first_only = _split(source, "twice", [f"@{tmp_path / 'a.npy'}"], tmp_path / "first", max_occurrences=1)
    assert first_only.tests[0].occurrences == [0, 1] and first_only.tests[0].kept == 1
    assert not (tmp_path / "first" / test.dir / "occurrences").exists()


def test_split_a_dispatch_in_a_loop_keeps_every_iteration(tmp_path):
    """IREE's own --iree-flow-trace-dispatch-tensors leaves a dispatch inside scf.for untraced; split's
    trace points reach it: one test, three occurrences, each iteration's data as numpy computes it."""
    source = tmp_path / "loop.mlir"
    source.write_text(LOOP)
    a = np.linspace(-2, 2, 16, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    out = tmp_path / "split"
    [test] = _split(source, "loop", [f"@{tmp_path / 'a.npy'}"], out).tests
    assert test.occurrences == [0, 1, 2] and test.loc.endswith("loop.mlir:8")
    x = a
    for k in range(3):
        where = out / test.dir / ("occurrences/" + str(k) if k else "")
        np.testing.assert_allclose(np.load(where / "inputs" / "arg0.npy"), x, rtol=1e-6, atol=1e-7)
        x = np.tanh(x * np.float32(0.5))
        np.testing.assert_allclose(np.load(where / "expected" / "result0.npy"), x, rtol=1e-5, atol=1e-6)
    [verdict] = check_split(out, list(TARGETS["vmvx"].flags), "local-sync", max_occurrences=None)
    assert verdict.verdict in ("exact", "within_rounding") and verdict.occurrences == 3


def test_split_folded_weights_travel_with_the_dispatch(tmp_path):
    source = tiny_program(tmp_path / "tiny.mlir")
    out = tmp_path / "split"
    _split(source, "main", ["4x16xf32=0.25"], out)
    texts = [(out / t.dir / "dispatch.mlir").read_text() for t in read_manifest(out)]
    assert len(texts) == 2
    for text in texts:  # each test holds the bias blob its dispatch folded in, and only that one
        assert "dense_resource<tiny_b" in text and "dialect_resources" in text and "tiny_w1:" not in text
    assert _assert_reproduces(out, ("llvm-cpu", "vmvx"), tmp_path) == 2


# A constant weight transformed once: with const-eval off IREE hoists tanh(W) into the module's initializer,
# a dispatch with no tensor operand that the call never runs.
HOISTED = """
#id = affine_map<(i, j) -> (i, j)>
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = arith.constant dense<[[0.1, 0.2, 0.3, 0.4], [1.1, 1.2, 1.3, 1.4]]> : tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %q = math.tanh %v : f32
    linalg.yield %q : f32
  } -> tensor<2x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %t : tensor<2x4xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %q = arith.mulf %a, %b : f32
    linalg.yield %q : f32
  } -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
"""


def test_split_makes_a_kernel_only_the_initializer_runs_a_test(tmp_path):
    """With const-eval off the initializer runs tanh(W), a dispatch with no tensor operand (IREE drops its
    empty inputs trace point). It is a test too, marked ``initializer``, numbered in the initializer's own
    count, so the call's tests still count from the call's first dispatch (as capture and diverge do)."""
    source = tmp_path / "hoisted.mlir"
    source.write_text(HOISTED)
    request = CompileRequest.from_file(source, extra_flags=("--iree-opt-const-eval=false",))
    out = tmp_path / "split"
    result = split_program(request, "main", ["2x4xf32=3"], out)
    assert result.dispatches == 1 and result.initializer_dispatches == 1
    manifest = json.loads((out / MANIFEST).read_text())
    first, second = manifest["tests"]
    assert first["initializer"] is True and first["dir"].startswith("initializer_0_dispatch_0")
    assert first["inputs"] == [] and first["ordinal"] == 0 and first["output_shapes"] == [[2, 4]]
    assert "initializer" not in second and second["ordinal"] == 0
    w = np.array([[0.1, 0.2, 0.3, 0.4], [1.1, 1.2, 1.3, 1.4]], np.float32)
    np.testing.assert_allclose(np.load(out / first["dir"] / "expected" / "result0.npy"), np.tanh(w), rtol=1e-6)
    np.testing.assert_allclose(np.load(out / second["dir"] / "expected" / "result0.npy"), 3 * np.tanh(w).ravel(),
                               rtol=1e-6)  # IREE flattened the elementwise dispatch
    assert [t.initializer for t in read_manifest(out)] == [True, False]
    assert _assert_reproduces(out, ("llvm-cpu",), tmp_path) == 2


TO_I4_AND_BACK = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xi4>
  %q = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xi4>) {
  ^bb0(%v: f32, %o: i4):
    %i = arith.fptosi %v : f32 to i4
    linalg.yield %i : i4
  } -> tensor<8xi4>
  %b = util.optimization_barrier %q : tensor<8xi4>
  %f = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%b : tensor<8xi4>) outs(%f : tensor<8xf32>) {
  ^bb0(%v: i4, %o: f32):
    %w = arith.sitofp %v : i4 to f32
    linalg.yield %w : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""


def test_split_tests_of_i4_tensors_are_checked_with_their_bytes(tmp_path):
    # A test taking or giving an i4 tensor (packed, kept as its bytes) failed its check: iree-run-module takes
    # no i4 .npy ("input0 element type mismatch; expected i4 but have ui8") and writes none. Its bytes go in
    # and come out as a binary file (--input=8xi4=@arg0.bin, --output=@out.bin).
    source = tmp_path / "i4.mlir"
    source.write_text(TO_I4_AND_BACK)
    out = tmp_path / "split"
    split_program(CompileRequest.from_file(source), "main", ["8xf32=1 -2 3 -4 5 -6 7 -8"], out)
    quantize, dequantize = sorted(read_manifest(out), key=lambda t: t.ordinal)
    packed = np.load(out / quantize.dir / "expected" / "result0.npy")
    assert packed.tolist() == [0xE1, 0xC3, 0xA5, 0x87]  # 1 -2 3 -4 5 -6 7 -8, low nibble first
    verdicts = check_split(out, list(TARGETS["llvm-cpu"].flags), "local-sync")
    assert [(v.verdict, v.reason) for v in verdicts] == [("exact", ""), ("exact", "")], verdicts




def test_split_tests_of_bf16_tensors_are_checked_as_bf16(tmp_path):
    # The split keeps bf16 as its bits (a ui16 .npy): given as that file, iree-run-module refused it ("input0
    # element type mismatch; expected bf16 but have ui16") and writes no bf16 .npy ("unsupported data
    # encoding"). They go in and come out as bytes with their type (--input=6x7xbf16=@arg0.bin).
    out = tmp_path / "split"
    split_program(CompileRequest.from_file(PROGRAMS / "bf16_square.mlir"), "main", ["6x7xbf16=1.5"], out)
    (test,) = read_manifest(out)
    bits = np.load(out / test.dir / "expected" / "result0.npy")
    assert bits.dtype == np.uint16 and set(bits.ravel().tolist()) == {0x4010}  # 2.25 as bf16
    verdicts = check_split(out, list(TARGETS["llvm-cpu"].flags), "local-sync")
    assert [(v.verdict, v.reason) for v in verdicts] == [("exact", "")], verdicts


TWO_DYNAMIC = """
func.func @dyn(%a: tensor<?x8xf32>, %b: tensor<8x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x8xf32>
  %n = tensor.dim %b, %c1 : tensor<8x?xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


def test_split_a_dispatch_of_two_dynamically_shaped_tensors(tmp_path):
    # IREE 3.13 prints the trace point of two dynamically shaped tensors as text its own parser refuses
    # ("custom op 'flow.tensor.trace' expected 1 operands"), so the traced program goes on as bytecode.
    source = tmp_path / "dyn2.mlir"
    source.write_text(TWO_DYNAMIC)
    a = np.arange(24, dtype=np.float32).reshape(3, 8)
    b = np.linspace(-1, 1, 40, dtype=np.float32).reshape(8, 5)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "split"
    result = _split(source, "dyn", [f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"], out)
    assert [t.error for t in result.tests] == [None]
    (test,) = read_manifest(out)
    np.testing.assert_allclose(np.load(out / test.dir / "expected" / "result0.npy"), a @ b, rtol=1e-5, atol=1e-5)
    _assert_reproduces(out, ("llvm-cpu",), tmp_path)


def _lens(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.launcher", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def small_cnn_split(tmp_path_factory) -> Path:
    """small_cnn split once by the command line (tests copy the folder before they edit it)."""
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"no shared models at {MODELS}")
    out = tmp_path_factory.mktemp("cnn") / "split"
    made = _lens("split", str(source), "--function=small_cnn", f"--input=@{MODELS / 'small_cnn_x.npy'}", f"--out={out}")
    assert made.returncode == 0, made.stderr
    return out


def test_tests_compiled_as_one_module_give_what_each_compiled_alone_gives(tmp_path, small_cnn_split):
    """check_split's merged module (one iree-compile for every test, each test's symbols renamed apart) runs
    each test to the same outputs, bit for bit, as the test's own iree-compile; a test that does not parse
    stays out of it, and check_split reports it as its own compile fails. (The PyTorch models' test below
    runs the merged module with folded weights.)"""
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    tests = read_manifest(out)
    (out / tests[0].dir / "dispatch.mlir").write_text("func.func @main( this is not MLIR")
    flags = list(TARGETS["llvm-cpu"].flags)
    batch = compile_batch(out, tests, flags, tmp_path)
    assert batch is not None and sorted(batch.functions) == sorted(t.dir for t in tests[1:])
    assert len(set(batch.functions.values())) == len(tests) - 1
    for test in tests[1:]:
        together = check_test(out, test, flags, "local-task", batch=batch)
        alone = check_test(out, test, flags, "local-task")
        assert together.verdict == alone.verdict == "exact", (test.dir, together, alone)
        assert together.outputs == alone.outputs
    [broken] = [v for v in check_split(out, flags, "local-task") if not v.agrees]
    assert broken.dir == tests[0].dir and broken.verdict == "failed" and "iree-compile failed" in broken.reason


def test_split_check_cli_reports_only_the_broken_test(tmp_path, small_cnn_split):
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    # every test compiles for llvm-cpu and vmvx with plain iree-compile and reproduces the model run's values
    assert _assert_reproduces(out, ("llvm-cpu", "vmvx"), tmp_path) == 6
    # --check on another target: nothing diverged
    checked = _lens("split", "--check", str(out), "--target=vmvx", "--json")
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert len(report["tests"]) == 6 and all(t["verdict"] in ("exact", "within_rounding") for t in report["tests"])
    # one test's program broken by hand: it alone is reported, and the exit status says so
    broken = next(t for t in read_manifest(out) if "conv_16x8" in t.dir)
    program = out / broken.dir / "dispatch.mlir"
    program.write_text(program.read_text().replace("arith.mulf", "arith.addf", 1))
    checked = _lens("split", "--check", str(out), "--json")
    assert checked.returncode == 1
    verdicts = {t["dir"]: t["verdict"] for t in json.loads(checked.stdout)["tests"]}
    assert [d for d, v in verdicts.items() if v not in ("exact", "within_rounding")] == [broken.dir]
    assert verdicts[broken.dir] == "diverged"
    [entry] = [t for t in json.loads(checked.stdout)["tests"] if t["dir"] == broken.dir]
    assert entry["max_abs_error"] > 0 and entry["mismatches"] > 0 and entry["worst_output"] == "result0.npy"
    # a program that no longer compiles is "failed" with iree-compile's reason
    program.write_text("func.func @main( {")
    failed = json.loads(_lens("split", "--check", str(out), "--json").stdout)
    reason = next(t for t in failed["tests"] if t["dir"] == broken.dir)
    assert reason["verdict"] == "failed" and "iree-compile failed" in reason["reason"]


def test_split_check_of_a_device_or_flag_that_fails_every_test_is_trouble(tmp_path, small_cnn_split):
    """Every test failing the same way is the build's or the device's doing: exit 2 with the reason once
    (it was 1, 'N diverged or failed', as if each test were at fault). A compiled module given to split is
    named as such (iree-compile said 'unexpected character')."""
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    for option, said in (("--device=no-such-device", "no driver 'no-such-device'"),
                         ("--iree-no-such-flag", "Unknown command line argument '--iree-no-such-flag'")):  # fmt: skip
        checked = _lens("split", "--check", str(out), option)
        assert checked.returncode == 2, checked.stderr
        [line] = [x for x in checked.stderr.splitlines() if x.startswith("iree-lens split:")]
        assert line.startswith("iree-lens split: every test failed the same way") and said in line, line
    # a folder split with no data kept: said as such (IREE said 'unable to open file .../inputs/arg0.npy')
    empty = tmp_path / "empty"
    shutil.copytree(small_cnn_split, empty)
    manifest = json.loads((empty / MANIFEST).read_text())
    for entry in manifest["tests"]:
        entry["kept_occurrences"] = 0
    (empty / MANIFEST).write_text(json.dumps(manifest))
    checked = _lens("split", "--check", str(empty))
    assert checked.returncode == 2 and "split kept no inputs or expected outputs of it" in checked.stderr
    refused = _lens("split", str(MODELS / "small_cnn.mlir"), "--function=small_cnn", "--max-occurrences=0",
                    f"--input=@{MODELS / 'small_cnn_x.npy'}", f"--out={tmp_path / 'none'}")  # fmt: skip
    assert refused.returncode == 2 and "--max-occurrences must be at least 1" in refused.stderr
    module = tmp_path / "m.vmfb"
    module.write_bytes(b"\x00\x00\x00\x00IREE" + bytes(64))
    split = _lens("split", str(module), "--function=main", f"--out={tmp_path / 'out'}")
    assert split.returncode == 2 and f"{module} is a compiled module" in split.stderr, split.stderr


def test_split_check_reports_the_rounding_it_applied(tmp_path, small_cnn_split):
    """small_cnn's mean over 64 terms with its divisor made 64.02 (3.1e-4 relative, ~5000 ulps): the rule is
    2048 f32 eps measured against the larger of the result's scale and the inputs' (twice the mean's), and
    the JSON says that rule: the rounding against the result's scale, the scale it was measured against,
    so that max_scaled_error is beyond the reported rounding exactly when elements are counted beyond it
    (it said rounding 2.4e-4 for an error of 3.1e-4 and no mismatch)."""
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    [test] = [t for t in read_manifest(out) if "reduction_16x64" in t.dir]
    program = out / test.dir / "dispatch.mlir"
    inputs_scale = float(np.abs(np.load(out / test.dir / "inputs" / test.inputs[0])).max())
    text = program.read_text()
    for divisor, verdict in (("6.402000e+01", "within_rounding"), ("6.410000e+01", "diverged")):
        program.write_text(text.replace("6.400000e+01", divisor))
        # VMVX: another build than the split's (llvm-cpu), judged by the default rule
        [entry] = [t for t in check_split(out, list(TARGETS["vmvx"].flags), "local-sync") if t.dir == test.dir]
        judged = entry.to_json()
        assert judged["verdict"] == verdict
        assert judged["rounding_scale"] == pytest.approx(inputs_scale) and inputs_scale > judged["scale"]
        assert (judged["mismatches"] == 0) == (judged["max_scaled_error"] <= judged["rounding"]), judged
        assert "64-term reduction's inputs'" in judged["tolerance"]


def test_the_splits_own_build_is_judged_by_a_tight_rule(tmp_path, small_cnn_split):
    """A check that is the split's own build (its flags, compiler, CPU; local-sync or local-task) re-runs each
    kernel on its recorded inputs: bit for bit (every dispatch of four models measured so), so it is judged
    within 16 eps of each output's scale, not the default 2048. small_cnn's mean with its divisor made
    64.005 (7.8e-5 relative, about 650 eps): the default rule passes it as rounding, the split's own build
    calls it diverged, with the allowance it applied. Another build, or a folder that does not say its build,
    keeps the default rule."""
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    build = json.loads((out / MANIFEST).read_text())["build"]
    assert build["flags"] == list(TARGETS["llvm-cpu"].flags) and build["device"] == "local-sync"
    checked = _lens("split", "--check", str(out), "--json")
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    assert report["same_build"] and report["rule"].startswith("the split's own build: within 16 eps")
    assert [t["verdict"] for t in report["tests"]] == ["exact"] * 6  # the measured figure: bit for bit
    [test] = [t for t in read_manifest(out) if "reduction_16x64" in t.dir]
    program = out / test.dir / "dispatch.mlir"
    program.write_text(program.read_text().replace("6.400000e+01", "6.400500e+01"))
    flags = list(TARGETS["llvm-cpu"].flags)
    for device in ("local-sync", "local-task"):  # the same code on either
        [entry] = [t.to_json() for t in check_split(out, flags, device) if t.dir == test.dir]
        assert entry["verdict"] == "diverged" and entry["mismatches"] > 0, entry
        assert entry["rounding"] == pytest.approx(16 * np.finfo(np.float32).eps, rel=1e-6)
        assert entry["max_scaled_error"] > entry["rounding"] and "split's own build" in entry["tolerance"]
    text = _lens("split", "--check", str(out))
    assert text.returncode == 1 and text.stdout.startswith("judged by the split's own build: within 16 eps")
    # another build (VMVX), and the same build of a folder that does not say which made it: the default rule
    [entry] = [t.to_json() for t in check_split(out, list(TARGETS["vmvx"].flags), "local-sync") if t.dir == test.dir]
    assert entry["verdict"] == "within_rounding" and entry["rounding"] > 1e-4, entry
    manifest = json.loads((out / MANIFEST).read_text())
    del manifest["build"]
    (out / MANIFEST).write_text(json.dumps(manifest))
    [entry] = [t.to_json() for t in check_split(out, flags, "local-sync") if t.dir == test.dir]
    assert entry["verdict"] == "within_rounding", entry
    told = json.loads(_lens("split", "--check", str(out), "--json").stdout)
    assert not told["same_build"] and "does not say which build" in told["rule"]
    # a GPU re-run of its own build was not measured: the default rule there
    manifest["build"] = {**build, "device": "vulkan"}
    (out / MANIFEST).write_text(json.dumps(manifest))
    assert "not a local CPU device" in same_build_as_split(out, flags, "vulkan")
    assert same_build_as_split(out, flags, "local-sync") == "another device (the split's vulkan, this local-sync)"


def test_split_attention_block_reproduces_on_llvm_cpu_and_vmvx(tmp_path):
    source = MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"no shared models at {MODELS}")
    out = tmp_path / "split"
    result = _split(source, "attention_block", [f"@{MODELS / 'attention_block_x.npy'}"], out)
    assert result.dispatches == 12 and len(result.tests) == 10  # the q/k/v projections share one executable
    assert max(len(t.occurrences) for t in result.tests) == 3
    assert _assert_reproduces(out, ("llvm-cpu", "vmvx"), tmp_path) == 10


def _xz_model(name: str, tmp: Path) -> Path:
    packed = MODELS / f"{name}.mlir.xz"
    if not packed.exists():
        pytest.skip(f"no shared models at {MODELS}")
    source = tmp / f"{name}.mlir"
    with lzma.open(packed) as src, open(source, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return source


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet1_1", "efficientvit_m0"])
def test_split_pytorch_models_every_test_agrees_on_vmvx(tmp_path, name):
    source = _xz_model(name, tmp_path)
    out = tmp_path / "split"
    result = _split(source, "main", [f"@{MODELS / f'{name}_x.npy'}"], out, max_occurrences=1)
    assert not [t.error for t in result.tests if t.error]
    # IREE orders trace points on the host, not around each dispatch (EfficientViT: two dispatches' outputs
    # before their inputs): paired by dispatch, every test has its expected results (5 had none, checked
    # vacuously) and the ordinal of the dispatch IREE's name numbers (its export's number, in this program).
    assert not [t.dir for t in result.tests if not t.outputs]
    assert not [t.dir for t in result.tests if t.occurrences[0] != int(re.search(r"dispatch_(\d+)", t.dispatch)[1])]
    assert any("dense_resource" in (out / t.dir / "dispatch.mlir").read_text() for t in result.tests)
    tests = read_manifest(out)
    for target in ("llvm-cpu", "vmvx"):
        # As split --check runs them: every test in the one merged module (its folded weights' dense_resource
        # blobs included), judged from there (check_split would judge a disagreeing test again alone).
        flags = list(TARGETS[target].flags)
        batch = compile_batch(out, tests, flags, tmp_path)
        assert batch is not None and sorted(batch.functions) == sorted(t.dir for t in tests)
        verdicts = [check_test(out, t, flags, TARGETS[target].device, batch=batch) for t in tests]
        assert [(v.dir, v.verdict, v.reason) for v in verdicts if not v.agrees] == []


def _break_bias(out: Path) -> tuple[Path, Path]:
    """small_cnn's first convolution test with its bias add (the second linalg.generic) made a subtraction;
    returns the test folder and a copy of the program as split wrote it."""
    [test] = [t for t in read_manifest(out) if "conv_8x16x16" in t.dir]
    program = out / test.dir / "dispatch.mlir"
    original = out / "original.mlir"
    text = program.read_text()
    original.write_text(text)
    second = text.index("linalg.generic", text.index("linalg.generic") + 1)
    at = text.index("arith.addf", second)
    program.write_text(text[:at] + "arith.subf" + text[at + len("arith.addf"):])
    return out / test.dir, original


def test_reduce_keeps_only_the_broken_op_and_its_inputs(tmp_path, small_cnn_split):
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    test_dir, original = _break_bias(out)
    reduced = _lens("reduce", str(test_dir), f"--reference={original}", "--json")
    assert reduced.returncode == 0, reduced.stderr
    report = json.loads(reduced.stdout)
    assert report["total"] == 3 and report["kept"] == ["#2 linalg.generic"]  # fill and convolution removed
    assert report["failure"].startswith("diverged") and report["steps"]
    text = (test_dir / "reduced" / "reduced.mlir").read_text()
    assert text.count("linalg.generic") == 1 and "linalg.fill" not in text and "arith.subf" in text
    # Its one input is the convolution's output as the whole test computed it, and its expectation is the
    # original bias + ReLU of that input, as numpy computes it (the bias is the dispatch's folded constant).
    [arg] = sorted((test_dir / "reduced" / "inputs").iterdir())
    conv = np.load(arg)
    assert conv.shape == (8, 16, 16)
    bias = np.array(re.search(r"dense<\[([^\]]*)\]> : tensor<8xf32>", text).group(1).split(","), dtype=np.float32)
    expected = np.load(test_dir / "reduced" / "expected" / "result0.npy")
    np.testing.assert_allclose(expected, np.maximum(conv + bias[:, None, None], 0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(expected, np.load(test_dir / "expected" / "result0.npy"), rtol=1e-6, atol=1e-6)
    # the reduced program on its inputs still disagrees with its expectation
    entry = {"dir": "reduced", "function": "main", "inputs": [arg.name], "outputs": ["result0.npy"]}
    [got] = _run_with_iree(test_dir / "reduced", entry, "llvm-cpu", tmp_path, "reduced.mlir")
    assert not np.allclose(got, expected, atol=1e-3)


def test_reduce_judges_every_candidate_by_the_whole_tests_rule(tmp_path, small_cnn_split):
    """small_cnn's mean (a sum over 64 terms, then a division by 64) with its divisor made 64.1: the sum is
    the same in A and B, so reduce keeps the division alone, and says the very difference the whole test
    showed. (Judged by the scale of what each candidate was fed, the division fed the sum, 30 times the
    inputs' scale, agreed and the innocent sum was kept.)"""
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    [test] = [t for t in read_manifest(out) if "reduction_16x64" in t.dir]
    program = out / test.dir / "dispatch.mlir"
    original = tmp_path / "original.mlir"
    original.write_text(program.read_text())
    assert program.read_text().count("6.400000e+01") == 1
    program.write_text(program.read_text().replace("6.400000e+01", "6.410000e+01"))
    reduced = _lens("reduce", str(out / test.dir), "--against=llvm-cpu", f"--reference={original}", "--json")
    assert reduced.returncode == 0, reduced.stderr
    report = json.loads(reduced.stdout)
    assert report["total"] == 3 and report["kept"] == ["#2 linalg.generic"], report
    # the same output difference, the same verdict and count at every step as for the whole test
    whole = check_test(out, test, list(TARGETS["llvm-cpu"].flags), "local-task")
    assert whole.verdict == "diverged"
    beyond = f"{whole.outputs[0]['mismatches']} of 16 beyond"
    assert report["failure"].startswith("diverged") and beyond in report["failure"]
    assert report["steps"] and all(beyond in step["detail"] for step in report["steps"])


def test_reduce_says_trouble_when_b_cannot_run_or_the_folder_is_the_split(tmp_path, small_cnn_split):
    """B that cannot run the test at all judges nothing: trouble (2) saying why, never "A and B agree"
    (exit 1, 'agree on the whole test (B failed: ...)'). The split folder given instead of one of its
    tests names a test to give (it said the parent folder was not a split folder)."""
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    [test] = [t for t in read_manifest(out) if "conv_8x16x16" in t.dir]
    reduced = _lens("reduce", str(out / test.dir), "--against=no-such-device")
    assert reduced.returncode == 2, reduced.stderr
    assert reduced.stderr.startswith("iree-lens reduce: B (llvm-cpu on no-such-device) cannot run the whole test")
    assert "agree" not in reduced.stderr
    whole = _lens("reduce", str(out), "--against=vmvx")
    assert whole.returncode == 2
    assert whole.stderr.strip() == f"iree-lens reduce: {out} is a split folder: give one of its tests (e.g. {out / read_manifest(out)[0].dir})"


def test_reduce_a_compile_failure_keeps_one_op_failing_the_same_way(tmp_path, small_cnn_split):
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    [test] = [t for t in read_manifest(out) if "conv_8x16x16" in t.dir]
    # A: a CPU LLVM does not know, so every candidate fails to compile with the same message
    reduced = _lens("reduce", str(out / test.dir), "--target=llvm-cpu", "--target-cpu=no-such-cpu",
                    "--against=llvm-cpu", "--json")  # fmt: skip
    assert reduced.returncode == 0, reduced.stderr
    report = json.loads(reduced.stdout)
    assert len(report["kept"]) == 1 and report["failure"].startswith("crash")


def test_reduce_refuses_a_test_that_agrees(tmp_path, small_cnn_split):
    [test] = [t for t in read_manifest(small_cnn_split) if "conv_8x16x16" in t.dir]
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    reduced = _lens("reduce", str(out / test.dir), "--against=vmvx")
    # nothing to reduce is an answer (1, as grep's "nothing found"), not trouble (2)
    assert reduced.returncode == 1 and "agree on the whole test" in reduced.stderr
    assert "expected/" not in reduced.stderr  # A agrees with expected/ too: nothing more to say


def test_reduce_of_a_test_that_only_disagrees_with_expected_says_what_it_compares(tmp_path, small_cnn_split):
    """split --check judges a test by its expected/ outputs, reduce by build B: a test whose expected/ is
    wrong (edited here) diverges under --check, and reduce, whose A and B agree, says that it compares two
    builds and how to reduce against expected/, with an answer's exit status, not trouble's."""
    [test] = [t for t in read_manifest(small_cnn_split) if "conv_16x8" in t.dir]
    out = tmp_path / "split"
    shutil.copytree(small_cnn_split, out)
    expected = out / test.dir / "expected" / "result0.npy"
    values = np.load(expected)
    values.flat[5] += 1.0
    np.save(expected, values)
    [checked] = [v for v in check_split(out, list(TARGETS["llvm-cpu"].flags), "local-task") if v.dir == test.dir]
    assert checked.verdict == "diverged"
    reduced = _lens("reduce", str(out / test.dir), "--against=vmvx")
    assert reduced.returncode == 1, reduced.stderr
    assert "A (llvm-cpu on" in reduced.stderr and "B (vmvx on" in reduced.stderr
    assert "reduce compares two builds, not the test's expected/ outputs" in reduced.stderr
    assert "A disagrees with expected/ (diverged: max abs 1," in reduced.stderr
    assert "give as B the build that wrote it" in reduced.stderr


HELDOUT = Path(__file__).resolve().parent / "heldout_programs"


@pytest.mark.parametrize(
    "name, inputs",
    [("dynamic_mlp", ["dynamic_mlp_x.npy"]), ("masked_embedding", ["masked_embedding_ids.npy", "masked_embedding_mask.npy"])],
)
def test_split_heldout_programs_reproduce_and_a_broken_test_alone_diverges(tmp_path, name, inputs):
    """The issue's held-out check on the torch-dialect programs (a dynamic batch; i64 ids and an i1 mask)."""
    out = tmp_path / "split"
    made = _lens("split", str(HELDOUT / f"{name}.mlir"), "--function=main",
                 *[f"--input=@{HELDOUT / i}" for i in inputs], f"--out={out}")  # fmt: skip
    assert made.returncode == 0, made.stderr
    count = _assert_reproduces(out, ("llvm-cpu",), tmp_path)
    assert count >= 2
    # the last test whose arithmetic has an add: made a subtraction
    victim = [t for t in read_manifest(out) if "arith.addf" in (out / t.dir / "dispatch.mlir").read_text()][-1]
    program = out / victim.dir / "dispatch.mlir"
    program.write_text(program.read_text().replace("arith.addf", "arith.subf", 1))
    checked = _lens("split", "--check", str(out), "--json")
    assert checked.returncode == 1, checked.stderr
    verdicts = {t["dir"]: t["verdict"] for t in json.loads(checked.stdout)["tests"]}
    assert len(verdicts) == count
    assert {d: v for d, v in verdicts.items() if v not in ("exact", "within_rounding")} == {victim.dir: "diverged"}


def test_split_into_an_earlier_split_replaces_it_and_refuses_other_folders(tmp_path):
    first, second = tmp_path / "twice.mlir", tmp_path / "loop.mlir"
    first.write_text(REPEATED)
    second.write_text(LOOP)
    out = tmp_path / "split"
    [old] = _split(first, "twice", ["8xf32=1"], out).tests
    (out / "checks").mkdir()
    (out / "checks" / "old.json").write_text("{}")
    [new] = _split(second, "loop", ["16xf32=1"], out).tests
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, new.dir])
    assert [t.dir for t in read_manifest(out)] == [new.dir] and old.dir != new.dir
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(LensError, match="not empty and holds no split"):
        _split(second, "loop", ["16xf32=1"], other)
    assert (other / "notes.txt").read_text() == "mine"
