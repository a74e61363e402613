"""The parked-run hand-over both engines' sessions share (``engine.session.parked_run``)."""

from __future__ import annotations

import threading

import pytest

from engine.session.parked_run import ParkedRun, RunState


def test_park_resume_end_and_abandon():
    run = ParkedRun()
    seen: list = []

    def program():
        for stop in range(3):
            seen.append(("parked", stop, threading.current_thread().name))
            seen.append(("resumed with", run.park()))
        seen.append("ended")

    run.start(program)  # returns once the run parks
    assert run.state == RunState.PARKED and seen == [("parked", 0, "session-run")]
    run.resume("continue")
    assert run.parked and seen[-2:] == [("resumed with", "continue"), ("parked", 1, "session-run")]
    run.resume("step")
    run.resume("last")
    assert run.state == RunState.IDLE and seen[-1] == "ended"
    with pytest.raises(RuntimeError):
        run.resume("nothing is parked")
    # A parked run the client gives up unwinds: nothing after park() runs, the thread ends.
    after: list = []
    run.start(lambda: after.append(run.park()))
    assert run.parked
    run.abandon()
    assert run.state == RunState.IDLE and after == []


def test_a_run_that_never_parks_returns_when_it_ends():
    run = ParkedRun()
    done = []
    run.start(lambda: done.append(True))
    assert done == [True] and run.state == RunState.IDLE
    run.abandon()  # nothing parked: only joins
