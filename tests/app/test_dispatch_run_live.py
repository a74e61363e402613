"""The paused dispatch in the real MainWindow: break at dispatch 1 of a compiled program, the "Dispatch #1"
document shows its bindings typed (shapes from the compilation's executable sources or IREE's name) with
values equal to what numpy computes; the Run Dispatches list fills as the run goes."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from session_support import compile_program
from test_stepper_dispatch import TIMEOUT, add_breakpoint, open_in_stepper

SCREENSHOT = "/tmp/dispatch_ui_paused_dispatch.png"


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def test_break_at_dispatch_1_shows_its_typed_tensors(qtbot, main_window, tmp_path):
    vmfb = compile_program("nan_log", "llvm-cpu", tmp_path)
    a = (np.arange(32, dtype=np.float32).reshape(4, 8) / 4 + 2).astype(np.float32)
    b = np.full((4, 8), 0.5, np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    panel = open_in_stepper(qtbot, main_window, vmfb)
    runs = main_window.panels["run_dispatches"]
    add_breakpoint(qtbot, panel, "dispatch", "1", "after")
    panel.set_inputs((f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"))
    with qtbot.waitSignal(runs.bridge.bindingsRead, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    view = runs.paused_view
    assert view is not None
    documents = main_window.documents
    assert documents.currentWidget() is view
    assert documents.tabToolTip(documents.currentIndex()) == f"Dispatch #1 {view.info.export}"
    # Dispatch 1 computes log(a - b): its input is a - b, its output the log. IREE flattens the elementwise
    # dispatch to 32xf32 (its name says ..._32_f32): that is the shape the dispatch sees.
    by_role = {t.role: t for t in view.tensors}
    assert set(by_role) == {"input", "output"}
    expected_in = a - b
    expected_out = np.log(expected_in)
    for role, expected in (("input", expected_in), ("output", expected_out)):
        t = by_role[role]
        assert str(t.type) == "32xf32" and t.type.source == "name", (role, t.type)
        assert t.array.shape == (32,)
        np.testing.assert_allclose(t.array, expected.ravel(), rtol=1e-6)
    inspector = view.inspector
    assert inspector.tensor_list.count() == 2
    assert "32xf32" in inspector.tensor_list.item(1).text()
    assert "types from name" in view.header.text()
    # The list of the run: dispatches 0 and 1 at least, dispatch 1 healthy and typed by its workgroups.
    ordinals = [e.ordinal for e in runs.model.entries]
    assert 1 in ordinals
    entry = runs.model.entries[ordinals.index(1)]
    assert entry.health == "ok" and entry.workgroups == list(view.info.workgroup_count)
    inspector.tensor_list.setCurrentRow(1)  # the output
    main_window.resize(1400, 900)
    qtbot.wait(200)
    main_window.grab().save(SCREENSHOT)
    with qtbot.waitSignal(runs.bridge.finished, timeout=TIMEOUT):
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
    assert "finished" in runs.title.text()
