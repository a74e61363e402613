"""``TimeTravelSession``: the protocol surface of time travel (what the window's timeline and watch use).

Driven synchronously through ``handle`` as ``InProcessSession``'s worker does; every expectation is a
forward run of the same session commands.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.session import TimeTravelClient, compile_program

from engine.session.protocol import (
    Bindings,
    History,
    LastChange,
    ReadBindings,
    ReadHistory,
    Reverse,
    Step,
    Stopped,
    TravelTo,
    WatchRegister,
    WhenChanged,
)


def test_travel_to_positions_and_dispatches_and_the_history_query(compiled):
    module = compiled.path("control_flow", "llvm-cpu")
    c = TimeTravelClient(module, "repeat_double", ["4xf32=1 2 3 4", "4"])
    stop = c.send(Step("into", 60))
    assert isinstance(stop, Stopped) and stop.detail.position == 60
    history = c.send(ReadHistory())
    assert isinstance(history, History)
    assert history.position == 60 and history.earliest == 0 and history.latest == 60
    assert len(history.dispatches) >= 2
    assert [d.ordinal for d in history.dispatches] == list(range(len(history.dispatches)))
    back = c.send(Reverse("reverse-step", 35))
    fresh = TimeTravelClient(module, "repeat_double", ["4xf32=1 2 3 4", "4"])
    ahead = fresh.send(Step("into", 25))
    assert back.detail.registers == ahead.detail.registers
    assert back.location.frames == ahead.location.frames
    to = c.send(TravelTo(position=33))
    assert to.detail.position == 33
    at = c.send(TravelTo(dispatch=1, when="after"))
    assert at.reason == "dispatch" and at.location.dispatch_info.ordinal == 1
    assert str(at.location.dispatch_info.when) == "after"
    assert c.send(ReadHistory()).position == history.dispatches[1].position + 1


def test_when_changed_answers_the_last_write(compiled):
    module = compiled.path("control_flow", "llvm-cpu")
    c = TimeTravelClient(module, "collatz_steps", ["27"])
    c.send(Step("into", 300))
    # The expectation: a fresh session stepped one instruction at a time over the last 30 positions.
    fresh = TimeTravelClient(module, "collatz_steps", ["27"])
    states = {270: fresh.send(Step("into", 270)).detail.registers.i32}
    for n in range(271, 301):
        states[n] = fresh.send(Step("into", 1)).detail.registers.i32
    checked = 0
    for reg in range(len(states[300])):
        changed = [n for n in range(271, 301) if states[n][reg] != states[n - 1][reg]]
        if not changed:
            continue
        answer = c.send(WhenChanged(WatchRegister(0, "i", reg)))
        assert isinstance(answer, LastChange) and answer.change is not None
        assert answer.change.position == changed[-1] - 1  # the instruction at that position wrote it
        assert answer.change.after == states[changed[-1]][reg]
        assert answer.change.before == states[changed[-1] - 1][reg]
        checked += 1
    assert checked >= 2
    # The session is where it was.
    assert c.send(ReadHistory()).position == 300


def test_travel_to_each_dispatch_of_one_command_buffer_parks_in_that_dispatch(tmp_path):
    """A real-frontend model: its dispatches share one instruction (one command buffer); a timeline's
    jump to dispatch k (TravelTo park) stops inside k with the bindings a forward Next Dispatch sees."""
    models = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
    source = models / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models folder)")
    module = compile_program(str(source), "llvm-cpu", tmp_path)
    inputs = [f"@{models / 'small_cnn_x.npy'}"]
    forward = TimeTravelClient(module, "small_cnn", inputs)
    seen = []
    while True:
        forward.events.clear()
        forward.session.handle(Step("dispatch"))
        stop = forward.events[-1]
        if not isinstance(stop, Stopped):
            break
        seen.append([b.to_numpy() for b in forward.send(ReadBindings()).tensors])
    assert len(seen) >= 3
    c = TimeTravelClient(module, "small_cnn", inputs)
    c.send(Step("into", 10_000))  # to the end (fewer instructions than that)
    marks = c.send(ReadHistory()).dispatches
    assert len(marks) == len(seen) and all(m.exact for m in marks)
    for k in reversed(range(len(seen))):
        stop = c.send(TravelTo(dispatch=k, park=True))
        assert stop.reason == "dispatch" and stop.location.dispatch_info.ordinal == k
        answer = c.send(ReadBindings())
        assert isinstance(answer, Bindings)
        got = [b.to_numpy() for b in answer.tensors]
        assert len(got) == len(seen[k])
        for a, b in zip(got, seen[k]):
            np.testing.assert_array_equal(a, b)


def test_stops_name_their_breakpoints_as_described_forward_and_in_reverse(tmp_path):
    """One description everywhere (``Breakpoint.describe``, as the debug session, the reference session and
    the replay debugger say it): a VM breakpoint's stop forward and found by reverse-continue, and a
    dispatch breakpoint found by reverse-continue, name the breakpoint the same way."""
    from engine.session.protocol import Breakpoint, BreakpointKind, Continue, SetBreakpoints

    module = compile_program("chain12", "llvm-cpu", tmp_path)
    c = TimeTravelClient(module, "main", ["4x8xf32=0"])
    execute = Breakpoint(BreakpointKind.IMPORT, import_name="hal.device.queue.execute.indirect")
    after3 = Breakpoint(BreakpointKind.DISPATCH, ordinal=3, when="after")

    def set_breakpoints(*bps):
        c.events.clear()
        c.session.handle(SetBreakpoints(bps))
        assert c.events == []  # taken: SetBreakpoints answers only a refusal

    set_breakpoints(execute, after3)
    first = c.send(Continue())
    assert first.reason == "breakpoint" and first.detail.breakpoints == ("call of hal.device.queue.execute.indirect",)
    set_breakpoints(after3)
    stop = c.send(Continue())
    assert stop.reason == "dispatch" and stop.detail.breakpoints == ("after dispatch #3",)
    set_breakpoints(execute)
    later = c.send(Continue())
    assert later.detail.breakpoints == ("call of hal.device.queue.execute.indirect",)
    set_breakpoints(execute, after3)
    back = c.send(Reverse("reverse-continue", 1))
    assert back.reason == "dispatch" and back.location.dispatch_info.ordinal == 3
    assert back.detail.breakpoints == ("after dispatch #3",)
    back = c.send(Reverse("reverse-continue", 1))
    assert back.reason == "breakpoint" and back.detail.breakpoints == ("call of hal.device.queue.execute.indirect",)
