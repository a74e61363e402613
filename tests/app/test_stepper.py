"""The VM stepper panel in the main window, driving a real debug session in a child process.

Keys are pressed as a user would (F11, F10, Shift+F11, F9, F5); what the panel shows is checked against
the engine's own disassembly of the real compiled sample and against iree-run-module's output.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from PySide6.QtCore import Qt
from support import iree_tool

from engine.runtime.vmfb.disassembler import function_lines
from engine.runtime.vmfb.module import open_vmfb
from engine.session.protocol import Breakpoint

ELEMENTWISE_INPUTS = ("4x8xf32=1", "4x8xf32=2")
TIMEOUT = 60_000


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    """The saved session goes to a folder of this test, never the user's."""
    path = tmp_path / "state"
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(path))
    return path


def open_in_stepper(qtbot, window, vmfb):
    panel = window.panels["stepper"]
    window.docks["stepper"].show()
    window.docks["stepper"].raise_()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    window.activateWindow()
    return panel


def press(qtbot, panel, key, modifier=Qt.KeyboardModifier.NoModifier, signal="stopped"):
    with qtbot.waitSignal(getattr(panel.bridge, signal), timeout=TIMEOUT) as blocker:
        qtbot.keyClick(panel.listing, key, modifier)
    return blocker.args[0]


def highlighted_pc(panel) -> int:
    """The pc of the highlighted line, read from the text the user sees (``00002A  vm...``)."""
    line = panel.listing.current_line()
    assert line is not None
    text = panel.listing.document().findBlockByNumber(line).text()
    return int(text[:6], 16)


def test_run_to_entry_and_step_into_follow_the_disassembly(qtbot, main_window, compiled):
    vmfb = compiled.path("matmul", "llvm-cpu")
    panel = open_in_stepper(qtbot, main_window, vmfb)
    assert panel.function_combo.currentText() == "main"
    panel.set_inputs(("4x8xf32=0.1", "8x16xf32=0.3"))
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.entry_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].reason == "entry"
    assert highlighted_pc(panel) == 0

    module = open_vmfb(vmfb)
    pcs = [line.pc for line in function_lines(module, "main") if not line.is_block_label]
    seen = []
    for _ in range(6):
        stop = press(qtbot, panel, Qt.Key.Key_F11)
        assert stop.reason == "step"
        seen.append(highlighted_pc(panel))
        assert panel.listing.is_line_visible(panel.listing.current_line())
    # Straight-line code at the start of main: each F11 moves to the next instruction of the listing.
    assert seen == pcs[:6]
    # The context (one current position for every panel) follows the stop.
    assert main_window.context.function == "main" and main_window.context.pc == seen[-1]
    # Registers show the i32 bank with its words and the ref bank with buffer-view descriptions.
    regs = stop.detail.registers
    top = panel.registers.topLevelItem(0)
    assert top.childCount() == len(regs.i32)
    refs = panel.registers.topLevelItem(1)
    assert refs.child(0).text(1) == regs.ref[0] and "4x8xf32" in regs.ref[0]
    assert "8x16xf32" in refs.child(1).text(1)
    assert panel.call_stack.topLevelItem(0).text(1) == "module.main"


def test_breakpoint_continue_step_over_and_out(qtbot, main_window, compiled, tmp_path):
    """F9 sets a breakpoint that F5 stops at; F10 steps over an internal call that F11 enters; Shift+F11
    comes back out to the caller."""
    vmfb = compiled.path("multi_function", "llvm-cpu")
    module = open_vmfb(vmfb)
    panel = open_in_stepper(qtbot, main_window, vmfb)
    # The exported __init calls the module's internal initialisers (vm.call @module:2 ...).
    if panel.function_combo.findText("__init") < 0:
        panel.function_combo.addItem("__init")
    panel.function_combo.setCurrentText("__init")
    panel.inputs_edit.clear()
    lines = function_lines(module, "__init")
    calls = [ln for ln in lines if ln.instruction.opcode.symbol == "Call" and "@module" in ln.text]
    assert calls, "__init calls internal functions"
    call_line = calls[0]
    after_call = lines[lines.index(call_line) + 1].pc

    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        qtbot.mouseClick(panel.entry_button, Qt.MouseButton.LeftButton)
    # F9 on the call's line puts a breakpoint in the margin...
    line_no = panel.listing.line_of_pc(call_line.pc)
    cursor = panel.listing.textCursor()
    cursor.setPosition(panel.listing.document().findBlockByNumber(line_no).position())
    panel.listing.setTextCursor(cursor)
    qtbot.keyClick(panel.listing, Qt.Key.Key_F9)
    assert Breakpoint("instruction", function="__init", pc=call_line.pc) in panel.bridge.breakpoints
    assert call_line.pc in panel.listing.breakpoint_pcs
    # ...and F5 runs to it.
    stop = press(qtbot, panel, Qt.Key.Key_F5)
    assert stop.reason == "breakpoint" and highlighted_pc(panel) == call_line.pc
    # F10 steps over the call: same frame, next instruction.
    stop = press(qtbot, panel, Qt.Key.Key_F10)
    assert len(stop.location.frames) == 1 and highlighted_pc(panel) == after_call

    # Again to the call (rerun to the breakpoint), then F11 enters the callee...
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        qtbot.mouseClick(panel.entry_button, Qt.MouseButton.LeftButton)
    press(qtbot, panel, Qt.Key.Key_F5)
    stop = press(qtbot, panel, Qt.Key.Key_F11)
    assert len(stop.location.frames) == 2
    callee = stop.location.frames[-1].function
    assert panel.shown_function == callee and highlighted_pc(panel) == 0
    assert panel.call_stack.topLevelItemCount() == 2
    # ...clicking the caller's frame shows the caller at its call...
    panel.call_stack.select_frame(0)
    assert panel.shown_function == "__init" and highlighted_pc(panel) == call_line.pc
    assert not panel.listing.current_is_innermost
    # ...and Shift+F11 returns to the caller, after the call.
    stop = press(qtbot, panel, Qt.Key.Key_F11, Qt.KeyboardModifier.ShiftModifier)
    assert len(stop.location.frames) == 1 and highlighted_pc(panel) == after_call
    assert panel.shown_function == "__init"


def test_import_breakpoint_and_results(qtbot, main_window, compiled, tmp_path):
    vmfb = compiled.path("elementwise", "llvm-cpu")
    panel = open_in_stepper(qtbot, main_window, vmfb)
    panel.breakpoints_view.kind.setCurrentIndex(panel.breakpoints_view.kind.findData("import"))
    panel.breakpoints_view.name.setText("hal.device.queue.execute.indirect")
    qtbot.mouseClick(panel.breakpoints_view.add_button, Qt.MouseButton.LeftButton)
    assert panel.bridge.breakpoints == (
        Breakpoint("import", import_name="hal.device.queue.execute.indirect"),
    )
    assert panel.breakpoints_view.list.count() == 1
    panel.set_inputs(ELEMENTWISE_INPUTS)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    stop = blocker.args[0]
    assert stop.reason == "breakpoint"
    text = panel.listing.document().findBlockByNumber(panel.listing.current_line()).text()
    assert "@hal.device.queue.execute.indirect" in text
    assert "breakpoint" in panel.status_label.text()
    # Globals of the module arrive through ReadGlobals: by ordinal, and why they have no names (a .vmfb keeps
    # none; no VM phase snapshot is beside this one).
    qtbot.waitUntil(lambda: panel.globals_view.topLevelItemCount() == 3, timeout=TIMEOUT)
    assert panel.globals_view.topLevelItem(0).text(0).startswith("names unknown: a .vmfb keeps none")
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT) as blocker:
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
    expected = subprocess.run(
        [iree_tool("iree-run-module"), f"--module={vmfb}", "--device=local-sync", "--function=main"]
        + [f"--input={i}" for i in ELEMENTWISE_INPUTS],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert expected.startswith("EXEC @main\n")
    assert blocker.args[0].results_text.strip() == expected.split("\n", 1)[1].strip()
    assert blocker.args[0].results_text.strip() in panel.output.toPlainText()
    assert panel.listing.current_line() is None


def test_window_stays_responsive_and_long_run_pauses(qtbot, main_window, compiled):
    vmfb = compiled.path("control_flow", "llvm-cpu")
    panel = open_in_stepper(qtbot, main_window, vmfb)
    panel.function_combo.setCurrentText("repeat_double")
    panel.set_inputs(("4xf32=1", "2147483647"))
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert panel.bridge.state == "running" and panel.stop_action.isEnabled()
    # The GUI thread keeps serving events while the debuggee runs.
    t0 = time.monotonic()
    qtbot.wait(500)
    assert time.monotonic() - t0 < 1.5
    with qtbot.waitSignal(panel.bridge.stopped, timeout=5000) as blocker:
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5, Qt.KeyboardModifier.ShiftModifier)
    assert blocker.args[0].reason == "paused"
    assert panel.shown_function == "repeat_double" and panel.listing.current_line() is not None


def test_bridge_in_process_runs_without_a_window(qtbot, compiled, tmp_path):
    """The bridge's in-process mode (scripts, tests): same signals, delivered on the GUI thread."""
    from PySide6.QtCore import QThread

    from app.session_bridge import SessionBridge
    from engine.session.persist import SessionStore

    bridge = SessionBridge(in_process=True, store=SessionStore(tmp_path / "bridge-state"))
    threads = []
    bridge.stopped.connect(lambda _: threads.append(QThread.currentThread()))
    try:
        with qtbot.waitSignal(bridge.opened, timeout=TIMEOUT):
            bridge.open(compiled.path("matmul", "llvm-cpu"))
        with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT):
            bridge.call("main", ("4x8xf32=0.1", "8x16xf32=0.3"), stop_at_entry=True)
        assert threads == [bridge.thread()] and bridge.state == "stopped"
        with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as blocker:
            bridge.continue_()
        assert blocker.args[0].results_text.startswith("result[0]: hal.buffer_view\n4x16xf32=[0.235")
        saved = SessionStore(tmp_path / "bridge-state").load()
        assert saved.function == "main" and saved.inputs == ["4x8xf32=0.1", "8x16xf32=0.3"]
    finally:
        bridge.shutdown()
