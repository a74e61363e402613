"""IREE's own traced dispatch tensors (a HalModuleDebugSink on a build with
``--iree-flow-trace-dispatch-tensors``, read without engine code) and the comparisons of captures and
sessions against them, for the typed-tensor and capture tests."""

from __future__ import annotations

import queue
from pathlib import Path

import numpy as np

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
    ReadTensors,
    SetBreakpoints,
    Stopped,
    Tensors,
    TypeSource,
)

TRACE = "--iree-flow-trace-dispatch-tensors"


def traced_by_dispatch(traced) -> dict[tuple[str, int], tuple[list[np.ndarray], list[np.ndarray]]]:
    """(inputs, outputs) of each traced dispatch by (export name, occurrence): a traced build may schedule
    independent dispatches in another order than the plain build, so dispatches pair by name and count."""
    found: dict[tuple[str, str], list[list[np.ndarray]]] = {}
    for key, arrays in traced:
        head, _, kind = key.rpartition(" ")
        found.setdefault((head.split("::")[1], kind), []).append(arrays)
    by_dispatch = {}
    for (name, kind), lists in found.items():
        if kind == "inputs":
            outs = found.get((name, "outputs"), [])
            assert len(outs) == len(lists), name
            for n, (i, o) in enumerate(zip(lists, outs)):
                by_dispatch[(name, n)] = (i, o)
    return by_dispatch


def assert_bundle_equals_traced(bundle: Bundle, traced) -> None:
    """Every dispatch's inputs and outputs equal IREE's traced tensors in shape, element type and bytes.

    One exception, checked narrowly: a tensor the dispatch reads and writes in place (IREE's concatenation
    into slices of one buffer) holds, where nothing wrote it yet, whatever the memory held: the plain
    build's transient slab holds earlier tensors there, the traced build's fresh buffer zeros. The capture
    marks those bytes undefined (``DispatchEntry.undefined``); a tensor may differ only there."""
    expected = traced_by_dispatch(traced)
    assert len(bundle.dispatches) == len(expected)
    seen: dict[str, int] = {}
    for d in bundle.dispatches:
        n = seen[d.name] = seen.get(d.name, -1) + 1
        ins, outs = expected[(d.name, n)]
        assert d.tensors_from == "interface", (d.ordinal, d.name, d.tensors_from)
        for which, want in (("inputs", ins), ("outputs", outs)):
            got = bundle.dispatch_tensors(d, which)
            assert len(got) == len(want), (d.ordinal, d.name, which)
            for k, (g, w) in enumerate(zip(got, want)):
                g = np.asarray(g)
                where = (d.ordinal, d.name, which, k)
                assert g.shape == w.shape, where
                assert g.dtype == w.dtype, where
                g8, w8 = g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8)
                defined = np.ones(g8.size, bool)
                for start, end in d.undefined.get(f"{which[:-1]}{k}", []):
                    defined[start:end] = False
                assert np.array_equal(g8[defined], w8[defined]), where


def stop_at_every_dispatch(
    vmfb: Path, function: str, inputs: tuple[str, ...], when: str = "after", rebuild: bool = False
) -> list[Tensors]:
    """A session stopped ``when`` (before/after) every dispatch; its ReadTensors answer at each stop. With
    ``rebuild`` the session may rebuild the module's sources: the first stop waits for the rebuild's Log and
    asks again."""
    events: queue.Queue = queue.Queue()
    session = InProcessSession(DebugSession, events.put)
    answers: list[Tensors] = []

    def next_event(timeout: float = 120):
        while True:
            event = events.get(timeout=timeout)
            if not isinstance(event, Log):
                return event
            logs.append(event.text)

    logs: list[str] = []
    try:
        session.send(Open(str(vmfb), rebuild_sources=rebuild))
        assert isinstance(next_event(60), Opened)
        session.send(SetBreakpoints((Breakpoint("dispatch", dispatch="*", when=when),)))
        session.send(Call(function, inputs))
        while True:
            event = next_event()
            if isinstance(event, Finished):
                return answers
            assert not isinstance(event, Failed), event
            if not isinstance(event, Stopped):
                continue
            session.send(ReadTensors())
            answer = next_event(60)
            assert isinstance(answer, Tensors), answer
            if rebuild and not answers:
                first = answer.tensors[0]
                assert first.type_source == TypeSource.SOURCES or "rebuilding" in first.type_note, first
                while not logs:  # the rebuild says when it is done
                    logs.append(events.get(timeout=600).text)
                assert "identical" in logs[0], logs
                session.send(ReadTensors())
                answer = next_event(60)
            answers.append(answer)
            session.send(Continue())
    finally:
        session.close()
