"""A headless debugger over a replay (``iree-lens debug RUN.ireereplay --commands=FILE``).

The replay runs on a worker thread (``ReplayExecutor`` on the emulated HAL); the device's dispatch
observer and the executor's record hook park it where a stop is due, and the commands file is read on the
calling thread meanwhile (the debug session's dispatch gate, in small). The commands are the module
debugger's (``engine.session.script``) where they mean something for a replay:

    break dispatch ORDINAL|NAME|* [before|after]   # NAME is IREE's export name (globs)
    break nan                                      # after the first dispatch writing NaN or Inf
    continue | finish                              # to the next stop | to the end
    step [N] | next [N]                            # N host calls (replay records) further
    reverse-continue | reverse-step [N]            # back to the previous stop | N host calls back (the
                                                   # replay runs again on a fresh device to that point)
    info registers                                 # where the replay is: record, host call, scope
    save-tensors DIR                               # the stopped dispatch's bindings as .npy

Each stop prints one line (``--json``: one JSON object: ``reason``, ``record``, ``operation``, ``scope``,
``dispatch`` null or ``{"ordinal", "name", "when"}``; the end ``{"reason": "finished", "dispatches": N}``).
"""

from __future__ import annotations

import fnmatch
import json
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from engine.dispatch.bundle import executable_of
from engine.dispatch.statistics import tensor_stats
from engine.dispatch.tensor_types import type_from_name, view_bytes
from engine.errors import LensError
from engine.replay import format as f
from engine.replay.execute import ReplayExecutor, Substitution
from engine.replay.reader import Record, open_replay
from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.runtime.hal.devices import create_device
from engine.session.protocol import BreakpointKind
from engine.session.script import ScriptCommand, ScriptError

SUPPORTED = (
    "break",
    "continue",
    "finish",
    "step",
    "next",
    "info registers",
    "save-tensors",
    "reverse-step",
    "reverse-next",
    "reverse-continue",
)
WAIT_S = 600.0


@dataclass
class Stop:
    reason: str  # "breakpoint", "nan", "step", "reverse", "finished", "failed"
    record: Record | None
    scope: str
    dispatch: DispatchRecord | None = None
    when: str | None = None
    message: str = ""
    # Where the run was: host calls begun and dispatch events (before/after) seen; a replay is
    # deterministic, so running a fresh device to the same position is going back in time.
    position: tuple[int, int] = (0, 0)


class _Abandon(Exception):
    """Unwinds a run thread parked at a stop when the debugger starts the replay again (reverse)."""


def check_for_replay(commands: list[ScriptCommand], path: str | None = None) -> None:
    """``ScriptError`` for a command a replay cannot do (no VM: no function or pc breakpoints, no history)."""
    for c in commands:
        kind = c.breakpoint.kind if c.breakpoint is not None else None
        if c.verb not in SUPPORTED or kind in (
            BreakpointKind.FUNCTION,
            BreakpointKind.INSTRUCTION,
            BreakpointKind.DIVERGE,
        ):
            raise ScriptError(
                f"{c.text!r} does not apply to a replay (it has HAL calls, no VM): use break dispatch, break nan, "
                "continue, finish, step, next, info registers, save-tensors",
                c.line,
                path,
            )


class _Gate(DispatchObserver):
    """Hands every dispatch, before and after, to the debugger's breakpoint check."""

    def __init__(self, on_dispatch: Callable[[DispatchRecord, str], None]):
        self.on_dispatch = on_dispatch

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.on_dispatch(record, "before")

    def after_dispatch(self, record: DispatchRecord) -> None:
        self.on_dispatch(record, "after")


class _EventCounter(DispatchObserver):
    reads_bindings = False

    def __init__(self):
        self.events = 0

    def watches(self, sequence: int, executable, ordinal: int) -> bool:
        return False  # counts only: told of batched dispatches afterwards (``dispatch_batch``)

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.events += 1

    def after_dispatch(self, record: DispatchRecord) -> None:
        self.events += 1


class ReplayDebugger:
    def __init__(
        self,
        path: str,
        device: str,
        commands: list[ScriptCommand],
        out: TextIO,
        err: TextIO,
        *,
        as_json: bool = False,
        substitutions: list[Substitution] | None = None,
    ):
        self.replay = open_replay(path)
        self.device_uri = device
        self.substitutions = substitutions
        self.device = create_device(device)
        self.commands = commands
        self.out, self.err = out, err
        self.as_json = as_json
        self.breakpoints = []
        self.executor = ReplayExecutor(
            self.replay, self.device, substitutions=substitutions, on_record=self._record
        )
        self.device.observers.append(_Gate(self._dispatch))
        self._stops: queue.Queue[Stop] = queue.Queue()
        self._resume: queue.Queue[bool] = queue.Queue()
        self._steps: int | None = None
        self._free = False  # run to the end without stopping
        self._record_now: Record | None = None
        self._thread: threading.Thread | None = None
        self.finished = False
        self.stop: Stop | None = None
        self.status = 0
        self._ops = 0
        self._events = 0
        self._target: tuple[int, int] | None = None
        self.history: list[tuple[int, int]] = []  # positions of the stops so far

    # -- the run thread

    def _scope(self) -> str:
        return self.executor.state.scopes[-1] if self.executor.state.scopes else ""

    def _park(self, stop: Stop) -> None:
        stop.position = (self._ops, self._events)
        self._stops.put(stop)
        if not self._resume.get():
            raise _Abandon

    def _record(self, r: Record) -> None:
        self._record_now = r
        if r.record_type != f.RecordType.OPERATION:
            return
        self._ops += 1
        if self._target is not None:
            if self._target == (self._ops, self._events):
                self._target = None
                self._park(Stop("reverse", r, self._scope()))
            return
        if self._free or self._steps is None:
            return
        self._steps -= 1
        if self._steps <= 0:
            self._steps = None
            self._park(Stop("step", r, self._scope()))

    def _dispatch(self, record: DispatchRecord, when: str) -> None:
        self._events += 1
        if self._target is not None:
            if self._target == (self._ops, self._events):
                self._target = None
                self._park(Stop("reverse", self._record_now, self._scope(), record, when))
            return
        if self._free:
            return
        for bp in self.breakpoints:
            if bp.kind == BreakpointKind.NAN and when == "after":
                if any(
                    (
                        s := tensor_stats(view_bytes(b.data, type_from_name(record.export_name, b.length))[0])
                    ).nan
                    or s.posinf
                    or s.neginf
                    for b in record.bindings
                ):
                    self._park(Stop("nan", self._record_now, self._scope(), record, when))
                    return
            elif bp.kind == BreakpointKind.DISPATCH and str(bp.when) == when:
                if bp.ordinal is not None and bp.ordinal != record.sequence:
                    continue
                if bp.dispatch and not (
                    fnmatch.fnmatchcase(record.export_name, bp.dispatch)
                    or fnmatch.fnmatchcase(executable_of(record.export_name), bp.dispatch)
                ):
                    continue
                self._park(Stop("breakpoint", self._record_now, self._scope(), record, when))
                return

    def _main(self) -> None:
        try:
            self.executor.run()
            self._stops.put(Stop("finished", self._record_now, "", position=(self._ops, self._events)))
        except _Abandon:
            return
        except (LensError, OSError) as e:
            self._stops.put(Stop("failed", self._record_now, self._scope(), message=str(e)))

    def _restart(self, target: tuple[int, int]) -> None:
        """Run the replay again on a fresh device to ``target`` (an earlier position): going back."""
        if self._thread is not None and not self.finished:
            self._resume.put(False)  # the parked run thread unwinds
            self._thread.join(timeout=WAIT_S)
        self.device = create_device(self.device_uri)
        self.device.observers.append(_Gate(self._dispatch))
        self.executor = ReplayExecutor(
            self.replay, self.device, substitutions=self.substitutions, on_record=self._record
        )
        self._ops = self._events = 0
        self._steps, self._free, self.finished = None, False, False
        self._target = target
        self._thread = None
        self._go()

    # -- the commands

    def _go(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="lens-replay-debug", daemon=True)
            self._thread.start()
        else:
            self._resume.put(True)
        try:
            self.stop = self._stops.get(timeout=WAIT_S)
        except queue.Empty:
            raise LensError(f"the replay did not stop or finish within {WAIT_S:.0f} s") from None
        if self.stop.reason not in ("finished", "failed") and (
            not self.history or self.history[-1] != self.stop.position
        ):
            self.history.append(self.stop.position)
        self._report(self.stop)

    def _report(self, stop: Stop) -> None:
        if stop.reason in ("finished", "failed"):
            self.finished = True
        if stop.reason == "failed":
            self.status = 1
            print(f"iree-lens debug: {stop.message}", file=self.err)
        r = stop.record
        line = {
            "reason": stop.reason,
            "record": r.sequence_ordinal if r is not None else None,
            "operation": r.operation if r is not None else None,
            "scope": stop.scope,
            "dispatch": None
            if stop.dispatch is None
            else {"ordinal": stop.dispatch.sequence, "name": stop.dispatch.export_name, "when": stop.when},
        }
        if stop.reason == "finished":
            line = {"reason": "finished", "dispatches": self.device.dispatch_count}
        if self.as_json:
            print(json.dumps(line), file=self.out)
        elif stop.reason == "finished":
            print(f"finished: {self.device.dispatch_count} dispatches", file=self.out)
        elif stop.dispatch is not None:
            print(
                f"stopped ({stop.reason}) {stop.when} dispatch {stop.dispatch.sequence} {stop.dispatch.export_name}"
                f" at record #{line['record']} {line['operation']}"
                + (f" in {stop.scope}" if stop.scope else ""),
                file=self.out,
            )
        elif stop.reason in ("step", "reverse"):
            print(
                f"stopped at record #{line['record']} {line['operation']}"
                + (f" in {stop.scope}" if stop.scope else ""),
                file=self.out,
            )
        self.out.flush()

    def run(self) -> int:
        for c in self.commands:
            if c.verb == "break":
                self.breakpoints.append(c.breakpoint)
            elif c.verb in ("continue", "finish", "step", "next"):
                if self.finished:
                    print(f"note: {c.text}: the replay has finished", file=self.err)
                    continue
                if c.verb == "finish":
                    self._free = True
                elif c.verb in ("step", "next"):
                    self._steps = c.count
                self._go()
            elif c.verb.startswith("reverse-"):
                self._reverse(c)
            elif c.verb == "info registers":
                r = self._record_now
                text = "not started" if r is None else f"record #{r.sequence_ordinal} {r.operation}"
                print(
                    json.dumps({"position": text, "scope": self._scope()}) if self.as_json else text,
                    file=self.out,
                )
            elif c.verb == "save-tensors":
                self._save(c)
        if (
            self._thread is not None and not self.finished
        ):  # the end of the commands ends the run (gdb -batch)
            self._free = True
            self._resume.put(True)
            self._thread.join(timeout=WAIT_S)
        return self.status

    def _reverse(self, c: ScriptCommand) -> None:
        here = (
            self.stop.position if self.stop is not None and not self.finished else (self._ops, self._events)
        )
        if c.verb == "reverse-continue":
            earlier = [p for p in self.history if p < here]
            target = earlier[-1] if earlier else None
        else:  # reverse-step/next N: N host calls back
            target = (here[0] - c.count, None) if here[0] - c.count > 0 else None
        if target is None:
            print(f"note: {c.text}: already at the start of the replay", file=self.err)
            return
        if target[1] is None:  # a host-call boundary: the dispatch events seen by then are counted on the way
            target = self._events_at(target[0])
        self.history = [p for p in self.history if p < target]
        self._restart(target)

    def _events_at(self, ops: int) -> tuple[int, int]:
        """The position at the start of host call ``ops``: dispatch events counted by a dry pass."""
        device = create_device(self.device_uri)
        counter = _EventCounter()
        device.observers.append(counter)
        executor = ReplayExecutor(self.replay, device, substitutions=self.substitutions)
        done = 0
        for r in self.replay.records():
            if r.record_type == f.RecordType.OPERATION:
                done += 1
                if done == ops:
                    break
            executor.step(r)
        return ops, counter.events

    def _save(self, c: ScriptCommand) -> None:
        stop = self.stop
        if stop is None or stop.dispatch is None or self.finished:
            print(f"iree-lens debug: save-tensors: not stopped at a dispatch (line {c.line})", file=self.err)
            self.status = 1
            return
        out = Path(c.path or ".")
        out.mkdir(parents=True, exist_ok=True)
        d = stop.dispatch
        for b in d.bindings:
            array, tt = view_bytes(np.array(b.data, copy=True), type_from_name(d.export_name, b.length))
            np.save(out / f"d{d.sequence:05d}_{stop.when}_binding{b.index}.npy", array)
        print(f"saved {len(d.bindings)} bindings of dispatch {d.sequence} to {out}", file=self.out)
