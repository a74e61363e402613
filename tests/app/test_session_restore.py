"""Nothing is lost: a session set up in an application that is then killed (SIGKILL) comes back.

A real application runs in a subprocess (offscreen), opens a module, sets breakpoints and starts a call;
the test kills it with SIGKILL, then a new main window offers the last session and restores it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from PySide6.QtCore import Qt

from engine.runtime.vmfb.disassembler import function_lines
from engine.runtime.vmfb.module import open_vmfb
from engine.session.protocol import Breakpoint

INPUTS = ("4x8xf32=1", "4x8xf32=2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2")
TIMEOUT = 60_000

_APP_SCRIPT = textwrap.dedent(
    """
    import sys
    from app.main import start_app
    from engine.session.protocol import Breakpoint

    vmfb, pc, inputs = sys.argv[1], int(sys.argv[2]), tuple(sys.argv[3:])
    app, window = start_app([vmfb])
    panel = window.panels["stepper"]

    def set_up(_event):
        panel.bridge.opened.disconnect(set_up)
        panel.function_combo.setCurrentText("main")
        panel.set_inputs(inputs)
        panel.bridge.add_breakpoint(Breakpoint("instruction", function="main", pc=pc))
        panel.breakpoints_view.add("import", "hal.device.queue.execute.indirect")
        panel.run_to_entry()

    def stopped(_event):
        print("READY", flush=True)

    panel.bridge.opened.connect(set_up)
    panel.bridge.stopped.connect(stopped)
    app.exec()
    """
)


def test_session_restored_after_a_killed_application(
    qtbot, make_main_window, compiled, tmp_path, monkeypatch
):
    vmfb = compiled.path("elementwise", "llvm-cpu")
    state = tmp_path / "state"
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(state))
    lines = [ln for ln in function_lines(open_vmfb(vmfb), "main") if not ln.is_block_label]
    pc = lines[8].pc

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", _APP_SCRIPT, str(vmfb), str(pc), *INPUTS],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        line = ""
        while time.monotonic() < deadline and "READY" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise AssertionError(f"the application exited early:\n{proc.stderr.read()[-3000:]}")
        assert "READY" in line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    # A new application offers the last session without blocking; restoring brings everything back.
    window = make_main_window()
    panel = window.panels["stepper"]
    assert panel.restore_banner.isVisible()
    assert "elementwise" in panel.restore_label.text() and "2 breakpoints" in panel.restore_label.text()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        assert panel.restore_last_session()
    assert not panel.restore_banner.isVisible()
    assert window.context.module is not None and window.context.module.path == vmfb
    assert panel.bridge.breakpoints == (
        Breakpoint("instruction", function="main", pc=pc),
        Breakpoint("import", import_name="hal.device.queue.execute.indirect"),
    )
    assert panel.breakpoints_view.list.count() == 2
    assert panel.function_combo.currentText() == "main" and panel.inputs == INPUTS
    assert pc in panel.listing.breakpoint_pcs
    # And the restored breakpoints are live in the (new) session: Run stops at the instruction one.
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].reason == "breakpoint" and blocker.args[0].location.frames[-1].pc == pc


def test_dismissing_the_offer_keeps_a_fresh_start(qtbot, make_main_window, tmp_path, monkeypatch):
    from engine.session.persist import SessionStore

    state = tmp_path / "state"
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(state))
    SessionStore(state).update(
        module_path=str(tmp_path / "gone.vmfb"), breakpoints=[{"kind": "function", "function": "f"}]
    )
    window = make_main_window()
    panel = window.panels["stepper"]
    assert panel.restore_banner.isVisible()
    qtbot.mouseClick(panel.dismiss_restore_button, Qt.MouseButton.LeftButton)
    assert not panel.restore_banner.isVisible() and panel.bridge.breakpoints == ()
