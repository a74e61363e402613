"""Capture bundles (iree-lens capture) on both engines, checked against IREE's own traced tensors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import compile_for, iree_compile, iree_traced_tensors, lens_in_process

from engine.compiler.targets import target_flags
from engine.dispatch.bundle import Bundle
from engine.dispatch.capture import CaptureError, capture_debug, capture_reference
from engine.dispatch.graph import dependency_graph
from engine.samples import sample_path

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
TRACE = "--iree-flow-trace-dispatch-tensors"


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    root = tmp_path_factory.mktemp("capture")
    return {
        "mlp": compile_for(sample_path("mlp"), root / "mlp.vmfb", "llvm-cpu"),
        "mlp_traced": compile_for(sample_path("mlp"), root / "mlp_t.vmfb", "llvm-cpu", TRACE),
        "softmax_traced": compile_for(sample_path("softmax"), root / "softmax_t.vmfb", "llvm-cpu", TRACE),
    }


def _assert_bundles_identical(a: Bundle, b: Bundle) -> None:
    assert [d.name for d in a.dispatches] == [d.name for d in b.dispatches]
    for da, db in zip(a.dispatches, b.dispatches):
        for which in ("inputs", "outputs"):
            ta, tb = a.dispatch_tensors(da, which), b.dispatch_tensors(db, which)
            assert len(ta) == len(tb) and len(ta) > 0, (da.ordinal, which)
            for x, y in zip(ta, tb):
                assert x.dtype == y.dtype and x.shape == y.shape
                assert np.asarray(x).tobytes() == np.asarray(y).tobytes(), (da.ordinal, which)


def _check_against_iree(bundle: Bundle, traced: list[tuple[str, list]]) -> None:
    outputs = [(k, arrays) for k, arrays in traced if k.endswith(" outputs")]
    inputs = [(k, arrays) for k, arrays in traced if k.endswith(" inputs")]
    assert len(bundle.dispatches) == len(outputs) == len(inputs) > 0
    for d, (key, arrays), (_, in_arrays) in zip(bundle.dispatches, outputs, inputs):
        assert key.split("::")[1].rsplit(" ", 1)[0] == d.name
        for got, want in zip(bundle.dispatch_tensors(d, "outputs"), arrays, strict=True):
            assert got.shape == want.shape and np.asarray(got).tobytes() == want.tobytes()
        for got, want in zip(bundle.dispatch_tensors(d, "inputs"), in_arrays, strict=True):
            assert np.asarray(got).tobytes() == want.tobytes()


def test_both_engines_capture_the_same_bits_and_equal_iree_traces(programs, tmp_path):
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(2, 16)
    np.save(tmp_path / "x.npy", x)
    spec = [f"@{tmp_path / 'x.npy'}"]
    debug = capture_debug(programs["mlp_traced"], "main", spec, tmp_path / "dbg")
    ref = capture_reference(programs["mlp_traced"], "main", spec, tmp_path / "ref")
    assert debug.dispatches == ref.dispatches == 2
    a, b = Bundle(tmp_path / "dbg"), Bundle(tmp_path / "ref")
    _assert_bundles_identical(a, b)
    _check_against_iree(a, iree_traced_tensors(programs["mlp_traced"], "main", [x]))
    # The manifest: paths relative to the bundle, the program's own inputs and outputs, typed.
    m = json.loads((tmp_path / "dbg" / "manifest.json").read_text())
    assert m["function"] == "main" and m["dispatches"][1]["workgroups"] == [1, 1, 1]
    assert m["dispatches"][0]["name"] == "main_dispatch_0_matmul_2x32x16_f32"
    assert m["dispatches"][0]["executable"] == "main_dispatch_0"
    assert m["dispatches"][0]["output_types"] == ["2x32xf32"]
    assert np.array_equal(np.load(tmp_path / "dbg" / m["inputs"][0]), x)
    assert np.array_equal(a.program_tensors("outputs")[0], a.dispatch_tensors(a.dispatches[-1], "outputs")[0])


def test_plain_module_capture_without_sources_is_the_bound_bytes_equal_to_traced_tensors(programs, tmp_path):
    # Without trace points or sources the debug engine keeps each binding's bytes, untyped (no shape is
    # guessed from IREE's dispatch name); mlp's bindings hold one tensor each, so their bytes are IREE's
    # traced tensors of the traced build.
    x = np.ones((2, 16), np.float32)
    capture_debug(programs["mlp"], "main", ["2x16xf32=1"], tmp_path / "plain")
    bundle = Bundle(tmp_path / "plain")
    assert {d.tensors_from for d in bundle.dispatches} == {"bindings"}
    assert all(t == f"{n}xu8" for d in bundle.dispatches for n, t in
               zip([b["length"] for b in d.bindings], d.input_types + d.output_types))
    traced = iree_traced_tensors(programs["mlp_traced"], "main", [x])
    for d, (_, ins), (_, outs) in zip(bundle.dispatches, traced[0::2], traced[1::2], strict=True):
        for got, want in [*zip(bundle.dispatch_tensors(d, "inputs"), ins, strict=True),
                          *zip(bundle.dispatch_tensors(d, "outputs"), outs, strict=True)]:
            assert got.dtype == np.uint8 and got.tobytes() == want.tobytes()
    graph = dependency_graph(bundle.dispatches)
    assert [(e.source, e.target) for e in graph.edges] == [(0, 1)]
    assert "d0 -> d1" in graph.to_dot()
    # Each slot's label is its binding label: the binding and what the dispatch did to it, no role guessed.
    for d in bundle.dispatches:
        slots = [f"input{k}" for k in range(len(d.inputs))] + [f"output{k}" for k in range(len(d.outputs))]
        assert sorted(d.labels) == sorted(slots)
        access = {b["index"]: b["access"] for b in d.bindings}
        for slot, label in d.labels.items():
            number, acc = label.removeprefix("binding ").split(", ")
            assert access[int(number)] == acc and (acc == "read") == slot.startswith("input"), (slot, label)


def test_reference_capture_without_trace_points_says_so(programs, tmp_path):
    with pytest.raises(CaptureError, match="trace-dispatch-tensors"):
        capture_reference(programs["mlp"], "main", ["2x16xf32=1"], tmp_path / "none")
    proc = lens_in_process(*["capture", str(programs["mlp"]), "--function=main",
         "--input=2x16xf32=1", "--engine=reference", f"--out={tmp_path / 'cli'}"])
    assert proc.returncode != 0 and "--iree-flow-trace-dispatch-tensors" in proc.stderr


def test_cli_capture_and_run_golden(programs, tmp_path):
    out = tmp_path / "golden"
    proc = lens_in_process(*["capture", str(programs["softmax_traced"]),
         "--function=main", "--input=4x16xf32=0.5", "--engine=reference", f"--out={out}"])
    if proc.returncode != 0 and "not found" in proc.stderr:
        pytest.fail(proc.stderr)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["dispatches"] and all(Path(out / f).is_file() for d in m["dispatches"] for f in d["outputs"])
    ok = lens_in_process(*["run", f"--golden={out}"])
    assert ok.returncode == 0 and "golden: output 0 matches" in ok.stdout, ok.stderr
    # Different inputs, same bundle: the outputs no longer match and the run says so.
    bad = lens_in_process(*["run", f"--golden={out}",
                          "--input=4x16xf32=0.5", "--engine=reference"])
    assert bad.returncode == 0  # same inputs given explicitly still match
    np.save(tmp_path / "other.npy", np.arange(64, dtype=np.float32).reshape(4, 16))
    bad = lens_in_process(*["run", f"--golden={out}",
                          f"--input=@{tmp_path / 'other.npy'}"])
    assert bad.returncode == 1 and "DIFFERS" in bad.stderr
    # A framework's outputs of another shape but the same size match only flat: the line says so.
    ok_run = lens_in_process("run", f"--golden={out}", "--output=@" + str(tmp_path / "result.npy"))
    assert ok_run.returncode == 0, ok_run.stderr
    expected = np.load(tmp_path / "result.npy")
    np.save(tmp_path / "transposed.npy", expected.reshape(expected.shape[::-1]))
    flat = lens_in_process("run", str(programs["softmax_traced"]), "--function=main", "--input=4x16xf32=0.5",
                           f"--golden={tmp_path / 'transposed.npy'}")  # fmt: skip
    assert flat.returncode == 0 and "compared flat: shape (4, 16) vs expected (16, 4)" in flat.stdout, flat


@pytest.mark.parametrize("model,function", [("attention_block", "attention_block"), ("small_cnn", "small_cnn")])
def test_real_frontend_models_capture_identically_on_both_engines(model, function, tmp_path):
    source = MODELS / f"{model}.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    vmfb = compile_for(source, tmp_path / f"{model}.vmfb", "llvm-cpu", TRACE)
    spec = [f"@{MODELS / f'{model}_x.npy'}"]
    capture_debug(vmfb, function, spec, tmp_path / "dbg")
    capture_reference(vmfb, function, spec, tmp_path / "ref")
    a, b = Bundle(tmp_path / "dbg"), Bundle(tmp_path / "ref")
    assert len(a.dispatches) >= 5
    _assert_bundles_identical(a, b)
    x = np.load(MODELS / f"{model}_x.npy")
    _check_against_iree(a, iree_traced_tensors(vmfb, function, [x]))


def test_plain_model_with_its_executable_sources_captures_each_tensor_exactly(tmp_path):
    # IREE packs several tensors into one binding (offsets in push constants); the sources say where each
    # lies, so a plain build (no trace flags) captured with them equals IREE's traced tensors.
    source = MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    dump = tmp_path / "sources"
    plain = compile_for(source, tmp_path / "plain.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={dump}")
    traced = compile_for(source, tmp_path / "traced.vmfb", "llvm-cpu", TRACE)
    x = MODELS / "attention_block_x.npy"
    proc = lens_in_process(*["capture", str(plain), "--function=attention_block",
         f"--input=@{x}", f"--sources={dump}", f"--out={tmp_path / 'plain_bundle'}"])
    assert proc.returncode == 0, proc.stderr
    bundle = Bundle(tmp_path / "plain_bundle")
    assert {d.tensors_from for d in bundle.dispatches} == {"interface"}
    for d in bundle.dispatches:  # typed: each slot's label ends with its role, as the sources say it
        for slot, label in d.labels.items():
            role, position = slot.rstrip("0123456789"), slot[len(slot.rstrip("0123456789")) :]
            assert label.startswith("binding ") and label.endswith(f", {role} {position}"), (slot, label)
    _check_against_iree(bundle, iree_traced_tensors(traced, "attention_block", [np.load(x)]))


# Sizes read with tensor.dim have no bound IREE can prove, so it passes each as a 64-bit index in two i32 push
# constants (extui, shli 32, ori) rather than one. (%r is returned too: fused into the reduction, iree-compile
# 3.13 fails on this one with "'vector.contract' op invalid accumulator/result vector shape".)
UNBOUNDED_DYNAMIC = """
func.func @main(%a: tensor<?x?xf32>, %b: tensor<?xf32>) -> (tensor<?x?xf32>, tensor<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %a, %c0 : tensor<?x?xf32>
  %d1 = tensor.dim %a, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<?x?xf32>, tensor<?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.mulf %x, %y : f32
    %t = math.tanh %s : f32
    linalg.yield %t : f32
  } -> tensor<?x?xf32>
  %z = arith.constant 0.0 : f32
  %ie = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%z : f32) outs(%ie : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                         iterator_types = ["reduction", "reduction"]} ins(%r : tensor<?x?xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r, %sum : tensor<?x?xf32>, tensor<f32>
}
"""


def test_sizes_in_two_push_constants_are_typed_from_the_sources(tmp_path):
    # Was: every dispatch of such a program captured as untyped bytes ("a dynamic dimension ... is not a push
    # constant"), its pairs of constants ([7, 0, 3, 0, 7, 0]) not read as the 64-bit sizes they are.
    source = tmp_path / "unbounded.mlir"
    source.write_text(UNBOUNDED_DYNAMIC)
    dump = tmp_path / "sources"
    plain = compile_for(source, tmp_path / "plain.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={dump}")
    assert "arith.shli" in "".join(p.read_text() for p in dump.glob("*.mlir"))  # the pattern this is about
    traced = compile_for(source, tmp_path / "traced.vmfb", "llvm-cpu", TRACE)
    a = np.linspace(-3, 3, 21, dtype=np.float32).reshape(3, 7)
    b = np.arange(1, 8, dtype=np.float32)
    for name, x in (("a", a), ("b", b)):
        np.save(tmp_path / f"{name}.npy", x)
    proc = lens_in_process("capture", str(plain), "--function=main", f"--input=@{tmp_path / 'a.npy'}",
                           f"--input=@{tmp_path / 'b.npy'}", f"--sources={dump}", f"--out={tmp_path / 'bundle'}")
    assert proc.returncode == 0, proc.stderr
    bundle = Bundle(tmp_path / "bundle")
    assert {d.tensors_from for d in bundle.dispatches} == {"interface"}
    assert [d.input_types for d in bundle.dispatches] == [["3x7xf32", "7xf32"], ["21xf32"]]
    assert [d.output_types for d in bundle.dispatches] == [["3x7xf32"], ["f32"]]
    traced_by_key = dict(iree_traced_tensors(traced, "main", [a, b]))  # IREE traces #1 before #0's outputs
    for d in bundle.dispatches:
        for which in ("inputs", "outputs"):
            want = traced_by_key[f"{d.executable}::{d.name} {which}"]
            got = bundle.dispatch_tensors(d, which)
            assert [g.shape for g in got] == [w.shape for w in want]
            assert all(np.asarray(g).tobytes() == w.tobytes() for g, w in zip(got, want)), (d.name, which)


NAN_PROGRAM = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.sqrt %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""


def test_health_counts_nan_and_the_graph_exports_as_dot(tmp_path):
    src = tmp_path / "nan.mlir"
    src.write_text(NAN_PROGRAM)
    # The sources beside the module (nan.sources, found without --sources) type the tensors: the health of
    # untyped bytes would be unknown.
    vmfb = compile_for(
        src, tmp_path / "nan.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={tmp_path / 'nan.sources'}"
    )
    dot = tmp_path / "g.dot"
    proc = lens_in_process(*["capture", str(vmfb), "--function=main",
         "--input=8xf32=4 -1 9 -4 0 1 -2 16", f"--out={tmp_path / 'b'}", f"--dot={dot}"])
    assert proc.returncode == 0, proc.stderr
    [entry] = Bundle(tmp_path / "b").dispatches
    assert entry.health == "3 NaN"
    [out] = Bundle(tmp_path / "b").dispatch_tensors(entry, "outputs")
    assert np.isnan(out).sum() == 3 and out[2] == 3.0
    assert dot.read_text().startswith("digraph dispatches {") and "3 NaN" in dot.read_text()


def test_both_engines_capture_the_same_bits_on_vulkan(tmp_path):
    from engine.runtime.hal.vulkan.loader import vulkan_available

    missing = vulkan_available()
    if missing is not None:
        pytest.skip(f"no Vulkan: {missing}")
    proc = iree_compile(
        [str(sample_path("mlp")), *target_flags("vulkan-spirv"), TRACE,
         "-o", str(tmp_path / "mlp_vk.vmfb")], text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    spec = ["2x16xf32=0.75"]
    capture_debug(tmp_path / "mlp_vk.vmfb", "main", spec, tmp_path / "dbg", device="vulkan")
    capture_reference(tmp_path / "mlp_vk.vmfb", "main", spec, tmp_path / "ref", device="vulkan")
    a, b = Bundle(tmp_path / "dbg"), Bundle(tmp_path / "ref")
    assert len(a.dispatches) == 2
    _assert_bundles_identical(a, b)




def test_a_failing_run_keeps_the_dispatches_before_the_failure(tmp_path):
    from support.session import compile_program

    vmfb = compile_program("square_assert", "llvm-cpu", tmp_path)
    with pytest.raises(CaptureError, match="failed after 1 dispatches") as e:
        capture_debug(vmfb, "main", ["4xf32=1 2 3 4"], tmp_path / "b")
    assert "the square was not negative" in str(e.value)
    bundle = Bundle(tmp_path / "b")
    assert "the square was not negative" in bundle.manifest["error"]
    [out] = bundle.dispatch_tensors(bundle.dispatches[0], "outputs")
    assert out.dtype == np.uint8 and np.array_equal(out.view(np.float32), [1, 4, 9, 16])  # untyped: its bytes


def test_a_capture_that_fails_before_its_run_leaves_no_file_open(tmp_path):
    """A module that does not load: the capture says so, and the bundle's entries file it had opened is
    closed (it was left to the garbage collector: a ResourceWarning)."""
    import gc
    import warnings

    from engine.errors import LensError

    bad = tmp_path / "bad.vmfb"
    bad.write_bytes(b"not a module at all" * 10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(LensError):
            capture_debug(bad, "main", [], tmp_path / "bundle")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]


def test_graph_counts_a_byte_read_through_two_bindings_once(tmp_path):
    # small_cnn's max-pool reads one buffer through two bindings (input and the padded output it updates):
    # the edge from the conv that wrote it said 30592 B, twice the 15296 B buffer.
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    vmfb = compile_for(source, tmp_path / "small_cnn.vmfb", "llvm-cpu")
    capture_debug(vmfb, "small_cnn", [f"@{MODELS / 'small_cnn_x.npy'}"], tmp_path / "b")
    dispatches = Bundle(tmp_path / "b").dispatches
    graph = dependency_graph(dispatches)
    shared = 0
    for edge in graph.edges:
        target = dispatches[edge.target]
        reads = [b for b in target.bindings if b["buffer"] == edge.buffer and b["access"] != "write"]
        shared += len(reads) > 1
        lo = min(b["offset"] for b in reads)
        hi = max(b["offset"] + b["length"] for b in reads)
        assert edge.bytes <= hi - lo, (edge, reads)
    assert shared > 0  # the program does read one buffer through two bindings


def test_a_type_override_that_cannot_apply_is_said(tmp_path):
    # --type for a tensor too short for the type, or for a dispatch/slot the run does not have, was taken
    # silently: the tensor stayed raw bytes (or nothing changed) and the user was not told.
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    vmfb = compile_for(source, tmp_path / "small_cnn.vmfb", "llvm-cpu")
    x = f"--input=@{MODELS / 'small_cnn_x.npy'}"
    fits = lens_in_process("capture", str(vmfb), "--function=small_cnn", x, f"--out={tmp_path / 'a'}",
                           "--type=5:output:0=2x5xf32")  # fmt: skip
    assert fits.returncode == 0 and "--type" not in fits.stderr, fits.stderr
    [out] = Bundle(tmp_path / "a").dispatch_tensors(Bundle(tmp_path / "a").dispatches[5], "outputs")
    assert out.shape == (2, 5) and out.dtype == np.float32
    proc = lens_in_process("capture", str(vmfb), "--function=small_cnn", x, f"--out={tmp_path / 'b'}",
                           "--type=5:output:0=11xf32", "--type=9:output:0=10xf32")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "5:output:0=11xf32: the type needs 44 bytes, the tensor has 40" in proc.stderr
    assert "9:output:0=10xf32: the capture has no dispatch 9" in proc.stderr
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert len(manifest["notes"]) == 2 and manifest["dispatches"][5]["output_types"] == ["40xu8"]


def test_reference_capture_pairs_the_dispatches_iree_traced_outputs_first(tmp_path):
    # IREE's stream scheduling moves some inputs trace points after their dispatch's outputs (efficientvit:
    # 7 of 336). Those dispatches were written with no inputs (then flagged in a note); each export now pairs
    # its own trace points, as the reference debugger numbers them: the n-th run of an export in the bundle
    # holds the n-th inputs and outputs IREE traced for it, every one of them.
    from support import shared_model

    source = shared_model("efficientvit_m0")  # skips where it is absent
    vmfb = compile_for(source, tmp_path / "ev.vmfb", "llvm-cpu", TRACE)
    x = MODELS / "efficientvit_m0_x.npy"
    traced: dict[tuple[str, str], list[list[np.ndarray]]] = {}
    seen: dict[str, int] = {}
    late = 0  # IREE's own order: the n-th outputs of an export before its n-th inputs
    for key, arrays in iree_traced_tensors(vmfb, "main", [np.load(x)]):
        name, kind = key.split("::")[1].rsplit(" ", 1)
        traced.setdefault((name, kind), []).append(arrays)
        if kind == "outputs" and len(traced[(name, "outputs")]) > len(traced.get((name, "inputs"), [])):
            late += 1
        seen[name] = seen.get(name, 0)
    assert late, "IREE traced every dispatch's inputs first: the case this test needs is gone"
    proc = lens_in_process("capture", str(vmfb), "--function=main", f"--input=@{x}", "--engine=reference",
                           f"--out={tmp_path / 'ref'}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    bundle = Bundle(tmp_path / "ref")
    assert len(bundle.dispatches) == sum(len(v) for (_, kind), v in traced.items() if kind == "outputs")
    assert [d.ordinal for d in bundle.dispatches] == list(range(len(bundle.dispatches)))
    for d in bundle.dispatches:
        n = seen[d.name]
        seen[d.name] += 1
        for kind in ("inputs", "outputs"):
            expected = traced.get((d.name, kind), [])
            got = bundle.dispatch_tensors(d, kind)
            want = expected[n] if n < len(expected) else []
            assert len(got) == len(want), (d.ordinal, d.name, kind)
            for a, b in zip(got, want):
                assert a.tobytes() == np.ascontiguousarray(b).tobytes(), (d.ordinal, d.name, kind)
    assert "notes" not in json.loads((tmp_path / "ref" / "manifest.json").read_text())


def test_late_inputs_of_two_runs_of_one_export_are_not_attributed():
    # TracePairing pairs an export's inputs that IREE traced after its outputs (efficientvit's 7, test above:
    # each time one run of the export waited for its inputs). Where two runs' outputs came before either's
    # inputs, which inputs are whose rests only on IREE keeping the runs' order: those dispatches are
    # ``ambiguous`` (the reference capture writes them without inputs and says so), the others are not.
    # No model at hand traces such an order, so IREE's trace keys are given here in that order.
    from engine.dispatch.capture import _pairing_notes
    from engine.dispatch.trace_pairing import TracePairing

    a, b = "ex::main$async_dispatch_7_matmul", "ex::main$async_dispatch_8_slow_memcpy"
    one = TracePairing()
    order = [(a, "outputs"), (b, "inputs"), (b, "outputs"), (a, "inputs")]  # efficientvit's dispatch 77
    assert [one.take(h, k, [])[0] for h, k in order] == [0, 1, 1, 0] and not one.ambiguous
    two = TracePairing()
    order = [(a, "outputs"), (b, "inputs"), (b, "outputs"), (a, "outputs"), (a, "inputs"), (a, "inputs")]
    assert [two.take(h, k, [])[0] for h, k in order] == [0, 1, 1, 2, 0, 2]
    assert two.ambiguous == {0, 2}
    [note] = _pairing_notes([], sorted(two.ambiguous))
    assert "inputs of 2 dispatches after their outputs" in note and "(dispatches 0, 2)" in note


def test_cli_capture_types_tensors_by_the_checked_rebuild_as_the_debugger_does(programs, tmp_path):
    # Given no --sources, capture typed only from a sources folder beside the module: a module compiled the
    # usual way (no dump) was captured as raw binding bytes where the debugger, diverge and compare-builds
    # type its tensors from a rebuild of the program it names (used only when it gives identical executables).
    program = tmp_path / "prog" / "mlp.mlir"
    program.parent.mkdir()
    program.write_text(sample_path("mlp").read_text())
    module = compile_for(program, tmp_path / "mlp.vmfb", "llvm-cpu")
    x = "--input=2x16xf32=1"
    proc = lens_in_process("capture", str(module), "--function=main", x, f"--out={tmp_path / 'typed'}")
    assert proc.returncode == 0, proc.stderr
    assert "tensors typed by executable sources rebuilt" in proc.stderr, proc.stderr
    typed = Bundle(tmp_path / "typed")
    assert {d.tensors_from for d in typed.dispatches} == {"interface"}
    # --no-rebuild: only given or found sources type them.
    proc = lens_in_process("capture", str(module), "--function=main", x, f"--out={tmp_path / 'bytes'}", "--no-rebuild")
    assert proc.returncode == 0 and "rebuil" not in proc.stderr, proc.stderr
    assert {d.tensors_from for d in Bundle(tmp_path / "bytes").dispatches} == {"bindings"}
    # diverge the same: typed by the rebuild, or with --no-rebuild by given or found sources only.
    for extra, said in (((), "tensors typed by executable sources rebuilt"), (("--no-rebuild",), "no executable sources")):
        proc = lens_in_process("diverge", str(module), str(module), "--function=main", x, *extra)
        assert proc.returncode == 0 and said in proc.stderr, proc.stderr
    traced = iree_traced_tensors(programs["mlp_traced"], "main", [np.ones((2, 16), np.float32)])
    _check_against_iree(typed, traced)
    # The program gone, nothing types them: the bytes, and it is said.
    program.unlink()
    proc = lens_in_process("capture", str(module), "--function=main", x, f"--out={tmp_path / 'raw'}")
    assert proc.returncode == 0, proc.stderr
    assert "no executable sources" in proc.stderr and "not here" in proc.stderr, proc.stderr
    assert {d.tensors_from for d in Bundle(tmp_path / "raw").dispatches} == {"bindings"}


def test_reference_capture_keeps_packed_i4_trace_points_as_their_bytes(tmp_path):
    # Was: "reading trace points failed: ... cannot reshape array of size 2 into shape (4,)": IREE traces a 4xi4
    # tensor as 2 bytes. Now the bytes as they are (raw u8; numpy has no i4), packed low nibble first.
    source = Path(__file__).parent / "e2e_programs" / "packed_i4.mlir"
    traced = compile_for(source, tmp_path / "i4_t.vmfb", "llvm-cpu", TRACE)
    capture_reference(traced, "ret4", [], tmp_path / "ref")
    bundle = Bundle(tmp_path / "ref")
    (d,) = bundle.dispatches
    assert d.input_types == ["2xu8", "2xu8"] and d.output_types == ["2xu8"]
    got = [np.asarray(a).tolist() for a in bundle.dispatch_tensors(d, "inputs") + bundle.dispatch_tensors(d, "outputs")]
    assert got == [[0x21, 0x43], [0x11, 0xF1], [0x32, 0x34]]  # [1 2 3 4], [1 1 1 -1], their sum [2 3 4 3]
