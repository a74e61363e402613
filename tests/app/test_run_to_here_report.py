"""Run to here (the run's dispatch list) stops before the dispatch picked, and the stop report says so once:
"Stopped at a dispatch (before #5 ...) — main pc ..." and not again as the temporary breakpoint's own
"[before dispatch #5]" after it (the window walk at 1366x768 read "before" twice in the status bar)."""

from __future__ import annotations

import pytest
from support.app import TIMEOUT, open_in_stepper
from support.session import compile_program

from engine.session.protocol import Breakpoint, BreakpointKind


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def test_run_to_here_says_before_once(qtbot, main_window, tmp_path):
    window = main_window
    vmfb = compile_program("matmul_chain12", "llvm-cpu", tmp_path)
    panel = open_in_stepper(qtbot, window, vmfb)
    panel.function_combo.setCurrentText("main")
    panel.set_inputs(("4x4xf32=1", "4x4xf32=0.5"))
    bridge = window.session_bridge
    runs = window.panels["run_dispatch_list"]
    # A breakpoint of the user's own before #2 (its report names it), then Run to here #5 from that stop.
    with qtbot.waitSignal(bridge.breakpointsChanged, timeout=TIMEOUT):
        assert runs.break_here(2)
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT):
        assert window.run_function()
    assert window.workbench.state.paused.ordinal == 2
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT) as done:
        assert runs.run_to_here(5)
    info = done.args[0].location.dispatch_info
    assert info is not None and info.ordinal == 5
    text = window.workbench.state.stop_text
    assert text.startswith("Stopped at a dispatch (before #5 "), text
    assert text.count("before") == 1, text
    assert panel.status_label.text() == text
    # A hit that says something the dispatch does not (a breakpoint on every dispatch) is still reported.
    with qtbot.waitSignal(bridge.breakpointsChanged, timeout=TIMEOUT):
        bridge.add_breakpoint(Breakpoint(BreakpointKind.DISPATCH, dispatch="*"))
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT):
        bridge.continue_()
    assert "[before dispatch every one]" in window.workbench.state.stop_text
