"""The window's side of the debug session: a ``QObject`` that owns a session and re-emits its events as signals.

The session (``engine.session``) runs the debuggee in a child process by default, so a faulting kernel or
a runaway loop never takes the window down; ``in_process=True`` runs it on a worker thread of this process
(for scripts and tests that do not need crash isolation). Either way its events arrive on a background
thread; the bridge hands each one to the GUI thread through a queued signal, then emits a typed signal
(``stopped``, ``finished``...). Panels send commands through the bridge's methods and never touch the
session directly.

The bridge also keeps the one current position: every stop moves the context (``LensContext``) to the
innermost frame's function and pc, so the module inspector and every other panel follow the run.

What the user sets up (the open module, breakpoints, the last function and inputs) is saved through a
``SessionStore`` as it changes, so a crash or a killed application loses nothing.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot

from app.settings import open_settings
from engine.session.persist import SavedSession, SessionStore, default_state_dir
from engine.session.protocol import (
    Answer,
    Bindings,
    Breakpoint,
    Call,
    Continue,
    Crashed,
    Event,
    Failed,
    Finished,
    History,
    Location,
    Log,
    Open,
    Opened,
    Progress,
    Query,
    ReadBindings,
    ReadHistory,
    Reverse,
    ReverseMode,
    RunTo,
    SetBreakpoints,
    Step,
    StepMode,
    Stopped,
    TravelTo,
    Watch,
    WhenChanged,
)

# Every debug run records its history (engine.timetravel), so the window can step back and travel in time.
HANDLER = "engine.timetravel.session:TimeTravelSession"
STATE_DIR_ENV = "IREE_LENS_STATE_DIR"  # where the last session is saved (tests point it at a tmp dir)

STOP_TIMEOUT_KEY = "session/stop_timeout_s"
HANG_TIMEOUT_KEY = "session/hang_timeout_s"
DEFAULT_STOP_TIMEOUT = 1.0  # seconds a run may take to answer Stop before it is killed
DEFAULT_HANG_TIMEOUT = 0.0  # 0: no watchdog (a long, silent Continue is legitimate in a debugger)
DEVICE_KEY = "run/device"  # the device URI debug runs use (the Device panel writes it)
CPU_DEVICE = "local-sync"
PROGRESS_INTERVAL = 0.05  # seconds between Progress events handed to the GUI thread (one per dispatch)


class BridgeState(StrEnum):
    CLOSED = "closed"  # no module
    IDLE = "idle"  # module open, no call in progress
    RUNNING = "running"
    STOPPED = "stopped"  # a call is paused: step, breakpoint, entry, pause, dispatch
    STARTING = "starting"  # the session process is (re)starting


def selected_device() -> str:
    """The device URI debug runs use, from the settings (``local-sync`` until one is chosen)."""
    value = open_settings().value(DEVICE_KEY, CPU_DEVICE)
    return str(value) if value else CPU_DEVICE


def state_dir() -> Path:
    """The folder of the saved session: ``$IREE_LENS_STATE_DIR`` or the engine's default."""
    return Path(os.environ.get(STATE_DIR_ENV) or default_state_dir())


def stop_timeout_setting() -> float:
    return float(open_settings().value(STOP_TIMEOUT_KEY, DEFAULT_STOP_TIMEOUT) or DEFAULT_STOP_TIMEOUT)


def hang_timeout_setting() -> float:
    return float(open_settings().value(HANG_TIMEOUT_KEY, DEFAULT_HANG_TIMEOUT) or 0.0)


def save_timeouts(stop_timeout: float | None = None, hang_timeout: float | None = None) -> None:
    settings = open_settings()
    if stop_timeout is not None:
        settings.setValue(STOP_TIMEOUT_KEY, float(stop_timeout))
    if hang_timeout is not None:
        settings.setValue(HANG_TIMEOUT_KEY, float(hang_timeout))
    settings.sync()


def breakpoint_to_dict(bp: Breakpoint) -> dict[str, Any]:
    return {k: v for k, v in asdict(bp).items() if v is not None}


def breakpoint_from_dict(data: dict[str, Any]) -> Breakpoint | None:
    try:
        return Breakpoint(**{k: data.get(k) for k in Breakpoint.__dataclass_fields__ if k in data})
    except TypeError:
        return None


def describe_breakpoint(bp: Breakpoint) -> str:
    return bp.describe()


def describe_crash(crash: Crashed, call: Call | None) -> str:
    """The report a crash shows: what was running (function, pc, dispatch) and why it stopped."""
    lines = [f"The debug session crashed: {crash.reason}."]
    frames = crash.location.frames
    if frames:
        f = frames[-1]
        where = f"{f.module}.{f.function} at pc {f.pc:#x}"
        if f.instruction:
            where += f" ({f.instruction})"
        lines.append(f"Running: {where}")
    elif call is not None:
        lines.append(f"Running: {call.function}")
    if crash.location.dispatch:
        lines.append(f"In dispatch #{crash.location.dispatch_index}: {crash.location.dispatch}")
    if call is not None:
        lines.append(
            f"Call: {call.function}({', '.join(call.inputs)})"
            + ("  [stopped at entry]" if call.stop_at_entry else "")
        )
    lines.append("The session process was restarted; Rerun repeats the call with the same breakpoints.")
    return "\n".join(lines)


class SessionBridge(QObject):
    """Owns a debug session; commands in (methods), events out (signals, always on the GUI thread).

    ``state`` is a ``BridgeState``: ``closed`` (no module), ``idle`` (module open, no call in progress),
    ``running``, ``stopped`` (a call is paused: step, breakpoint, entry, pause, dispatch) and ``starting``
    (the session process is (re)starting after a crash).

    A stop at a dispatch also emits ``dispatchStopped(DispatchInfo)`` and sets the context's paused
    dispatch; ``request_bindings()`` then answers with ``bindingsRead(DispatchInfo, [uint8 arrays])``.
    """

    opened = Signal(object)  # Opened
    stopped = Signal(object)  # Stopped
    finished = Signal(object)  # Finished
    failed = Signal(object)  # Failed
    crashed = Signal(object)  # Crashed (the report text is ``crash_report``)
    answered = Signal(object)  # an Answer (engine.session.protocol: one type per query)
    logged = Signal(str)
    stateChanged = Signal(str)
    breakpointsChanged = Signal(object)  # tuple[Breakpoint, ...]
    callChanged = Signal(object)  # Call: the last call (function, inputs), e.g. restored
    progressed = Signal(object)  # Progress: what runs now (a dispatch), at most every PROGRESS_INTERVAL
    dispatchStopped = Signal(object)  # DispatchInfo: the run paused at this dispatch
    bindingsRead = Signal(object, object)  # DispatchInfo, list[np.ndarray]: the paused dispatch's bindings
    historyChanged = Signal(object)  # History | None: asked after each stop (recorded span, dispatches)
    _event = Signal(object)  # from the session's thread to the GUI thread (queued)

    def __init__(
        self,
        context: Any = None,
        *,
        in_process: bool = False,
        store: SessionStore | None = None,
        stop_timeout: float | None = None,
        hang_timeout: float | None = None,
        parent: QObject | None = None,
    ):
        super().__init__(parent)
        self.context = context
        self.in_process = in_process
        self.store = store if store is not None else SessionStore(state_dir())
        self.stop_timeout = stop_timeout if stop_timeout is not None else stop_timeout_setting()
        hang = hang_timeout if hang_timeout is not None else hang_timeout_setting()
        self.hang_timeout = hang or None
        self.state = BridgeState.CLOSED
        self._last_progress = 0.0
        self.module_path: str | None = None
        self.source_path: str | None = None
        self.device = CPU_DEVICE
        self.functions: tuple[str, ...] = ()
        self.breakpoints: tuple[Breakpoint, ...] = ()
        self.last_call: Call | None = None
        self.last_stop: Stopped | None = None
        self.last_crash: Crashed | None = None
        self.crash_report = ""
        self.crash_count = 0
        self._closed = False
        self.history: History | None = None  # the last ReadHistory answer (None: nothing recorded)
        self._history_alive = False  # a recorded call one can go back in (stopped, or finished)
        self._reverse_from: str | None = None  # the state a reverse/travel command in flight started from
        self._event.connect(self._on_event, Qt.ConnectionType.QueuedConnection)
        # The session process starts with the first command: a window that never debugs never spawns one.
        self.session: Any = None

    # -- session life cycle ---------------------------------------------------------------------

    def _make_session(self):
        if self.in_process:
            from engine.session.inprocess import InProcessSession
            from engine.timetravel.session import TimeTravelSession

            return InProcessSession(TimeTravelSession, self._from_session, progress=True)
        from engine.session.child import ChildSession

        return ChildSession(HANDLER, self._from_session, hang_timeout=self.hang_timeout, progress=True)

    def _from_session(self, event: Event) -> None:
        """Called on the session's thread: queue the event for the GUI thread."""
        if self._closed:
            return
        if isinstance(event, Progress):  # one per dispatch: the GUI needs a few a second
            now = time.monotonic()
            if now - self._last_progress < PROGRESS_INTERVAL:
                return
            self._last_progress = now
        try:
            self._event.emit(event)
        except RuntimeError:  # the QObject is gone (window closed while the child was talking)
            pass

    def shutdown(self) -> None:
        """Close the session (the child process ends). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self.session is None:
            self._set_state("closed")
            return
        try:
            self.session.close()
        except Exception:  # a dead pipe while closing: the child is gone anyway
            pass
        self._set_state("closed")

    @property
    def is_alive(self) -> bool:
        return not self._closed and self.session is not None and self.session.alive

    def set_hang_timeout(self, seconds: float) -> None:
        """The watchdog limit (0 turns it off); applies to the session process from its next start."""
        self.hang_timeout = seconds or None
        if self.session is not None and hasattr(self.session, "hang_timeout"):
            self.session.hang_timeout = self.hang_timeout
        save_timeouts(hang_timeout=seconds)

    def set_stop_timeout(self, seconds: float) -> None:
        self.stop_timeout = float(seconds)
        save_timeouts(stop_timeout=seconds)

    # -- commands -------------------------------------------------------------------------------

    def _send(self, command) -> None:
        if self._closed:
            return
        if self.session is None:
            self.session = self._make_session()
        self.session.send(command)

    def open(
        self, module_path: str | Path, device: str = "local-sync", source_path: str | Path | None = None
    ):
        """Open ``module_path`` in the session on ``device``; the breakpoints set so far stay."""
        self.module_path = str(module_path)
        self.source_path = str(source_path) if source_path else None
        self.device = device
        self.last_stop = None
        self._forget_history()
        self._set_state("starting")
        self._send(Open(self.module_path, device))
        self._send(SetBreakpoints(self.breakpoints))
        self._save(module_path=self.module_path, source_path=self.source_path, device=device)

    def call(self, function: str, inputs: tuple[str, ...] | list[str] = (), stop_at_entry: bool = False):
        command = Call(function, tuple(inputs), stop_at_entry)
        self.last_call = command
        self.last_stop = None
        self._forget_history()
        self._save(function=function, inputs=list(command.inputs))
        self.callChanged.emit(command)
        self._run(command)

    def rerun(self) -> None:
        """Repeat the last call (after a crash, the restarted session already has the breakpoints)."""
        if self.last_call is not None:
            self._send(SetBreakpoints(self.breakpoints))
            self.call(self.last_call.function, self.last_call.inputs, self.last_call.stop_at_entry)

    def step(self, mode: str = "into", count: int = 1) -> None:
        if self.state == "stopped":
            self._run(Step(mode, count))

    def step_into(self) -> None:
        self.step("into")

    def step_over(self) -> None:
        self.step("over")

    def step_out(self) -> None:
        self.step("out")

    def next_dispatch(self) -> None:
        """Run to the next dispatch (stops before it runs)."""
        self.step(StepMode.DISPATCH)

    def continue_(self) -> None:
        if self.state == "stopped":
            self._run(Continue())

    def run_to(self, function: str, pc: int) -> None:
        if self.state == "stopped":
            self._run(RunTo(function, pc))

    # -- time travel (the session records every call) -----------------------------------------------

    @property
    def can_reverse(self) -> bool:
        """A recorded call can be gone back in: paused, or finished (not failed, not crashed)."""
        return self._history_alive and self.state in (BridgeState.STOPPED, BridgeState.IDLE)

    def reverse(self, mode: str = ReverseMode.STEP, count: int = 1) -> None:
        """``mode`` a ``ReverseMode`` (gdb's reverse-step/next/finish/continue); answered by ``stopped``."""
        if self.can_reverse:
            self._reverse_from = self.state
            self._run(Reverse(str(mode), count))

    def reverse_step_into(self) -> None:
        self.reverse(ReverseMode.STEP)

    def reverse_step_over(self) -> None:
        self.reverse(ReverseMode.NEXT)

    def reverse_step_out(self) -> None:
        self.reverse(ReverseMode.FINISH)

    def reverse_continue(self) -> None:
        self.reverse(ReverseMode.CONTINUE)

    def travel_to(self, position: int | None = None, dispatch: int | None = None, when: str = "before") -> None:
        """Go to a recorded moment: an instruction ``position``, or a dispatch (its run ordinal): before it
        runs, parked inside it so its tensors can be read, or ``after`` it."""
        if self.can_reverse:
            self._reverse_from = self.state
            park = dispatch is not None and when == "before"
            self._run(TravelTo(position, dispatch, when, park))

    def previous_dispatch_ordinal(self) -> int | None:
        """The dispatch before where the run is (from the history), or None when none was recorded."""
        marks = self.history.dispatches if self.history is not None else ()
        info = self.last_stop.location.dispatch_info if self.last_stop is not None else None
        if info is not None and self.state == BridgeState.STOPPED:
            target = info.ordinal - 1 if str(info.when) == "before" else info.ordinal
            return target if any(m.ordinal == target for m in marks) else None
        position = self.history.position if self.history is not None else None
        if position is None:
            return None
        earlier = [m.ordinal for m in marks if m.position < position]
        return max(earlier) if earlier else None

    def previous_dispatch(self) -> bool:
        """Go back to the dispatch before this moment and park in it (False: none recorded)."""
        target = self.previous_dispatch_ordinal()
        if target is None or not self.can_reverse:
            return False
        self.travel_to(dispatch=target)
        return True

    def when_changed(self, watch: Watch) -> None:
        """Ask when a register/global/element last changed (answered by ``LastChange``)."""
        if self.can_reverse:
            self.evaluate(WhenChanged(watch))

    def refresh_history(self) -> None:
        if self._history_alive:
            self.evaluate(ReadHistory())

    def _forget_history(self) -> None:
        self._history_alive = False
        self._reverse_from = None
        if self.history is not None:
            self.history = None
            self.historyChanged.emit(None)

    def evaluate(self, query: Query) -> None:
        """Send a query (``engine.session.protocol``); its answer comes through ``answered``."""
        if self.state in ("stopped", "idle"):
            self._send(query)

    def request_bindings(self) -> None:
        """Ask for the bytes of every binding of the paused dispatch (answered by ``bindingsRead``)."""
        if self.state == BridgeState.STOPPED and self.last_stop is not None:
            if self.last_stop.location.dispatch_info is not None:
                self._send(ReadBindings())

    def _run(self, command) -> None:
        self._set_state("running")
        self._publish_dispatch(None)
        self._send(command)

    def stop(self) -> None:
        """Pause the run; if it does not answer within ``stop_timeout`` s, kill it (then it restarts).

        The wait happens on a helper thread: the window never waits for the debuggee.
        """
        if self.state != "running" or self._closed or self.session is None:
            return
        session, timeout = self.session, self.stop_timeout
        threading.Thread(target=session.stop, args=(timeout,), name="session-stop", daemon=True).start()

    # -- breakpoints ----------------------------------------------------------------------------

    def set_breakpoints(self, breakpoints) -> None:
        self.breakpoints = tuple(dict.fromkeys(breakpoints))  # unique, in order
        self._send(SetBreakpoints(self.breakpoints))
        self._save(breakpoints=[breakpoint_to_dict(b) for b in self.breakpoints])
        self.breakpointsChanged.emit(self.breakpoints)

    def add_breakpoint(self, bp: Breakpoint) -> None:
        if bp not in self.breakpoints:
            self.set_breakpoints((*self.breakpoints, bp))

    def remove_breakpoint(self, bp: Breakpoint) -> None:
        self.set_breakpoints(b for b in self.breakpoints if b != bp)

    def toggle_breakpoint(self, bp: Breakpoint) -> bool:
        """Add ``bp`` or remove it; True when it is now set."""
        if bp in self.breakpoints:
            self.remove_breakpoint(bp)
            return False
        self.add_breakpoint(bp)
        return True

    def toggle_instruction_breakpoint(self, function: str, pc: int) -> bool:
        return self.toggle_breakpoint(Breakpoint("instruction", function=function, pc=pc))

    # -- persistence ----------------------------------------------------------------------------

    def _save(self, **fields: Any) -> None:
        try:
            self.store.update(**fields)
        except OSError as e:  # a full disk must not stop the debugger; say so in the log
            self.logged.emit(f"cannot save the session to {self.store.root}: {e}")

    def saved_session(self) -> SavedSession | None:
        """The session saved by the last run of the application, if there is one worth restoring."""
        if not self.store.has_saved_session():
            return None
        saved = self.store.load()
        if not (saved.module_path or saved.source_path or saved.breakpoints):
            return None
        return saved

    def restore_setup(self, saved: SavedSession) -> None:
        """Take back the breakpoints and the last call of ``saved`` (the module is opened by the window)."""
        bps = [b for b in (breakpoint_from_dict(d) for d in saved.breakpoints) if b is not None]
        self.set_breakpoints(bps)
        if saved.function:
            self.last_call = Call(saved.function, tuple(saved.inputs))
            self._save(function=saved.function, inputs=list(saved.inputs))
            self.callChanged.emit(self.last_call)

    # -- events (GUI thread) ----------------------------------------------------------------------

    @Slot(object)
    def _on_event(self, event: Event) -> None:
        if self._closed:
            return
        if isinstance(event, Opened):
            self.functions = event.functions
            self._set_state("idle")
            self.opened.emit(event)
        elif isinstance(event, Stopped):
            self.last_stop = event
            self._history_alive = True
            self._reverse_from = None
            self._set_state("stopped")
            self._move_context(event.location)
            self.stopped.emit(event)
            info = event.location.dispatch_info
            self._publish_dispatch(info)
            if info is not None:
                self.dispatchStopped.emit(info)
            self.refresh_history()
        elif isinstance(event, Finished):
            self.last_stop = None
            self._history_alive = True  # one can still go back from the end
            self._reverse_from = None
            self._set_state("idle")
            self._publish_dispatch(None)
            self.finished.emit(event)
            self.refresh_history()
        elif isinstance(event, Failed):
            if self._reverse_from is not None and self.state == BridgeState.RUNNING:
                # A reverse command that cannot be done leaves the program where it was.
                state, self._reverse_from = self._reverse_from, None
                self._set_state(state)
                if self.last_stop is not None:
                    self._publish_dispatch(None)
            elif self.state == BridgeState.RUNNING:  # a failed call ends it; a rejected query does not
                self.last_stop = None
                self._history_alive = False
                self._set_state("idle")
            self.failed.emit(event)
        elif isinstance(event, Crashed):
            self._on_crashed(event)
        elif isinstance(event, Answer):
            if isinstance(event, Bindings) and self.last_stop is not None:
                info = self.last_stop.location.dispatch_info
                self.bindingsRead.emit(info, [ref.to_numpy() for ref in event.tensors])
            elif isinstance(event, History):
                self.history = event if event.recording else None
                self.historyChanged.emit(self.history)
            self.answered.emit(event)
        elif isinstance(event, Progress):
            self.progressed.emit(event)
        elif isinstance(event, Log):
            self.logged.emit(event.text)

    def _on_crashed(self, crash: Crashed) -> None:
        self.last_crash = crash
        self.last_stop = None
        self._forget_history()
        self.crash_count += 1
        self.crash_report = describe_crash(crash, self.last_call)
        # Restart first, so the report's Rerun works as soon as it is shown.
        if not self.in_process:
            self._set_state("starting" if self.module_path else "closed")
            self.session.restart()  # replays Open and SetBreakpoints
        self.crashed.emit(crash)

    def _move_context(self, location: Location) -> None:
        if self.context is None or not location.frames:
            return
        frame = location.frames[-1]
        self.context.set_position(function=frame.function, pc=frame.pc, dispatch=location.dispatch_index)

    def _publish_dispatch(self, info) -> None:
        """The context's paused dispatch (what tensor views show) follows the run."""
        if self.context is not None:
            self.context.set_paused_dispatch(info)

    def _set_state(self, state: str) -> None:
        state = BridgeState(state)
        if state != self.state:
            self.state = state
            self.stateChanged.emit(state)
