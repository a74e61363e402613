"""The window on a remote session with a module that exists only on the remote side (File > Attach to
Remote..., Open Remote Module...): the server is a real ``iree-lens serve --stdio`` started in another folder,
the module is named by a path relative to that folder, which the window's process cannot see. The module's
bytes come over the session's stream once (the views read that copy), the session runs the remote file,
and a dropped connection keeps the window's module, breakpoints and call."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from support.app import read_bindings

from app.messages import Level
from engine.session.client import SessionState
from engine.session.protocol import Breakpoint

TIMEOUT = 60_000
ROOT = Path(__file__).resolve().parents[2]
INPUTS = ("4x8xf32=0.5", "8x16xf32=0.25")


@pytest.fixture
def remote_side(compiled, tmp_path, monkeypatch):
    """A folder only the server works in, holding the module, and the command that serves from there."""
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    shutil.copy(compiled.path("matmul", "llvm-cpu"), server_dir / "matmul.vmfb")
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    monkeypatch.chdir(client_dir)  # "matmul.vmfb" names nothing here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    serve = shlex.join([sys.executable, "-m", "app.launcher", "serve", "--stdio"])
    command = shlex.join(["sh", "-c", f"cd {shlex.quote(str(server_dir))} && exec {serve}"])
    return server_dir, command


def test_a_module_only_the_remote_side_has(qtbot, main_window, remote_side):
    server_dir, command = remote_side
    window = main_window
    bridge, workbench = window.session_bridge, window.workbench
    assert not Path("matmul.vmfb").exists()
    crashes = []
    bridge.crashed.connect(crashes.append)
    bridge.attach_remote(command)
    try:
        assert window.open_remote_module("matmul.vmfb")
        qtbot.waitUntil(lambda: workbench.module is not None and bridge.state == SessionState.IDLE, timeout=TIMEOUT)
        loaded = workbench.module
        remote_path = str(server_dir / "matmul.vmfb")
        # The views read a copy fetched over the stream; the session opened the file on its side.
        assert Path(loaded.path).read_bytes() == (server_dir / "matmul.vmfb").read_bytes()
        assert str(loaded.path) != remote_path and bridge.module_path == remote_path
        assert "main" in [f.name for f in loaded.module.exports]
        assert bridge.functions and "main" in bridge.functions

        # A remote run shows as a local one: entry stop, a step moves the window's position, a dispatch stop.
        workbench.set_call("main", INPUTS)
        with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT):
            assert workbench.run(stop_at_entry=True)
        with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT) as step:
            bridge.step_into()
        assert window.context.position.pc == step.args[0].location.frames[-1].pc
        bridge.add_breakpoint(Breakpoint("dispatch", ordinal=0))
        with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT):
            bridge.continue_()
        bindings = read_bindings(qtbot, bridge, TIMEOUT)
        lhs = np.full((4, 8), 0.5, np.float32).tobytes()
        assert any(lhs in array.tobytes() for array in bindings)

        # The connection drops: reported, and the window keeps its module, breakpoints and call; a fresh
        # server opens the remote path again (it is not valid here), and the call runs again.
        bridge.client.transport.process.kill()
        qtbot.waitUntil(lambda: bool(crashes), timeout=TIMEOUT)
        assert workbench.module is loaded
        assert bridge.breakpoints == (Breakpoint("dispatch", ordinal=0),)
        assert (workbench.state.function, workbench.state.inputs) == ("main", INPUTS)
        qtbot.waitUntil(lambda: bridge.state == SessionState.IDLE, timeout=TIMEOUT)
        assert bridge.module_path == remote_path
        with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT):
            assert workbench.run()

        # A server that cannot be started again (its folder is gone): reported, the window keeps its state;
        # attaching again with the same command reconnects and opens the module again.
        failures = []
        bridge.failed.connect(failures.append)
        server_dir.rename(server_dir.with_name("away"))
        bridge.client.transport.process.kill()
        qtbot.waitUntil(lambda: len(crashes) == 2 and bool(failures), timeout=TIMEOUT)
        assert "restart" in failures[-1].message
        assert workbench.module is loaded and bridge.breakpoints == (Breakpoint("dispatch", ordinal=0),)
        server_dir.with_name("away").rename(server_dir)
        bridge.attach_remote(command)
        qtbot.waitUntil(lambda: bridge.state == SessionState.IDLE, timeout=TIMEOUT)
        assert workbench.module is loaded and bridge.module_path == remote_path
        with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT):
            assert workbench.run()

        # A path the remote side does not have is an error message; the open module stays.
        errors = len([m for m in window.messages.messages if m.level == Level.ERROR])
        assert window.open_remote_module("missing.vmfb")
        qtbot.waitUntil(
            lambda: len([m for m in window.messages.messages if m.level == Level.ERROR]) > errors, timeout=TIMEOUT
        )
        assert workbench.module is loaded
    finally:
        bridge.shutdown()


def test_open_remote_module_needs_a_remote_session(qtbot, main_window):
    failures = []
    main_window.session_bridge.failed.connect(failures.append)
    assert not main_window.open_remote_module("matmul.vmfb")
    assert failures and not main_window.open_remote_action.isEnabled()


def test_the_menu_path(qtbot, main_window, remote_side, monkeypatch):
    """File > Attach to Remote... asks for the command, then for a module's path on that side."""
    from PySide6.QtWidgets import QInputDialog

    server_dir, command = remote_side
    answers = iter([(command, True), ("matmul.vmfb", True)])
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *args, **kwargs: next(answers)))
    window = main_window
    try:
        window.attach_remote_action.trigger()
        assert window.open_remote_action.isEnabled()
        qtbot.waitUntil(lambda: window.session_bridge.state == SessionState.IDLE, timeout=TIMEOUT)
        assert window.session_bridge.module_path == str(server_dir / "matmul.vmfb")
        assert window.workbench.module is not None
        assert not window.settings.recent_files()  # (the local copy is no file to reopen later)
    finally:
        window.session_bridge.shutdown()
