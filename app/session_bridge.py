"""The window's side of the debug session: a ``QObject`` that re-emits a ``SessionClient``'s events as signals.

The client (``engine.session.client.SessionClient``) is the session: its state machine, breakpoints, last
call and stop, history, restart after a crash and the saved work. The bridge adds only what is Qt: the
client's events arrive on the transport's thread and are handed to the GUI thread through a queued
signal; there the client takes each into its state and the bridge emits a typed signal (``stopped``,
``finished``...). Panels send commands through the bridge's methods (the client's) and never touch the
session directly.

The session runs in a child process by default, so a faulting kernel or a runaway loop never takes the
window down; ``in_process=True`` runs it on a worker thread of this process (for scripts and tests that
do not need crash isolation).

The bridge also keeps the one current position: every stop moves the context (``LensContext``) to the
innermost frame's function and pc, so the module inspector and every other panel follow the run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Qt, Signal, Slot

from app.settings import STATE_DIR_ENV, open_settings
from engine.errors import LensError
from engine.session.client import (
    BreakpointsChanged,
    CallChanged,
    HistoryChanged,
    SessionClient,
    SessionState,
    StateChanged,
    breakpoint_from_dict,
    breakpoint_to_dict,
    child_process,
    describe_crash,
    in_process,
)
from engine.session.module_queries import ModuleFile, ReadModuleFile
from engine.session.persist import SavedSession, SessionStore, default_state_dir
from engine.session.protocol import (
    Answer,
    Breakpoint,
    Call,
    Crashed,
    Event,
    Failed,
    Finished,
    History,
    Location,
    Log,
    Opened,
    Progress,
    Query,
    ReverseMode,
    StepMode,
    Stopped,
    Watch,
)

# Every debug run records its history (engine.timetravel), so the window can step back and travel in time.
HANDLER = "engine.session.timetravel_session:TimeTravelSession"

STOP_TIMEOUT_KEY = "session/stop_timeout_s"
HANG_TIMEOUT_KEY = "session/hang_timeout_s"
DEFAULT_STOP_TIMEOUT = 1.0  # seconds a run may take to answer Stop before it is killed
DEFAULT_HANG_TIMEOUT = 0.0  # 0: no watchdog (a long, silent Continue is legitimate in a debugger)
DEVICE_KEY = "run/device"  # the device URI debug runs use (the Device panel writes it)
CPU_DEVICE = "local-sync"
REMOTE_STOP_TIMEOUT = 5.0  # seconds a remote run may take to answer Stop (over ssh) before it is ended
PROGRESS_INTERVAL = 0.05  # seconds between Progress events handed to the GUI thread (one per dispatch)


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


BridgeState = SessionState  # the client's states: closed, idle, running, stopped, starting

__all__ = [
    "BridgeState",
    "SessionBridge",
    "breakpoint_from_dict",
    "breakpoint_to_dict",
    "describe_breakpoint",
    "describe_crash",
]


def describe_breakpoint(bp: Breakpoint) -> str:
    return bp.describe()


class SessionBridge(QObject):
    """A ``SessionClient`` behind Qt signals: commands in (methods), events out (signals, on the GUI thread).

    ``state`` is a ``BridgeState`` (``SessionState``): ``closed`` (no module), ``idle`` (module open, no call
    in progress), ``running``, ``stopped`` (a call is paused: step, breakpoint, entry, pause, dispatch) and
    ``starting`` (the session process is (re)starting).

    A stop at a dispatch also emits ``dispatchStopped(DispatchInfo)``; ``request_bindings()`` then answers
    through ``answered`` with a ``Bindings`` (the paused dispatch's bound bytes). The bridge keeps no state
    of the run: the window's one run state (the stop, the paused dispatch, how the run ended) is
    ``app.workbench.Workbench.state``.
    """

    opened = Signal(object)  # Opened
    stopped = Signal(object)  # Stopped
    finished = Signal(object)  # Finished
    failed = Signal(object)  # Failed
    crashed = Signal(object)  # Crashed (the report text is ``crash_report``)
    answered = Signal(object)  # an Answer (engine.session.protocol: one type per query)
    logged = Signal(str)
    sourcesSettled = Signal()  # what types a dispatch's tensors is known now (a rebuild of the sources ended)
    stateChanged = Signal(str)
    breakpointsChanged = Signal(object)  # tuple[Breakpoint, ...]
    callChanged = Signal(object)  # Call: the last call (function, inputs), e.g. restored
    progressed = Signal(object)  # Progress: what runs now (a dispatch), at most every PROGRESS_INTERVAL
    dispatchStopped = Signal(object)  # DispatchInfo: the run paused at this dispatch
    historyChanged = Signal(object)  # History | None: asked after each stop (recorded span, dispatches)
    remoteModuleFetched = Signal(str, str)  # a remote module's local copy, its path on the remote side
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
        self.stop_requested = False  # Stop was asked and the run has not answered yet
        self.remote: str | None = None  # a server command (attach_remote): the session runs there
        # ``[SCOPE=]FILE`` archives a program compiled with external parameters loads (``Open.parameters``),
        # and the module they were given for (None: the next one opened); another module opens without them.
        self.parameters: tuple[str, ...] = ()
        # Libraries providing functions CPU kernels import (``Open.executable_plugins``): as in IREE, for every
        # module this window opens from now on.
        self.executable_plugins: tuple[str, ...] = ()
        self._parameters_for: str | None = None
        self._initializer_for: str | None = None  # the module opened with its initializer left to a call
        self._remote_copies: dict[str, str] = {}  # local copy of a remote module -> its path there
        self._remote_dir: Path | None = None  # where the copies are kept (removed at shutdown)
        hang = hang_timeout if hang_timeout is not None else hang_timeout_setting()
        self.hang_timeout = hang or None
        self._event.connect(self._on_event, Qt.ConnectionType.QueuedConnection)
        # The session process starts with the first command: a window that never debugs never spawns one.
        self.client = SessionClient(
            self._transport_factory,
            store=store if store is not None else SessionStore(state_dir()),
            notify=self._notify,
            deliver=self._from_session,
            progress_interval=PROGRESS_INTERVAL,
            stop_timeout=stop_timeout if stop_timeout is not None else stop_timeout_setting(),
        )

    # -- the client ------------------------------------------------------------------------------------

    def attach_remote(self, command: str | None) -> None:
        """Run the session in the server that ``command`` starts (``ssh HOST iree-lens serve --stdio``;
        paths are that side's); None goes back to a local child process. The open module is opened again
        in the new session (breakpoints kept): attaching again with the same command reconnects after a
        dropped connection whose server could not be restarted, and the window keeps its state."""
        command = command or None
        reopen = self.client.module_path if self.client.state != SessionState.CLOSED else None
        if self.client.transport is not None:
            self.client.transport.close()
            self.client.transport = None
        if command != self.remote:
            # Another server: the remote module's local copy stands in for it (e.g. back on this machine).
            reopen = next((local for local, there in self._remote_copies.items() if there == reopen), reopen)
            self._remote_copies.clear()
        self.remote = command
        if reopen is not None and not self.client.closed:
            self.open(reopen, self.client.device, self.client.source_path)

    def fetch_remote_module(self, path: str) -> bool:
        """Fetch the module file ``path`` of the remote side (relative: to the server's working directory)
        over the session's stream, once; ``remoteModuleFetched(local copy, remote path)`` follows (or
        ``failed``). The window reads the module's tables, disassembly and executables from the copy;
        ``open`` of the copy opens the remote path in the session. False when nothing was sent."""
        if not self.remote:
            self.failed.emit(Failed("no remote session: attach to one first (File > Attach to Remote...)"))
            return False
        try:
            self.client.send(ReadModuleFile(str(path)))
        except LensError as e:  # the server does not start (a wrong command, ssh refused)
            self.failed.emit(Failed(str(e)))
            return False
        return True

    def remote_path_of(self, local_path: str | Path) -> str | None:
        """The remote side's path of a fetched module's local copy (None: not a remote module's copy)."""
        return self._remote_copies.get(str(local_path)) if self.remote else None

    def _keep_remote_copy(self, answer: ModuleFile) -> Event:
        """(Session thread) Write a fetched module to the local copies; the answer then travels without its
        bytes. A new copy replaces the old one by rename: a module the window has mapped stays intact."""
        try:
            if self._remote_dir is None:
                self._remote_dir = Path(tempfile.mkdtemp(prefix="iree-lens-remote-"))
            folder = self._remote_dir / hashlib.sha256(f"{self.remote}|{answer.path}".encode()).hexdigest()[:16]
            folder.mkdir(exist_ok=True)
            local = folder / (Path(answer.path).name or "module.vmfb")
            partial = local.with_name(local.name + ".part")
            with open(partial, "wb") as f:
                f.write(memoryview(answer.data))
            os.replace(partial, local)
        except OSError as e:
            return Failed(f"cannot keep a copy of the remote module {answer.path}: {e}")
        self._remote_copies[str(local)] = answer.path
        return replace(answer, data=np.empty(0, np.uint8))

    def _transport_factory(self, on_event):
        if self.remote:
            from engine.session.stream import remote

            return remote(self.remote, "timetravel")(on_event)
        if self.in_process:
            from engine.session.timetravel_session import TimeTravelSession

            return in_process(TimeTravelSession)(on_event)
        return child_process(HANDLER, self.hang_timeout)(on_event)

    def _from_session(self, event: Event) -> None:
        """Called on the session's thread: queue the event for the GUI thread."""
        if isinstance(event, ModuleFile):
            event = self._keep_remote_copy(event)
        try:
            self._event.emit(event)
        except RuntimeError:  # the QObject is gone (window closed while the child was talking)
            pass

    @Slot(object)
    def _on_event(self, event: Event) -> None:
        self.client.receive(event)  # the client's state changes here, on the GUI thread; then _notify

    def _notify(self, message) -> None:
        """The client's events and notices, re-emitted as signals (GUI thread)."""
        if isinstance(message, Stopped | Finished | Failed | Opened):
            self.stop_requested = False  # the run answered (a Crashed keeps it: the stop ended the session)
        if isinstance(message, StateChanged):
            self.stateChanged.emit(message.state)
        elif isinstance(message, Opened):
            self.opened.emit(message)
        elif isinstance(message, Stopped):
            self._move_context(message.location)
            self.stopped.emit(message)
            info = message.location.dispatch_info
            if info is not None:
                self.dispatchStopped.emit(info)
        elif isinstance(message, Finished):
            self.finished.emit(message)
        elif isinstance(message, Failed):
            self.failed.emit(message)
        elif isinstance(message, Crashed):
            self.crashed.emit(message)
            self.stop_requested = False
        elif isinstance(message, Answer):
            if isinstance(message, ModuleFile):
                local = next((k for k, v in self._remote_copies.items() if v == message.path), None)
                if local is not None:
                    self.remoteModuleFetched.emit(local, message.path)
            self.answered.emit(message)
        elif isinstance(message, HistoryChanged):
            self.historyChanged.emit(message.history)
        elif isinstance(message, BreakpointsChanged):
            self.breakpointsChanged.emit(message.breakpoints)
        elif isinstance(message, CallChanged):
            self.callChanged.emit(message.call)
        elif isinstance(message, Progress):
            self.progressed.emit(message)
        elif isinstance(message, Log):
            self.logged.emit(message.text)
            if message.about == "sources":
                self.sourcesSettled.emit()

    def _move_context(self, location: Location) -> None:
        if self.context is None or not location.frames:
            return
        frame = location.frames[-1]
        self.context.set_position(function=frame.function, pc=frame.pc)

    # -- the client's state, read-only -------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        return self.client.state

    @property
    def session(self):
        """The transport (a ``ChildSession`` or an ``InProcessSession``), None until the first command."""
        return self.client.transport

    @property
    def store(self) -> SessionStore | None:
        return self.client.store

    @property
    def module_path(self) -> str | None:
        return self.client.module_path

    @property
    def source_path(self) -> str | None:
        return self.client.source_path

    @property
    def device(self) -> str:
        return self.client.device

    @property
    def functions(self) -> tuple[str, ...]:
        return self.client.functions

    @property
    def breakpoints(self) -> tuple[Breakpoint, ...]:
        return self.client.breakpoints

    @property
    def last_call(self) -> Call | None:
        return self.client.last_call

    @property
    def last_crash(self) -> Crashed | None:
        return self.client.last_crash

    @property
    def crash_report(self) -> str:
        return self.client.crash_report

    @property
    def crash_count(self) -> int:
        return self.client.crash_count

    @property
    def history(self) -> History | None:
        return self.client.history

    @property
    def can_reverse(self) -> bool:
        return self.client.can_reverse

    def ended_the_call(self, event: Failed) -> bool:
        """Whether ``event`` is how the last call failed (not a command or query refused while it stood)."""
        return self.client.failed_call is event

    @property
    def is_alive(self) -> bool:
        return self.client.alive

    @property
    def stop_timeout(self) -> float:
        return self.client.stop_timeout

    # -- commands (the client's) -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Close the session (the child process ends). Safe to call twice."""
        self.client.shutdown()
        if self._remote_dir is not None:  # (a module still mapped stays readable until it is unmapped)
            shutil.rmtree(self._remote_dir, ignore_errors=True)
            self._remote_dir = None

    def set_hang_timeout(self, seconds: float) -> None:
        """The watchdog limit (0 turns it off); applies to the session process from its next start."""
        self.hang_timeout = seconds or None
        if self.session is not None and hasattr(self.session, "hang_timeout"):
            self.session.hang_timeout = self.hang_timeout
        save_timeouts(hang_timeout=seconds)

    def set_stop_timeout(self, seconds: float) -> None:
        self.client.stop_timeout = float(seconds)
        save_timeouts(stop_timeout=seconds)

    def open(self, module_path: str | Path, device: str = "local-sync", source_path: str | Path | None = None):
        """Open ``module_path`` in the session on ``device``; the breakpoints set so far stay. The local copy
        of a remote module (``fetch_remote_module``) opens its path on the remote side."""
        if self._parameters_for is None:
            self._parameters_for = str(module_path)
        elif self._parameters_for != str(module_path):
            self.parameters, self._parameters_for = (), str(module_path)
        if self._initializer_for != str(module_path):  # another module runs its initializer as it opens
            self._initializer_for = None
        initializer = self._initializer_for is not None
        remote_path = self.remote_path_of(module_path)
        if remote_path is not None:
            self.client.open(remote_path, device, parameters=self.parameters, initializer=initializer,
                             executable_plugins=self.executable_plugins)  # fmt: skip
            return
        self.client.open(str(module_path), device, str(source_path) if source_path else None,
                         parameters=self.parameters, initializer=initializer,
                         executable_plugins=self.executable_plugins)  # fmt: skip

    def debug_initializer(self) -> None:
        """Open the module again with its initializer (``__init``) left to a call (``Open.initializer``), so that
        its dispatches stop like a call's; until another module opens."""
        if self.client.module_path and self.client.state != SessionState.CLOSED and not self.client.closed:
            self._initializer_for = self.client.module_path
            self.open(self.client.module_path, self.client.device, self.client.source_path)

    def set_parameters(self, specs: tuple[str, ...] | list[str]) -> None:
        """The parameter archives of the module's runs (``--parameters=[SCOPE=]FILE``); the open module is
        opened again with them (its initializer loads the weights)."""
        self.parameters = tuple(specs)
        self._parameters_for = None  # for the module open now (reopened below), else the next one
        if self.client.module_path and self.client.state != SessionState.CLOSED and not self.client.closed:
            self.open(self.client.module_path, self.client.device, self.client.source_path)

    def add_executable_plugins(self, paths: tuple[str, ...] | list[str]) -> None:
        """Plugins whose functions CPU kernels import (``--executable-plugin``), for this module and the next;
        the open module is opened again with them (its initializer loads the executables)."""
        self.executable_plugins = (*self.executable_plugins, *(p for p in paths if p not in self.executable_plugins))
        if self.client.module_path and self.client.state != SessionState.CLOSED and not self.client.closed:
            self.open(self.client.module_path, self.client.device, self.client.source_path)

    def call(self, function: str, inputs: tuple[str, ...] | list[str] = (), stop_at_entry: bool = False):
        self.client.call(function, inputs, stop_at_entry)

    def rerun(self) -> None:
        """Repeat the last call (after a crash, the restarted session already has the breakpoints)."""
        self.client.rerun()

    def step(self, mode: str = "into", count: int = 1) -> None:
        self.client.step(mode, count)

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
        self.client.continue_()

    def run_to(self, function: str, pc: int) -> None:
        self.client.run_to(function, pc)

    def stop(self) -> None:
        """Pause the run; if it does not answer within ``stop_timeout`` s (a remote one: at least
        ``REMOTE_STOP_TIMEOUT``, the pause crosses a connection), end its session (then it restarts). The
        end that follows is the user's Stop, not a crash: ``stop_requested`` says so until the next event."""
        if self.client.state != SessionState.RUNNING:
            return
        self.stop_requested = True
        timeout = self.client.stop_timeout
        if self.remote:
            self.client.stop_timeout = max(timeout, REMOTE_STOP_TIMEOUT)
        try:
            self.client.stop()
        finally:
            self.client.stop_timeout = timeout

    def reverse(self, mode: str = ReverseMode.STEP, count: int = 1) -> None:
        """``mode`` a ``ReverseMode`` (gdb's reverse-step/next/finish/continue); answered by ``stopped``."""
        self.client.reverse(mode, count)

    def reverse_step_into(self) -> None:
        self.reverse(ReverseMode.STEP)

    def reverse_step_over(self) -> None:
        self.reverse(ReverseMode.NEXT)

    def reverse_step_out(self) -> None:
        self.reverse(ReverseMode.FINISH)

    def reverse_continue(self) -> None:
        self.reverse(ReverseMode.CONTINUE)

    def travel_to(
        self, position: int | None = None, dispatch: int | None = None, when: str = "before", park: bool | None = None
    ) -> None:
        """Go to a recorded moment: an instruction ``position``, or a dispatch (its run ordinal): before it
        runs, parked inside it so its tensors can be read, or ``after`` it (parked after it ran with ``park``)."""
        self.client.travel_to(position, dispatch, when, park)

    def previous_dispatch_ordinal(self) -> int | None:
        return self.client.previous_dispatch_ordinal()

    def previous_dispatch(self) -> bool:
        """Go back to the dispatch before this moment and park in it (False: none recorded)."""
        target = self.client.previous_dispatch_ordinal()
        if target is None or not self.can_reverse:
            return False
        self.travel_to(dispatch=target)
        return True

    def when_changed(self, watch: Watch) -> None:
        """Ask when a register/global/element last changed (answered by ``LastChange``)."""
        self.client.when_changed(watch)

    def refresh_history(self) -> None:
        self.client.refresh_history()

    def evaluate(self, query: Query) -> None:
        """Send a query (``engine.session.protocol``); its answer comes through ``answered``."""
        self.client.query(query)

    def request_bindings(self) -> None:
        """Ask for the bytes of every binding of the paused dispatch (a ``Bindings`` through ``answered``)."""
        self.client.request_bindings()

    # -- breakpoints ----------------------------------------------------------------------------

    def set_breakpoints(self, breakpoints) -> None:
        self.client.set_breakpoints(breakpoints)

    def add_breakpoint(self, bp: Breakpoint) -> None:
        self.client.add_breakpoint(bp)

    def remove_breakpoint(self, bp: Breakpoint) -> None:
        self.client.remove_breakpoint(bp)

    def toggle_breakpoint(self, bp: Breakpoint) -> bool:
        """Add ``bp`` or remove it; True when it is now set."""
        return self.client.toggle_breakpoint(bp)

    def toggle_instruction_breakpoint(self, function: str, pc: int) -> bool:
        return self.toggle_breakpoint(Breakpoint("instruction", function=function, pc=pc))

    # -- persistence ----------------------------------------------------------------------------

    def saved_session(self) -> SavedSession | None:
        """The session saved by the last run of the application, if there is one worth restoring."""
        return self.client.saved_session()

    def restore_setup(self, saved: SavedSession) -> None:
        """Take back the breakpoints and the last call of ``saved`` (the module is opened by the window)."""
        self.client.restore_setup(saved)
