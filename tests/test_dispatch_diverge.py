"""The first-divergence finder names a deliberately broken dispatch, and its reproducer reproduces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import broken_pair, compile_for, lens_in_process

from engine.samples import sample_path

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"


def test_finder_names_the_broken_dispatch_and_the_reproducer_reproduces(tmp_path):
    a, b, dump = broken_pair(sample_path("mlp"), tmp_path, "main_dispatch_1", "arith.addf", "arith.subf")
    repro = tmp_path / "repro"
    proc = lens_in_process("diverge", a, b, "--function=main", "--input=2x16xf32=0.25", "--json", f"--repro={repro}",
                 f"--sources={dump}")
    assert proc.returncode == 1, proc.stderr  # a divergence named: 1, as diff and cmp say "they differ"
    found = json.loads(proc.stdout)["first_divergence"]
    assert found["ordinal"] == 1 and found["name"] == "main_dispatch_1_matmul_2x4x32_f32"
    assert found["executable"] == "main_dispatch_1" and found["max_abs_error"] > 0
    # The reproducer: the executable's source, its bindings as .npy, and a command that reruns it.
    meta = json.loads((repro / "repro.json").read_text())
    assert (repro / meta["source"]).read_text().count("arith.addf") >= 1
    assert all((repro / binding["before"]).is_file() for binding in meta["bindings"])
    rerun = subprocess.run([sys.executable, "-m", "app.launcher", *meta["command"].split()[1:]],
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 1 and "still diverges" in rerun.stdout, rerun.stderr
    # The same reproducer replayed on the good module matches: the divergence is the executable's.
    meta["module"] = str(a)
    (repro / "repro.json").write_text(json.dumps(meta))
    good = lens_in_process("diverge", f"--replay={repro}")
    assert good.returncode == 0 and "now matches" in good.stdout, good.stdout + good.stderr


def test_same_module_has_no_divergence_and_tolerance_hides_small_errors(tmp_path):
    a = compile_for(sample_path("mlp"), tmp_path / "a.vmfb", "llvm-cpu")
    proc = lens_in_process("diverge", a, a, "--function=main", "--input=2x16xf32=1", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["first_divergence"] is None, proc.stderr
    # maximumf -> minimumf in the first matmul's fused bias+relu would change results by a lot; a huge
    # tolerance hides any divergence.
    _, b, _ = broken_pair(sample_path("mlp"), tmp_path / "t", "main_dispatch_1", "arith.addf", "arith.subf")
    loose = lens_in_process("diverge", a, b, "--function=main", "--input=2x16xf32=1", "--json", "--atol=100")
    assert json.loads(loose.stdout)["first_divergence"] is None


def test_finder_on_a_real_frontend_model(tmp_path):
    source = MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    a, b, _ = broken_pair(source, tmp_path, "attention_block$async_dispatch_10", "math.erf", "math.tanh")
    x = MODELS / "attention_block_x.npy"
    proc = lens_in_process("diverge", a, b, "--function=attention_block", f"--input=@{x}", "--json",
                 "--atol=1e-6", f"--repro={tmp_path / 'repro'}")
    assert proc.returncode == 1, proc.stderr
    found = json.loads(proc.stdout)["first_divergence"]
    assert found is not None and found["executable"] == "attention_block$async_dispatch_10"
    rerun = lens_in_process("diverge", f"--replay={tmp_path / 'repro'}")
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr


def test_untyped_bytes_that_differ_are_said_so_not_named_a_divergence(tmp_path):
    """Without the executables' sources (none beside the modules, and the program gone: nothing to rebuild)
    a dispatch whose IREE name gives no element type (``slow_memcpy``) is bytes: bytes that differ cannot be
    told rounding from error, so the finder says "bytes differ" with what would judge them, and names no
    divergence. With --sources the same dispatch is typed and named."""
    import shutil

    from support import broken_build

    program = tmp_path / "work" / "packed_concat.mlir"
    program.parent.mkdir()
    shutil.copy(Path(__file__).parent / "diverge_programs" / "packed_concat.mlir", program)

    good = compile_for(program, tmp_path / "work" / "good.vmfb", "llvm-cpu",
                       f"--iree-hal-dump-executable-sources-to={tmp_path / 'work' / 'sources'}")  # fmt: skip
    bad = broken_build(program, tmp_path / "work", "llvm-cpu", "main_dispatch_3", "offsets = [0, 24]", "offsets = [0, 23]")
    clean = tmp_path / "clean"
    clean.mkdir()
    a, b = shutil.copy(good, clean / "a.vmfb"), shutil.copy(bad, clean / "b.vmfb")
    shutil.copytree(tmp_path / "work" / "sources", tmp_path / "sources")  # given below, not where A names them
    shutil.rmtree(tmp_path / "work")  # the program and the dumped sources the modules' locations name are gone
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", (rng.standard_normal((16, 24)) * 2).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.standard_normal((16, 40)).astype(np.float32))
    inputs = [f"--input=@{tmp_path / 'x.npy'}", f"--input=@{tmp_path / 'y.npy'}"]

    proc = lens_in_process("diverge", a, b, "--function=main", *inputs, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "no executable sources" in proc.stderr
    report = json.loads(proc.stdout)
    assert report["first_divergence"] is None, report["first_divergence"]
    [differ] = [d for d in report["dispatches"] if d.get("untyped_bytes") and d["verdict"] == "diverged"]
    assert differ["name"].endswith("slow_memcpy") and differ["ordinal"] == 3
    assert report["verdicts"]["bytes_differ"] == 1
    assert any("bytes of no known element type" in n and "--sources" in n for n in report["notes"]), report["notes"]
    text = lens_in_process("diverge", a, b, "--function=main", *inputs)
    assert "#3    bytes differ" in text.stdout and "first divergence" not in text.stdout
    assert text.returncode == 0, text.stderr  # bytes that differ, not judged: no divergence named

    typed = lens_in_process("diverge", a, b, "--function=main", *inputs, "--json", f"--sources={tmp_path / 'sources'}")
    assert typed.returncode == 1, typed.stderr
    report = json.loads(typed.stdout)
    assert report["first_divergence"]["ordinal"] == 3 and "bytes_differ" not in report["verdicts"]


def test_a_module_that_is_not_there_is_named_first(tmp_path):
    """Before anything is read from the other module (its inputs, its function): the missing one is named."""
    other = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    proc = lens_in_process("diverge", str(tmp_path / "absent.vmfb"), other)
    assert proc.returncode == 2 and proc.stderr.strip() == f"iree-lens diverge: no such file: {tmp_path / 'absent.vmfb'}"


def test_exit_status_is_diffs_and_options_stand_anywhere(tmp_path):
    """0 when nothing diverges, 1 when a first divergence is named (lockstep, --keep's bundles, text or
    --json), 2 for trouble; the options may stand between the two modules and after them."""
    a, b, dump = broken_pair(sample_path("mlp"), tmp_path, "main_dispatch_1", "arith.addf", "arith.subf")
    same = lens_in_process("diverge", a, "--input=2x16xf32=0.25", a, "--function=main")
    assert same.returncode == 0 and "no divergence in" in same.stdout, same.stdout + same.stderr
    found = lens_in_process("diverge", a, "--device-a=local-sync", "--input=2x16xf32=0.25", b,
                            f"--sources={dump}", "--json", "--device-b=local-task")  # fmt: skip
    assert found.returncode == 1, found.stderr
    report = json.loads(found.stdout)
    assert report["first_divergence"]["ordinal"] == 1 and report["devices"] == ["local-sync", "local-task"]
    text = lens_in_process("diverge", "--function=main", a, b, "--input=2x16xf32=0.25", f"--sources={dump}")
    assert text.returncode == 1 and "first divergence: dispatch 1" in text.stdout, text.stdout + text.stderr
    kept = lens_in_process("diverge", a, f"--keep={tmp_path / 'kept'}", b, "--input=2x16xf32=0.25", "--json")
    assert kept.returncode == 1 and json.loads(kept.stdout)["first_divergence"] is not None, kept.stderr
    assert lens_in_process("diverge", a, f"--keep={tmp_path / 'kept_same'}", a, "--json").returncode == 0
    usage = lens_in_process("diverge", a)
    assert usage.returncode == 2 and "give A.vmfb B.vmfb, or one module with --device-a/--device-b" in usage.stderr
    one = lens_in_process("diverge", a, "--device-b=local-task", "--input=2x16xf32=0.25", "--json")
    assert one.returncode == 0, one.stderr  # one module on two devices: A against itself on local-task
    assert json.loads(one.stdout)["devices"] == ["local-sync", "local-task"]
    helped = lens_in_process("diverge", "--help")
    assert "Exit status (as diff and cmp): 0 when nothing diverges, 1 when a first divergence is named" in " ".join(
        helped.stdout.split()
    )


def test_golden_judges_b_on_its_own_run_not_on_a_inputs(tmp_path):
    # B differs in small_cnn's first conv only. Fed A's bytes, B's last dispatch gives A's result; that was
    # compared with the golden and B was reported 'within rounding' though its own run is far off.
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    a, b, _ = broken_pair(source, tmp_path, "small_cnn$async_dispatch_1", "arith.mulf", "arith.subf")
    x = MODELS / "small_cnn_x.npy"
    from support import iree_tool

    outs = {}
    for name, vmfb in (("a", a), ("b", b)):  # IREE's own runs
        outs[name] = tmp_path / f"{name}_y.npy"
        subprocess.run([iree_tool("iree-run-module"), f"--module={vmfb}", "--function=small_cnn", f"--input=@{x}",
                        f"--output=@{outs[name]}"], check=True, capture_output=True)  # fmt: skip
    y_a, y_b = np.load(outs["a"]), np.load(outs["b"])
    assert np.abs(y_a - y_b).max() > 0.01
    proc = lens_in_process("diverge", a, b, "--function=small_cnn", f"--input=@{x}", "--json", f"--golden={outs['a']}")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["first_divergence"]["executable"] == "small_cnn$async_dispatch_1"
    golden = {g["run"]: g for g in report["golden"]}
    assert golden["A"]["ok"] and not golden["B"]["ok"], golden
    assert golden["B"]["max_abs_error"] == pytest.approx(float(np.abs(y_a - y_b).max()), rel=1e-6)
    # --keep (both runs captured, each on its own inputs) compared nothing with --golden: it was dropped
    proc = lens_in_process("diverge", a, b, "--function=small_cnn", f"--input=@{x}", "--json", f"--golden={outs['a']}",
                           f"--keep={tmp_path / 'keep'}")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    kept = {g["run"]: g for g in json.loads(proc.stdout)["golden"]}
    # a B that lacks the function is named before either runs ("function 'small_cnn' not found in module")
    other = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    wrong = lens_in_process("diverge", a, other, "--function=small_cnn", f"--input=@{x}")
    assert wrong.returncode == 2 and f"module B ({other}) has no function 'small_cnn'; it exports main" in wrong.stderr
    assert kept["A"]["ok"] and not kept["B"]["ok"]
    assert kept["B"]["max_abs_error"] == golden["B"]["max_abs_error"]


def test_reproducer_compares_the_tensor_the_finder_compared(tmp_path):
    # IREE packs small_cnn's tensors into shared buffers: the conv's output is a slice of its binding. The
    # replay compared the whole binding ('N of <binding words> beyond', another scale and SQNR than the
    # finder said); now the same tensor, so its verdict is the finder's, word for word.
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    a, b, _ = broken_pair(source, tmp_path, "small_cnn$async_dispatch_1", "arith.mulf", "arith.subf")
    x = MODELS / "small_cnn_x.npy"
    repro = tmp_path / "repro"
    proc = lens_in_process("diverge", a, b, "--function=small_cnn", f"--input=@{x}", "--json", f"--repro={repro}")
    assert proc.returncode == 1, proc.stderr
    found = json.loads(proc.stdout)["first_divergence"]
    meta = json.loads((repro / "repro.json").read_text())
    [written] = [binding for binding in meta["bindings"] if binding["expected"]]
    [tensor] = written["tensors"]
    assert tensor["type"] == "8x16x16xf32" and written["length"] > 8 * 16 * 16 * 4
    rerun = lens_in_process("diverge", f"--replay={repro}")
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr
    assert found["executable"] == "small_cnn$async_dispatch_1"
    text = lens_in_process("diverge", a, b, "--function=small_cnn", f"--input=@{x}").stdout
    said = next(line for line in text.splitlines() if line.startswith("  output 0: ")).removeprefix("  output 0: ")
    assert f"binding {written['index']}: {said}" in rerun.stdout


def _default_and_o3(source: Path, tmp: Path, *extra: str) -> tuple[Path, Path]:
    """``source`` built for llvm-cpu as IREE builds it by default, and at ``--iree-opt-level=O3`` (with
    ``extra`` flags)."""
    from support import iree_compile

    a = compile_for(source, tmp / "a.vmfb", "llvm-cpu")
    b = tmp / "b.vmfb"
    flags = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
             "--iree-llvmcpu-target-cpu=host", "--iree-opt-level=O3", *extra]  # fmt: skip
    built = iree_compile([str(source), *flags, "-o", str(b)])
    assert built.returncode == 0, built.stderr
    return a, b


HALF_MATMUL = """func.func @half(%a: tensor<8x16xf16>, %b: tensor<16x4xf16>) -> tensor<8x4xf16> {
  %z = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<8x4xf16>
  %f = linalg.fill ins(%z : f16) outs(%e : tensor<8x4xf16>) -> tensor<8x4xf16>
  %m = linalg.matmul ins(%a, %b : tensor<8x16xf16>, tensor<16x4xf16>) outs(%f : tensor<8x4xf16>) -> tensor<8x4xf16>
  return %m : tensor<8x4xf16>
}
"""


def test_builds_that_name_a_kernel_otherwise_are_still_compared(tmp_path):
    """At O3 IREE 3.13 names the matmul's dispatch ``half_dispatch_0_matmul_like_8x4x16_f16``, the default
    build ``half_dispatch_0_matmul_8x4x16_f16``: matched by name alone nothing was compared ("no divergence
    in 0 dispatches"). The same place in the program with binding ranges of the same lengths pairs them."""
    source = tmp_path / "half.mlir"
    source.write_text(HALF_MATMUL)
    a, b = _default_and_o3(source, tmp_path)
    inputs = ("--function=half", "--input=8x16xf16=0.5", "--input=16x4xf16=0.25")
    proc = lens_in_process("diverge", a, b, *inputs, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["dispatches_compared"] == 1 and report["dispatches"][0]["verdict"] == "exact", report
    (note,) = [n for n in report["notes"] if "another name" in n]
    assert "half_dispatch_0_matmul_like_8x4x16_f16" in note and "half_dispatch_0_matmul_8x4x16_f16" in note, note


def test_builds_that_form_their_dispatches_otherwise_name_no_divergence(tmp_path):
    """The ONNX attention block at O3 against the default build: IREE forms other dispatches (12 against 10;
    its first binds other ranges and computes something else under the same name), and the function's result
    agrees within rounding. Named by dispatch, the old finder called dispatch 0 the first divergence; the
    builds' structure differs, so no dispatch is named one and the notes say why."""
    source = MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    a, b = _default_and_o3(source, tmp_path)
    x = MODELS / "attention_block_x.npy"
    proc = lens_in_process("diverge", a, b, "--function=attention_block", f"--input=@{x}", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    report = json.loads(proc.stdout)
    assert report["first_divergence"] is None
    assert any(d.get("layout_differs") for d in report["dispatches"]), report["dispatches"]
    assert any("laid out otherwise in A and B" in n for n in report["notes"]), report["notes"]
    assert any(n.startswith("dispatch counts differ") for n in report["notes"]), report["notes"]
    # B's dispatches with no counterpart are said once, their numbers in runs (was a note each).
    assert "9 of B's dispatches have no counterpart in A where they run, not compared: 1-9" in report["notes"]
    (result,) = report["outputs"]
    assert result["verdict"] in ("exact", "within_rounding"), result
    # A's sources do not describe B's exports of the same names: B's dispatch 0 binds other ranges, and is shown
    # as its bytes (its whole binding), not cut by A's interface (was: compared as A's 8xf32 output, "max abs
    # error 3.98", values of another tensor); the typing of B is said.
    assert "B dispatches 7 exports A does not (of 8)" in proc.stderr, proc.stderr
    assert "B's by A's sources only where a dispatch binds the same ranges as its counterpart in A" in proc.stderr
    first = report["dispatches"][0]
    assert first["layout_differs"] and not first["fed"] and "max_abs_error" not in first, first
    assert first["note"].startswith("outputs differ in layout"), first
    # The same builds, one kernel's arithmetic broken by hand, still name it (the structure is the same: B is
    # typed by A's sources throughout).
    _, broken, _ = broken_pair(source, tmp_path / "broken", "attention_block$async_dispatch_10", "math.erf", "math.tanh")
    proc = lens_in_process("diverge", a, broken, "--function=attention_block", f"--input=@{x}", "--json", "--atol=1e-6")
    assert proc.returncode == 1 and json.loads(proc.stdout)["first_divergence"]["ordinal"] == 10, proc.stderr
    assert "B's as A's (B dispatches the same 10 exports)" in proc.stderr, proc.stderr
    # B's own executable sources beside it (as b.sources/) type it; still no divergence named.
    a, b = _default_and_o3(source, tmp_path / "own", f"--iree-hal-dump-executable-sources-to={tmp_path / 'own' / 'b.sources'}")
    proc = lens_in_process("diverge", a, b, "--function=attention_block", f"--input=@{x}", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["first_divergence"] is None, proc.stderr
    assert "B's by executable sources beside" in proc.stderr, proc.stderr
