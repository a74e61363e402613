"""Step Into Workgroup in the real window (issue 31): break after the dispatch that takes a log, select the
first NaN in the inspector, Step Into Workgroup… proposes the workgroup that wrote it, the recorded workgroup
opens at the store that wrote it; Run to NaN from the start stops at the math.log line, highlighted, with its
values beside it; F11/Shift+F11 step and step back to the same values."""

from __future__ import annotations

import numpy as np
import pytest
import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton
from support.session import compile_program

TIMEOUT = 120_000  # a run on a loaded 2-core machine


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
def test_from_a_nan_in_the_inspector_to_the_statement_that_made_it(qtbot, main_window, tmp_path, target):
    # With its executables' sources beside it (the session types the tensors from them).
    vmfb = compile_program("nan_log", target, tmp_path, f"--iree-hal-dump-executable-sources-to={tmp_path / 'sources'}")
    a = (np.arange(32, dtype=np.float32).reshape(4, 8) / 4).astype(np.float32)
    b = np.full((4, 8), 1.0, np.float32)  # a - b < 0 in the first row: log gives NaN (and -Inf at 0)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    panel = main_window.panels["stepper"]
    main_window.docks["stepper"].show()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        main_window.open_file(vmfb)
    view = panel.breakpoints_view
    view.kind.setCurrentIndex(view.kind.findData("dispatch"))
    view.when.setCurrentIndex(view.when.findData("after"))
    view.name.setText("1")
    with qtbot.waitSignal(panel.bridge.breakpointsChanged, timeout=TIMEOUT):
        qtbot.mouseClick(view.add_button, Qt.MouseButton.LeftButton)
    panel.set_inputs((f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"))
    runs = main_window.panels["run_dispatches"]
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    paused = runs.paused_view
    outputs = [k for k, t in enumerate(paused.tensors) if t.role == "output"]
    paused.inspector.tensor_list.setCurrentRow(outputs[0])
    index = paused.inspector.go_to_first_nonfinite()
    assert index is not None
    element = paused.selected_element()
    assert element is not None and "output 0" in element.label

    qtbot.mouseClick(paused.step_into_button, Qt.MouseButton.LeftButton)
    picker = runs.picker
    qtbot.waitUntil(lambda: picker.buttons.isEnabled() and "wrote" in picker.note.text(), timeout=TIMEOUT)
    assert "Workgroup (" in picker.note.text()
    said = []
    main_window.workbench.said.connect(said.append)
    with qtbot.waitSignal(runs.kernelViewOpened, timeout=TIMEOUT) as opened:
        qtbot.mouseClick(picker.buttons.buttons()[0], Qt.MouseButton.LeftButton)
        # Said at once, while the kernel is built and recorded (minutes when the program is rebuilt).
        assert said and said[0].startswith("Stepping into workgroup (") and "dispatch #1" in said[0], said
    kernel = opened.args[0]
    assert main_window.documents.currentWidget() is kernel
    qtbot.waitUntil(lambda: "statements recorded" in said[-1], timeout=TIMEOUT)
    assert not (shiboken6.isValid(picker) and picker.isVisible())  # the picker has done its work

    # Opened at the store that wrote the element: its value there is the inspector's NaN.
    store = kernel.cursor.current.store
    assert store is not None and store.binding == element.binding
    values = store.value if isinstance(store.value, list) else [store.value]
    lane = (element.offset - store.offset) // store.element_bytes
    assert np.isnan(values[lane])

    assert kernel.first_nan()  # back from the store to where the NaN was made
    made = kernel.cursor.position
    kernel.go(0)
    assert kernel.run_to_nan() and kernel.cursor.position == made
    step = kernel.cursor.current
    assert step.op == "math.log" and step.nonfinite
    row = kernel.current_row
    assert row is not None and "math.log" in kernel.source.item(row, 1).text()
    assert kernel.source.item(row, 2).text().startswith("math.log: [")
    assert kernel.source.item(row, 0).background().color().name() == "#ffec96"  # the current line
    assert "NaN/Inf" in kernel.statement.text()
    # A statement LLVM gave no location (a phi) is said to carry none, not placed "at unknown".
    unlocated = next((s.index for s in kernel.trace.steps if s.location is None), None)
    if unlocated is not None:
        kernel.go(unlocated)
        assert "which carries no source location" in kernel.statement.text()
        assert "unknown" not in kernel.statement.text().splitlines()[0]
        kernel.go(made)
    else:
        assert target == "vmvx", "the llvm-cpu kernel's loop phis carry no location"

    kernel.source.setFocus()
    here = kernel.cursor.position
    qtbot.keyClick(kernel.source, Qt.Key.Key_F11)
    assert kernel.cursor.position == here + 1
    qtbot.keyClick(kernel.source, Qt.Key.Key_F11, Qt.KeyboardModifier.ShiftModifier)
    assert kernel.cursor.position == here and kernel.cursor.current.values == step.values
    qtbot.keyClick(kernel.source, Qt.Key.Key_F10)
    moved = kernel.cursor.current
    assert moved.location is None or moved.location.line != step.location.line or moved.index == len(kernel.trace.steps) - 1
    qtbot.keyClick(kernel.source, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    assert kernel.cursor.position <= here
    # The stepper's own keys still work outside the kernel view (F5 continues the paused run).
    assert main_window.isActiveWindow()
    with qtbot.waitSignal(panel.bridge.finished, timeout=30_000):
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)


@pytest.mark.vulkan
def test_a_vulkan_build_is_refused_plainly_and_built_for_the_cpu(qtbot, make_main_window, tmp_path):
    """Stepping needs the llvm-cpu or VMVX build: the picker says so at a Vulkan stop and builds the program
    for llvm-cpu on request, then opens that build."""
    from engine.runtime.hal.vulkan.loader import vulkan_available

    reason = vulkan_available()
    if reason is not None:
        pytest.skip(f"no Vulkan: {reason}")
    from support.app import add_breakpoint, open_in_stepper

    from app.session_bridge import DEVICE_KEY
    from app.settings import open_settings

    settings = open_settings()
    settings.setValue(DEVICE_KEY, "vulkan")
    settings.sync()
    window = make_main_window()
    vmfb = compile_program("nan_log", "vulkan-spirv", tmp_path)
    panel = open_in_stepper(qtbot, window, vmfb)
    add_breakpoint(qtbot, panel, "nan")
    panel.set_inputs(("4x8xf32=1", "4x8xf32=2"))
    runs = window.panels["run_dispatches"]
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(runs.paused_view.step_into_button, Qt.MouseButton.LeftButton)
    picker = runs.picker
    assert "llvm-cpu or VMVX build" in picker.note.text() and "vulkan-spirv-fb" in picker.note.text()
    assert not picker.buttons.button(picker.buttons.StandardButton.Ok).isEnabled()
    build = picker.findChild(QPushButton, "buildForCpu")
    assert build is not None  # the program its debug locations name is here
    with qtbot.waitSignal(window.context.moduleChanged, timeout=TIMEOUT):
        qtbot.mouseClick(build, Qt.MouseButton.LeftButton)
    module = window.workbench.state.module
    assert module is not None and module.path != vmfb
    assert {e.format for e in module.module.executables} == {"embedded-elf-x86_64"}
