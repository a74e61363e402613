"""A faulting or hanging kernel in the stepper: the child process dies, the window lives and reports it.

The kernels are real llvm-cpu dispatch functions patched in the .vmfb to write through a null pointer or
to spin forever (``jmp .``), as in ``tests/test_session.py``.
"""

from __future__ import annotations

import os
import time

import pytest
from PySide6.QtCore import Qt
from support import NULL_WRITE, SPIN, cpu_seconds, patched_kernel_copy

INPUTS = ("4x8xf32=1", "4x8xf32=2")
TIMEOUT = 60_000


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    path = tmp_path / "state"
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(path))
    return path


def open_patched(qtbot, window, vmfb):
    panel = window.panels["stepper"]
    window.docks["stepper"].show()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    panel.set_inputs(INPUTS)
    return panel


def test_null_write_crashes_the_child_the_window_reports_and_rerun_works(
    qtbot, main_window, compiled, tmp_path
):
    bad = tmp_path / "null_write.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), bad, NULL_WRITE)
    panel = open_patched(qtbot, main_window, bad)
    first_child = panel.bridge.session.pid
    with qtbot.waitSignal(panel.bridge.crashed, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    crash = blocker.args[0]
    assert "SIGSEGV" in crash.reason and crash.exitcode == -11
    # The report is in the window, not in a modal dialog: what ran (function, pc, dispatch) and why.
    assert panel.crash_banner.isVisible()
    report = panel.crash_label.text()
    assert "segmentation fault" in report
    assert "module.main at pc 0x" in report
    assert "main_dispatch_0" in report and "Call: main(4x8xf32=1, 4x8xf32=2)" in report
    assert "segmentation fault" in main_window.banner.text()
    assert main_window.isVisible()
    # The session was restarted in a new process, with the module open again.
    qtbot.waitUntil(lambda: panel.bridge.state == "idle", timeout=TIMEOUT)
    assert panel.bridge.is_alive and panel.bridge.session.pid != first_child
    # Rerun repeats the call (and the patched kernel crashes the same way, at the same dispatch).
    with qtbot.waitSignal(panel.bridge.crashed, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.rerun_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].location.dispatch == crash.location.dispatch
    assert panel.bridge.crash_count == 2


def test_rerun_after_a_crash_stops_at_the_same_breakpoint(qtbot, main_window, compiled, tmp_path):
    """The breakpoints survive the restart: a rerun stops where the user was before the crash."""
    bad = tmp_path / "null_write.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), bad, NULL_WRITE)
    panel = open_patched(qtbot, main_window, bad)
    panel.breakpoints_view.add("import", "hal.device.queue.execute.indirect")
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    before = blocker.args[0].location.frames[-1].pc
    with qtbot.waitSignal(panel.bridge.crashed, timeout=TIMEOUT):
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: panel.bridge.state == "idle", timeout=TIMEOUT)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.rerun_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].reason == "breakpoint" and blocker.args[0].location.frames[-1].pc == before
    assert not panel.crash_banner.isVisible()


def test_a_hanging_kernel_is_stopped_within_a_second(qtbot, main_window, compiled, tmp_path):
    spinning = tmp_path / "spin.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), spinning, SPIN)
    panel = open_patched(qtbot, main_window, spinning)
    assert panel.bridge.stop_timeout == 1.0  # the default limit (a setting)
    idle = cpu_seconds(os.getpid(), descendants_only=True)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    # Well into the spinning kernel: the session's process has spent half a CPU second since the click.
    qtbot.waitUntil(lambda: cpu_seconds(os.getpid(), descendants_only=True) - idle >= 0.5, timeout=120_000)
    assert panel.bridge.state == "running"
    start = time.monotonic()
    with qtbot.waitSignal(panel.bridge.crashed, timeout=5000) as blocker:
        qtbot.mouseClick(panel.toolbar.widgetForAction(panel.stop_action), Qt.MouseButton.LeftButton)
    elapsed = time.monotonic() - start
    assert elapsed < 1.6, elapsed  # 1 s to answer the pause, then the kill
    assert "did not stop within 1 s" in blocker.args[0].reason
    # The user's Stop, not a crash: said as a stop, with the dispatch that was running.
    assert not panel.crash_banner.isVisible() and main_window.workbench.state.outcome == "stopped"
    assert panel.status_label.text().startswith("Stopped") and "main_dispatch_0" in panel.status_label.text()
    qtbot.waitUntil(lambda: panel.bridge.state == "idle", timeout=TIMEOUT)


def test_the_hang_limit_setting_kills_a_silent_run(qtbot, make_main_window, compiled, tmp_path):
    from app.session_bridge import save_timeouts

    save_timeouts(hang_timeout=1.0)  # what the Limits menu stores
    window = make_main_window()
    spinning = tmp_path / "spin.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), spinning, SPIN)
    panel = open_patched(qtbot, window, spinning)
    assert panel.bridge.hang_timeout == 1.0
    with qtbot.waitSignal(panel.bridge.crashed, timeout=10_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert "hang" in blocker.args[0].reason and "hang" in panel.crash_label.text()
