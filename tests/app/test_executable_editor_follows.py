"""The Executable Editor document follows the open module: another module opened after a compiled program
shows its own executables (or says it has none), never the program's."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

from app.context import LensContext, LoadedModule
from app.views.executable_editor import ExecutableEditorPanel

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
