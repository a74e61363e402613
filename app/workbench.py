"""The window's one current state: the open module, the device, the function and its inputs, the run
(state, position in its history, the stop and the dispatch it is paused at).

The window owns one :class:`Workbench`; every view reads it (``state``) and redraws on ``stateChanged``,
and asks it to act (``run``, ``set_device``, ``open_module``, ``set_function``, ``set_inputs``...). The
state is the only copy: the stepper's function box and inputs line are views of ``state.function`` and
``state.inputs`` (they show them and edit them, they keep nothing of their own), so no panel can disagree
about what runs next. The run itself happens in the window's one debug session (``SessionBridge``); views
never start runs or pick devices on their own.

Opening a module is a clean start: ``moduleReset`` tells every view to drop what belonged to the
previous module (results, registers, error banners, dispatch lists, tensor comparisons, profiles).
Every action either happens or says why not (``said``, shown in the status bar by the window).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.context import LoadedModule
from app.settings import open_settings
from engine.runtime.hal.devices import (
    compile_target_for,
    cuda_absence,
    formats_kind,
    hip_absence,
    runs_formats,
)
from engine.runtime.hal.formats import foreign_cpu_problem
from engine.session.protocol import Call

DEVICE_KEY = "run/device"  # the device URI debug runs use (shared with the Device panel and the bridge)
CPU_DEVICE = "local-sync"
HASH_CHUNK = 1 << 20
ASYNC_SUFFIX = "$async"


def callable_first(functions) -> list[str]:
    """Functions in the order a user picks them: what one calls (``main``) first, then the coarse-fences
    twins (``main$async``, which need fences), then the module's initialiser (``__init``)."""

    def rank(name: str) -> int:
        if name.startswith("__"):
            return 2
        return 1 if name.endswith(ASYNC_SUFFIX) else 0

    return sorted(functions, key=rank)  # stable: the module's order within each rank


@dataclass(frozen=True)
class DeviceMismatch:
    """The open module's executables do not run on the selected device."""

    device: str  # the selected device
    needs: str | None  # the kind of device the module needs ("cpu", "vulkan"), None when unknown
    formats: tuple[str, ...]  # the module's executable formats

    def describe(self) -> str:
        what = {
            "cpu": "a CPU device (local-sync)", "vulkan": "a Vulkan device", "cuda": "a CUDA device",
            "hip": "an AMD GPU (HIP)",
        }.get(self.needs or "", "another device")  # fmt: skip
        foreign = foreign_cpu_problem(self.formats) if self.needs is None else None
        if foreign is not None:
            return f"This module cannot run here: {foreign}."
        text = f"This module was built for {what} ({', '.join(self.formats)}); {self.device} cannot run it."
        if self.needs in ("cuda", "hip"):
            # no driver here: say so, in the driver's one sentence
            absence = cuda_absence() if self.needs == "cuda" else hip_absence()
            if absence is not None:
                text += f" {absence[0].upper()}{absence[1:]}."
        return text


@dataclass(frozen=True)
class WorkbenchState:
    """Everything a view needs to draw the current module and run."""

    module: LoadedModule | None = None
    device: str = CPU_DEVICE
    functions: tuple[str, ...] = ()  # the open module's functions, in the order a user picks them
    function: str | None = None  # what Run calls
    inputs: tuple[str, ...] = ()  # its inputs, as iree-run-module's --input values
    run_state: str = "closed"  # app.session_bridge.BridgeState
    run: int = 0  # how many runs this window started: a new number is a new run (views drop the old one's)
    # How the last run ended: "" (none yet, or still going), "finished", "failed", "crashed", "stopped" (the
    # user's Stop ended a run that did not pause).
    outcome: str = ""
    position: int | None = None  # the instruction position of the run in its recorded history
    # engine.session.protocol.Stopped: the run's last stop (what it is paused at while run_state is "stopped";
    # kept while a step runs, so a step the session refuses leaves the run where it was); None once it ended.
    stop: Any = None
    stop_text: str = ""  # the full description of the last stop (what the status bar shows)
    mismatch: DeviceMismatch | None = None

    # The paused dispatch and its ordinal are read from the stop, never kept beside it.
    @property
    def paused(self) -> Any:
        """``DispatchInfo`` of the dispatch the run is paused at (None: not paused at a dispatch)."""
        if self.stop is None or self.run_state != "stopped":
            return None
        return self.stop.location.dispatch_info

    @property
    def dispatch(self) -> int | None:
        """The run ordinal of the paused dispatch."""
        info = self.paused
        return None if info is None else int(info.ordinal)


def module_formats(module: Any) -> tuple[str, ...]:
    """The executable formats of a parsed module (in first-seen order)."""
    formats: dict[str, None] = {}
    for executable in getattr(module, "executables", None) or []:
        fmt = getattr(executable, "format", None)
        if fmt:
            formats[str(fmt)] = None
    return tuple(formats)


def file_identity(path: Path) -> str:
    """A file's path and content hash: inputs are remembered per file, not per module name (every PyTorch
    export is ``@module``)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(HASH_CHUNK):
                digest.update(chunk)
    except OSError:
        return f"{path}|unreadable"
    return f"{Path(path).resolve()}|{digest.hexdigest()[:16]}"


class Workbench(QObject):
    stateChanged = Signal(object)  # WorkbenchState
    moduleReset = Signal(object)  # LoadedModule | None: a new module; drop what belonged to the old one
    deviceChanged = Signal(str)  # the selected device URI
    said = Signal(str)  # an action that did not happen, and why (or a stop's full description)
    runStarted = Signal(object)  # engine.session.protocol.Call: the call a Run just started
    runRefused = Signal(str)  # why a Run did not start

    def __init__(self, context: Any, bridge: Any, parent: QObject | None = None):
        super().__init__(parent)
        self.context = context
        self.bridge = bridge
        device = open_settings().value(DEVICE_KEY, CPU_DEVICE)
        self.state = WorkbenchState(device=str(device) if device else CPU_DEVICE)
        self._identity: dict[Path, str] = {}
        # Breakpoints belong to a module file: each file's are kept when another opens and come back with it.
        self._breakpoints: dict[str, tuple] = {}
        self._emitting = False
        self._dirty = False
        # Checks before a run starts, in order; each returns None, or why the run cannot start (the inputs
        # filler: it makes inputs from the signature when there are none, and remembers them).
        self.before_run: list = []
        # The devices a module may be opened on (the window's Device panel lists them; the CPU always runs).
        self.devices: Callable[[], list[str]] = lambda: [CPU_DEVICE]
        self.previous_module: LoadedModule | None = None  # during moduleReset: the module being closed
        self._calling = False  # a call was told (CallChanged) and has not started running yet
        self._matched: set[str] = set()  # the breakpoints that stopped this run (as its stops name them)
        # The workbench connects to the bridge before any view does: a view told of a bridge event reads a
        # state that already holds it.
        bridge.stateChanged.connect(self._on_run_state)
        bridge.stopped.connect(self._on_stopped)
        bridge.finished.connect(self._on_finished)
        bridge.failed.connect(self._on_failed)
        bridge.crashed.connect(
            lambda _e: self._update(stop=None, outcome="stopped" if self.bridge.stop_requested else "crashed")
        )
        bridge.historyChanged.connect(self._on_history)
        bridge.opened.connect(self._on_opened)
        bridge.callChanged.connect(self._on_call_changed)

    # -- reading ---------------------------------------------------------------------------------

    @property
    def module(self) -> LoadedModule | None:
        return self.state.module

    @property
    def device(self) -> str:
        return self.state.device

    def identity(self) -> str | None:
        """Path and content hash of the open file (the source when compiled here): what inputs are keyed by."""
        loaded = self.state.module
        if loaded is None:
            return None
        path = Path(loaded.source or loaded.path)
        if path not in self._identity:
            self._identity[path] = file_identity(path)
        return self._identity[path]

    def _update(self, **changes: Any) -> None:
        new = replace(self.state, **changes)
        if new == self.state:
            return
        self.state = new
        self._emit()

    def _emit(self) -> None:
        """Tell the views; a change made by a view while they are told is told after, so the last state
        every view sees is the current one."""
        if self._emitting:
            self._dirty = True
            return
        self._emitting = True
        try:
            self._dirty = True
            while self._dirty:
                self._dirty = False
                self.stateChanged.emit(self.state)
        finally:
            self._emitting = False

    # -- the module ------------------------------------------------------------------------------

    def mismatch_of(self, loaded: LoadedModule | None, device: str) -> DeviceMismatch | None:
        if loaded is None:
            return None
        formats = module_formats(loaded.module)
        if not formats or runs_formats(device, formats):
            return None
        return DeviceMismatch(device, formats_kind(formats), formats)

    def open_module(self, loaded: LoadedModule | None) -> None:
        """Make ``loaded`` the current module: every view resets, then the session opens it on the
        selected device (unless the module needs another device: then ``state.mismatch`` says so)."""
        previous = self.previous_module = self.state.module
        if loaded is not None and (self._other_module(loaded, previous) or self._saved_for_another(loaded)):
            self._forget_saved_call()
        self._switch_breakpoints(previous, loaded)
        device, switched = self.state.device, None
        mismatch = self.mismatch_of(loaded, device)
        if mismatch is not None:
            # Open it where it runs (a CPU-built module on the CPU even when Vulkan is selected), and say so.
            runs_on = self.matching_device(self.devices(), loaded)
            if runs_on is not None:
                switched, device, mismatch = device, runs_on, None
                self._remember_device(device)
        # Inputs typed while no module was open (while the first one compiled) are the user's for this module.
        typed = self.state.inputs if previous is None and loaded is not None else ()
        self.state = WorkbenchState(device=device, run_state=self.state.run_state, mismatch=mismatch, inputs=typed)
        self.state = replace(self.state, module=loaded)
        self.moduleReset.emit(loaded)
        self.context.set_module(loaded)
        self._emit()
        if switched is not None:
            self.deviceChanged.emit(device)
        if loaded is not None and mismatch is None:
            self.bridge.open(loaded.path, device, loaded.source)
            if getattr(self.bridge, "remote", None):
                self.said.emit(self.runs_where(loaded))
            if switched is not None:
                kind = formats_kind(module_formats(loaded.module)) or "another device"
                self.said.emit(
                    f"{Path(loaded.source or loaded.path).name} runs on {kind} only: opened on {device} "
                    f"({switched} cannot run it)"
                )
        elif mismatch is not None:
            self.said.emit(mismatch.describe())

    def runs_where(self, loaded: LoadedModule) -> str:
        """Where runs of ``loaded`` happen: here, or on the attached server (which opens its own file)."""
        name = Path(loaded.source or loaded.path).name
        remote = getattr(self.bridge, "remote", None)
        if not remote:
            return f"{name} runs locally"
        there = self.bridge.remote_path_of(loaded.path)
        if there is not None:
            return f"{name} is the server's {there}: it runs on the server ({remote})"
        return (
            f"{name} was opened from this machine, but runs happen on the server ({remote}): the server opens "
            f"{loaded.path} there (File > Attach to Remote… with no command runs locally again)"
        )

    @staticmethod
    def module_file(loaded: LoadedModule) -> str:
        """The file a module's breakpoints belong to: the program opened (the .mlir compiled here), else the .vmfb."""
        return str(Path(loaded.source or loaded.path).resolve())

    def _switch_breakpoints(self, previous: LoadedModule | None, loaded: LoadedModule | None) -> None:
        """Keep the closing module's breakpoints with its file; the next module gets its own (none the first
        time): a breakpoint of one program (a "Diverges from" reference of the same shapes, an ordinal) means
        nothing in another. The first module opened keeps what a restored session set."""
        if previous is None:
            return
        self._breakpoints[self.module_file(previous)] = tuple(self.bridge.breakpoints)
        if loaded is None or self.module_file(loaded) == self.module_file(previous):
            return
        mine = self._breakpoints.get(self.module_file(loaded), ())
        if tuple(self.bridge.breakpoints) != mine:
            self.bridge.set_breakpoints(mine)

    @staticmethod
    def _other_module(loaded: LoadedModule, previous: LoadedModule | None) -> bool:
        return previous is not None and Path(loaded.path) != Path(previous.path)

    def _saved_for_another(self, loaded: LoadedModule) -> bool:
        """The saved session's call belongs to another file (a previous start of the application)."""
        store = getattr(self.bridge, "store", None)
        saved = getattr(store, "session", None)
        if saved is None or not saved.function:
            return False
        ours = {str(loaded.path)} | ({str(loaded.source)} if loaded.source else set())
        return saved.module_path not in ours and saved.source_path not in ours

    def _forget_saved_call(self) -> None:
        """The saved session's function and inputs belong to the module that was open; a restore offer
        must not mix them with the next module."""
        store = getattr(self.bridge, "store", None)
        if store is not None:
            try:
                store.update(function=None, inputs=[])
            except OSError:
                pass
        # The engine's session client keeps the last call (the bridge re-emits it read-only).
        client = getattr(self.bridge, "client", self.bridge)
        client.last_call = None

    def debug_compilation(self, compilation: Any) -> bool:
        """Open what a compile produced (the Compile panel's result) as the current module, in one action."""
        if compilation is None:
            self.said.emit("Nothing compiled yet: compile a program first.")
            return False
        vmfb = getattr(compilation, "vmfb_path", None)
        if not getattr(compilation, "ok", False) or vmfb is None or not Path(vmfb).exists():
            self.said.emit("This compilation produced no module (it failed, or stopped before the vm phase).")
            return False
        from app.module_loader import open_module

        source = getattr(compilation, "source_path", None)
        loaded = LoadedModule(
            path=Path(vmfb), module=open_module(Path(vmfb)), source=Path(source) if source else None, compilation=compilation
        )
        self.open_module(loaded)
        return True

    def compile_target(self) -> str:
        """The iree-compile target of the selected device: what opening an ``.mlir`` compiles for."""
        return compile_target_for(self.state.device)

    # -- the device ------------------------------------------------------------------------------

    def set_device(self, uri: str) -> None:
        """Select the device runs use; an open module is reopened on it (a module that needed this device
        starts working without being reopened by the user)."""
        if not uri or uri == self.state.device:
            return
        self._remember_device(uri)
        loaded = self.state.module
        mismatch = self.mismatch_of(loaded, uri)
        self._update(device=uri, mismatch=mismatch, stop=None, position=None, outcome="")
        self.deviceChanged.emit(uri)
        if loaded is None:
            return
        if mismatch is None:
            self.bridge.open(loaded.path, uri, loaded.source)
            self.said.emit(f"{Path(loaded.source or loaded.path).name} opened on {uri}")
        else:
            self.said.emit(mismatch.describe())

    @staticmethod
    def _remember_device(uri: str) -> None:
        settings = open_settings()
        settings.setValue(DEVICE_KEY, uri)
        settings.sync()

    def matching_device(self, devices: list[str], loaded: LoadedModule | None = None) -> str | None:
        """The first of ``devices`` that runs ``loaded`` (the open module by default; what "Switch device"
        offers)."""
        loaded = loaded if loaded is not None else self.state.module
        if loaded is None:
            return None
        formats = module_formats(loaded.module)
        return next((uri for uri in devices if runs_formats(uri, formats)), None)

    # -- the run ---------------------------------------------------------------------------------

    def set_function(self, function: str | None) -> None:
        """Choose the function Run calls (the stepper's function box edits this)."""
        self._update(function=function or None)

    def set_inputs(self, inputs: tuple[str, ...] | list[str]) -> None:
        """The inputs Run passes, as ``--input`` values (the stepper's inputs line edits this)."""
        self._update(inputs=tuple(inputs))

    def set_call(self, function: str | None, inputs: tuple[str, ...] | list[str]) -> None:
        self._update(function=function or None, inputs=tuple(inputs))

    def why_not_run(self) -> str | None:
        """Why a Run cannot start now (None: it can)."""
        state = self.bridge.state
        if self.state.module is None:
            return "Nothing to run: open a .vmfb module or an .mlir program first (File > Open, Ctrl+O)."
        if self.state.mismatch is not None:
            return self.state.mismatch.describe() + " Switch the device or recompile first."
        if state == "starting":
            return "The debug session is still starting; Run again in a moment."
        if state == "running":
            return "A run is in progress: Stop it first (Shift+F5)."
        if state == "closed":
            return "The debug session is closed: reopen the module."
        if not self.state.function:
            return "The module exports no function to run."
        return None

    def run(self, stop_at_entry: bool = False) -> bool:
        """Run the chosen function with the state's inputs (made from its signature when none are given, by
        ``before_run``); False (and ``said``, ``runRefused``) when it cannot start."""
        why = self.why_not_run()
        for check in self.before_run if why is None else ():
            why = check()
            if why:
                why = f"Not run: {why}"
                break
        if why is not None:
            self.said.emit(why)
            self.runRefused.emit(why)
            return False
        call = Call(self.state.function, self.state.inputs)
        self.bridge.call(call.function, call.inputs, stop_at_entry)
        self.runStarted.emit(call)
        return True

    def say(self, text: str) -> None:
        self.said.emit(text)

    # -- session events --------------------------------------------------------------------------

    def _on_run_state(self, state: Any) -> None:
        state = str(state)
        if state == "running" and self._calling:
            # A new call (Run, Rerun, Run to here): nothing of the previous run (its stop, how it ended, its
            # place in history) remains. Travelling in a finished run's history also runs from idle: not a call.
            self._calling = False
            self._matched = set()
            self._update(run_state=state, run=self.state.run + 1, outcome="", stop=None, position=None)
            return
        # Idle, closed or restarting: no run is paused any more (a Finished or Failed says how it ended).
        self._update(run_state=state, **({} if state in ("running", "stopped") else {"stop": None}))

    def _on_stopped(self, event: Any) -> None:
        self._matched.update(event.detail.breakpoints)  # (Breakpoint.describe of each)
        position = event.detail.position
        self._update(stop=event, position=position if position is not None else self.state.position)

    def _on_failed(self, event: Any) -> None:
        """A run that failed ended without results (a query refused while paused or after a run ends nothing)."""
        if self.state.run and not self.state.outcome and self.bridge.state in ("idle", "closed"):
            self._update(stop=None, outcome="failed")

    def _on_opened(self, event: Any) -> None:
        """The session opened the module: its functions, and the one to call (the chosen one if the module
        still has it, else the last call's, e.g. a restored session's, else the one a user calls)."""
        self._calling = False  # a restored call is offered, not run
        functions = tuple(callable_first(event.functions))
        call = self.bridge.last_call
        function, inputs = self.state.function, self.state.inputs
        if function not in functions:
            if call is not None and call.function in functions:
                function, inputs = call.function, tuple(call.inputs)
            else:
                function = functions[0] if functions else None
        self._update(functions=functions, function=function, inputs=inputs)

    def _on_call_changed(self, call: Any) -> None:
        """The session's last call changed (a run started, a session restored): what Run calls next."""
        # A call is about to run (the client tells the call, then runs it): the next "running" is a new run.
        self._calling = call is not None
        if call is None or (self.state.functions and call.function not in self.state.functions):
            return
        self._update(function=call.function, inputs=tuple(call.inputs))

    def _on_finished(self, event: Any) -> None:
        """A run ended: said in the status bar too (else the last message, e.g. "inputs filled", stays), with
        the dispatch breakpoints that never stopped it (a name or ordinal that matched nothing)."""
        self._update(stop=None, outcome="finished", stop_text=f"Finished {event.function}")
        never = self.unmatched_breakpoints()
        self.said.emit(
            f"Finished {event.function}: results in the VM Stepper's output"
            + (f"; the run never stopped at: {'; '.join(never)}" if never else "")
        )

    def unmatched_breakpoints(self) -> list[str]:
        """The dispatch breakpoints (described) that stopped no stop of this run."""
        from engine.session.dispatch_gate import is_dispatch_breakpoint

        return [
            bp.describe()
            for bp in self.bridge.breakpoints
            if is_dispatch_breakpoint(bp) and not {bp.describe(), repr(bp)} & self._matched
        ]

    def _on_history(self, history: Any) -> None:
        """``History`` (engine.session.protocol) or None."""
        if history is not None and history.position is not None:
            self._update(position=int(history.position))

    def set_stop_text(self, text: str) -> None:
        self._update(stop_text=text)
        if text:
            self.said.emit(text)

