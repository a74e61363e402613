"""The executable editor in the window, with a run paused at a dispatch: Apply goes through the session
bridge (the session process builds, swaps and reruns the dispatch), the outputs before and after show in
the tensor inspector, Revert gives the module's code back, and the run continues. The elementwise sample
computes ``a * b + |a|``; the edit (tests/support ``edited_source``) makes the ``addf`` a ``mulf``.
Expected values are computed with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from support import compile_with_dumps, edited_source, iree_compile
from support.app import TIMEOUT, add_breakpoint, open_in_stepper, save_screenshot

from app.views.tensor_inspector import TensorInspector


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def test_apply_rerun_revert_through_the_session_and_continue(qtbot, main_window, tmp_path):
    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    edit = edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir")
    a = (np.arange(32, dtype=np.float32).reshape(4, 8) / 7 - 2).astype(np.float32)
    b = np.full((4, 8), 1.5, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    stepper = open_in_stepper(qtbot, main_window, vmfb)
    bridge = stepper.bridge
    add_breakpoint(qtbot, stepper, "dispatch", "0", "after")
    stepper.set_inputs((f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"))
    with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT):
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)

    panel = main_window.show_panel("editor")
    qtbot.waitUntil(lambda: panel.editor is not None, timeout=TIMEOUT)
    editor = panel.editor
    assert editor.session is not None and editor.session.available
    editor.select("main_dispatch_0", "mlir")
    editor.text.setPlainText(edit.read_text())
    pid_before = bridge.session.pid if hasattr(bridge.session, "pid") else None
    with qtbot.waitSignal(editor.applied, timeout=TIMEOUT):
        qtbot.mouseClick(editor.apply_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.last_outputs is not None, timeout=TIMEOUT)
    before, after = (x.view(np.float32).reshape(4, 8) for x in editor.last_outputs)
    np.testing.assert_allclose(before, a * b + np.abs(a), rtol=1e-6)
    np.testing.assert_array_equal(after, (a * b) * np.abs(a))
    assert "rerun" in editor.status.text(), editor.status.text()
    inspector = editor.outputs.findChild(TensorInspector, "outputsInspector")
    assert inspector is not None and len(inspector.tensors) == 2  # after the edit (vs before), before
    main_window.show_panel("editor")
    main_window.resize(1400, 900)
    qtbot.wait(200)
    save_screenshot(main_window, "dispatch_ui_editor_rerun")

    # Rerun alone: the same edited outputs again.
    editor.last_outputs = None
    qtbot.mouseClick(editor.rerun_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.last_outputs is not None, timeout=TIMEOUT)
    np.testing.assert_array_equal(editor.last_outputs[1].view(np.float32).reshape(4, 8), (a * b) * np.abs(a))

    # Revert: the module's code back, the rerun gives the original outputs.
    editor.last_outputs = None
    qtbot.mouseClick(editor.revert_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.last_outputs is not None, timeout=TIMEOUT)
    np.testing.assert_allclose(editor.last_outputs[1].view(np.float32).reshape(4, 8), a * b + np.abs(a), rtol=1e-6)
    assert editor.text.toPlainText() == editor.document.original

    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT):
        bridge.continue_()
    assert bridge.crash_count == 0 and (pid_before is None or bridge.session.pid == pid_before)


def test_a_bad_edit_through_the_session_reports_its_line_and_the_run_stays(qtbot, main_window, tmp_path):
    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    edit = edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir")
    stepper = open_in_stepper(qtbot, main_window, vmfb)
    add_breakpoint(qtbot, stepper, "dispatch", "0", "before")
    stepper.set_inputs(("4x8xf32=1", "4x8xf32=2"))
    with qtbot.waitSignal(stepper.bridge.dispatchStopped, timeout=TIMEOUT):
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)
    panel = main_window.show_panel("editor")
    qtbot.waitUntil(lambda: panel.editor is not None, timeout=TIMEOUT)
    editor = panel.editor
    editor.select("main_dispatch_0", "mlir")
    bad = edit.read_text().replace("arith.mulf", "arith.mulq", 1)
    editor.text.setPlainText(bad)
    with qtbot.waitSignal(editor.failed, timeout=TIMEOUT):
        qtbot.mouseClick(editor.apply_button, Qt.MouseButton.LeftButton)
    assert editor.status.text().startswith("Not applied: line "), editor.status.text()
    assert editor.errors.count() >= 1
    assert editor.text.toPlainText() == bad  # the edit is kept
    assert stepper.bridge.state == "stopped"
    with qtbot.waitSignal(stepper.bridge.finished, timeout=TIMEOUT):
        stepper.bridge.continue_()


def test_a_faulting_edit_takes_down_only_the_session_and_the_edit_survives(qtbot, main_window, tmp_path):
    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    source = (tmp_path / "cpu" / "sources" / "module_main_dispatch_0.mlir").read_text()
    # The output subspan 2^50 bytes past its binding: the kernel writes to unmapped memory (SIGSEGV).
    faulting = source.replace(
        "%c0 = arith.constant 0 : index", "%c0 = arith.constant 0 : index\n        %cbig = arith.constant 1125899906842624 : index", 1
    ).replace("binding(2) alignment(64) offset(%c0)", "binding(2) alignment(64) offset(%cbig)", 1)
    assert "offset(%cbig)" in faulting
    stepper = open_in_stepper(qtbot, main_window, vmfb)
    bridge = stepper.bridge
    add_breakpoint(qtbot, stepper, "dispatch", "0", "after")
    stepper.set_inputs(("4x8xf32=1", "4x8xf32=2"))
    with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT):
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)
    panel = main_window.show_panel("editor")
    qtbot.waitUntil(lambda: panel.editor is not None, timeout=TIMEOUT)
    editor = panel.editor
    editor.select("main_dispatch_0", "mlir")
    editor.text.setPlainText(faulting)
    with qtbot.waitSignal(bridge.crashed, timeout=TIMEOUT):
        qtbot.mouseClick(editor.apply_button, Qt.MouseButton.LeftButton)
    assert main_window.isVisible() and bridge.crash_count == 1
    assert "crashed" in editor.status.text() and "edit is kept" in editor.status.text(), editor.status.text()
    assert editor.text.toPlainText() == faulting
    assert editor.drafts.load(editor.scope, editor.document) == faulting  # and in its draft, for a restart
    # The session came back (restarted): the program runs again, with the module's own code.
    qtbot.waitUntil(lambda: bridge.state == "idle", timeout=TIMEOUT)


def test_revert_after_the_run_finished_holds_for_the_next_run(qtbot, main_window, tmp_path):
    """Apply while paused, continue to the end, Revert, Run again: the module's own kernel runs (the revert
    acts on the session, not only on the editor's text); the editor opens the paused dispatch's source,
    marks it modified while applied, and shows the paused dispatch's own typed output before and after."""
    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    edit = edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir")
    a = (np.arange(32, dtype=np.float32).reshape(4, 8) / 7 - 2).astype(np.float32)
    b = np.full((4, 8), 1.5, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    stepper = open_in_stepper(qtbot, main_window, vmfb)
    bridge = stepper.bridge
    stepper.set_inputs((f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"))
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as plain_run:
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)
    plain = plain_run.args[0].outputs[0].to_numpy()

    add_breakpoint(qtbot, stepper, "dispatch", "0", "before")
    with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT):
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)
    panel = main_window.show_panel("editor")
    qtbot.waitUntil(lambda: panel.editor is not None, timeout=TIMEOUT)
    editor = panel.editor
    assert editor.document.name == "main_dispatch_0" and editor.document.kind == "mlir"  # the paused one
    editor.text.setPlainText(edit.read_text())
    with qtbot.waitSignal(editor.applied, timeout=TIMEOUT):
        qtbot.mouseClick(editor.apply_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.last_outputs is not None, timeout=TIMEOUT)
    before, after = editor.last_outputs
    # Paused before the dispatch: before = the module's kernel on its inputs, after = the edit; typed as the
    # dispatch's own tensor (IREE flattened the 4x8 operands: 32xf32), not the binding's bytes.
    assert before.shape == after.shape == (32,) and after.dtype == np.float32
    assert before.tobytes() == plain.tobytes()
    np.testing.assert_array_equal(after.reshape(4, 8), (a * b) * np.abs(a))
    assert "Dispatch #0 main_dispatch_0_elementwise_32_f32" in editor.status.text(), editor.status.text()
    item = editor.list.item(editor.documents.index(editor.document))
    assert item.text().startswith("● ")

    editor.benchmark_text = ""
    qtbot.mouseClick(editor.benchmark_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.benchmark_text != "", timeout=TIMEOUT)
    assert "module's kernel" in editor.benchmark_text and "edited" in editor.benchmark_text
    assert 0 < editor.benchmark_result[0] < 1 and 0 < editor.benchmark_result[1] < 1
    assert "iree-benchmark-executable" in editor.benchmark_text and all(editor.iree_benchmark_result)

    bridge.set_breakpoints(())
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as edited_run:
        bridge.continue_()
    np.testing.assert_array_equal(edited_run.args[0].outputs[0].to_numpy(), (a * b) * np.abs(a))

    qtbot.mouseClick(editor.revert_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "next runs use the module's code" in editor.status.text(), timeout=TIMEOUT)
    assert not editor.list.item(editor.documents.index(editor.document)).text().startswith("● ")
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as again:
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)
    assert again.args[0].outputs[0].to_numpy().tobytes() == plain.tobytes()


def test_a_module_without_sources_says_what_the_editor_needs(qtbot, main_window, tmp_path):
    import shutil

    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    alone = tmp_path / "alone" / "elementwise.vmfb"
    alone.parent.mkdir()
    shutil.copyfile(vmfb, alone)
    open_in_stepper(qtbot, main_window, alone)
    panel = main_window.show_panel("editor")
    qtbot.waitUntil(lambda: "iree-lens sources" in panel.placeholder.text(), timeout=TIMEOUT)
    assert panel.editor is None and panel.placeholder.isVisible()


def test_folded_weights_program_opened_as_mlir_edit_apply_continue_revert(qtbot, main_window, tmp_path):
    """A program whose weights IREE folds into the dispatches (as a PyTorch export's), opened as .mlir: the
    editor's source of the paused dispatch carries its blobs, applies unmodified, and an edit gives IREE's
    own build of it; continue, revert, run again: the original result. At both screen sizes the actions
    keep readable labels."""

    from support import TARGET_FLAGS, lens_run, tiny_program

    program = tiny_program(tmp_path / "tiny.mlir")
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32))
    stepper = open_in_stepper(qtbot, main_window, program)  # compiled in the app
    bridge = stepper.bridge
    stepper.set_inputs((f"@{x}",))
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as plain_run:
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)
    plain = plain_run.args[0].outputs[0].to_numpy()

    add_breakpoint(qtbot, stepper, "dispatch", "1", "before")
    with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT):
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)
    panel = main_window.show_panel("editor")
    qtbot.waitUntil(lambda: panel.editor is not None, timeout=TIMEOUT)
    editor = panel.editor
    doc = editor.document
    assert doc.name == "main_dispatch_1" and doc.kind == "mlir"
    assert "dense_resource<tiny_b2>" in doc.original and "tiny_b2:" in doc.original  # the blob comes along

    # Unmodified: the same kernel (before and after equal, and the module's output).
    with qtbot.waitSignal(editor.applied, timeout=TIMEOUT):
        qtbot.mouseClick(editor.apply_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.last_outputs is not None, timeout=TIMEOUT)
    before, after = editor.last_outputs
    assert before.tobytes() == after.tobytes() == plain.tobytes()

    edited_text = doc.original.replace("arith.addf", "arith.subf", 1)
    editor.text.setPlainText(edited_text)
    editor.last_outputs = None
    with qtbot.waitSignal(editor.applied, timeout=TIMEOUT):
        qtbot.mouseClick(editor.apply_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: editor.last_outputs is not None, timeout=TIMEOUT)
    edit_file = tmp_path / "edit" / "main_dispatch_1.mlir"
    edit_file.parent.mkdir()
    edit_file.write_text(edited_text)
    iree_vmfb = tmp_path / "iree_edit.vmfb"
    iree_compile(
        [str(program), *TARGET_FLAGS["cpu"], "-o", str(iree_vmfb),
         f"--iree-hal-substitute-executable-source=main_dispatch_1={edit_file}"],
        check=True, timeout=600,
    )  # fmt: skip
    proc = lens_run(iree_vmfb, "main", [f"@{x}"], "reference", f"--output=@{tmp_path / 'iree.npy'}", timeout=600)
    assert proc.returncode == 0, proc.stderr
    expected = np.load(tmp_path / "iree.npy")
    assert editor.last_outputs[0].tobytes() == plain.tobytes()
    assert editor.last_outputs[1].tobytes() == expected.tobytes() != plain.tobytes()

    for size in ((1920, 1080), (1366, 768)):
        main_window.resize(*size)
        qtbot.wait(100)
        for button in (editor.apply_button, editor.revert_button, editor.benchmark_button, editor.export_button):
            assert button.width() >= button.sizeHint().width(), (size, button.text())

    bridge.set_breakpoints(())
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as edited_run:
        bridge.continue_()
    assert edited_run.args[0].outputs[0].to_numpy().tobytes() == expected.tobytes()
    qtbot.mouseClick(editor.revert_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "next runs use the module's code" in editor.status.text(), timeout=TIMEOUT)
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as again:
        qtbot.mouseClick(stepper.run_button, Qt.MouseButton.LeftButton)
    assert again.args[0].outputs[0].to_numpy().tobytes() == plain.tobytes()
