"""Dispatch stops in the debug session: the run parks inside a dispatch while the session keeps serving
commands (binding reads, registers), then resumes with continue, step or next-dispatch.

Programs: the matmul sample and ``session_programs/nan_log.mlir`` (a - b, log, square in three
dispatches: the log writes NaN where a < b), compiled with the real iree-compile, on the CPU and on
Vulkan (Mesa's lavapipe), in this process and in a child process.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.session import Events, compile_program

from engine.session.child import ChildSession
from engine.session.debug_session import DebugSession
from engine.session.inprocess import InProcessSession
from engine.session.protocol import (
    BindingBytes,
    Breakpoint,
    Call,
    Continue,
    DispatchInfo,
    Failed,
    Finished,
    Open,
    Opened,
    ReadBinding,
    ReadBindings,
    ReadDispatch,
    ReadRegisters,
    SetBreakpoints,
    Step,
    Stopped,
)

NAN_INPUTS = ("4x8xf32=1", "4x8xf32=2")  # log(1 - 2): NaN everywhere
HEALTHY_INPUTS = ("4x8xf32=3", "4x8xf32=1")
MATMUL_INPUTS = ("4x8xf32=0.1", "8x16xf32=0.3")


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return tmp_path_factory.mktemp("session_programs")


def _vulkan_or_skip():
    from engine.runtime.hal.vulkan import vulkan_available

    reason = vulkan_available()  # None when a device opens
    if reason is not None:
        pytest.skip(f"no Vulkan: {reason}")


DEVICES = [("llvm-cpu", "local-sync"), ("vulkan-spirv", "vulkan")]


@pytest.fixture(params=DEVICES, ids=["cpu", "vulkan"])
def target_device(request):
    if request.param[1] == "vulkan":
        _vulkan_or_skip()
    return request.param


@pytest.fixture
def session():
    events = Events()
    s = InProcessSession(DebugSession, events)
    s.events = events
    yield s
    s.close()


def _open(session, path, device, breakpoints=()):
    session.send(Open(str(path), device))
    assert isinstance(session.events.next(), Opened)
    session.send(SetBreakpoints(tuple(breakpoints)))


def test_break_before_dispatch_by_ordinal_serves_commands_while_paused(session, programs, target_device):
    target, device = target_device
    path = compile_program("nan_log", target, programs)
    _open(session, path, device, [Breakpoint("dispatch", ordinal=1)])
    session.send(Call("main", HEALTHY_INPUTS))
    stop = session.events.next()
    assert isinstance(stop, Stopped) and stop.reason == "dispatch", stop
    info = stop.location.dispatch_info
    assert isinstance(info, DispatchInfo) and info.ordinal == 1 and info.when == "before"
    assert info.export.startswith("main_dispatch_1_") and info.executable == "main_dispatch_1"
    assert [b.length for b in info.bindings] == [128, 128]
    assert stop.location.frames[-1].function == "main" and "call" in stop.location.frames[-1].instruction
    # While parked: the input binding holds a - b = 2.0; registers answer too.
    session.send(ReadBinding(0))
    answer = session.events.next()
    assert isinstance(answer, BindingBytes) and answer.query == ReadBinding(0) and answer.index == 0
    assert np.array_equal(answer.tensor.to_numpy().view(np.float32), np.full(32, 2.0, np.float32))
    session.send(ReadRegisters())
    assert len(session.events.next().registers.ref) > 0
    session.send(ReadDispatch())
    assert session.events.next().info == info
    session.send(Continue())
    done = session.events.next()
    assert isinstance(done, Finished), done
    assert np.allclose(done.outputs[0].to_numpy(), np.log(2.0) ** 2)


def test_nan_breakpoint_stops_after_the_dispatch_that_writes_nan(session, programs, target_device):
    target, device = target_device
    path = compile_program("nan_log", target, programs)
    _open(session, path, device, [Breakpoint("nan")])
    session.send(Call("main", HEALTHY_INPUTS))
    assert isinstance(session.events.next(), Finished)  # healthy inputs: no stop
    session.send(Call("main", NAN_INPUTS))
    stop = session.events.next()
    assert isinstance(stop, Stopped) and stop.reason == "dispatch", stop
    info = stop.location.dispatch_info
    assert info.ordinal == 1 and info.when == "after" and "dispatch_1" in info.export
    assert stop.detail.nan_bindings == (1,)
    assert [b.access for b in info.bindings] == ["read", "write"]
    session.send(ReadBinding(1))
    written = session.events.next().tensor.to_numpy().view(np.float32)
    assert np.isnan(written).all()


def test_break_by_name_glob_and_after(session, programs):
    path = compile_program("nan_log", "llvm-cpu", programs)
    _open(session, path, "local-sync", [Breakpoint("dispatch", dispatch="*dispatch_2*", when="after")])
    session.send(Call("main", HEALTHY_INPUTS))
    stop = session.events.next()
    info = stop.location.dispatch_info
    assert info.ordinal == 2 and info.when == "after"
    session.send(ReadBinding(1))
    assert np.allclose(session.events.next().tensor.to_numpy().view(np.float32), np.log(2.0) ** 2)


def test_every_dispatch_and_next_dispatch(session, programs):
    path = compile_program("nan_log", "llvm-cpu", programs)
    _open(session, path, "local-sync", [Breakpoint("dispatch", dispatch="*")])
    session.send(Call("main", HEALTHY_INPUTS))
    ordinals = []
    while True:
        event = session.events.next()
        if isinstance(event, Finished):
            break
        assert event.reason == "dispatch"
        ordinals.append(event.location.dispatch_info.ordinal)
        session.send(Continue())
    assert ordinals == [0, 1, 2]
    # Next dispatch from the entry, without breakpoints.
    session.send(SetBreakpoints(()))
    session.send(Call("main", HEALTHY_INPUTS, stop_at_entry=True))
    assert session.events.next().reason == "entry"
    seen = []
    for _ in range(3):
        session.send(Step("dispatch"))
        stop = session.events.next()
        seen.append((stop.reason, stop.location.dispatch_info.ordinal))
    assert seen == [("dispatch", 0), ("dispatch", 1), ("dispatch", 2)]
    session.send(Step("dispatch"))
    assert isinstance(session.events.next(), Finished)


def test_step_from_a_dispatch_finishes_its_call_then_counts_instructions(session, programs, compiled):
    """Step N from a dispatch stop = the call it runs in, then N-1 instructions: the same place as a run
    that steps the same number of instructions from the call's own pc."""
    path = compiled.path("matmul", "llvm-cpu")
    _open(session, path, "local-sync", [Breakpoint("dispatch", ordinal=0)])
    session.send(Call("main", MATMUL_INPUTS))
    stop = session.events.next()
    call_pc = stop.location.frames[-1].pc
    session.send(Step("into", 3))
    after = session.events.next()
    assert after.reason == "step" and after.detail.steps >= 1
    # The same from a stop at the call instruction itself, by instruction breakpoint.
    session.send(
        SetBreakpoints((Breakpoint("instruction", function="main", pc=call_pc),))
    )
    session.send(Call("main", MATMUL_INPUTS))
    at_call = session.events.next()
    assert at_call.reason == "breakpoint" and at_call.location.frames[-1].pc == call_pc
    session.send(Step("into", 3))
    again = session.events.next()
    assert again.location.frames[-1].pc == after.location.frames[-1].pc
    assert again.detail.registers == after.detail.registers


def test_a_new_call_abandons_a_paused_run(session, programs):
    path = compile_program("nan_log", "llvm-cpu", programs)
    _open(session, path, "local-sync", [Breakpoint("dispatch", ordinal=0)])
    session.send(Call("main", HEALTHY_INPUTS))
    assert session.events.next().reason == "dispatch"
    session.send(Call("main", HEALTHY_INPUTS))
    again = session.events.next()
    assert again.reason == "dispatch" and again.location.dispatch_info.ordinal == 0
    session.send(SetBreakpoints(()))
    session.send(Continue())
    assert isinstance(session.events.next(), Finished)


def test_binding_read_without_a_paused_dispatch_fails_clearly(session, programs):
    path = compile_program("nan_log", "llvm-cpu", programs)
    _open(session, path, "local-sync")
    session.send(Call("main", HEALTHY_INPUTS, stop_at_entry=True))
    session.events.next()
    session.send(ReadBinding(0))
    failed = session.events.next()
    assert isinstance(failed, Failed) and "no dispatch is paused" in failed.message


def test_dispatch_stop_in_a_child_process_with_shared_memory_tensors(programs):
    path = compile_program("nan_log", "llvm-cpu", programs)
    events = Events()
    session = ChildSession("engine.session.debug_session:DebugSession", events)
    try:
        session.send(Open(str(path)))
        assert isinstance(events.next(), Opened)
        session.send(SetBreakpoints((Breakpoint("dispatch", ordinal=2),)))
        session.send(Call("main", HEALTHY_INPUTS))
        stop = events.next()
        assert stop.reason == "dispatch" and stop.location.dispatch_info.ordinal == 2
        session.send(ReadBindings())
        tensors = events.next().tensors
        first = tensors[0].to_numpy().view(np.float32)
        assert np.allclose(first, np.log(2.0))
        session.send(Continue())
        assert isinstance(events.next(), Finished)
    finally:
        session.close()
