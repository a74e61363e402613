"""A dispatch's tensors typed once (engine.dispatch.typed_tensors): from the executables' sources (IREE's
--iree-hal-dump-executable-sources-to folder, IREE Lens's compile output, found beside the module or named
with --sources), else exactly the bound bytes. Checked against IREE's own traced tensors (HalModuleDebugSink
on a build with --iree-flow-trace-dispatch-tensors): shape, element type and bytes of every dispatch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import compile_for, iree_compile, iree_traced_tensors, model_cpu_build, shared_model
from support.traced import TRACE, assert_bundle_equals_traced, stop_at_every_dispatch, traced_by_dispatch

from engine.compiler.targets import target_flags
from engine.dispatch.bundle import Bundle, BundleWriter
from engine.dispatch.tensor_types import TensorType, binding_interfaces
from engine.dispatch.typed_tensors import (
    ExecutableSources,
    Provenance,
    Role,
    dispatch_tensors,
    find_sources,
    read_sources,
)

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"


def _model_source(model: str, tmp: Path) -> Path:
    return shared_model(model)


# ---------------------------------------------------------------------------------------------- units

SOURCE = """
#pipeline_layout = #hal.pipeline.layout<constants = 1, bindings = [#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, #hal.pipeline.binding<storage_buffer, Indirect>], flags = Indirect>
hal.executable public @main_dispatch_0 {
  hal.executable.variant public @embedded_elf_x86_64 target(<"llvm-cpu", "embedded-elf-x86_64", {}>) {
    hal.executable.export public @main_dispatch_0_reduce_8_f32 ordinal(0) layout(#pipeline_layout) count(%arg0: !hal.device) -> (index, index, index) {
      hal.return %c1, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func @main_dispatch_0_reduce_8_f32() {
        %c0 = arith.constant 0 : index
        %c64 = arith.constant 64 : index
        %0 = hal.interface.constant.load layout(#pipeline_layout) ordinal(0) : i32
        %1 = arith.index_castui %0 : i32 to index
        %2 = hal.interface.binding.subspan layout(#pipeline_layout) binding(0) alignment(64) offset(%c0) flags("ReadOnly|Indirect") : !iree_tensor_ext.dispatch.tensor<readonly:tensor<2x4xf32>>
        %3 = hal.interface.binding.subspan layout(#pipeline_layout) binding(1) alignment(64) offset(%c64) flags(Indirect) : !iree_tensor_ext.dispatch.tensor<writeonly:tensor<f32>>
        %4 = hal.interface.binding.subspan layout(#pipeline_layout) binding(1) alignment(64) offset(%1) flags(Indirect) : !iree_tensor_ext.dispatch.tensor<readwrite:tensor<2xi32>>
        return
      }
    }
  }
}
"""


def test_sources_cut_rank0_and_packed_tensors_by_access_not_position():
    sources = ExecutableSources(binding_interfaces(SOURCE), "given", "test")
    x = np.arange(8, dtype=np.float32)
    slab_before = np.zeros(128, np.uint8)
    slab_before[8:16] = np.array([5, 6], np.int32).view(np.uint8)  # the readwrite tensor, at push constant 8
    slab_after = slab_before.copy()
    slab_after[64:68] = np.array([28.0], np.float32).view(np.uint8)
    slab_after[8:16] = np.array([7, 8], np.int32).view(np.uint8)
    export = "main_dispatch_0_reduce_8_f32"
    tensors = dispatch_tensors(export, (8,), [x.view(np.uint8), slab_before], [x.view(np.uint8), slab_after], sources)
    roles = [(t.role, t.position, t.binding, t.offset, str(t.type), t.access) for t in tensors]
    assert roles == [
        (Role.INPUT, 0, 0, 0, "2x4xf32", "read"),
        (Role.INPUT, 1, 1, 8, "2xi32", "readwrite"),
        (Role.OUTPUT, 0, 1, 64, "f32", "write"),
        (Role.OUTPUT, 1, 1, 8, "2xi32", "readwrite"),
    ]
    assert all(t.provenance == Provenance.SOURCES for t in tensors)
    assert tensors[2].array.shape == () and float(tensors[2].array) == 28.0  # rank 0 stays rank 0
    assert tensors[1].array.tolist() == [5, 6] and tensors[3].array.tolist() == [7, 8]  # before / after
    assert np.array_equal(tensors[0].array, x.reshape(2, 4))
    # Before the dispatch ran: outputs are the current bytes, flagged as not written yet.
    before_run = dispatch_tensors(export, (8,), [x.view(np.uint8), slab_before], None, sources)
    assert [t.written for t in before_run] == [True, True, False, False]
    # A source that does not fit the dispatch (its offset past the bound bytes) is not used: bytes.
    misfit = dispatch_tensors(export, (4096,), [x.view(np.uint8), slab_before], None, sources)
    assert {t.provenance for t in misfit} == {Provenance.UNTYPED} and "does not fit" in misfit[0].note
    # Nor one whose layout is not the dispatch's: another build's source, however well its tensors fit.
    for constants, bindings in (((8,), [x.view(np.uint8), slab_before, slab_before]), ((8, 0), [x, slab_before])):
        other = dispatch_tensors(export, constants, [b.view(np.uint8) for b in bindings], None, sources)
        assert {t.provenance for t in other} == {Provenance.UNTYPED}, constants
        assert "its layout declares 2 bindings and 1 push constants" in other[0].note, other[0].note


ONE_INPUT = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n" \
    "  %r = arith.mulf %a, %a : tensor<4xf32>\n  return %r : tensor<4xf32>\n}\n"
TWO_INPUTS = "func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n" \
    "  %r = arith.mulf %a, %b : tensor<4xf32>\n  return %r : tensor<4xf32>\n}\n"


def test_another_builds_sources_beside_a_module_do_not_type_its_dispatches(tmp_path):
    # Two programs built into one folder, one's sources dumped there: their dispatches share IREE's name
    # (main_dispatch_0_elementwise_4_f32), and the one-input program's source typed the other's second input
    # as "output 0" (the bytes of b, called the result) and left its result out. Its layout says 2 bindings.
    (tmp_path / "one.mlir").write_text(ONE_INPUT)
    (tmp_path / "two.mlir").write_text(TWO_INPUTS)
    compile_for(tmp_path / "one.mlir", tmp_path / "one.vmfb", "llvm-cpu",
                f"--iree-hal-dump-executable-sources-to={tmp_path / 'sources'}")
    two = compile_for(tmp_path / "two.mlir", tmp_path / "two.vmfb", "llvm-cpu")
    found = find_sources(two)
    assert found.origin == "beside" and "main_dispatch_0_elementwise_4_f32" in found.interfaces
    (stop,) = stop_at_every_dispatch(two, "main", ("4xf32=1 2 3 4", "4xf32=2"))
    assert {t.type_source for t in stop.tensors} == {"untyped"}
    assert "its layout declares 2 bindings and 0 push constants; the dispatch binds 3" in stop.tensors[0].type_note
    assert sorted(t.tensor.to_numpy().view(np.float32).tolist() for t in stop.tensors if t.role == "output") == [
        [2.0, 4.0, 6.0, 8.0]]


def test_without_sources_each_binding_is_exactly_its_bytes_with_the_access_seen():
    a = np.arange(12, dtype=np.uint8)
    out_before, out_after = np.zeros(6, np.uint8), np.arange(6, dtype=np.uint8)
    ran = dispatch_tensors("x_dispatch_0_generic_3_f32", (), [out_before, a], [out_after, a],
                           observed_access=["write", "read"])
    assert [(t.role, t.binding, t.length, str(t.type), t.access) for t in ran] == [
        (Role.INPUT, 1, 12, "12xu8", "read"),
        (Role.OUTPUT, 0, 6, "6xu8", "write"),
    ]
    assert all(t.provenance == Provenance.UNTYPED for t in ran)  # never typed from IREE's name
    not_run = dispatch_tensors("x_dispatch_0_generic_3_f32", (), [out_before, a], None)
    assert [(t.role, t.access) for t in not_run] == [(Role.BINDING, "unknown")] * 2


def test_rank0_tensor_stays_rank0_in_a_bundle(tmp_path):
    writer = BundleWriter(tmp_path / "b", module="m.vmfb", function="main", engine="debug", device="local-sync")
    name, text = writer.write_tensor("scalar", np.array(2.5, np.float32), TensorType((), "f32"))
    writer.finish()
    assert text == "f32" and np.load(tmp_path / "b" / name).shape == ()


def test_sources_found_beside_given_or_none(tmp_path):
    with pytest.raises(Exception, match="do not exist"):
        read_sources([tmp_path / "missing"])
    vmfb = tmp_path / "m.vmfb"
    vmfb.write_bytes(b"")
    assert not find_sources(vmfb).found
    folder = tmp_path / "executables" / "sources"  # IREE Lens's compile output layout
    folder.mkdir(parents=True)
    (folder / "module_main_dispatch_0.mlir").write_text(SOURCE)
    found = find_sources(vmfb)
    assert found.origin == "beside" and "main_dispatch_0_reduce_8_f32" in found.interfaces
    assert read_sources([tmp_path]).found  # the compile output folder itself names its sources


def test_another_programs_sources_beside_a_module_are_not_its_own(tmp_path):
    """An edited dispatch of another program left in the module's folder declares none of the module's
    dispatches: it is not taken for the module's sources (everything would stay untyped, and the debugger
    would not rebuild the sources that type it); the module's own sources there are."""
    from engine.samples import sample_path

    module = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    other = tmp_path / "other"
    other.mkdir()
    compile_for(sample_path("softmax"), other / "softmax.vmfb", "llvm-cpu",
                f"--iree-hal-dump-executable-sources-to={other / 'dump'}")  # fmt: skip
    for f in (other / "dump").glob("*.mlir"):
        (tmp_path / f.name).write_text(f.read_text())  # beside the module: its folder (".")
    found = find_sources(module)
    assert not found.found and "declare none of its dispatches" in found.note
    own = tmp_path / "sources"
    compile_for(sample_path("mlp"), tmp_path / "again.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={own}")
    found = find_sources(module)
    assert found.found and found.path == str(own)


# ------------------------------------------------------------------ the held-out check: iree-lens capture


def _capture(vmfb: Path, function: str, x: Path, out: Path, *extra: str) -> Bundle:
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher", "capture", str(vmfb), f"--function={function}",
         f"--input=@{x}", f"--out={out}", *extra],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Bundle(out)


@pytest.mark.parametrize(
    "model,function",
    [("small_cnn", "small_cnn"), ("attention_block", "attention_block"),
     # The PyTorch models compile twice (plain with its sources, traced): minutes on a loaded machine.
     pytest.param("squeezenet1_1", "main", marks=pytest.mark.timeout(1800)),
     pytest.param("efficientvit_m0", "main", marks=pytest.mark.timeout(2400))],
)
def test_capture_with_iree_dumped_sources_equals_iree_traced_tensors(model, function, tmp_path):
    build = model_cpu_build(model, tmp_path / "plain.vmfb")  # its sources dumped by IREE
    traced = compile_for(shared_model(model), tmp_path / "traced.vmfb", "llvm-cpu", TRACE)
    x = MODELS / f"{model}_x.npy"
    bundle = _capture(build.module, function, x, tmp_path / "bundle", f"--sources={build.sources}")
    assert_bundle_equals_traced(bundle, iree_traced_tensors(traced, function, [np.load(x)]))


def test_capture_finds_the_sources_of_iree_lens_own_compile(tmp_path):
    from engine.compiler.job import compile_program
    from engine.compiler.request import CompileRequest

    source = _model_source("small_cnn", tmp_path)
    compilation = compile_program(CompileRequest.from_file(source), out_dir=tmp_path / "lens")
    compilation.raise_if_failed()
    traced = compile_for(source, tmp_path / "traced.vmfb", "llvm-cpu", TRACE)
    x = MODELS / "small_cnn_x.npy"
    expected = iree_traced_tensors(traced, "small_cnn", [np.load(x)])
    beside = _capture(compilation.vmfb_path, "small_cnn", x, tmp_path / "beside")  # no --sources
    assert_bundle_equals_traced(beside, expected)
    named = _capture(compilation.vmfb_path, "small_cnn", x, tmp_path / "named", f"--sources={tmp_path / 'lens'}")
    assert_bundle_equals_traced(named, expected)


def test_the_sources_a_module_was_dumped_with_are_found_where_its_exports_are_located(tmp_path, monkeypatch):
    """``iree-compile --iree-hal-dump-executable-sources-to=DIR`` (DIR not a name looked for beside the module)
    rewrites each export's location to its dumped file, so such a module is never rebuilt byte for byte: the
    sources are the ones it names, found relative to the folder it was compiled in or beside the module, from
    anywhere; the program's own file, also named, is not taken for them."""
    import os

    from engine.dispatch.rebuild_sources import found_or_rebuilt
    from engine.samples import sample_path

    work = tmp_path / "work"
    work.mkdir()
    proc = iree_compile([str(sample_path("mlp")), *target_flags("llvm-cpu"), "-o", "mlp.vmfb",
                         "--iree-hal-dump-executable-sources-to=kernels"], cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    monkeypatch.chdir(tmp_path)  # elsewhere: the dump is found beside the module by the relative name
    found = find_sources(work / "mlp.vmfb")
    assert found.found and found.origin == "named by the module", found
    assert found.path == str(work / "kernels") and len(found.interfaces) == 2
    assert found_or_rebuilt(work / "mlp.vmfb").origin == "named by the module"  # no rebuild that cannot match
    # The module's own program named by an ordinary build is no source.
    plain = compile_for(sample_path("mlp"), tmp_path / "plain.vmfb", "llvm-cpu")
    assert not find_sources(plain).found
    os.remove(work / "kernels" / "module_main_dispatch_0.mlir")  # one of two left: still the module's
    assert set(find_sources(work / "mlp.vmfb").interfaces) == {"main_dispatch_1_matmul_2x4x32_f32"}


SUB_BYTE_AND_COMPLEX = """
func.func @nibbles() -> tensor<4xi8> {
  %a = util.unfoldable_constant dense<[1, 2, 3, 4]> : tensor<4xi4>
  %b = util.unfoldable_constant dense<[1, 1, 1, -1]> : tensor<4xi4>
  %e = tensor.empty() : tensor<4xi8>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%a, %b : tensor<4xi4>, tensor<4xi4>) outs(%e : tensor<4xi8>) {
  ^bb0(%x: i4, %y: i4, %o: i8):
    %s = arith.addi %x, %y : i4
    %w = arith.extsi %s : i4 to i8
    linalg.yield %w : i8
  } -> tensor<4xi8>
  return %r : tensor<4xi8>
}
func.func @spectrum(%re: tensor<6xf32>, %im: tensor<6xf32>) -> tensor<6xf32> {
  %e = tensor.empty() : tensor<6xcomplex<f32>>
  %c = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%re, %im : tensor<6xf32>, tensor<6xf32>)
                       outs(%e : tensor<6xcomplex<f32>>) {
  ^bb0(%x: f32, %y: f32, %o: complex<f32>):
    %z = complex.create %x, %y : complex<f32>
    linalg.yield %z : complex<f32>
  } -> tensor<6xcomplex<f32>>
  %b = util.optimization_barrier %c : tensor<6xcomplex<f32>>
  %f = tensor.empty() : tensor<6xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
                       ins(%b : tensor<6xcomplex<f32>>) outs(%f : tensor<6xf32>) {
  ^bb0(%z: complex<f32>, %o: f32):
    %a = complex.abs %z : complex<f32>
    linalg.yield %a : f32
  } -> tensor<6xf32>
  return %m : tensor<6xf32>
}
"""


def test_packed_and_complex_tensors_are_shown_as_views_of_their_bytes_and_the_others_typed(tmp_path):
    # i4 (packed two to a byte) and complex<f32> tensors: shown as their bytes and as (real, imaginary) pairs,
    # said so, and every other tensor of their dispatches typed, in IREE's operand order: the capture equals
    # IREE's traced tensors byte for byte. Was: the whole dispatch was bytes (the dequantization dispatch of an
    # int4-weight model showed its f32 result as bytes); before that the subspans were dropped silently.
    from support import lens_in_process

    source = tmp_path / "odd.mlir"
    source.write_text(SUB_BYTE_AND_COMPLEX)
    dump = tmp_path / "sources"
    plain = compile_for(source, tmp_path / "odd.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={dump}")
    traced = compile_for(source, tmp_path / "traced.vmfb", "llvm-cpu", TRACE)
    sources = read_sources([dump])
    declared = {e: [t for bi in i.values() for t in bi.declared if t] for e, i in sources.interfaces.items()}
    assert sorted(declared.values()) == [["4xi4", "4xi4"], ["6xcomplex<f32>"], ["6xcomplex<f32>"]]
    assert not any(bi.unshown for i in sources.interfaces.values() for bi in i.values())
    re, im = np.array([1, -2, 3, 4, 5, 6], np.float32), np.array([4, 4, 0.5, 4, 4, 4], np.float32)
    np.save(tmp_path / "re.npy", re)
    np.save(tmp_path / "im.npy", im)
    cases = {"nibbles": [], "spectrum": [re, im]}
    for function, args in cases.items():
        inputs = [f"--input=@{tmp_path / n}" for n in ("re.npy", "im.npy")][: len(args)]
        out = tmp_path / function
        proc = lens_in_process("capture", str(plain), f"--function={function}", *inputs, f"--out={out}",
                               f"--sources={dump}")
        assert proc.returncode == 0, proc.stderr
        bundle = Bundle(out)
        expected = traced_by_dispatch(iree_traced_tensors(traced, function, args))
        assert len(bundle.dispatches) == len(expected) == (1 if function == "nibbles" else 2)
        for d in bundle.dispatches:
            assert d.tensors_from == "interface", d
            ins, outs = expected[(d.name, 0)]
            for which, want in (("inputs", ins), ("outputs", outs)):
                got = bundle.dispatch_tensors(d, which)
                assert len(got) == len(want), (d.name, which)
                for g, w in zip(got, want):  # the same bytes in the same operand order
                    assert np.array_equal(np.asarray(g).reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8))
                    if w.dtype == np.complex64:
                        assert g.shape == (*w.shape, 2) and g.dtype == np.float32
                        assert np.array_equal(g[..., 0], w.real) and np.array_equal(g[..., 1], w.imag)
                    elif w.dtype.itemsize >= 1 and w.size * w.dtype.itemsize == g.size and g.dtype == w.dtype:
                        assert g.shape == w.shape
    # The nibbles dispatch: its i4 inputs are their 2 bytes each (1 2 3 4: 0x21 0x43), its i8 sum typed.
    bundle = Bundle(tmp_path / "nibbles")
    (d,) = bundle.dispatches
    a, b = bundle.dispatch_tensors(d, "inputs")
    assert a.dtype == np.uint8 and list(a) == [0x21, 0x43] and list(b) == [0x11, 0xF1]
    (total,) = bundle.dispatch_tensors(d, "outputs")
    assert total.dtype == np.int8 and list(total) == [2, 3, 4, 3]
    # A session's paused dispatch says which tensors are views, and of what (the window unpacks i4 by it).
    (stop,) = stop_at_every_dispatch(plain, "nibbles", ())
    assert [(t.role, t.declared, t.tensor.to_numpy().tolist()) for t in stop.tensors] == [
        ("input", "4xi4", [0x21, 0x43]), ("input", "4xi4", [0x11, 0xF1]), ("output", "", [2, 3, 4, 3])]
    # save-tensors writes what the source declares: i4 values (one a byte), complex<f32> as complex64.
    script = tmp_path / "save.cmd"
    script.write_text(f"break dispatch 0 after\ncontinue\nsave-tensors {tmp_path / 'saved'}\ncontinue\n")
    for function, args in (("nibbles", ()), ("spectrum", ("--input=6xf32=1 -2 3 4 5 6", "--input=6xf32=4 4 0.5 4 4 4"))):
        proc = lens_in_process("debug", str(plain), f"--function={function}", *args, f"--commands={script}",
                               f"--sources={dump}")
        assert proc.returncode == 0, proc.stderr
        saved = {p.name: np.load(p) for p in (tmp_path / "saved").glob("*.npy")}
        if function == "nibbles":
            assert "dispatch0_after_input0.npy: 4xi4, unpacked" in proc.stdout, proc.stdout
            assert saved["dispatch0_after_input1.npy"].tolist() == [1, 1, 1, -1]
        else:
            z = saved["dispatch0_after_output0.npy"]
            assert z.dtype == np.complex64 and z.tolist() == [complex(a, b) for a, b in zip(re, im)]
    # What a paused dispatch says of them.
    interface = sources.interfaces[d.name]
    lengths = [64] * (max(interface) + 1)
    tensors = dispatch_tensors(d.name, (), [np.zeros(n, np.uint8) for n in lengths],
                               [np.ones(n, np.uint8) for n in lengths], sources)
    assert {t.provenance for t in tensors} == {Provenance.SOURCES}
    notes = [t.note for t in tensors if "does not show yet" in t.note]
    assert notes == [f"binding {k} holds 4xi4, an element type IREE Lens does not show yet: shown as its 2 bytes "
                     "(packed, low bits first)" for k in (0, 1)]


def test_a_complex_output_iree_traced_is_bytes_whose_health_is_not_claimed(tmp_path):
    # IREE traces complex<f32> as cf64, which IREE Lens keeps as its bytes; the capture said "ok" of them
    # while they held a NaN (the input's). Their health is not known now ("-"); the next dispatch's f32 is.
    from engine.dispatch.capture import capture_reference

    source = tmp_path / "odd.mlir"
    source.write_text(SUB_BYTE_AND_COMPLEX)
    traced = compile_for(source, tmp_path / "traced.vmfb", "llvm-cpu", TRACE)
    re = np.array([1, np.nan, 3, 4, 5, 6], np.float32)
    np.save(tmp_path / "re.npy", re)
    np.save(tmp_path / "im.npy", np.full(6, 4, np.float32))
    capture_reference(traced, "spectrum", [f"@{tmp_path / 're.npy'}", f"@{tmp_path / 'im.npy'}"], tmp_path / "ref")
    first, second = Bundle(tmp_path / "ref").dispatches
    assert first.output_types == ["48xu8"] and first.health == "-"
    assert second.output_types == ["6xf32"] and second.health == "1 NaN"


def test_a_nan_in_an_imaginary_part_stops_both_engines_where_it_is_written(tmp_path):
    # Was: the reference engine judged only float outputs (its trace gives complex64), and a complex output
    # was widened to its real part: it stopped a dispatch late, where |z| carried the NaN on.
    from support import lens_in_process

    source = tmp_path / "odd.mlir"
    source.write_text(SUB_BYTE_AND_COMPLEX)
    traced = compile_for(source, tmp_path / "traced.vmfb", "llvm-cpu", TRACE)
    commands = tmp_path / "nan.cmd"
    commands.write_text("break nan\ncontinue\n")
    for engine in ("reference", "debug"):
        proc = lens_in_process("debug", str(traced), "--function=spectrum", "--input=6xf32=1",
                               "--input=6xf32=4 4 nan 4 4 4", f"--commands={commands}", f"--engine={engine}")
        stops = [line for line in proc.stdout.splitlines() if line.startswith("Stopped")]
        assert stops and "after dispatch #0 spectrum_dispatch_0" in stops[0], (engine, proc.stdout, proc.stderr)


def test_the_reference_engine_says_which_traced_tensors_are_packed(tmp_path):
    # IREE's trace gives an i4 tensor as its bytes; the session says it holds 4xi4, so the window unpacks it
    # as it does the debug engine's (was: 2 bytes, untold).
    import queue

    from engine.session.inprocess import InProcessSession
    from engine.session.protocol import (
        Breakpoint,
        Call,
        Log,
        Open,
        ReadTensors,
        SetBreakpoints,
        Stopped,
        Tensors,
    )
    from engine.session.reference_session import ReferenceSession

    source = tmp_path / "odd.mlir"
    source.write_text(SUB_BYTE_AND_COMPLEX)
    traced = compile_for(source, tmp_path / "traced.vmfb", "llvm-cpu", TRACE)
    events: queue.Queue = queue.Queue()
    session = InProcessSession(ReferenceSession, events.put)

    def next_event():
        while isinstance(event := events.get(timeout=60), Log):
            pass
        return event

    try:
        session.send(Open(str(traced)))
        next_event()
        session.send(SetBreakpoints((Breakpoint("dispatch", dispatch="*", when="before"),)))
        session.send(Call("nibbles"))
        assert isinstance(next_event(), Stopped)
        session.send(ReadTensors())
        answer = next_event()
        assert isinstance(answer, Tensors)
        assert [(t.declared, t.tensor.to_numpy().tolist()) for t in answer.tensors] == [
            ("4xi4", [0x21, 0x43]), ("4xi4", [0x11, 0xF1])]
    finally:
        session.close()
