"""The one client of a debug session: what the window, ``iree-lens debug`` and adapters drive.

``SessionClient`` owns everything about a session that is not the program itself: the state machine
(``SessionState``: closed, starting, idle, running, stopped), the breakpoints, the last call and stop, the
run's history (``History``, asked after each stop of a recorded run), restart after the session process
crashes (the module is opened again and the breakpoints set again), and persistence of the user's work
(``SessionStore``: module, source, device, breakpoints, function and inputs, saved as they change).

Commands go in through methods (``open``, ``call``, ``step``, ``continue_``, ``reverse``, ``travel_to``,
``query``...). Events come out through ``notify(message)``: every protocol ``Event`` the session sends
(after the client has taken it into its state) and the client's own notices (``StateChanged``,
``BreakpointsChanged``, ``CallChanged``, ``HistoryChanged``, and a ``Log`` when saving fails). The Qt
bridge (``app/session_bridge.py``) re-emits them as signals; the CLI reads them one at a time.

**Threads.** A transport delivers events on a thread of its own. They reach the client's state only
through ``receive(event)``, called on the thread that owns the client: ``deliver`` (a constructor
argument) carries an event from the transport's thread to that thread; it defaults to calling
``receive`` right there. ``blocking=True`` queues the events instead and ``next_event()`` receives one
(the CLI, tests, request/response adapters).

**The transport seam.** A transport carries commands to a session handler (``DebugSession``,
``TimeTravelSession``, ``ReferenceSession``) and its events back. ``transport_factory(on_event)`` makes
one when the first command is sent; it calls ``on_event(event)`` from any thread. Its whole surface is
``Transport`` below:

* ``send(command)``: queue a command (or a query); never blocks on the program;
* ``pause()``: ask a running program to stop at its next chance (a ``Stopped(reason="paused")``);
* ``stop(timeout) -> bool``: pause, and if no stop comes within ``timeout`` s kill the session (a crash
  isolated transport reports ``Crashed``); True when it paused;
* ``restart()``: a fresh session after a crash (the client sends ``Open`` and ``SetBreakpoints`` again);
* ``close()``; ``alive``; ``crash_isolated`` (True: the session runs in another process, so a crash
  arrives as ``Crashed`` and ``restart`` gives a new one).

Three transports exist: ``InProcessSession`` (a worker thread of this process), ``ChildSession`` (a
spawned child process, messages pickled over a pipe, tensors in shared memory). The third,
``engine.session.stream.StreamSession`` (factory ``stream.remote(command, handler)``), talks to
``iree-lens serve --stdio`` started by a command (over ssh for another machine): each command is written
as bytes (``engine.session.wire``) and a reader thread turns bytes back into events for ``on_event``; a
``blocking`` client has it read them in ``next_event`` instead (``read_on_caller``/``pump``: no reader
thread to wake for each reply).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any, Protocol

from engine.session.persist import SavedSession, SessionStore
from engine.session.protocol import (
    Breakpoint,
    Call,
    Command,
    Continue,
    Crashed,
    Event,
    Failed,
    Finished,
    History,
    Log,
    Open,
    Opened,
    Progress,
    Query,
    ReadBindings,
    ReadHistory,
    ReadTensors,
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


class SessionState(StrEnum):
    CLOSED = "closed"  # no module
    IDLE = "idle"  # module open, no call in progress
    RUNNING = "running"
    STOPPED = "stopped"  # a call is paused: step, breakpoint, entry, pause, dispatch
    STARTING = "starting"  # the session process is (re)starting, or a module is opening


class Transport(Protocol):
    """What carries commands to a session handler and its events back (see the module's docstring)."""

    crash_isolated: bool

    def send(self, command: Command) -> None: ...

    def pause(self) -> None: ...

    def stop(self, timeout: float = 1.0) -> bool: ...

    def restart(self) -> None: ...

    def close(self) -> None: ...

    @property
    def alive(self) -> bool: ...


TransportFactory = Callable[[Callable[[Event], Any]], Transport]


def in_process(handler_class: type) -> TransportFactory:
    """A transport running ``handler_class`` on a worker thread of this process (no crash isolation)."""

    def make(on_event: Callable[[Event], Any]) -> Transport:
        from engine.session.inprocess import InProcessSession

        return InProcessSession(handler_class, on_event, progress=True)

    return make


def child_process(handler_path: str, hang_timeout: float | None = None) -> TransportFactory:
    """A transport running ``handler_path`` (``"module:Class"``) in a child process."""

    def make(on_event: Callable[[Event], Any]) -> Transport:
        from engine.session.child import ChildSession

        return ChildSession(handler_path, on_event, hang_timeout=hang_timeout, progress=True)

    return make


# ------------------------------------------------------------------------------------ client notices


@dataclass(frozen=True)
class Notice:
    """Something the client tells its owner besides the session's own events."""


@dataclass(frozen=True)
class StateChanged(Notice):
    state: SessionState


@dataclass(frozen=True)
class BreakpointsChanged(Notice):
    breakpoints: tuple[Breakpoint, ...]


@dataclass(frozen=True)
class CallChanged(Notice):
    call: Call


@dataclass(frozen=True)
class HistoryChanged(Notice):
    history: History | None


# ------------------------------------------------------------------------------------ persistence


def breakpoint_to_dict(bp: Breakpoint) -> dict[str, Any]:
    return {k: v for k, v in asdict(bp).items() if v is not None}


def breakpoint_from_dict(data: dict[str, Any]) -> Breakpoint | None:
    try:
        return Breakpoint(**{k: data.get(k) for k in Breakpoint.__dataclass_fields__ if k in data})
    except TypeError:
        return None


def describe_crash(crash: Crashed, call: Call | None, restarted: bool = True) -> str:
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
    if restarted:
        lines.append("The session process was restarted; Rerun repeats the call with the same breakpoints.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ client


class SessionClient:
    def __init__(
        self,
        transport_factory: TransportFactory,
        *,
        store: SessionStore | None = None,
        notify: Callable[[Event | Notice], Any] | None = None,
        deliver: Callable[[Event], Any] | None = None,
        blocking: bool = False,
        progress_interval: float | None = None,
        stop_timeout: float = 1.0,
        track_history: bool = True,
    ):
        """``store``: where the user's work is saved (None: not saved). ``progress_interval``: at most one
        ``Progress`` per that many seconds reaches ``deliver`` (None: none at all). ``track_history``: ask
        for the ``History`` after each stop and end (a session that records; harmless otherwise)."""
        self.transport_factory = transport_factory
        self.store = store
        self.notify = notify or (lambda message: None)
        self._inbox: queue.Queue[Event] | None = queue.Queue() if blocking else None
        self.deliver = deliver or (self._inbox.put if self._inbox is not None else self.receive)
        self.progress_interval = progress_interval
        self.stop_timeout = stop_timeout
        self.track_history = track_history
        self.transport: Transport | None = None
        self.state = SessionState.CLOSED
        self.module_path: str | None = None
        self.source_path: str | None = None
        self.device = "local-sync"
        self.sources: tuple[str, ...] = ()
        self.wait_for_sources = False
        self.rebuild_sources = True
        self.parameters: tuple[str, ...] = ()
        self.initializer = False  # opened with its initializer left to a call (Open.initializer)
        self.modules: tuple[str, ...] = ()  # the compiled modules the program calls (Open.modules)
        self.executable_plugins: tuple[str, ...] = ()  # what its CPU kernels import from (Open.executable_plugins)
        self.functions: tuple[str, ...] = ()
        self.breakpoints: tuple[Breakpoint, ...] = ()
        self.last_call: Call | None = None
        self.last_stop: Stopped | None = None
        self.last_crash: Crashed | None = None
        self.failed_call: Failed | None = None  # how the last call failed (it ended there); None: it did not
        self.crash_report = ""
        self.crash_count = 0
        self.history: History | None = None
        self.closed = False
        self._history_alive = False  # a recorded call one can go back in (stopped, or finished)
        self._reverse_from: SessionState | None = None  # the state a reverse/travel in flight started from
        self._last_progress = 0.0

    # -- transport -------------------------------------------------------------------------------------

    def _from_transport(self, event: Event) -> None:
        """On the transport's thread: pass the event on to the owner's thread (Progress thinned out)."""
        if self.closed:
            return
        if isinstance(event, Progress):
            if self.progress_interval is None:
                return
            now = time.monotonic()
            if now - self._last_progress < self.progress_interval:
                return
            self._last_progress = now
        self.deliver(event)

    def connect(self) -> Transport:
        """Start the transport now (otherwise the first command starts it); a failure to start raises here."""
        if self.transport is None:
            self.transport = self.transport_factory(self._from_transport)
            read_on_caller = getattr(self.transport, "read_on_caller", None)
            if self._inbox is not None and callable(read_on_caller):
                read_on_caller()  # next_event reads the stream itself: no reader thread to wake per event
        return self.transport

    def send(self, command: Command) -> None:
        """Send a command as it is (the methods below keep the state; this is for what they do not cover)."""
        if self.closed:
            return
        self.connect().send(command)

    @property
    def alive(self) -> bool:
        return not self.closed and self.transport is not None and self.transport.alive

    def next_event(self, timeout: float | None = None) -> Event:
        """(``blocking`` clients) The next event, taken into the client's state. ``queue.Empty`` on timeout."""
        if self._inbox is None:
            raise RuntimeError("next_event() needs a client made with blocking=True")
        pump = getattr(self.transport, "pump", None) if getattr(self.transport, "pull", False) else None
        if pump is not None and self._inbox.empty():
            deadline = None if timeout is None else time.monotonic() + timeout
            while self._inbox.empty():  # (a Progress read may be thinned out: read on)
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not pump(left):
                    break  # timed out, or the stream ended: what the inbox has (or gets) decides
            if deadline is not None:
                timeout = max(0.0, deadline - time.monotonic())
        event = self._inbox.get(timeout=timeout)
        self.receive(event)
        return event

    def shutdown(self) -> None:
        """Close the session (a child process ends). Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        if self.transport is not None:
            try:
                self.transport.close()
            except Exception:  # a dead pipe while closing: the child is gone anyway
                pass
        self._set_state(SessionState.CLOSED)

    # -- commands --------------------------------------------------------------------------------------

    def open(
        self,
        module_path: str,
        device: str = "local-sync",
        source_path: str | None = None,
        sources: tuple[str, ...] = (),
        wait_for_sources: bool = False,
        rebuild_sources: bool = True,
        parameters: tuple[str, ...] = (),
        initializer: bool = False,
        modules: tuple[str, ...] = (),
        executable_plugins: tuple[str, ...] = (),
    ) -> None:
        """Open ``module_path`` on ``device``; the breakpoints set so far stay. ``sources``: the executables'
        sources that type its tensors (``Open.sources``; by default those beside the module);
        ``wait_for_sources``: opened once a rebuild of them is done (``Open.wait_for_sources``);
        ``rebuild_sources``: False types only from given or found sources (``Open.rebuild_sources``);
        ``parameters``: the archives its weights load from (``Open.parameters``); ``initializer``: its
        initializer left to a call of ``__init`` (``Open.initializer``)."""
        self.module_path = str(module_path)
        self.source_path = str(source_path) if source_path else None
        self.device = device
        self.sources = tuple(str(s) for s in sources)
        self.wait_for_sources = wait_for_sources
        self.rebuild_sources = rebuild_sources
        self.parameters = tuple(str(p) for p in parameters)
        self.modules = tuple(str(m) for m in modules)
        self.executable_plugins = tuple(str(p) for p in executable_plugins)
        self.initializer = initializer
        self.last_stop = None
        self._forget_history()
        self._set_state(SessionState.STARTING)
        self.send(self._open_command())
        self.send(SetBreakpoints(self.breakpoints))
        self._save(module_path=self.module_path, source_path=self.source_path, device=device,
                   parameters=list(self.parameters), executable_plugins=list(self.executable_plugins))  # fmt: skip

    def _open_command(self) -> Open:
        return Open(
            self.module_path,
            self.device,
            self.sources,
            rebuild_sources=self.rebuild_sources,
            wait_for_sources=self.wait_for_sources,
            parameters=self.parameters,
            initializer=self.initializer,
            modules=self.modules,
            executable_plugins=self.executable_plugins,
        )

    def call(self, function: str, inputs: Iterable[str] = (), stop_at_entry: bool = False) -> None:
        command = Call(function, tuple(inputs), stop_at_entry)
        self.last_call = command
        self.last_stop = None
        self.failed_call = None
        self._forget_history()
        self._save(function=function, inputs=list(command.inputs))
        self.notify(CallChanged(command))
        self._run(command)

    def rerun(self) -> None:
        """Repeat the last call (after a crash, the restarted session already has the breakpoints)."""
        if self.last_call is not None:
            self.send(SetBreakpoints(self.breakpoints))
            self.call(self.last_call.function, self.last_call.inputs, self.last_call.stop_at_entry)

    def step(self, mode: str = StepMode.INTO, count: int = 1) -> bool:
        """Step a stopped call; False (nothing sent) when no call is stopped."""
        if self.state != SessionState.STOPPED:
            return False
        self._run(Step(str(mode), count))
        return True

    def continue_(self) -> bool:
        if self.state != SessionState.STOPPED:
            return False
        self._run(Continue())
        return True

    def run_to(self, function: str, pc: int) -> bool:
        if self.state != SessionState.STOPPED:
            return False
        self._run(RunTo(function, pc))
        return True

    def query(self, query: Query) -> bool:
        """Send a query (answered by its ``Answer`` or a ``Failed``); False when no module is ready."""
        if self.state not in (SessionState.STOPPED, SessionState.IDLE):
            return False
        self.send(query)
        return True

    def request_bindings(self) -> bool:
        """Ask for the bytes of every binding of the paused dispatch (answered by ``Bindings``)."""
        stop = self.last_stop
        if self.state == SessionState.STOPPED and stop is not None and stop.location.dispatch_info is not None:
            self.send(ReadBindings())
            return True
        return False

    def request_tensors(self, wait_for_sources: bool = False) -> bool:
        """Ask for the paused dispatch's tensors, typed by the session (answered by ``Tensors``);
        ``wait_for_sources``: after a rebuild of the sources in progress (``ReadTensors``)."""
        stop = self.last_stop
        if self.state == SessionState.STOPPED and stop is not None and stop.location.dispatch_info is not None:
            self.send(ReadTensors(wait_for_sources))
            return True
        return False

    def _run(self, command: Command) -> None:
        self._set_state(SessionState.RUNNING)
        self.send(command)

    def stop(self) -> None:
        """Pause the run; if it does not answer within ``stop_timeout`` s, kill it (then it restarts).
        The wait happens on a helper thread: the caller never waits for the debuggee."""
        if self.state != SessionState.RUNNING or self.closed or self.transport is None:
            return
        transport, timeout = self.transport, self.stop_timeout
        threading.Thread(target=transport.stop, args=(timeout,), name="session-stop", daemon=True).start()

    # -- time travel (a recording session) -----------------------------------------------------------------

    @property
    def can_reverse(self) -> bool:
        """A recorded call can be gone back in: paused, finished or failed (not crashed)."""
        return self._history_alive and self.state in (SessionState.STOPPED, SessionState.IDLE)

    def reverse(self, mode: str = ReverseMode.STEP, count: int = 1) -> bool:
        """``mode`` a ``ReverseMode`` (gdb's reverse-step/next/finish/continue); answered by ``Stopped``."""
        if not self.can_reverse:
            return False
        self._reverse_from = self.state
        self._run(Reverse(str(mode), count))
        return True

    def travel_to(
        self, position: int | None = None, dispatch: int | None = None, when: str = "before", park: bool | None = None
    ) -> bool:
        """Go to a recorded moment: an instruction ``position``, or a dispatch (its run ordinal): before it
        runs, parked inside it so its tensors can be read, or ``after`` it (after its instruction; parked
        inside the dispatch after it ran with ``park``)."""
        if not self.can_reverse:
            return False
        self._reverse_from = self.state
        park = dispatch is not None and (when == "before" if park is None else park)
        self._run(TravelTo(position, dispatch, when, park))
        return True

    def previous_dispatch_ordinal(self) -> int | None:
        """The dispatch before where the run is (from the history), or None when none was recorded."""
        marks = self.history.dispatches if self.history is not None else ()
        info = self.last_stop.location.dispatch_info if self.last_stop is not None else None
        if info is not None and self.state == SessionState.STOPPED:
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
        return self.travel_to(dispatch=target)

    def when_changed(self, watch: Watch) -> bool:
        """Ask when a register/global/element last changed (answered by ``LastChange``)."""
        return self.can_reverse and self.query(WhenChanged(watch))

    def refresh_history(self) -> None:
        if self._history_alive and self.track_history:
            self.query(ReadHistory())

    def _history_from_stop(self, stop: Stopped) -> bool:
        """The history after ``stop`` from the stop's own record when only the place in it changed (the same
        end and the same dispatches recorded: a reverse move, a travel); False when it must be asked for."""
        detail, history = stop.detail, self.history
        if history is None or detail.latest is None or not self.track_history:
            return False
        if detail.latest != history.latest or detail.recorded_dispatches != len(history.dispatches):
            return False
        if detail.earliest is not None and detail.earliest != history.earliest:
            return False
        self.history = replace(history, position=detail.position)
        self.notify(HistoryChanged(self.history))
        return True

    def _forget_history(self) -> None:
        self._history_alive = False
        self._reverse_from = None
        if self.history is not None:
            self.history = None
            self.notify(HistoryChanged(None))

    # -- breakpoints -----------------------------------------------------------------------------------

    def set_breakpoints(self, breakpoints: Iterable[Breakpoint]) -> None:
        self.breakpoints = tuple(dict.fromkeys(breakpoints))  # unique, in order
        self.send(SetBreakpoints(self.breakpoints))
        self._save(breakpoints=[breakpoint_to_dict(b) for b in self.breakpoints])
        self.notify(BreakpointsChanged(self.breakpoints))

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

    # -- persistence -----------------------------------------------------------------------------------

    def _save(self, **fields: Any) -> None:
        if self.store is None:
            return
        try:
            self.store.update(**fields)
        except OSError as e:  # a full disk must not stop the debugger; say so
            self.notify(Log(f"cannot save the session to {self.store.root}: {e}"))

    def saved_session(self) -> SavedSession | None:
        """The session saved by the last run of the application, if there is one worth restoring."""
        if self.store is None or not self.store.has_saved_session():
            return None
        saved = self.store.load()
        if not (saved.module_path or saved.source_path or saved.breakpoints):
            return None
        return saved

    def restore_setup(self, saved: SavedSession) -> None:
        """Take back the breakpoints and the last call of ``saved`` (the module is opened by the caller)."""
        bps = [b for b in (breakpoint_from_dict(d) for d in saved.breakpoints) if b is not None]
        self.set_breakpoints(bps)
        if saved.function:
            self.last_call = Call(saved.function, tuple(saved.inputs))
            self._save(function=saved.function, inputs=list(saved.inputs))
            self.notify(CallChanged(self.last_call))

    # -- events (the owner's thread) ---------------------------------------------------------------------

    def receive(self, event: Event) -> None:
        """Take one event from the session into the state, then tell the owner (``notify``)."""
        if self.closed:
            return
        if isinstance(event, Opened):
            self.functions = event.functions
            self._set_state(SessionState.IDLE)
            self.notify(event)
        elif isinstance(event, Stopped):
            self.last_stop = event
            self._history_alive = True
            self._reverse_from = None
            self._set_state(SessionState.STOPPED)
            self.notify(event)
            if not self._history_from_stop(event):
                self.refresh_history()
        elif isinstance(event, Finished):
            self.last_stop = None
            self._history_alive = True  # one can still go back from the end
            self._reverse_from = None
            self._set_state(SessionState.IDLE)
            self.notify(event)
            self.refresh_history()
        elif isinstance(event, Failed):
            if self._reverse_from is not None and self.state == SessionState.RUNNING:
                # A reverse command that cannot be done leaves the program where it was.
                state, self._reverse_from = self._reverse_from, None
                self._set_state(state)
            elif self.state == SessionState.RUNNING:  # a failed call ends it; a rejected query does not
                self.last_stop = None
                self.failed_call = event
                # Its history up to the failure stays (gdb goes back from a fatal signal): a recording session
                # moves back from where the program failed; one that records nothing says so.
                self._history_alive = True
                self._set_state(SessionState.IDLE)
                self.notify(event)
                self.refresh_history()
                return
            self.notify(event)
        elif isinstance(event, Crashed):
            self._on_crashed(event)
        elif isinstance(event, History):
            self.history = event if event.recording else None
            self.notify(event)
            self.notify(HistoryChanged(self.history))
        else:
            self.notify(event)

    def _on_crashed(self, crash: Crashed) -> None:
        self.last_crash = crash
        self.last_stop = None
        self._forget_history()
        self.crash_count += 1
        transport = self.transport
        restart = transport is not None and getattr(transport, "crash_isolated", False)
        self.crash_report = describe_crash(crash, self.last_call, restarted=restart)
        if restart:
            # Restart first, so that a Rerun works as soon as the crash is reported.
            self._set_state(SessionState.STARTING if self.module_path else SessionState.CLOSED)
            transport.restart()
            if self.module_path:
                self.send(self._open_command())
                self.send(SetBreakpoints(self.breakpoints))
        else:
            self._set_state(SessionState.IDLE if self.module_path else SessionState.CLOSED)
        self.notify(crash)

    def _set_state(self, state: SessionState | str) -> None:
        state = SessionState(state)
        if state != self.state:
            self.state = state
            self.notify(StateChanged(state))
