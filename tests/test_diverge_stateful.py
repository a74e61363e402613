"""The divergence finder and ``break diverge`` on a program whose calls leave state (``session_programs/stateful.mlir``: each call adds its
input to a tensor global and returns it, as a decoder's KV cache grows): a debug session's call N is compared
with the reference's call N, reached through the same N-1 earlier calls, not with a fresh reference's first
call (every later call of the module against itself then "diverged" at its first dispatch); ``iree-lens
diverge --calls=N`` compares N calls of each run in lockstep and names the call and dispatch where they part.

The reference that goes apart is the same program with the sum capped at 2.5: with input 1 the state is 1, 2,
3... after each call, so the two agree for two calls and part at the third.
"""

from __future__ import annotations

import json
import queue
from pathlib import Path

import numpy as np
import pytest
from support import compile_for, lens_in_process

from engine.dispatch.bundle import Bundle
from engine.session.debug_session import DebugSession
from engine.session.inprocess import InProcessSession
from engine.session.protocol import (
    Breakpoint,
    Call,
    Continue,
    Failed,
    Finished,
    Log,
    Open,
    Opened,
    SetBreakpoints,
    Stopped,
)

PROGRAM = Path(__file__).resolve().parent / "session_programs" / "stateful.mlir"
SUM = "%n = arith.addf %s, %x : tensor<8xf32>"
CAPPED = """%sum = arith.addf %s, %x : tensor<8xf32>
  %cap = arith.constant dense<2.5> : tensor<8xf32>
  %n = arith.minimumf %sum, %cap : tensor<8xf32>"""
INPUT = ("8xf32=1",)


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("stateful-diverge")
    text = PROGRAM.read_text()
    assert SUM in text
    capped = out / "capped.mlir"
    capped.write_text(text.replace(SUM, CAPPED))
    return {
        "live": compile_for(PROGRAM, out / "live.vmfb", "llvm-cpu"),
        "same": compile_for(PROGRAM, out / "same.vmfb", "llvm-cpu"),
        "capped": compile_for(capped, out / "capped.vmfb", "llvm-cpu"),
    }


class Session:
    def __init__(self, module: Path, *breakpoints: Breakpoint):
        self.events: queue.Queue = queue.Queue()
        self.session = InProcessSession(DebugSession, self.events.put)
        self.session.send(Open(str(module), rebuild_sources=False))
        assert isinstance(self.next(), Opened)
        self.session.send(SetBreakpoints(breakpoints))

    def next(self):
        while True:
            event = self.events.get(timeout=120)
            if not isinstance(event, Log):
                return event

    def call(self) -> list:
        """One call of ``accumulate``, continued past every stop: the stops and the call's end."""
        self.session.send(Call("accumulate", INPUT))
        seen = []
        while True:
            event = self.next()
            seen.append(event)
            if isinstance(event, (Finished, Failed)):
                return seen
            if isinstance(event, Stopped):
                self.session.send(Continue())

    def close(self) -> None:
        self.session.close()


def diverged_stops(events: list) -> list[Stopped]:
    return [e for e in events if isinstance(e, Stopped) and e.detail.divergence is not None]


def test_the_module_against_itself_never_stops_however_many_calls(builds):
    session = Session(builds["live"], Breakpoint("diverge", reference=str(builds["same"])))
    try:
        for call in range(4):
            events = session.call()
            assert isinstance(events[-1], Finished), (call, events[-1])
            assert not diverged_stops(events), call
            # Every dispatch judged, and judged equal: the reference ran the same calls before this one.
            assert events[-1].verdicts and {v for _, v in events[-1].verdicts} == {"exact"}, events[-1].verdicts
    finally:
        session.close()


def test_a_reference_that_parts_at_the_third_call_stops_there_first(builds):
    session = Session(builds["live"], Breakpoint("diverge", reference=str(builds["capped"])))
    try:
        for call in (1, 2):
            events = session.call()
            assert isinstance(events[-1], Finished) and not diverged_stops(events), call
        events = session.call()
        (stop,) = diverged_stops(events)
        assert stop.detail.divergence.ordinal == 0
        assert isinstance(events[-1], Finished)
    finally:
        session.close()


def test_after_a_call_left_part_way_the_reference_is_refused_saying_why(builds):
    # Call 1 stops before its dispatch and is left there: the module's state is part way, no reference run
    # reaches it, and the next call says so instead of comparing with another state.
    session = Session(builds["live"], Breakpoint("dispatch", ordinal=0, when="before"),
                      Breakpoint("diverge", reference=str(builds["same"])))  # fmt: skip
    try:
        session.session.send(Call("accumulate", INPUT))
        assert isinstance(session.next(), Stopped)
        session.session.send(Call("accumulate", INPUT))
        event = session.next()
        assert isinstance(event, Failed), event
        assert "left before its end" in event.message and "call 1, accumulate" in event.message, event.message
    finally:
        session.close()


def test_a_bundle_of_the_first_call_judges_the_first_call_and_refuses_the_second(builds, tmp_path):
    bundle = tmp_path / "call1"
    proc = lens_in_process("capture", str(builds["same"]), "--function=accumulate", f"--input={INPUT[0]}",
                           f"--out={bundle}", "--no-rebuild")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    session = Session(builds["live"], Breakpoint("diverge", reference=str(bundle)))
    try:
        events = session.call()
        assert isinstance(events[-1], Finished) and not diverged_stops(events)
        assert {v for _, v in events[-1].verdicts} == {"exact"}
        # Call 2 starts from the state call 1 left; the bundle holds a call from the fresh module's state.
        event = session.call()[-1]
        assert isinstance(event, Failed), event
        assert "this is call 2" in event.message and "captured at call 1" in event.message, event.message
        # The refused call did not run: against the module, the next call is the second, after one earlier call.
        session.session.send(SetBreakpoints((Breakpoint("diverge", reference=str(builds["same"])),)))
        events = session.call()
        assert isinstance(events[-1], Finished), events[-1]
        assert "8xf32=2 2 2 2 2 2 2 2" in events[-1].results_text
        assert {v for _, v in events[-1].verdicts} == {"exact"}
    finally:
        session.close()


def diverge_json(builds, *args: str) -> tuple[int, dict]:
    proc = lens_in_process("diverge", str(builds["live"]), str(builds["capped"]), "--function=accumulate",
                           f"--input={INPUT[0]}", "--json", "--no-rebuild", *args)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout)


def test_diverge_calls_names_the_call_where_the_runs_part(builds):
    # The premise: one call of each agrees.
    status, report = diverge_json(builds)
    assert status == 0 and report["first_divergence"] is None
    status, report = diverge_json(builds, "--calls=4")
    assert status == 1
    first = report["first_divergence"]
    assert (first["call"], first["ordinal"]) == (3, 0), first
    # Each call's one dispatch, numbered from its call's start, as break dispatch N counts within a call.
    assert [(d["call"], d["ordinal"]) for d in report["dispatches"]] == [(1, 0), (2, 0), (3, 0), (4, 0)]
    assert [d["verdict"] for d in report["dispatches"][:2]] == ["exact", "exact"]


def test_diverge_calls_reproducer_still_diverges_alone(builds, tmp_path):
    status, report = diverge_json(builds, "--calls=3", f"--repro={tmp_path / 'repro'}")
    assert status == 1 and report["repro"]
    # The dispatch rerun alone in B's module on A's bytes of call 3: capped at 2.5 where A holds 3.
    proc = lens_in_process("diverge", f"--replay={tmp_path / 'repro'}")
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_diverge_calls_is_refused_with_keep_and_below_one(builds, tmp_path):
    proc = lens_in_process("diverge", str(builds["live"]), str(builds["capped"]), "--function=accumulate",
                           f"--input={INPUT[0]}", "--calls=2", f"--keep={tmp_path}")  # fmt: skip
    assert proc.returncode == 2 and "--keep captures one call" in proc.stderr, proc.stderr
    proc = lens_in_process("diverge", str(builds["live"]), str(builds["capped"]), "--calls=0")
    assert proc.returncode == 2 and "0 is not at least 1" in proc.stderr, proc.stderr


def test_capture_calls_captures_the_nth_call_and_break_diverge_follows_it(builds, tmp_path):
    # Call 3 of the module: its dispatch reads the state two calls left (2) and writes 3, on both engines
    # (IREE's runtime through a trace-point build).
    traced = compile_for(PROGRAM, tmp_path / "traced.vmfb", "llvm-cpu", "--iree-flow-trace-dispatch-tensors")
    for engine, module in (("debug", builds["live"]), ("reference", traced)):
        out = tmp_path / f"call3-{engine}"
        proc = lens_in_process("capture", str(module), "--function=accumulate", f"--input={INPUT[0]}",
                               f"--out={out}", "--calls=3", f"--engine={engine}", "--no-rebuild")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        bundle = Bundle(out)
        assert bundle.calls_before == (("accumulate", INPUT),) * 2
        (dispatch,) = bundle.dispatches
        written = [bundle.load(name) for name in dispatch.outputs]
        assert any(np.array_equal(np.asarray(w).reshape(-1).view(np.float32), np.full(8, 3, np.float32))
                   for w in written), (engine, written)  # fmt: skip
    # A bundle of call 3 judges the live module's call 3 (after two calls with no breakpoint).
    session = Session(builds["live"])
    try:
        for _ in range(2):
            assert isinstance(session.call()[-1], Finished)
        session.session.send(SetBreakpoints((Breakpoint("diverge", reference=str(tmp_path / "call3-debug")),)))
        events = session.call()
        assert isinstance(events[-1], Finished) and not diverged_stops(events), events[-1]
        assert {v for _, v in events[-1].verdicts} == {"exact"}
    finally:
        session.close()


def test_a_call_travelled_back_into_and_left_there_is_part_way(builds):
    # After call 1 ends, a reverse step puts the run back inside it (its globals as they were there); a new
    # call then starts from that part-way state, which no reference run reaches: said, not compared.
    from engine.session.protocol import Reverse
    from engine.session.timetravel_session import TimeTravelSession

    events: queue.Queue = queue.Queue()
    session = InProcessSession(TimeTravelSession, events.put)

    def next_event():
        while True:
            event = events.get(timeout=120)
            if not isinstance(event, Log):
                return event

    try:
        session.send(Open(str(builds["live"]), rebuild_sources=False))
        assert isinstance(next_event(), Opened)
        session.send(SetBreakpoints((Breakpoint("diverge", reference=str(builds["same"])),)))
        session.send(Call("accumulate", INPUT))
        assert isinstance(next_event(), Finished)
        session.send(Reverse("reverse-step"))
        assert isinstance(next_event(), Stopped)
        session.send(Call("accumulate", INPUT))
        event = next_event()
        assert isinstance(event, Failed) and "left before its end" in event.message, event
    finally:
        session.close()
