"""The debug session through its protocol, in this process and in a child process.

The child-process tests run real faulting and hanging programs: a kernel hand-edited to write through a
null pointer must crash the child, not the test process, and a run that never ends must stop on request.
"""

from __future__ import annotations

import time

import pytest
from support import SPIN, cpu_seconds, patched_kernel_copy, wait_until
from support.session import Events

from engine.session.child import ChildSession
from engine.session.debug_session import DebugSession
from engine.session.inprocess import InProcessSession
from engine.session.protocol import (
    Breakpoint,
    Call,
    Continue,
    Crashed,
    Failed,
    Finished,
    Open,
    Opened,
    ReadRegisters,
    Registers,
    SetBreakpoints,
    Step,
    Stopped,
)

HANDLER = "engine.session.debug_session:DebugSession"
MATMUL_INPUTS = ("4x8xf32=0.1", "8x16xf32=0.3")


@pytest.fixture(params=["in-process", "child"])
def session(request):
    events = Events()
    if request.param == "in-process":
        s = InProcessSession(DebugSession, events)
    else:
        s = ChildSession(HANDLER, events)
    s.events = events
    yield s
    s.close()


def test_step_break_and_finish(session, compiled):
    events = session.events
    session.send(Open(str(compiled.path("matmul", "llvm-cpu"))))
    opened = events.next()
    assert isinstance(opened, Opened) and opened.functions == ("main",)
    session.send(SetBreakpoints((Breakpoint("import", import_name="hal.device.queue.execute.indirect"),)))
    session.send(Call("main", MATMUL_INPUTS, stop_at_entry=True))
    entry = events.next()
    assert isinstance(entry, Stopped) and entry.reason == "entry" and entry.location.frames[-1].pc == 0
    session.send(Step("into"))
    step = events.next()
    assert step.reason == "step" and step.location.frames[-1].pc == 1
    assert "vm.const" in step.location.frames[-1].instruction
    session.send(Continue())
    hit = events.next()
    assert hit.reason == "breakpoint", hit
    assert "execute.indirect" in hit.location.frames[-1].instruction or hit.detail.breakpoints
    session.send(ReadRegisters())
    answer = events.next()
    assert isinstance(answer, Registers) and answer.query == ReadRegisters() and len(answer.registers.ref) > 0
    session.send(Continue())
    done = events.next()
    assert isinstance(done, Finished), done
    assert done.results_text.startswith("result[0]: hal.buffer_view\n4x16xf32=[0.235")
    out = done.outputs[0].to_numpy()
    assert out.shape == (4, 16) and abs(float(out[0, 0]) - 0.2354963) < 1e-6


def test_results_are_printed_only_when_the_call_asks(session, compiled):
    events = session.events
    session.send(Open(str(compiled.path("matmul", "llvm-cpu"))))
    assert isinstance(events.next(), Opened)
    session.send(Call("main", MATMUL_INPUTS, results_text=False))
    quiet = events.next()
    assert isinstance(quiet, Finished) and quiet.results_text == ""
    session.send(Call("main", MATMUL_INPUTS))
    printed = events.next()
    assert isinstance(printed, Finished) and printed.results_text.startswith("result[0]: hal.buffer_view\n4x16xf32=")
    # The outputs are there either way, and the same.
    assert (quiet.outputs[0].to_numpy() == printed.outputs[0].to_numpy()).all()


def test_program_failure_is_reported_and_the_session_lives_on(session, compiled):
    events = session.events
    session.send(Open(str(compiled.path("matmul", "llvm-cpu"))))
    events.next()
    session.send(Call("main", ("4x7xf32=1", "8x16xf32=1")))
    failed = events.next()
    assert isinstance(failed, Failed) and failed.status == "INVALID_ARGUMENT"
    assert "input0 shape dimension 1 mismatch" in failed.message
    session.send(Call("main", MATMUL_INPUTS))
    assert isinstance(events.next(), Finished)






def test_faulting_kernel_crashes_the_child_not_us(compiled, tmp_path):
    bad = tmp_path / "null_write.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), bad)
    events = Events()
    session = ChildSession(HANDLER, events)
    try:
        session.send(Open(str(bad)))
        assert isinstance(events.next(), Opened)
        session.send(Call("main", ("4x8xf32=1", "4x8xf32=2")))
        crash = events.next()
        assert isinstance(crash, Crashed), crash
        assert "SIGSEGV" in crash.reason and crash.exitcode == -11
        # The report says what was running: the function and the dispatch.
        assert crash.location.dispatch and crash.location.dispatch.startswith("main_dispatch_0")
        assert crash.location.frames and crash.location.frames[-1].function == "main"
        # A restarted transport is a fresh child; opened again, a rerun crashes the same way.
        session.restart()
        session.send(Open(str(bad)))
        assert isinstance(events.next(), Opened)
        session.send(Call("main", ("4x8xf32=1", "4x8xf32=2")))
        again = events.next()
        assert isinstance(again, Crashed) and again.location.dispatch == crash.location.dispatch
    finally:
        session.close()


def test_hanging_run_stops_within_a_second_of_stop(compiled):
    events = Events()
    session = ChildSession(HANDLER, events)
    try:
        session.send(Open(str(compiled.path("control_flow", "llvm-cpu"))))
        assert isinstance(events.next(), Opened)
        # 2^31 doublings: a host loop that runs for hours in any interpreter.
        idle = cpu_seconds(session.pid)
        session.send(Call("repeat_double", ("4xf32=1", "2147483647")))
        # The run has started when the child has spent half a CPU second on it (a pause sent before the
        # call begins would be a different test); CPU time, not the clock, so a loaded machine waits longer.
        wait_until(lambda: cpu_seconds(session.pid) - idle >= 0.5, 120, "the child to run the loop")
        start = time.monotonic()
        paused = session.stop(timeout=1.0)
        stopped = events.next(timeout=5)
        assert time.monotonic() - start < 1.5
        assert paused and isinstance(stopped, Stopped) and stopped.reason == "paused"
        assert stopped.location.frames[-1].function == "repeat_double"
    finally:
        session.close()


def test_a_kernel_that_never_returns_is_killed_on_stop(compiled, tmp_path):
    spinning = tmp_path / "spin.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), spinning, SPIN)
    events = Events()
    session = ChildSession(HANDLER, events)
    try:
        session.send(Open(str(spinning)))
        assert isinstance(events.next(), Opened)
        idle = cpu_seconds(session.pid)
        session.send(Call("main", ("4x8xf32=1", "4x8xf32=2")))
        wait_until(lambda: cpu_seconds(session.pid) - idle >= 0.5, 120, "the child to spin in the kernel")
        start = time.monotonic()
        assert session.stop(timeout=1.0) is False  # native code cannot be paused: it is killed
        crash = events.next(timeout=5)
        assert time.monotonic() - start < 2.0
        assert isinstance(crash, Crashed) and "did not stop" in crash.reason
        assert crash.location.dispatch.startswith("main_dispatch_0")
        session.restart()  # and the session is usable again
        session.send(Open(str(spinning)))
        assert isinstance(events.next(), Opened)
    finally:
        session.close()


def test_a_session_that_stops_answering_is_killed(compiled, tmp_path):
    spinning = tmp_path / "spin.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), spinning, SPIN)
    events = Events()
    session = ChildSession(HANDLER, events, hang_timeout=1.0)
    try:
        session.send(Open(str(spinning)))
        assert isinstance(events.next(), Opened)
        session.send(Call("main", ("4x8xf32=1", "4x8xf32=2")))
        crash = events.next(timeout=10)
        assert isinstance(crash, Crashed) and "hang" in crash.reason
        assert not session.alive
    finally:
        session.close()
