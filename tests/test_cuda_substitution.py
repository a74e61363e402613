"""Editing CUDA builds without a GPU: ``iree-lens sources --target=cuda`` of a real model, its linked PTX and
its dispatch sources put back with ``--substitute`` (``.ptx`` whole, ``.mlir`` rebuilt for CUDA and merged as
a module of its own), the checks that refuse a PTX IREE could not launch, and the CDA1 writer they rely on,
read back by the reader that ``iree-dump-module``'s dispatch sites check (test_cuda_executables). Running
the edits needs a GPU: that test skips here with the driver's reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import SHARED_MODELS, compile_for, cuda_driver_present, lens_in_process, shared_model

from engine.runtime.hal.cuda.context import CudaKernel
from engine.runtime.hal.cuda.driver import NO_DRIVER
from engine.runtime.hal.cuda_hal_device import CudaExecutable
from engine.runtime.hal.executable_swap import ExportOverlay
from engine.runtime.vmfb.cda1 import read_cda1, write_cda1
from engine.runtime.vmfb.executable_flatbuffer import HEADER_SIZE, open_headed_flatbuffer
from engine.runtime.vmfb.flatbuffer import FlatBuffer
from engine.runtime.vmfb.flatbuffer_writer import (
    Scalar,
    ScalarVector,
    String,
    Struct,
    TableValue,
    TableVector,
    build,
)
from engine.runtime.vmfb.module import open_vmfb
from engine.substitute.apply import build_all, patched_module
from engine.substitute.build import SubstitutionSpec
from engine.substitute.documents import documents_for_module_file, documents_from_dumps, documents_from_module
from engine.substitute.errors import InterfaceMismatchError, SubstitutionError
from engine.substitute.ptx import ptx_entries

NEEDS_GPU = pytest.mark.skipif(not cuda_driver_present(), reason=NO_DRIVER)


@pytest.fixture(scope="module")
def cnn_sources(tmp_path_factory) -> Path:
    """``iree-lens sources --target=cuda`` of small_cnn (an ONNX import: ``$async`` dispatches, one linked
    CUDA executable)."""
    out = tmp_path_factory.mktemp("cuda-sources")
    proc = lens_in_process("sources", shared_model("small_cnn"), f"--out={out}", "--target=cuda")
    assert proc.returncode == 0, proc.stderr
    return out


def _cuda(vmfb_bytes: bytes, tmp: Path):
    path = tmp / "patched.vmfb"
    path.write_bytes(vmfb_bytes)
    [executable] = open_vmfb(path).executables
    return read_cda1(bytes(executable.data))


def test_the_writer_lays_out_what_the_reader_reads():
    table = TableValue([
        Scalar("u32", 7), String("kernel"), Struct(bytes(range(12))), None,
        ScalarVector("u64", [1, 2**63]), TableVector([TableValue([String("a")]), TableValue([Scalar("i32", -3)])]),
        ScalarVector("u8", b"\x00\xff"),
    ])  # fmt: skip
    data = build(table, b"TEST")
    fb = FlatBuffer(memoryview(data), 0, len(data))
    root = fb.root("root", expect_identifier=b"TEST")
    assert root.scalar(0, "u32") == 7 and root.string(1) == "kernel"
    assert bytes(data[root.field_pos(2) : root.field_pos(2) + 12]) == bytes(range(12))
    assert not root.has(3) and root.scalar(3, "u32", 99) == 99
    assert list(root.scalars(4, "u64")) == [1, 2**63]
    start, _ = root.vector_span(4, 8)
    assert start % 8 == 0  # 8-byte elements 8-aligned, as IREE's verifier requires
    children = list(root.tables(5))
    assert children[0].string(0) == "a" and children[1].scalar(0, "i32") == -3
    assert bytes(root.byte_vector(6)) == b"\x00\xff"


def test_a_written_cda1_reads_back_as_iree_wrote_it(cnn_sources, tmp_path):
    program = tmp_path / "p.mlir"
    program.write_text("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {\n"
                       "  %0 = math.exp %a : tensor<?xf32>\n  return %0 : tensor<?xf32>\n}\n")  # fmt: skip
    small = compile_for(program, tmp_path / "p.vmfb", "cuda")
    for vmfb in (small, cnn_sources / "small_cnn.vmfb"):
        for executable in open_vmfb(vmfb).executables:
            original = read_cda1(bytes(executable.data))
            written = write_cda1(original)
            assert read_cda1(written) == original
            fb, root = open_headed_flatbuffer(written, b"CDA1", "CDA1")
            for export in root.tables(0):
                start, _ = export.vector_span(5, 8)
                assert (start - HEADER_SIZE) % 8 == 0


def test_sources_of_a_cuda_build_are_its_mlir_and_its_linked_ptx(cnn_sources):
    docs = documents_for_module_file(cnn_sources / "small_cnn.vmfb")
    kinds = {d.name: d.kind for d in docs}
    assert kinds["small_cnn_linked"] == "ptx"
    assert sum(k == "mlir" for k in kinds.values()) == 6
    assert "llvm" not in kinds.values()  # IREE's NVPTX LLVM IR is not offered: its PTX is the edit
    [alone] = documents_from_module(open_vmfb(cnn_sources / "small_cnn.vmfb"))
    assert (alone.name, alone.kind, alone.suffix) == ("small_cnn_linked", "ptx", ".ptx")
    assert alone.original == (cnn_sources / "small_cnn_linked.ptx").read_text()
    assert len(ptx_entries(alone.original)) == 6


def test_compile_dumps_of_a_cuda_build_offer_ptx_not_nvptx_ir(tmp_path):
    dumps = tmp_path / "dumps"
    compile_for(shared_model("small_cnn"), tmp_path / "m.vmfb", "cuda",
                f"--iree-hal-dump-executable-sources-to={dumps / 'sources'}",
                f"--iree-hal-dump-executable-intermediates-to={dumps / 'intermediates'}",
                f"--iree-hal-dump-executable-binaries-to={dumps / 'binaries'}")  # fmt: skip
    assert list((dumps / "intermediates").glob("*nvptx*.ll"))  # IREE wrote its NVPTX IR...
    docs = documents_from_dumps(dumps)
    assert [d.name for d in docs if d.kind == "ptx"] == ["small_cnn_linked"]
    assert not [d for d in docs if d.kind == "llvm"]  # ...which is not offered


def test_an_edited_ptx_replaces_the_linked_module_and_nothing_else(cnn_sources, tmp_path):
    module = open_vmfb(cnn_sources / "small_cnn.vmfb")
    original = read_cda1(bytes(module.executables[0].data))
    text = (cnn_sources / "small_cnn_linked.ptx").read_text()
    assert "add.rn.f32" in text
    edited = tmp_path / "edited.ptx"
    edited.write_text(text.replace("add.rn.f32", "sub.rn.f32"))
    [replacement] = build_all(module, [SubstitutionSpec.parse(f"small_cnn_linked={edited}")])
    assert replacement.whole
    patched = _cuda(patched_module(module, [replacement]), tmp_path)
    assert patched.modules[0].ptx == edited.read_text()
    assert patched.exports == original.exports and len(patched.modules) == 1
    # One kernel's name is enough: the module that holds it is replaced whole.
    [by_export] = build_all(module, [SubstitutionSpec.parse(f"small_cnn$async_dispatch_2={edited}")])
    assert by_export.whole and by_export.data == replacement.data
    assert _cuda(patched_module(module, [by_export]), tmp_path) == patched


def test_an_mlir_source_rebuilt_for_cuda_becomes_a_module_of_its_own(cnn_sources, tmp_path):
    module = open_vmfb(cnn_sources / "small_cnn.vmfb")
    original = read_cda1(bytes(module.executables[0].data))
    source = cnn_sources / "small_cnn$async_dispatch_4.mlir"
    [replacement] = build_all(module, [SubstitutionSpec.parse(f"small_cnn$async_dispatch_4={source}")])
    assert replacement.interface.kind == "cda1" and not replacement.whole
    [export] = replacement.exports
    patched = _cuda(patched_module(module, [replacement]), tmp_path)
    assert len(patched.modules) == 2 and patched.modules[0] == original.modules[0]
    i = patched.export_index(export)
    assert patched.exports[i].module_ordinal == 1
    assert export in ptx_entries(patched.modules[1].ptx) and len(ptx_entries(patched.modules[1].ptx)) == 1
    others = [e for k, e in enumerate(patched.exports) if k != i]
    assert others == [e for k, e in enumerate(original.exports) if k != i]
    # The debug engine overlays the export instead: its launches of that ordinal take the replacement's.
    base = CudaExecutable(original, tuple(CudaKernel(100 + k, e.kernel_name) for k, e in enumerate(original.exports)))
    built = read_cda1(replacement.data)
    other = CudaExecutable(built, (CudaKernel(999, export),))
    overlay = ExportOverlay(base, {i: (other, 0)})
    assert overlay.launch_target(i) == (built.exports[0], CudaKernel(999, export))
    assert overlay.launch_target(0) == (original.exports[0], CudaKernel(100, original.exports[0].kernel_name))


@pytest.mark.parametrize(
    ("edit", "refusal"),
    [
        (lambda t: t.replace("small_cnn_async_dispatch_3_conv", "renamed", 2), "kernel 'small_cnn_async_dispatch_3_conv"),
        (lambda t: re.sub(r"(\.entry small_cnn_async_dispatch_5\w+\(\s*)\.param \.u64 [^,]+,", r"\1", t),
         "parameters, IREE passes"),
        (lambda t: re.sub(r"(\.entry small_cnn_async_dispatch_1\w+\(\s*\.param )\.u64 \.ptr \.global \.align 16",
                          r"\1.u32", t), "IREE passes a 64-bit binding pointer"),
        (lambda t: t.replace(".version", "// .version"), "not a PTX module"),
    ],
    ids=["kernel missing", "a parameter less", "a 32-bit pointer", "not PTX"],
)
def test_a_ptx_that_iree_could_not_launch_is_refused_before_it_runs(cnn_sources, tmp_path, edit, refusal):
    module = open_vmfb(cnn_sources / "small_cnn.vmfb")
    text = (cnn_sources / "small_cnn_linked.ptx").read_text()
    bad = tmp_path / "bad.ptx"
    bad.write_text(edit(text))
    assert bad.read_text() != text
    with pytest.raises((InterfaceMismatchError, SubstitutionError), match=re.escape(refusal)):
        build_all(module, [SubstitutionSpec.parse(f"small_cnn_linked={bad}")])


def test_ptx_does_not_replace_a_cpu_executable(cnn_sources, tmp_path):
    cpu = compile_for(shared_model("small_cnn"), tmp_path / "cpu.vmfb", "llvm-cpu")
    with pytest.raises(SubstitutionError, match="PTX replaces CUDA executables"):
        build_all(open_vmfb(cpu), [SubstitutionSpec.parse(f"small_cnn$async_dispatch_1={cnn_sources / 'small_cnn_linked.ptx'}")])


@NEEDS_GPU
def test_an_edited_ptx_runs_on_the_gpu_in_both_engines(cnn_sources, tmp_path):
    """Unchanged PTX gives the module's own result; every add made a subtract gives another, the same in
    the debug engine and IREE's runtime."""
    module = cnn_sources / "small_cnn.vmfb"
    x = SHARED_MODELS / "small_cnn_x.npy"
    text = (cnn_sources / "small_cnn_linked.ptx").read_text()
    same, edited = tmp_path / "same.ptx", tmp_path / "edited.ptx"
    same.write_text(text)
    edited.write_text(text.replace("add.rn.f32", "sub.rn.f32"))
    results = {}
    for engine in ("debug", "reference"):
        for name, ptx in (("plain", None), ("same", same), ("edited", edited)):
            extra = [f"--substitute=small_cnn_linked={ptx}"] if ptx else []
            run = lens_in_process("run", module, "--function=small_cnn", "--device=cuda", f"--engine={engine}",
                                  f"--input=@{x}", *extra)  # fmt: skip
            assert run.returncode == 0, run.stderr
            results[engine, name] = run.stdout.split("result[0]")[1]
    assert results["debug", "plain"] == results["debug", "same"] == results["reference", "plain"]
    assert results["debug", "edited"] == results["reference", "edited"] != results["debug", "plain"]
