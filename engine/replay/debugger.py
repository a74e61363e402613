"""A headless debugger over a replay (``iree-lens debug RUN.ireereplay --commands=FILE``).

The replay runs on a run thread (``ReplayExecutor`` on the emulated HAL) that parks where a stop is due
(``engine.session.parked_run.ParkedRun``, the debug session's), while the commands file is read on the
calling thread. Its dispatch stops are judged by the debug session's own ``DispatchGate`` on the device's
snapshot observer (``engine.dispatch.snapshot``): the same breakpoint matching and the same NaN/Inf rule on
the same typed snapshot (``--sources``, or sources beside the replay, type it). The commands are the module
debugger's (``engine.session.script``) where they mean something for a replay:

    break dispatch ORDINAL|NAME|* [before|after]   # NAME is IREE's export name (globs)
    break nan                                      # after each dispatch writing NaN or Inf
    continue | finish                              # to the next stop | to the end
    step [N] | next [N]                            # N host calls (replay records) further
    reverse-continue                               # back to the latest stop of any breakpoint before here
    reverse-step [N] | reverse-next [N]            # N host calls back (the replay runs again to that point)
    info registers                                 # where the replay is: record, host call, scope
    save-tensors DIR                               # the stopped dispatch's tensors as .npy (typed)

Each stop prints one line (``--json``: one JSON object: ``reason``, ``record``, ``operation``, ``scope``,
``dispatch`` null or ``{"ordinal", "name", "when"}``, ``nonfinite`` after a NaN stop; the end
``{"reason": "finished", "dispatches": N}``; save-tensors ``{"saved": [...]}``; notes go to stderr).
Errors end the commands file with exit status 1 as the module debugger's do (``engine.cli.debug.SCRIPT_RULE``,
gdb -batch -x's rule): a failed replay, a run command after the end, info registers or save-tensors with no
stop to read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from engine.dispatch.snapshot import DispatchSnapshots
from engine.dispatch.tensor_types import to_storage
from engine.dispatch.typed_tensors import ExecutableSources, find_sources
from engine.errors import LensError
from engine.replay import format as f
from engine.replay.execute import ReplayExecutor, Substitution
from engine.replay.model import describe_replay
from engine.replay.reader import Record, open_replay
from engine.runtime.hal.device import DispatchRecord
from engine.runtime.hal.devices import create_device
from engine.session.dispatch_gate import DispatchGate, GateStop, unmatchable
from engine.session.parked_run import ParkedRun
from engine.session.protocol import Breakpoint, BreakpointKind, DispatchInfo, DispatchWhen, NonFinite
from engine.session.script import ScriptCommand, ScriptError

Place = tuple[int, int, int]  # (host calls begun, dispatch sequence or -1, before 0 / after 1)

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


@dataclass
class Stop:
    reason: str  # "breakpoint", "nan", "step", "reverse", "finished", "failed"
    record: Record | None
    scope: str
    dispatch: DispatchRecord | None = None
    when: str | None = None
    message: str = ""
    position: Place = (0, -1, 0)  # where the replay was (see ``Place``): going back runs a fresh device there
    info: DispatchInfo | None = None
    nonfinite: tuple[NonFinite, ...] = ()


class _ScanDone(BaseException):
    """Ends a scan of the replay for breakpoint hits once it reaches the place it started from (a
    BaseException: no ``except Exception`` of the HAL or the executor on the way turns it into an error)."""


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


class _Run:
    """One issue of the replay: a fresh device, its snapshot observer (typed by ``sources``), the session's
    dispatch gate on it, and the executor that reissues the records."""

    def __init__(self, debugger: ReplayDebugger, sources: ExecutableSources):
        self.device = create_device(debugger.device_uri)
        self.snapshots = DispatchSnapshots(self.device, sources)
        self.device.add_observer(self.snapshots)
        self.gate = DispatchGate(debugger.dispatch_stop, lambda: False, lambda record: None)
        self.gate.breakpoints = tuple(debugger.breakpoints)
        self.gate.begin_call(0)  # a replay's dispatches are numbered from 0, as iree-dump-replay does
        self.snapshots.subscribe(self.gate)
        self.executor = ReplayExecutor(
            debugger.replay, self.device, substitutions=debugger.substitutions, on_record=debugger.on_record
        )


class ReplayDebugger:
    """Runs a commands file against a replay; the run parks (``ParkedRun``, as the debug session's does) at
    the stops the session's ``DispatchGate`` judges (dispatch breakpoints, NaN/Inf written, on the same typed
    snapshot) and at host-call steps. A stop's place is (host calls begun, dispatch sequence, before 0 /
    after 1), ordered as the replay passed them: reverse-continue scans the replay again for the latest hit
    before the current place and runs a fresh device to it (a replay is deterministic)."""

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
        sources: tuple[str, ...] = (),
    ):
        self.replay = open_replay(path)
        self.path = str(path)
        self.device_uri = device
        self.substitutions = substitutions
        self.sources = find_sources(path, sources)  # types tensors: given, else beside the replay
        self.commands = commands
        self.out, self.err = out, err
        self.as_json = as_json
        self.breakpoints: list[Breakpoint] = []
        self.run_thread = ParkedRun("lens-replay-debug")
        self.current = _Run(self, self.sources)
        self.started = False
        self.finished = False
        self.stop: Stop | None = None
        self.status = 0
        self._ops = 0
        self._record_now: Record | None = None
        self._steps: int | None = None
        self._free = False  # run to the end without stopping
        self._target: Place | None = None  # travelling back: the one place to stop at
        self._scan: tuple[Place, list[tuple[Place, str]]] | None = None  # looking for hits before a place
        self.matched: set[str] = set()

    @property
    def device(self):
        return self.current.device

    # -- the run thread

    def _scope(self) -> str:
        state = self.current.executor.state
        return state.scopes[-1] if state.scopes else ""

    def _park(self, stop: Stop) -> None:
        self.stop = stop
        self.run_thread.park()  # raises Abandoned when the debugger starts the replay again

    def on_record(self, r: Record) -> None:
        """The executor's hook, before each record: host-call steps and travels to a host call."""
        self._record_now = r
        if r.record_type != f.RecordType.OPERATION:
            return
        self._ops += 1
        here = (self._ops, -1, 0)
        if self._scan is not None:
            if here >= self._scan[0]:
                raise _ScanDone
            return
        if self._target is not None:
            if here == self._target:
                self._target = None
                self._park(Stop("reverse", r, self._scope(), position=here))
            return
        if self._free or self._steps is None:
            return
        self._steps -= 1
        if self._steps <= 0:
            self._steps = None
            self._park(Stop("step", r, self._scope(), position=here))

    def dispatch_stop(self, record: DispatchRecord, info: DispatchInfo, why: GateStop) -> None:
        """The gate's ``park``: a condition holds at this dispatch (its snapshot is the gate's)."""
        here = (self._ops, record.sequence, 1 if str(info.when) == DispatchWhen.AFTER else 0)
        reason = "nan" if why.nan_bindings and not any(b.kind != BreakpointKind.NAN for b in why.breakpoints) else "breakpoint"
        if self._scan is not None:
            if here >= self._scan[0]:
                raise _ScanDone
            self._scan[1].append((here, reason))
            return
        if self._target is not None:
            if here == self._target:
                self._target = None
                self.matched.update(b.describe() for b in why.breakpoints)
                self._park(Stop("reverse", self._record_now, self._scope(), record, str(info.when), position=here,
                                info=info, nonfinite=why.nonfinite))  # fmt: skip
            return
        if self._free:
            return
        self.matched.update(b.describe() for b in why.breakpoints)
        self._park(Stop(reason, self._record_now, self._scope(), record, str(info.when), position=here, info=info,
                        nonfinite=why.nonfinite))  # fmt: skip

    def _main(self) -> None:
        try:
            self.current.executor.run()
            self.stop = Stop("finished", self._record_now, "", position=(self._ops + 1, -1, 0))
        except (LensError, OSError) as e:
            self.stop = Stop("failed", self._record_now, self._scope(), message=str(e))

    def _fresh(self) -> None:
        """Abandon the run (parked or not) and set up a fresh device at the replay's start."""
        self.run_thread.abandon()
        self.current = _Run(self, self.sources)
        self._ops = 0
        self._record_now = None
        self._steps, self._free, self.finished, self.started = None, False, False, False

    # -- the commands

    def _go(self) -> None:
        if not self.started:
            self.started = True
            self.run_thread.start(self._main)
        else:
            self.run_thread.resume(True)
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
        if stop.nonfinite:
            line["nonfinite"] = [n.to_json() for n in stop.nonfinite]
        if stop.reason == "finished":
            line = {"reason": "finished", "dispatches": self.device.dispatch_count}
            never = [b.describe() for b in self.breakpoints if b.describe() not in self.matched]
            if never:
                print("iree-lens debug: the replay ended without stopping at: " + "; ".join(never), file=self.err)
        if self.as_json:
            print(json.dumps(line), file=self.out)
        elif stop.reason == "finished":
            print(f"finished: {self.device.dispatch_count} dispatches", file=self.out)
        elif stop.dispatch is not None:
            written = "".join(f" ({n.describe()})" for n in stop.nonfinite)
            print(
                f"stopped ({stop.reason}) {stop.when} dispatch {stop.dispatch.sequence} {stop.dispatch.export_name}"
                f" at record #{line['record']} {line['operation']}"
                + (f" in {stop.scope}" if stop.scope else "") + written,
                file=self.out,
            )
        elif stop.reason in ("step", "reverse"):
            print(
                f"stopped at record #{line['record']} {line['operation']}"
                + (f" in {stop.scope}" if stop.scope else ""),
                file=self.out,
            )
        self.out.flush()

    def _note(self, text: str) -> None:
        print(json.dumps({"note": text}) if self.as_json else f"note: {text}", file=self.err)

    def _fail(self, c: ScriptCommand, text: str) -> None:
        """``c`` could not do what it says: said, exit status 1, and the commands file stops after it."""
        print(f"iree-lens debug: line {c.line}: {text}", file=self.err)
        self.status = 1

    def run(self) -> int:
        try:
            for c in self.commands:
                self._do(c)
                if self.status:  # an error ends the commands file there (gdb -batch -x)
                    break
            if self.started and not self.finished:  # the end of the commands ends the run (gdb -batch)
                self._free = True
                self.run_thread.resume(True)
        finally:
            self.run_thread.close()
        return self.status

    def _do(self, c: ScriptCommand) -> None:
        if c.verb == "break":
            problem = unmatchable(c.breakpoint, self._dispatch_names(), Path(self.path).name)
            if problem is not None:  # said, not set, and the commands go on (as the module debugger does)
                print(f"iree-lens debug: line {c.line}: {problem} (not set)", file=self.err)
                return
            self.breakpoints.append(c.breakpoint)
            self.current.gate.breakpoints = tuple(self.breakpoints)
        elif c.verb in ("continue", "finish", "step", "next"):
            if self.finished:
                self._fail(c, f"{c.text!r}: the replay is not being run (finished)")
                return
            if c.verb == "finish":
                self._free = True
            elif c.verb in ("step", "next"):
                self._steps = c.count
            self._go()
        elif c.verb.startswith("reverse-"):
            self._reverse(c)
        elif c.verb == "info registers":
            r = self._record_now
            if r is None or self.finished:
                self._fail(c, f"{c.text!r}: the replay is not stopped ({'finished' if self.finished else 'not started'})")
                return
            text = f"record #{r.sequence_ordinal} {r.operation}"
            print(json.dumps({"position": text, "scope": self._scope()}) if self.as_json else text, file=self.out)
        elif c.verb == "save-tensors":
            self._save(c)

    def _dispatch_names(self) -> tuple[str, ...] | None:
        """The export names of the replay's executables' functions (what its dispatches can be named)."""
        names = [name for e in describe_replay(self.replay).executables for name in e.functions]
        return tuple(dict.fromkeys(names)) if names else None

    def _here(self) -> Place:
        if self.stop is not None and not self.finished:
            return self.stop.position
        return (self._ops + 1, -1, 0)  # the end: after the last host call

    def _reverse(self, c: ScriptCommand) -> None:
        here = self._here()
        if c.verb == "reverse-continue":
            found = self._hits_before(here)
            if not found:
                self._note(f"{c.text}: no breakpoint was hit before this point: at the start of the replay")
                return
            target, _ = found[-1]
        else:  # reverse-step/next N: N host calls back
            ops = here[0] - c.count
            if ops < 1:
                self._note(f"{c.text}: already at the start of the replay")
                return
            target = (ops, -1, 0)
        self._fresh()
        self._target = target
        self._go()

    def _hits_before(self, here: Place) -> list[tuple[Place, str]]:
        """Every place before ``here`` where a breakpoint's condition holds, in replay order: the replay
        issued again on a second fresh device with the gate judging each dispatch (a replay is
        deterministic); the run where it is stays parked meanwhile, untouched."""
        saved = (self.current, self._ops, self._record_now)
        self.current = _Run(self, self.sources)
        self._ops, self._record_now = 0, None
        self._scan = (here, [])
        try:
            self.current.executor.run()
        except _ScanDone:
            pass
        finally:
            hits = self._scan[1]
            self._scan = None
            self.current, self._ops, self._record_now = saved
        return hits

    def _save(self, c: ScriptCommand) -> None:
        stop = self.stop
        snapshot = self.current.gate.snapshot
        if stop is None or stop.dispatch is None or self.finished or snapshot is None:
            self._fail(c, "save-tensors: not stopped at a dispatch")
            return
        out = Path(c.path or ".")
        out.mkdir(parents=True, exist_ok=True)
        saved = []
        # Typed once (engine.dispatch.typed_tensors): from the executable sources, else the bound bytes.
        for t in snapshot.tensors():
            path = out / f"dispatch{stop.dispatch.sequence}_{stop.when}_{t.role}{t.position}.npy"
            np.save(path, to_storage(np.array(t.array, copy=True)))
            saved.append(str(path))
        if self.as_json:
            print(json.dumps({"saved": saved}), file=self.out)
        else:
            print(f"saved {len(saved)} tensors of dispatch {stop.dispatch.sequence} to {out}", file=self.out)
