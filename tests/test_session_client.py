"""The one client of a session (``engine.session.client.SessionClient``) on real programs: its state
machine, breakpoints, history, the saved work, restart after the session process crashes, and
``iree-lens debug`` driving it."""

from __future__ import annotations

import json

import numpy as np
from support import patched_kernel_copy, wait_until

from engine.cli import debug as debug_cli
from engine.cli import main as lens_main
from engine.session.client import (
    BreakpointsChanged,
    CallChanged,
    HistoryChanged,
    SessionClient,
    SessionState,
    StateChanged,
    child_process,
    in_process,
)
from engine.session.debug_session import DebugSession
from engine.session.persist import SessionStore
from engine.session.protocol import (
    Bindings,
    Breakpoint,
    Crashed,
    Failed,
    Finished,
    History,
    Log,
    Opened,
    ReadRegisters,
    Registers,
    Stopped,
)
from engine.session.timetravel_session import TimeTravelSession

MATMUL_INPUTS = ("4x8xf32=0.1", "8x16xf32=0.3")
ELEMENTWISE_INPUTS = ("4x8xf32=1", "4x8xf32=2")
TIMEOUT = 120


def _until(client: SessionClient, kind: type, timeout: float = TIMEOUT):
    """Receive events until one of ``kind`` (the others are taken into the state on the way)."""
    while True:
        event = client.next_event(timeout)
        if isinstance(event, kind):
            return event
        assert not isinstance(event, Crashed) or kind is Crashed, event


def _iree_main(module) -> np.ndarray:
    import iree.runtime as rt

    ctx = rt.SystemContext(config=rt.Config("local-sync"))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, module.read_bytes()))
    a, b = np.full((4, 8), 0.1, np.float32), np.full((8, 16), 0.3, np.float32)
    return ctx.modules.module["main"](a, b).to_host()


def test_state_machine_breakpoints_history_and_saved_work(compiled, tmp_path):
    notices = []
    store = SessionStore(tmp_path / "state")
    client = SessionClient(in_process(TimeTravelSession), store=store, notify=notices.append, blocking=True)
    module = compiled.path("matmul", "llvm-cpu")
    try:
        assert client.state == SessionState.CLOSED
        client.open(str(module))
        assert client.state == SessionState.STARTING
        opened = _until(client, Opened)
        assert client.state == SessionState.IDLE and client.functions == opened.functions
        client.add_breakpoint(Breakpoint("dispatch", ordinal=0))
        client.add_breakpoint(Breakpoint("dispatch", ordinal=0))  # set once
        assert client.breakpoints == (Breakpoint("dispatch", ordinal=0),)
        assert not client.step()  # no call: nothing sent
        client.call("main", MATMUL_INPUTS)
        assert client.state == SessionState.RUNNING
        stop = _until(client, Stopped)
        assert client.state == SessionState.STOPPED and client.last_stop is stop
        assert stop.location.dispatch_info.ordinal == 0
        history = _until(client, History)  # a recording session: the client asked after the stop
        assert client.history is history and history.recording and len(history.dispatches) == 1
        assert client.request_bindings()
        bindings = _until(client, Bindings)
        assert len(bindings.tensors) == len(stop.location.dispatch_info.bindings)
        assert client.query(ReadRegisters())
        assert isinstance(_until(client, Registers), Registers)
        client.continue_()
        finished = _until(client, Finished)
        assert client.state == SessionState.IDLE and client.last_stop is None
        # The same executables on IREE's own runtime give the same bytes.
        np.testing.assert_array_equal(finished.outputs[0].to_numpy(), _iree_main(module))
        _until(client, History)
        assert client.can_reverse  # a finished recorded call can be gone back in
        # The notices: every state change, the breakpoints and the call, the history.
        states = [n.state for n in notices if isinstance(n, StateChanged)]
        assert states == ["starting", "idle", "running", "stopped", "running", "idle"]
        assert any(isinstance(n, BreakpointsChanged) for n in notices)
        assert [n.call.function for n in notices if isinstance(n, CallChanged)] == ["main"]
        assert any(isinstance(n, HistoryChanged) and n.history is not None for n in notices)
        # The user's work was saved as it changed, and a new client offers it back.
        saved = SessionClient(in_process(DebugSession), store=SessionStore(tmp_path / "state")).saved_session()
        assert saved.module_path == str(module) and saved.function == "main"
        assert saved.inputs == list(MATMUL_INPUTS) and saved.breakpoints == [{"kind": "dispatch", "ordinal": 0, "when": "before"}]
    finally:
        client.shutdown()
    assert client.state == SessionState.CLOSED


def test_a_crashed_session_process_restarts_with_the_module_and_breakpoints(compiled, tmp_path):
    bad = tmp_path / "null_write.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), bad)
    client = SessionClient(child_process("engine.session.debug_session:DebugSession"), blocking=True)
    try:
        client.open(str(bad))
        _until(client, Opened)
        first = client.transport.pid
        client.call("main", ELEMENTWISE_INPUTS)
        crash = _until(client, Crashed)
        assert "SIGSEGV" in crash.reason and crash.location.dispatch.startswith("main_dispatch_0")
        assert client.crash_count == 1 and "segmentation fault" in client.crash_report
        assert "Call: main(4x8xf32=1, 4x8xf32=2)" in client.crash_report
        # Restarted in a new process, the module opened again without being asked.
        assert client.state == SessionState.STARTING
        _until(client, Opened)
        assert client.state == SessionState.IDLE and client.alive and client.transport.pid != first
        # A breakpoint set now, before the dispatch that faults, holds in the new process: a rerun stops there.
        client.set_breakpoints([Breakpoint("dispatch", ordinal=0)])
        client.rerun()
        stop = _until(client, Stopped)
        assert stop.reason == "dispatch" and stop.location.dispatch_info.ordinal == 0
        client.continue_()
        again = _until(client, Crashed)
        assert again.location.dispatch == crash.location.dispatch and client.crash_count == 2
        # Restarted again, with the breakpoint: the rerun stops before the faulting dispatch once more.
        _until(client, Opened)
        client.rerun()
        assert _until(client, Stopped).location.dispatch_info.ordinal == 0
    finally:
        client.shutdown()


def test_iree_lens_debug_runs_through_the_session_client(compiled, tmp_path, capsys, monkeypatch):
    """The CLI's events are the client's: every stop it prints went through ``SessionClient.receive``."""
    received = []

    class Recording(SessionClient):
        def receive(self, event):
            received.append(event)
            super().receive(event)

    monkeypatch.setattr(debug_cli, "SessionClient", Recording)
    script = tmp_path / "commands.gdb"
    script.write_text("break dispatch 0\ncontinue\nstep\ninfo registers\ncontinue\n")
    module = compiled.path("matmul", "llvm-cpu")
    args = [f"--input={i}" for i in MATMUL_INPUTS]
    code = lens_main(["debug", str(module), "--function=main", f"--commands={script}", "--json", *args])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    stops = [e for e in received if isinstance(e, Stopped)]
    assert [line.get("reason") for line in lines if "reason" in line] == ["dispatch", "step", "finished"]
    # The session's notes first (the sources it rebuilt before opening: every stop typed), then Opened.
    events = [e for e in received if not isinstance(e, Log)]
    assert len(stops) == 2 and isinstance(events[0], Opened) and isinstance(events[-1], Finished)
    assert lines[1]["registers"]["i32"] == list(stops[1].detail.registers.i32)


def test_a_restarted_in_process_transport_is_a_fresh_session(compiled):
    client = SessionClient(in_process(DebugSession), blocking=True)
    try:
        client.open(str(compiled.path("matmul", "llvm-cpu")))
        _until(client, Opened)
        assert client.query(ReadRegisters())
        assert isinstance(_until(client, Registers), Registers)
        client.transport.restart()
        assert client.query(ReadRegisters())  # the fresh handler has no module open
        failed = client.next_event(TIMEOUT)
        assert isinstance(failed, Failed) and "no module is open" in failed.message
    finally:
        client.shutdown()


def test_a_command_sent_to_a_session_process_that_just_died_is_a_crash_not_an_error(compiled):
    # A kernel can crash the session process between its last event and the client's next command (a query
    # the client sends on its own when a stop or failure arrives): the send must not raise BrokenPipeError
    # into the window or script; the reader reports the crash.
    import os
    import signal

    from engine.session.protocol import ReadHistory

    client = SessionClient(child_process("engine.session.debug_session:DebugSession"), blocking=True)
    try:
        client.open(str(compiled.path("elementwise", "llvm-cpu")))
        _until(client, Opened)
        os.kill(client.transport.pid, signal.SIGKILL)
        wait_until(lambda: not client.transport.alive, 10, "the session process to die")
        client.transport.send(ReadHistory())  # into a pipe whose reader is gone
        crash = _until(client, Crashed)
        assert "SIGKILL" in crash.reason or "killed" in crash.reason, crash.reason
    finally:
        client.shutdown()
