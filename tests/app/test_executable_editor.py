"""The executable editor (pytest-qt, offscreen) on its own: drafts survive a restart, errors at their lines,
find, a module's own sources. Applying to a paused run, revert and benchmark go through the window's session
(test_executable_editor_session.py). Real compiles, no mocks."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget
from support import compile_with_dumps

from app.views.executable_editor import ExecutableEditor
from engine.runtime.vmfb.module import open_vmfb
from engine.substitute.documents import DraftStore, documents_from_dumps, documents_from_module


def isolated_state(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state" / "last-session"))


@pytest.fixture(scope="module")
def cpu_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("editor")
    vmfb = compile_with_dumps("elementwise", "cpu", out / "cpu")
    return vmfb, out / "cpu"


def _editor(qtbot, vmfb, dumps, drafts) -> ExecutableEditor:
    docs = documents_from_dumps(dumps)
    editor = ExecutableEditor(docs, scope=str(vmfb), module_path=vmfb, drafts=drafts)
    qtbot.addWidget(editor)
    editor.resize(1100, 600)
    editor.show()
    return editor


def test_documents_and_drafts_survive_a_restart(qtbot, cpu_build, tmp_path):
    vmfb, dumps = cpu_build
    drafts = DraftStore(tmp_path / "drafts")
    editor = _editor(qtbot, vmfb, dumps, drafts)
    kinds = {(d.name, d.kind) for d in editor.documents}
    assert ("main_dispatch_0", "mlir") in kinds and ("main_dispatch_0", "llvm") in kinds
    editor.select("main_dispatch_0", "mlir")
    assert "hal.executable" in editor.text.toPlainText()
    editor.text.moveCursor(editor.text.textCursor().MoveOperation.End)
    qtbot.keyClicks(editor.text, "// edited by hand")
    qtbot.waitUntil(lambda: (drafts.load(str(vmfb), editor.document) or "").endswith("// edited by hand"))
    edited = editor.text.toPlainText()
    editor.close()

    again = _editor(qtbot, vmfb, dumps, DraftStore(tmp_path / "drafts"))  # a new window after a restart
    again.select("main_dispatch_0", "mlir")
    assert again.text.toPlainText() == edited
    assert "Restored" in again.status.text()
    again.revert()
    assert again.text.toPlainText() == again.document.original
    assert DraftStore(tmp_path / "drafts").load(str(vmfb), again.document) is None


def test_find(qtbot, cpu_build, tmp_path):
    vmfb, dumps = cpu_build
    editor = _editor(qtbot, vmfb, dumps, DraftStore(tmp_path / "d"))
    editor.select("main_dispatch_0", "mlir")
    assert editor.find("arith.addf")
    assert editor.text.textCursor().selectedText() == "arith.addf"
    assert not editor.find("no such text anywhere")


def test_compile_error_is_marked_at_its_line(qtbot, cpu_build, tmp_path):
    vmfb, dumps = cpu_build
    editor = _editor(qtbot, vmfb, dumps, DraftStore(tmp_path / "d"))
    editor.select("main_dispatch_0", "mlir")
    lines = editor.text.toPlainText().splitlines()
    bad = next(i for i, t in enumerate(lines) if "arith.addf" in t)
    lines[bad] = lines[bad].replace("arith.addf", "arith.addz")
    editor.text.setPlainText("\n".join(lines))
    editor.apply()
    qtbot.waitUntil(lambda: not editor.busy(), timeout=60000)
    assert editor.error_lines() == [bad + 1]
    assert "arith.addz" in editor.errors.item(0).text()
    assert editor.status.text().startswith("Not applied")
    editor.errors.setCurrentRow(0)
    editor._error_clicked(editor.errors.item(0))
    assert editor.text.textCursor().blockNumber() == bad


def test_module_alone_offers_vulkan_spirv(qtbot, tmp_path):
    from engine.runtime.hal.vulkan.loader import vulkan_available

    vmfb = compile_with_dumps("elementwise", "vulkan", tmp_path / "vk")
    docs = documents_from_module(open_vmfb(vmfb))
    assert [d.kind for d in docs] == ["spirv"] and "OpFAdd" in docs[0].original
    editor = ExecutableEditor(docs, scope=str(vmfb), module_path=vmfb, drafts=DraftStore(tmp_path / "d"))
    qtbot.addWidget(editor)
    editor.text.setPlainText(editor.text.toPlainText().replace("OpFAdd %float", "OpFMul %float"))
    editor.apply()
    qtbot.waitUntil(lambda: not editor.busy(), timeout=60000)
    assert editor.status.text().startswith("Built"), editor.status.text()
    if vulkan_available() is None:
        editor.text.setPlainText(editor.text.toPlainText().replace("OpFMul %float", "OpFMulx %float"))
        editor.apply()
        qtbot.waitUntil(lambda: not editor.busy(), timeout=60000)
        line = next(i for i, t in enumerate(editor.text.toPlainText().splitlines(), 1) if "OpFMulx" in t)
        assert editor.error_lines() == [line]


def test_editor_for_a_module_with_dumps_beside_it(qtbot, cpu_build, tmp_path):
    from app.views.executable_editor import editor_for_module

    vmfb, dumps = cpu_build
    editor = editor_for_module(vmfb, drafts=DraftStore(tmp_path / "d"))
    qtbot.addWidget(editor)
    assert {d.kind for d in editor.documents} == {"mlir", "llvm"}


def test_panel_follows_the_current_module(qtbot, cpu_build):
    from app.context import LensContext, LoadedModule
    from app.views.executable_editor import ExecutableEditorPanel

    vmfb, dumps = cpu_build

    class Services:
        context = LensContext()

    panel = ExecutableEditorPanel(Services())
    qtbot.addWidget(panel)
    assert panel.editor is None
    Services.context.set_position(module=LoadedModule(vmfb, open_vmfb(vmfb)))
    assert panel.editor is None  # hidden: nothing listed yet
    panel.show()
    assert panel.editor is not None and {d.kind for d in panel.editor.documents} == {"mlir", "llvm"}


def test_outputs_in_the_tensor_inspector(qtbot):
    from app.views.executable_editor import inspector_output_view

    before = np.arange(8, dtype=np.float32)
    after = before * 2
    view = inspector_output_view(before.view(np.uint8), after.view(np.uint8), "binding 2")
    qtbot.addWidget(view)
    assert view.tensors[0].reference is not None
    np.testing.assert_array_equal(view.tensors[0].array, after)
    np.testing.assert_array_equal(view.tensors[1].array, before)


def test_labels_stay_readable_beside_the_outputs(qtbot, tmp_path):
    """At 1920x1080 after Apply (outputs shown beside the text): no button label is cut, the executables'
    shared prefix is elided in the middle, the before/after entries differ where the list shows them, and
    element types read as the inspector writes them (f32, not float32)."""
    from app.views.executable_editor import inspector_output_view, list_labels
    from engine.substitute.documents import EditableText

    names = [f"main$async_dispatch_{k}_elementwise_4x8_f32" for k in range(4)]
    docs = [EditableText(n, "mlir", f"// {n}\n", f"{n}.mlir") for n in names]
    editor = ExecutableEditor(docs, scope="labels", module_path=tmp_path / "m.vmfb", drafts=DraftStore(tmp_path / "d"))
    editor.output_view_factory = inspector_output_view
    qtbot.addWidget(editor)
    editor.resize(1100, 800)  # the editor's share of a 1920x1080 window with its docks
    editor.show()
    before = np.arange(32, dtype=np.float32).reshape(4, 8)
    editor.show_outputs(before, before * 2, "Dispatch #1 main$async_dispatch_1_elementwise_4x8_f32 binding 2")
    qtbot.waitExposed(editor)
    for button in (editor.apply_button, editor.revert_button, editor.rerun_button, editor.export_button,
                   editor.benchmark_button):  # fmt: skip
        assert button.width() >= button.sizeHint().width(), button.text()
    assert editor.list.textElideMode() == Qt.TextElideMode.ElideRight
    assert editor.list.item(3).toolTip() == docs[3].title
    assert editor.list.item(3).text().startswith("…dispatch_3_")  # the shared main$async_ is dropped
    # A linked library among them leaves no common prefix; each dispatch still shows from its number.
    assert list_labels(["main$async_dispatch_12_conv (MLIR source)", "module_linked (LLVM IR)"]) == [
        "…dispatch_12_conv (MLIR source)", "module_linked (LLVM IR)"]
    # A narrow list elides each item at its end: no item is wider than the list (it was, and its end was
    # cut too: "…cnn$async_dispatch_1 (MLI").
    editor.list.resize(120, editor.list.height())
    qtbot.wait(20)
    assert all(editor.list.visualItemRect(editor.list.item(k)).width() <= editor.list.viewport().width()
               for k in range(editor.list.count()))  # fmt: skip
    inspector = editor.outputs.findChild(QWidget, "outputsInspector")
    # The outputs come to the front on a tab of their own, as wide as the text (beside it: a third).
    assert editor.panes.currentWidget() is editor.outputs and editor.panes.isTabVisible(1)
    assert inspector.width() >= 0.7 * editor.width(), (inspector.width(), editor.width())
    labels = [inspector.tensor_list.item(k).text() for k in range(2)]
    assert labels[0].startswith("after the edit") and labels[1].startswith("before the edit")
    assert all("4x8xf32" in label or "f32" in label for label in labels) and not any("float32" in t for t in labels)
    assert inspector.tensors[0].type_text == "4x8xf32"
