"""Time travel in the stepper: reverse keys, reverse continue, the run position timeline, "when did this change?".

Real compiled samples run in the window's session (a child process that records every call). Every
expectation is a forward run in the same window: the state after N steps forward and K back must be the
state after N-K steps of a fresh run; a timeline jump to a dispatch must show the bytes a forward Next
Dispatch parks at.
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from support.app import read_bindings, save_screenshot

from engine.session.protocol import Breakpoint, WatchGlobalRef, WatchRegister

TIMEOUT = 120_000  # a child process opening Vulkan on a loaded 2-core machine can take a minute
CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def open_in_stepper(qtbot, window, vmfb, function, inputs):
    panel = window.panels["stepper"]
    dock = window.docks["stepper"]
    dock.show()
    dock.raise_()
    window.resize(1600, 1000)  # room for the screenshots: the stepper at a usable size
    window.resizeDocks([dock], [1200], Qt.Orientation.Horizontal)
    window.resizeDocks([dock], [700], Qt.Orientation.Vertical)
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    window.activateWindow()
    panel.function_combo.setCurrentText(function)
    panel.set_inputs(inputs)
    return panel


def press(qtbot, panel, key, modifier=Qt.KeyboardModifier.NoModifier, signal="stopped"):
    with qtbot.waitSignal(getattr(panel.bridge, signal), timeout=TIMEOUT) as blocker:
        qtbot.keyClick(panel.listing, key, modifier)
    return blocker.args[0]


def to_entry(qtbot, panel):
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.entry_button, Qt.MouseButton.LeftButton)
    return blocker.args[0]


def finish(qtbot, panel):
    """F5 to the end of the call, then the history answered after it (the recorded span)."""
    answers = []  # histories answered once the call finished (the bridge is idle then)
    record = lambda h: panel.bridge.state == "idle" and answers.append(h)  # noqa: E731
    panel.bridge.historyChanged.connect(record)
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT):
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: bool(answers), timeout=TIMEOUT)
    panel.bridge.historyChanged.disconnect(record)
    assert answers[-1].position == answers[-1].latest


def wait_history(qtbot, panel, position):
    qtbot.waitUntil(
        lambda: panel.bridge.history is not None and panel.bridge.history.position == position, timeout=TIMEOUT
    )


def shown(panel):
    """What the panel shows of the state: pc line, the i32 register column, the call stack."""
    regs = panel.registers.topLevelItem(0)
    words = [regs.child(i).text(1) for i in range(regs.childCount())]
    stack = [panel.call_stack.topLevelItem(i).text(1) for i in range(panel.call_stack.topLevelItemCount())]
    return panel.listing.current_pc, words, stack


def test_step_n_then_reverse_k_shows_the_state_after_n_minus_k_steps(qtbot, main_window, compiled):
    vmfb = compiled.path("control_flow", "llvm-cpu")
    panel = open_in_stepper(qtbot, main_window, vmfb, "repeat_double", ("4xf32=1 2 3 4", "3"))
    assert not panel.reverse.reverse_step_into_action.isEnabled()  # nothing recorded yet
    to_entry(qtbot, panel)
    assert panel.reverse.reverse_step_into_action.isEnabled()
    n, k = 60, 30
    forward = {0: shown(panel)}
    details = {}
    for i in range(1, n + 1):
        stop = press(qtbot, panel, Qt.Key.Key_F11)
        forward[i] = shown(panel)
        details[i] = stop
    assert stop.detail.position == n
    wait_history(qtbot, panel, n)
    assert len(panel.bridge.history.dispatches) >= 2  # the 60 steps ran dispatches, the way back crosses them
    for j in range(1, k + 1):
        stop = press(qtbot, panel, Qt.Key.Key_F11, CTRL_SHIFT)  # Ctrl+Shift+F11: reverse step into
        assert stop.detail.position == n - j
        assert shown(panel) == forward[n - j]
        assert stop.detail.registers == details[n - j].detail.registers
    wait_history(qtbot, panel, n - k)
    save_screenshot(panel, "reverse_step_back")
    assert "@ 30" in panel.status_label.text()
    # The position is said in VM instructions, of the span recorded (dispatches share their command buffer's).
    position = panel.reverse.position_label.text()
    assert position.startswith("instr. 30 of 0–") and "dispatches" in position, position
    # A fresh run of the same call, N-K steps forward, shows the same (independent of the first history).
    to_entry(qtbot, panel)
    for _ in range(n - k):
        fresh = press(qtbot, panel, Qt.Key.Key_F11)
    assert shown(panel) == forward[n - k]
    assert fresh.detail.registers == stop.detail.registers
    assert fresh.location.frames == stop.location.frames
    # Forward again from a travelled state continues the same history.
    press(qtbot, panel, Qt.Key.Key_F11, CTRL_SHIFT)
    press(qtbot, panel, Qt.Key.Key_F11)
    assert shown(panel) == forward[n - k]


def test_reverse_continue_returns_to_the_breakpoint_and_reverse_over_out(qtbot, main_window, compiled):
    from engine.runtime.vmfb.disassembler import function_lines
    from engine.runtime.vmfb.module import open_vmfb

    vmfb = compiled.path("multi_function", "llvm-cpu")
    panel = open_in_stepper(qtbot, main_window, vmfb, "main", ())
    if panel.function_combo.findText("__init") < 0:
        panel.function_combo.addItem("__init")
    panel.function_combo.setCurrentText("__init")
    panel.inputs_edit.clear()
    lines = function_lines(open_vmfb(vmfb), "__init")
    call = next(ln for ln in lines if ln.instruction.opcode.symbol == "Call" and "@module" in ln.text)
    panel.bridge.add_breakpoint(Breakpoint("instruction", function="__init", pc=call.pc))
    to_entry(qtbot, panel)
    hit = press(qtbot, panel, Qt.Key.Key_F5)
    assert hit.reason == "breakpoint" and panel.listing.current_pc == call.pc
    at_call = shown(panel)
    inside = press(qtbot, panel, Qt.Key.Key_F11)
    assert len(inside.location.frames) == 2
    for _ in range(3):
        press(qtbot, panel, Qt.Key.Key_F11)
    # Alt+Shift+F11 (reverse step out) goes back to the call that entered the callee.
    out = press(qtbot, panel, Qt.Key.Key_F11, Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ShiftModifier)
    assert len(out.location.frames) == 1 and shown(panel) == at_call
    # Forward over the call, then Ctrl+Shift+F10 (reverse step over) comes back over it in one step.
    press(qtbot, panel, Qt.Key.Key_F10)
    assert panel.listing.current_pc != call.pc
    back = press(qtbot, panel, Qt.Key.Key_F10, CTRL_SHIFT)
    assert len(back.location.frames) == 1 and shown(panel) == at_call
    # Past the breakpoint (into the callee and on), Ctrl+Shift+F5 returns to the breakpoint hit.
    for _ in range(5):
        press(qtbot, panel, Qt.Key.Key_F11)
    stop = press(qtbot, panel, Qt.Key.Key_F5, CTRL_SHIFT)
    assert stop.reason == "breakpoint"
    assert shown(panel) == at_call and stop.detail.registers == hit.detail.registers
    # Once more: nothing earlier than the breakpoint but the history's start.
    stop = press(qtbot, panel, Qt.Key.Key_F5, CTRL_SHIFT)
    assert stop.detail.position == 0 and panel.listing.current_pc == 0
    save_screenshot(panel, "reverse_continue")
    # Reverse step out of the outermost frame cannot be done: said, and the program stays.
    with qtbot.waitSignal(panel.bridge.failed, timeout=TIMEOUT):
        qtbot.keyClick(panel.listing, Qt.Key.Key_F11, Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ShiftModifier)
    assert panel.bridge.state == "stopped" and panel.status_label.text().startswith("Not done")
    assert panel.reverse.reverse_step_into_action.isEnabled()
    # Without breakpoints Reverse Continue goes to the start of the history (gdb's meaning): its tooltip and
    # the stop's status say so.
    action = panel.reverse.reverse_continue_action
    assert "previous breakpoint hit" in action.toolTip()
    with qtbot.waitSignal(panel.bridge.breakpointsChanged, timeout=TIMEOUT):
        panel.bridge.set_breakpoints(())
    assert "start of the recorded history" in action.toolTip() and "no breakpoints" in action.toolTip()
    for _ in range(3):
        press(qtbot, panel, Qt.Key.Key_F11)
    stop = press(qtbot, panel, Qt.Key.Key_F5, CTRL_SHIFT)
    assert stop.reason == "history-start" and stop.detail.position == 0
    assert "no breakpoints set" in panel.status_label.text()


def test_timeline_jumps_to_positions_and_dispatches_after_the_run_finished(qtbot, main_window, compiled):
    vmfb = compiled.path("control_flow", "llvm-cpu")
    inputs = ("4xf32=1 2 3 4", "3")
    panel = open_in_stepper(qtbot, main_window, vmfb, "repeat_double", inputs)
    # A forward reference: parked at dispatch #1 by Next Dispatch (F6) twice, its bindings read.
    to_entry(qtbot, panel)
    press(qtbot, panel, Qt.Key.Key_F6)
    second = press(qtbot, panel, Qt.Key.Key_F6)
    assert second.location.dispatch_info.ordinal == 1
    reference = [np.array(a, copy=True) for a in read_bindings(qtbot, panel.bridge, TIMEOUT)]
    # Shift+F6: previous dispatch (parked in #0).
    prev = press(qtbot, panel, Qt.Key.Key_F6, Qt.KeyboardModifier.ShiftModifier)
    assert prev.location.dispatch_info.ordinal == 0 and str(prev.location.dispatch_info.when) == "before"
    assert main_window.workbench.state.paused.ordinal == 0
    # Run to the end; the history stays and the timeline covers it.
    finish(qtbot, panel)
    timeline = panel.reverse.timeline
    latest = panel.bridge.history.latest
    assert timeline.latest == latest == panel.bridge.history.position > 0 and panel.reverse.reverse_step_into_action.isEnabled()
    # The dispatches that ran inside the fast run (F5) have their exact positions, in run order.
    marks = panel.bridge.history.dispatches
    assert [m.ordinal for m in marks] == [0, 1, 2] and all(m.exact for m in marks)
    assert marks[0].position < marks[1].position < marks[2].position < latest
    save_screenshot(panel, "reverse_finished")
    # Click in the middle of the strip: the run travels to that instruction.
    ticks = [timeline.x_of(p) for p, _, _ in timeline.dispatches]
    x = next(
        x for x in range(int(timeline.x_of(latest // 2)), timeline.width()) if all(abs(t - x) > 6 for t in ticks)
    )
    target = timeline.position_at(x)
    assert 0 < target < latest
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(timeline, Qt.MouseButton.LeftButton, pos=QPoint(x, timeline.height() // 2))
    stop = blocker.args[0]
    assert stop.detail.position == target
    assert main_window.context.pc == stop.location.frames[-1].pc == panel.listing.current_pc
    wait_history(qtbot, panel, target)
    at_target = shown(panel)
    # The same position reached by stepping a fresh run forward.
    to_entry(qtbot, panel)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        panel.bridge.step("into", target)
    assert shown(panel) == at_target and blocker.args[0].detail.registers == stop.detail.registers
    # Finish again, then click dispatch #1's tick: the run stops inside it, tensors as the forward stop saw.
    finish(qtbot, panel)
    assert timeline.latest == latest and timeline.position == latest
    position = next(p for p, o, _ in timeline.dispatches if o == 1)
    with qtbot.waitSignal(panel.bridge.dispatchStopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(timeline, Qt.MouseButton.LeftButton, pos=QPoint(int(timeline.x_of(position)), 12))
    assert blocker.args[0].ordinal == 1 and main_window.workbench.state.paused.ordinal == 1
    travelled = read_bindings(qtbot, panel.bridge, TIMEOUT)
    assert len(travelled) == len(reference)
    for a, b in zip(travelled, reference):
        np.testing.assert_array_equal(a, b)
    save_screenshot(panel, "reverse_timeline_dispatch")


def test_when_did_this_change_runs_back_to_the_last_write(qtbot, main_window, compiled):
    vmfb = compiled.path("control_flow", "llvm-cpu")
    panel = open_in_stepper(qtbot, main_window, vmfb, "collatz_steps", ("27",))
    to_entry(qtbot, panel)
    words = {0: panel.workbench.state.stop.detail.registers.i32}
    n = 30
    for i in range(1, n + 1):
        words[i] = press(qtbot, panel, Qt.Key.Key_F11).detail.registers.i32
    wait_history(qtbot, panel, n)
    # A register that changed, and one step after which it last changed.
    reg, last = max(
        ((r, max(i for i in range(1, n + 1) if words[i][r] != words[i - 1][r]))
         for r in range(len(words[n])) if any(words[i][r] != words[i - 1][r] for i in range(1, n + 1))),
        key=lambda rl: -rl[1],
    )
    assert last < n  # something to run back over
    bank = panel.registers.topLevelItem(0)
    watch = panel.reverse.watch_of(panel.registers, bank.child(reg))
    assert watch == WatchRegister(0, "i", reg)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        panel.reverse.when_changed(watch)
    stop = blocker.args[0]
    # The instruction at position last-1 wrote it: the run is just before it, the pc on that instruction.
    assert stop.detail.position == last - 1
    assert stop.detail.registers.i32 == words[last - 1]
    text = panel.status_label.text()
    # The frame as the Call Stack numbers and names it (innermost first), not its depth from the entry.
    frames = blocker.args[0].location.frames
    assert len(frames) == 1
    assert f"%i{reg} of #0 {frames[0].module}.{frames[0].function} was last written at instruction {last - 1}" in text
    assert "→" in text
    wait_history(qtbot, panel, last - 1)
    save_screenshot(panel, "reverse_when_changed")
    # A global row of the globals view maps to a global watch.
    qtbot.waitUntil(lambda: panel.globals_view.topLevelItemCount() == 3, timeout=TIMEOUT)  # why unnamed, then both
    refs = panel.globals_view.topLevelItem(2)
    if refs.childCount():
        assert isinstance(panel.reverse.watch_of(panel.globals_view, refs.child(0)), WatchGlobalRef)


def test_a_forward_stop_timeline_says_its_positions_are_not_located_yet(qtbot):
    """A run that went forward at full speed to a dispatch stop has no located span yet: the strip says so
    instead of an axis from 0 to 0 with every dispatch tick at its left edge."""
    from app.views.run_timeline import NOT_LOCATED, RunTimeline
    from engine.session.protocol import DispatchMark, History, ReadHistory

    timeline = RunTimeline()
    qtbot.addWidget(timeline)
    marks = (DispatchMark(0, "main_dispatch_0", 0, False), DispatchMark(1, "main_dispatch_1", 0, False))
    timeline.set_history(History(ReadHistory(), recording=True, position=None, latest=0, dispatches=marks))
    assert timeline.has_history and not timeline.located and timeline.toolTip() == NOT_LOCATED
    timeline.set_history(History(ReadHistory(), recording=True, position=34, latest=40, dispatches=(DispatchMark(0, "d", 34, True),)))
    assert timeline.located and "instruction 34 of 40" in timeline.toolTip()




def test_a_failed_run_is_gone_back_in_from_where_it_failed(qtbot, main_window, tmp_path):
    """gdb goes back from a fatal signal: the run that failed (a cf.assert: vm.fail) is reverse-stepped from
    the failing instruction, and Run Dispatch List's history still has its dispatch."""
    from support.session import compile_program

    vmfb = compile_program("square_assert", "llvm-cpu", tmp_path)
    panel = open_in_stepper(qtbot, main_window, vmfb, "main", ("4xf32=1 2 3 4",))
    to_entry(qtbot, panel)
    with qtbot.waitSignal(panel.bridge.failed, timeout=TIMEOUT) as blocker:
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
    failed = blocker.args[0]
    assert "the square was not negative" in failed.message
    assert "the run failed" in panel.status_label.text().lower() or panel.status_label.text().startswith("Failed")
    assert main_window.banner.text().startswith("the run failed")
    failed_pc = failed.location.frames[-1].pc
    # Shown where it failed: the vm.fail line, the call stack, the failing frame's registers (vm.fail's status
    # register holds 9, FAILED_PRECONDITION).
    assert panel.listing.current_pc == failed_pc and panel.call_stack.topLevelItemCount() == 1
    qtbot.waitUntil(lambda: 9 in tuple(panel.registers.registers.i32), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: panel.bridge.can_reverse, timeout=TIMEOUT)
    back = press(qtbot, panel, Qt.Key.Key_F11, CTRL_SHIFT)  # reverse step into
    assert back.location.frames[-1].function == "main" and back.location.frames[-1].pc < failed_pc
    assert panel.listing.current_pc == back.location.frames[-1].pc
    # Stepped back: the banner no longer says the run failed as if it were the present (the Log keeps it).
    assert main_window.banner.text() == ""
    assert any(m.text.startswith("the run failed") for m in main_window.messages.messages)
    # Forward again: the same failure at the same instruction.
    with qtbot.waitSignal(panel.bridge.failed, timeout=TIMEOUT) as blocker:
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
    assert blocker.args[0].location.frames[-1].pc == failed_pc
    assert main_window.banner.text().startswith("the run failed")
