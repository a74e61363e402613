"""The window's bridge is a thin re-emitter of the engine's ``SessionClient``: the state, the stop and the
history it shows are the client's, and its signals come on the GUI thread."""

from __future__ import annotations

from PySide6.QtCore import QThread

from app.session_bridge import SessionBridge
from engine.session.client import SessionClient, SessionState
from engine.session.persist import SessionStore
from engine.session.protocol import Breakpoint, ReadRegisters, Registers

TIMEOUT = 60_000


def test_the_bridge_re_emits_the_clients_events(qtbot, compiled, tmp_path):
    bridge = SessionBridge(in_process=True, store=SessionStore(tmp_path / "state"))
    assert isinstance(bridge.client, SessionClient)
    states, threads, answers, histories = [], [], [], []
    bridge.stateChanged.connect(states.append)
    bridge.stopped.connect(lambda _: threads.append(QThread.currentThread()))
    bridge.answered.connect(answers.append)
    bridge.historyChanged.connect(histories.append)
    try:
        with qtbot.waitSignal(bridge.opened, timeout=TIMEOUT):
            bridge.open(compiled.path("matmul", "llvm-cpu"))
        bridge.add_breakpoint(Breakpoint("dispatch", ordinal=0))
        assert bridge.client.breakpoints == bridge.breakpoints == (Breakpoint("dispatch", ordinal=0),)
        with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT) as blocker:
            bridge.call("main", ("4x8xf32=0.1", "8x16xf32=0.3"))
        stop = blocker.args[0]
        assert bridge.client.last_stop is stop and bridge.state is bridge.client.state is SessionState.STOPPED
        assert threads == [bridge.thread()]
        qtbot.waitUntil(lambda: bridge.history is not None, timeout=TIMEOUT)
        assert bridge.history is bridge.client.history and histories[-1] is bridge.history
        bridge.evaluate(ReadRegisters())
        qtbot.waitUntil(lambda: any(isinstance(a, Registers) for a in answers), timeout=TIMEOUT)
        assert next(a for a in answers if isinstance(a, Registers)).registers == stop.detail.registers
        with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT):
            bridge.continue_()
        assert states == ["starting", "idle", "running", "stopped", "running", "idle"]
    finally:
        bridge.shutdown()
    assert bridge.state == "closed"
