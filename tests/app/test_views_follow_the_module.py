"""The views of a module's executables and dispatches follow the open module: another module opened after a
compiled program shows its own (or says it has none), never the program's that the compile panel keeps."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

from app.context import LensContext, LoadedModule
from app.messages import MessageLog
from app.panels import PanelServices
from app.views.dispatch_panel import DispatchPanel
from app.views.executable_editor import ExecutableEditorPanel
from app.workers import EngineWorker

SOURCE = """hal.executable public @program$async_dispatch_0 {
}
"""


def test_another_module_after_a_compiled_program_never_shows_the_programs_executables(qtbot, tmp_path, compiled):
    """Walk: attention_block.mlir opened (compiled: its 11 executables in the editor), then small_cnn.vmfb: the
    editor still listed attention_block's dispatches under small_cnn (the compile panel keeps its compilation)."""
    out = tmp_path / "compiled"
    (out / "executables" / "sources").mkdir(parents=True)
    (out / "executables" / "sources" / "module_program$async_dispatch_0.mlir").write_text(SOURCE)
    compilation = SimpleNamespace(out_dir=out, vmfb_path=out / "program.vmfb")
    plain = tmp_path / "plain" / "other.vmfb"  # a module from elsewhere: no sources beside it
    plain.parent.mkdir()
    shutil.copy(compiled.path("multi_function", "llvm-cpu"), plain)

    services = SimpleNamespace(context=LensContext())
    panel = ExecutableEditorPanel(services)
    qtbot.addWidget(panel)
    panel.show()
    context = services.context
    context.set_position(module=LoadedModule(compilation.vmfb_path, None, compilation=compilation),
                         compilation=compilation)  # fmt: skip
    assert panel.editor is not None and [d.name for d in panel.editor.documents] == ["program$async_dispatch_0"]
    context.set_position(module=LoadedModule(plain, None))  # the compilation stays the compile panel's
    assert context.compilation is compilation
    assert panel.editor is None
    assert panel.placeholder.isVisibleTo(panel) and panel.placeholder.text().startswith("other.vmfb:")
    # Back to the program (Open Recent): its executables again.
    context.set_position(module=LoadedModule(compilation.vmfb_path, None, compilation=compilation))
    assert panel.editor is not None and not panel.placeholder.isVisibleTo(panel)


def test_the_dispatches_panel_lists_the_open_modules_dispatches_not_the_last_compilations(qtbot, tmp_path, compiled):
    """Walk: attention_block.mlir, then small_cnn.vmfb: the Dispatches panel said "10 dispatches from the
    compilation, 6 dispatch calls in the loaded module" and listed attention_block's dispatches."""
    from engine.compiler import CompileRequest, compile_program
    from engine.runtime.vmfb.module import open_vmfb
    from engine.samples import sample_path

    comp = compile_program(CompileRequest(sample_path("transpose_concat"), target="llvm-cpu"), out_dir=tmp_path / "c")
    comp.raise_if_failed()
    other = compiled.path("multi_function", "llvm-cpu")
    context = LensContext()
    worker = EngineWorker()
    panel = DispatchPanel(PanelServices(context, worker, MessageLog(), lambda _path: None))
    qtbot.addWidget(panel)
    try:
        context.set_position(module=LoadedModule(comp.vmfb_path, open_vmfb(comp.vmfb_path)), compilation=comp)
        program = panel.names()
        assert program and all(name.startswith("main_dispatch_") for name in program)
        assert "from the compilation" in panel.summary.text()
        context.set_position(module=LoadedModule(other, open_vmfb(other)))  # the compilation stays
        assert context.compilation is comp
        assert not set(panel.names()) & set(program)
        assert "from the module" in panel.summary.text(), panel.summary.text()
        assert panel.dispatch() is None
    finally:
        worker.shutdown()
