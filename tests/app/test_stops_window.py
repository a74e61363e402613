"""The window's run state stops where gdb, the command line and DAP do (tests/test_stops.py drives the same
sequence through ``iree-lens debug`` and the DAP adapter and checks gdb's answers).

``session_programs/matmul_chain12.mlir`` (twelve matmuls in one command buffer) compiled with the real
iree-compile, run in the window's session, driven by the keyboard: Ctrl+R runs to a breakpoint at dispatch 10,
Shift+F6 back one dispatch, then breakpoints at 5 and "after 3" set there, Ctrl+Shift+F5 twice, F5 three times.
Each stop is read from the window's one run state (``Workbench.state``), which every view shows.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from support.app import TIMEOUT, add_breakpoint, open_in_stepper
from support.session import compile_program

CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
CTRL = Qt.KeyboardModifier.ControlModifier
# gdb's answers, the same list tests/test_stops.py asserts for the command line and DAP.
GDB_STOPS = [(10, "before"), (9, "before"), (5, "before"), (3, "after"), (5, "before"), (10, "before"), ("finished",)]


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def stop_after(qtbot, window, panel, key, modifier=Qt.KeyboardModifier.NoModifier) -> tuple:
    """Press ``key``; the run state's stop once the session answered: (ordinal, when) or ("finished",)."""
    bridge = panel.bridge
    heard = []
    on_stop, on_finish = (lambda _: heard.append("stopped")), (lambda _: heard.append("finished"))
    bridge.stopped.connect(on_stop)
    bridge.finished.connect(on_finish)
    try:
        qtbot.keyClick(panel.listing, key, modifier)
        qtbot.waitUntil(lambda: bool(heard), timeout=TIMEOUT)
    finally:
        bridge.stopped.disconnect(on_stop)
        bridge.finished.disconnect(on_finish)
    if heard[0] == "finished":
        assert window.workbench.state.paused is None and window.workbench.state.outcome == "finished"
        return ("finished",)
    paused = window.workbench.state.paused
    assert paused is not None, "a stop that is not at a dispatch"
    return (paused.ordinal, paused.when)


def test_the_window_stops_where_gdb_the_cli_and_dap_do(qtbot, main_window, tmp_path):
    vmfb = compile_program("matmul_chain12", "llvm-cpu", tmp_path)
    panel = open_in_stepper(qtbot, main_window, vmfb)
    panel.function_combo.setCurrentText("main")
    panel.set_inputs(("4x4xf32=1", "4x4xf32=0.5"))
    add_breakpoint(qtbot, panel, "dispatch", "10")
    main_window.activateWindow()
    stops = [stop_after(qtbot, main_window, panel, Qt.Key.Key_R, CTRL)]  # Run
    stops.append(stop_after(qtbot, main_window, panel, Qt.Key.Key_F6, SHIFT))
    add_breakpoint(qtbot, panel, "dispatch", "5")
    add_breakpoint(qtbot, panel, "dispatch", "3", "after")
    for _ in range(2):
        stops.append(stop_after(qtbot, main_window, panel, Qt.Key.Key_F5, CTRL_SHIFT))
    for _ in range(3):
        stops.append(stop_after(qtbot, main_window, panel, Qt.Key.Key_F5))
    assert stops == GDB_STOPS
