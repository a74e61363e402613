"""The window's one current state: the open module, the device, the function and its inputs, the run
(state, position in its history, the stop and the dispatch it is paused at).

The window owns one :class:`Workbench`; every view reads it (``state``) and redraws on ``stateChanged``,
and asks it to act (``run``, ``set_device``, ``open_module``...). The run itself happens in the window's
one debug session (``SessionBridge``); views never start runs or pick devices on their own.

Opening a module is a clean start: ``moduleReset`` tells every view to drop what belonged to the
previous module (results, registers, error banners, dispatch lists, tensor comparisons, profiles).
Every action either happens or says why not (``said``, shown in the status bar by the window).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.context import LoadedModule
from app.settings import open_settings
from engine.runtime.hal.devices import compile_target_for, device_kind, formats_kind, runs_formats

DEVICE_KEY = "run/device"  # the device URI debug runs use (shared with the Device panel and the bridge)
CPU_DEVICE = "local-sync"
HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class DeviceMismatch:
    """The open module's executables do not run on the selected device."""

    device: str  # the selected device
    needs: str | None  # the kind of device the module needs ("cpu", "vulkan"), None when unknown
    formats: tuple[str, ...]  # the module's executable formats

    def describe(self) -> str:
        what = {"cpu": "a CPU device (local-sync)", "vulkan": "a Vulkan device"}.get(self.needs or "", "another device")
        return f"This module was built for {what} ({', '.join(self.formats)}); {self.device} cannot run it."


@dataclass(frozen=True)
class WorkbenchState:
    """Everything a view needs to draw the current module and run."""

    module: LoadedModule | None = None
    device: str = CPU_DEVICE
    function: str | None = None
    inputs: tuple[str, ...] = ()
    run_state: str = "closed"  # app.session_bridge.BridgeState
    position: int | None = None  # the instruction position of the run in its recorded history
    paused: Any = None  # engine.session.protocol.DispatchInfo of the dispatch the run is paused at
    stop_text: str = ""  # the full description of the last stop (what the status bar shows)
    mismatch: DeviceMismatch | None = None


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

    def __init__(self, context: Any, bridge: Any, parent: QObject | None = None):
        super().__init__(parent)
        self.context = context
        self.bridge = bridge
        device = open_settings().value(DEVICE_KEY, CPU_DEVICE)
        self.state = WorkbenchState(device=str(device) if device else CPU_DEVICE)
        self._identity: dict[Path, str] = {}
        self._runner = None  # the view that turns the state into a call (the stepper's run bar)
        self.previous_module: LoadedModule | None = None  # during moduleReset: the module being closed
        bridge.stateChanged.connect(lambda s: self._update(run_state=str(s)))
        bridge.stopped.connect(self._on_stopped)
        bridge.finished.connect(lambda e: self._update(paused=None, stop_text=f"Finished {e.function}"))
        bridge.historyChanged.connect(self._on_history)
        context.pausedDispatchChanged.connect(lambda info: self._update(paused=info))

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
        if new != self.state:
            self.state = new
            self.stateChanged.emit(new)

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
        mismatch = self.mismatch_of(loaded, self.state.device)
        self.state = WorkbenchState(device=self.state.device, run_state=self.state.run_state, mismatch=mismatch)
        self.state = replace(self.state, module=loaded)
        self.moduleReset.emit(loaded)
        self.context.set_module(loaded)
        self.stateChanged.emit(self.state)
        if loaded is not None and mismatch is None:
            self.bridge.open(loaded.path, self.state.device, loaded.source)
        elif mismatch is not None:
            self.said.emit(mismatch.describe())

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
        settings = open_settings()
        settings.setValue(DEVICE_KEY, uri)
        settings.sync()
        loaded = self.state.module
        mismatch = self.mismatch_of(loaded, uri)
        self._update(device=uri, mismatch=mismatch, paused=None, position=None)
        self.deviceChanged.emit(uri)
        if loaded is None:
            return
        if mismatch is None:
            self.bridge.open(loaded.path, uri, loaded.source)
            self.said.emit(f"{Path(loaded.source or loaded.path).name} opened on {uri}")
        else:
            self.said.emit(mismatch.describe())

    def matching_device(self, devices: list[str]) -> str | None:
        """The first of ``devices`` that runs the open module (what "Switch device" offers)."""
        loaded = self.state.module
        if loaded is None:
            return None
        formats = module_formats(loaded.module)
        return next((uri for uri in devices if runs_formats(uri, formats)), None)

    # -- the run ---------------------------------------------------------------------------------

    def set_runner(self, runner: Any) -> None:
        """The view that turns a run request into a call (the stepper: its function and inputs)."""
        self._runner = runner

    def set_call(self, function: str | None, inputs: tuple[str, ...]) -> None:
        self._update(function=function or None, inputs=tuple(inputs))

    def why_not_run(self) -> str | None:
        """Why a Run cannot start now (None: it can)."""
        state = self.bridge.state
        if self.state.module is None:
            return "Nothing to run: open a .vmfb module or an .mlir program first (File > Open, Ctrl+O)."
        if self.state.mismatch is not None:
            return self.state.mismatch.describe() + " Switch the device or recompile first."
        if self._runner is None:
            return "Nothing to run with: the VM Stepper panel is not part of this window."
        if state == "starting":
            return "The debug session is still starting; Run again in a moment."
        if state == "running":
            return "A run is in progress: Stop it first (Shift+F5)."
        if state == "closed":
            return "The debug session is closed: reopen the module."
        if not self._runner.function_combo.currentText():
            return "The module exports no function to run."
        return None

    def run(self, stop_at_entry: bool = False) -> bool:
        """Run the chosen function (inputs made from its signature when none are given); False (and
        ``said``) when it cannot start."""
        why = self.why_not_run()
        if why is not None:
            self.said.emit(why)
            return False
        return bool(self._runner.start_run(stop_at_entry))

    def say(self, text: str) -> None:
        self.said.emit(text)

    # -- session events --------------------------------------------------------------------------

    def _on_stopped(self, event: Any) -> None:
        position = event.detail.position
        self._update(position=position if position is not None else self.state.position)

    def _on_history(self, history: Any) -> None:
        """``History`` (engine.session.protocol) or None."""
        if history is not None and history.position is not None:
            self._update(position=int(history.position))

    def set_stop_text(self, text: str) -> None:
        self._update(stop_text=text)
        if text:
            self.said.emit(text)


def device_is_known(uri: str) -> bool:
    return device_kind(uri) is not None
