"""The Phases document's header names its numbers.

Walk (squeezenet1_1.mlir, Phases, 1366x768): the header read "12/12 phases · 32 executables · 11.51 s" right
above the timeline's "total 11.363 s wall": two times, neither said of what. The header's is how long the
compile took (iree-compile's process, start to end)."""

from __future__ import annotations

from app.views.compilation_document import CompilationDocument
from engine.compiler import CompileRequest, compile_program
from engine.samples import sample_path


def test_the_header_says_what_its_time_is(qtbot, tmp_path):
    compilation = compile_program(CompileRequest.from_file(sample_path("mlp"), target="llvm-cpu"), out_dir=tmp_path / "c")
    doc = CompilationDocument(compilation)
    qtbot.addWidget(doc)
    assert f"compiled in {compilation.elapsed_s:.2f} s" in doc.summary.text()
