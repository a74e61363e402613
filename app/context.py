"""The one current position every panel sees (RenderDoc's ``ICaptureViewer`` idea).

Panels never reach into each other: a panel that moves the position (a click on a function, a
step of the VM, a click on a timeline) calls a setter here; every panel that cares listens to the
signals. Setters emit only on a real change, so listeners may set the position back without loops.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal


@dataclass(frozen=True)
class LoadedModule:
    """A module the application has open: the parsed engine object and where it came from."""

    path: Path  # the .vmfb that was parsed
    module: Any  # engine.runtime.vmfb.VmfbModule
    source: Path | None = None  # the .mlir it was compiled from, when it was
    compilation: Any = None  # engine.compiler.Compilation that produced it, when compiled here
    # engine.runtime.vmfb.global_names.GlobalNames from the phases beside it (None: not read; names the
    # disassembly's global accesses)
    global_names: Any = None

    def built_by(self, compilation: Any) -> bool:
        """Whether ``compilation`` (the compile panel's, kept when another module opens) built this module:
        only then are its phases, dispatches and executables this module's."""
        if compilation is None:
            return False
        if self.compilation is compilation:
            return True
        try:
            return Path(compilation.vmfb_path).resolve() == Path(self.path).resolve()
        except (AttributeError, OSError, TypeError):
            return False


@dataclass(frozen=True)
class Position:
    """Where the user is looking: each field is ``None`` when nothing is selected at that level."""

    module: LoadedModule | None = None
    function: str | None = None  # function name as exported/defined in the module
    pc: int | None = None  # bytecode offset inside ``function``
    # A dispatch of the program by IREE's name (``main_dispatch_0``): what the compile-side views show. The
    # dispatch a run is paused at is the run's (``Workbench.state.paused``), not a position of its own.
    dispatch: str | None = None
    phase: str | None = None  # compiler phase name, IREE's spelling
    time: float | None = None  # seconds on the timeline of a run
    compilation: Any = None  # engine.compiler.Compilation shown by the compile panel


class LensContext(QObject):
    """Holds the current :class:`Position` and broadcasts each change.

    One signal per field carries the new value; ``positionChanged`` follows with the whole
    :class:`Position` once per call of a setter, whatever the number of fields that changed.
    """

    moduleChanged = Signal(object)  # LoadedModule | None
    functionChanged = Signal(object)  # str | None
    pcChanged = Signal(object)  # int | None
    dispatchChanged = Signal(object)  # str | None
    phaseChanged = Signal(object)  # str | None
    timeChanged = Signal(object)  # float | None
    compilationChanged = Signal(object)  # Compilation | None
    positionChanged = Signal(object)  # Position

    _FIELDS = tuple(f.name for f in fields(Position))

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._position = Position()

    @property
    def position(self) -> Position:
        return self._position

    @property
    def module(self) -> LoadedModule | None:
        return self._position.module

    @property
    def function(self) -> str | None:
        return self._position.function

    @property
    def pc(self) -> int | None:
        return self._position.pc

    @property
    def dispatch(self) -> str | None:
        return self._position.dispatch

    @property
    def phase(self) -> str | None:
        return self._position.phase

    @property
    def time(self) -> float | None:
        return self._position.time

    @property
    def compilation(self) -> Any:
        return self._position.compilation

    def set_position(self, **changes: Any) -> None:
        """Change several fields at once, e.g. ``set_position(function="main", pc=0)``."""
        unknown = set(changes) - set(self._FIELDS)
        if unknown:
            raise TypeError(f"unknown position fields: {', '.join(sorted(unknown))}")
        old = self._position
        # A new module invalidates everything below it unless the caller says otherwise.
        if "module" in changes and changes["module"] is not old.module:
            for name in ("function", "pc", "dispatch"):
                changes.setdefault(name, None)
        if "function" in changes and changes["function"] != old.function:
            changes.setdefault("pc", None)
        new = replace(old, **changes)
        changed = [
            n
            for n in self._FIELDS
            if getattr(new, n) is not getattr(old, n) and getattr(new, n) != getattr(old, n)
        ]
        if not changed:
            return
        self._position = new
        for name in changed:
            getattr(self, f"{name}Changed").emit(getattr(new, name))
        self.positionChanged.emit(new)

    def set_module(self, module: LoadedModule | None) -> None:
        self.set_position(module=module)

    def set_function(self, function: str | None, pc: int | None = None) -> None:
        self.set_position(function=function, pc=pc)

    def set_pc(self, pc: int | None) -> None:
        self.set_position(pc=pc)

    def set_dispatch(self, dispatch: str | None) -> None:
        if dispatch is not None and not isinstance(dispatch, str):
            raise TypeError(f"a position's dispatch is IREE's name of it, not {dispatch!r}")
        self.set_position(dispatch=dispatch)

    def set_phase(self, phase: str | None) -> None:
        self.set_position(phase=phase)

    def set_time(self, time: float | None) -> None:
        self.set_position(time=time)

    def set_compilation(self, compilation: Any) -> None:
        self.set_position(compilation=compilation)
