"""The window's bridge on a remote session (``attach_remote``: the session runs in ``iree-lens serve
--stdio``): the same stops, bindings and history as a local one, and a dropped connection is reported
(the bridge keeps its module and breakpoints and starts a fresh server)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import numpy as np
from support.app import read_bindings

from app.session_bridge import SessionBridge
from engine.session.client import SessionState
from engine.session.persist import SessionStore
from engine.session.protocol import Breakpoint

TIMEOUT = 60_000
ROOT = Path(__file__).resolve().parents[2]


def test_remote_session_behind_the_bridge(qtbot, compiled, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    bridge = SessionBridge(store=SessionStore(tmp_path / "state"))
    bridge.attach_remote(shlex.join([sys.executable, "-m", "app.launcher", "serve", "--stdio"]))
    crashes = []
    bridge.crashed.connect(crashes.append)
    try:
        with qtbot.waitSignal(bridge.opened, timeout=TIMEOUT):
            bridge.open(compiled.path("matmul", "llvm-cpu"))
        bridge.add_breakpoint(Breakpoint("dispatch", ordinal=0))
        with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT) as blocker:
            bridge.call("main", ("4x8xf32=0.5", "8x16xf32=0.25"))
        assert blocker.args[0].ordinal == 0
        bindings = read_bindings(qtbot, bridge, TIMEOUT)
        lhs = np.full((4, 8), 0.5, np.float32).tobytes()
        assert any(lhs in array.tobytes() for array in bindings)
        qtbot.waitUntil(lambda: bridge.history is not None, timeout=TIMEOUT)  # the server records (time travel)
        bridge.client.transport.process.kill()  # the connection drops
        qtbot.waitUntil(lambda: bool(crashes), timeout=TIMEOUT)
        assert "lost" in crashes[0].reason
        qtbot.waitUntil(lambda: bridge.state == SessionState.IDLE, timeout=TIMEOUT)  # a fresh server, reopened
        assert bridge.breakpoints == (Breakpoint("dispatch", ordinal=0),)
        with qtbot.waitSignal(bridge.dispatchStopped, timeout=TIMEOUT):
            bridge.call("main", ("4x8xf32=0.5", "8x16xf32=0.25"))
    finally:
        bridge.shutdown()
