"""The stepper's breakpoint list: every breakpoint of the session, and adding one on a function entry, on
an import call by name (``hal.command_buffer.dispatch``, ``hal.device.queue.execute.indirect``...), on a
dispatch (its run ordinal ``3``, IREE's name ``main_dispatch_1*`` or ``*`` for every one; before or after
it runs), after the first dispatch that writes NaN/Inf, or after the first dispatch whose outputs diverge
from a reference run (a capture bundle folder or a ``.vmfb`` module, with a tolerance).

The fields sit on rows of their own (kind and when; the name across the whole width; the buttons), so a
typed glob or a reference path stays readable in a narrow dock."""

from __future__ import annotations

import mmap
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QCompleter,
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.session_bridge import describe_breakpoint
from engine.errors import LensError
from engine.runtime.vmfb.container import locate
from engine.session.protocol import Breakpoint, BreakpointKind, DispatchWhen

KINDS = (
    (BreakpointKind.IMPORT, "Import call"),
    (BreakpointKind.FUNCTION, "Function entry"),
    (BreakpointKind.DISPATCH, "Dispatch"),
    (BreakpointKind.NAN, "NaN/Inf written"),
    (BreakpointKind.DIVERGE, "Diverges from…"),
)

PLACEHOLDERS = {
    BreakpointKind.IMPORT: "hal.command_buffer.dispatch",
    BreakpointKind.FUNCTION: "main",
    BreakpointKind.DISPATCH: "3, main_dispatch_1*, or *",  # whole at 1366 px; the tooltip says more
    BreakpointKind.NAN: "(stops after the first dispatch that writes NaN or Inf)",
    BreakpointKind.DIVERGE: "capture bundle folder or reference .vmfb  [atol rtol]",
}


TOOLTIPS = {
    BreakpointKind.DISPATCH: "A dispatch's run ordinal (3: the fourth dispatch of the call), IREE's name or a glob "
    "of it (main_dispatch_1*), or * for every dispatch",
}


class BreakpointsView(QWidget):
    """Shows ``set_breakpoints(bps)``; asks for changes with ``addRequested`` / ``removeRequested``."""

    addRequested = Signal(object)  # Breakpoint
    removeRequested = Signal(object)  # Breakpoint
    activated = Signal(object)  # Breakpoint (double-click: show it)
    refused = Signal(str)  # a breakpoint not set, and why (a reference that is no module or bundle...)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        # Whether a "Diverges from" reference can be checked here: a remote session's paths are the server's.
        self.references_are_local: Callable[[], bool] = lambda: True
        self.list = QListWidget(self)
        self.list.setObjectName("stepperBreakpointList")
        # Wrapped, not cut: in a 1366-px window the list is ~200 px wide ("after a dispatch that writes Na…").
        self.list.setWordWrap(True)
        self.kind = QComboBox(self)
        self.kind.setObjectName("stepperBreakpointKind")
        for key, label in KINDS:
            self.kind.addItem(label, key)
        self.name = QLineEdit(self)
        self.name.setObjectName("stepperBreakpointName")
        self.name.setPlaceholderText("hal.command_buffer.dispatch")
        self.name.returnPressed.connect(self.add_from_fields)
        self.when = QComboBox(self)
        self.when.setObjectName("stepperBreakpointWhen")
        self.when.addItem("before", DispatchWhen.BEFORE)
        self.when.addItem("after", DispatchWhen.AFTER)
        self.when.setToolTip("Stop before the dispatch runs, or after it (its outputs written)")
        self.add_button = QPushButton("Add", self)
        self.add_button.clicked.connect(self.add_from_fields)
        self.remove_button = QPushButton("Remove", self)
        self.remove_button.clicked.connect(self.remove_selected)
        self.browse_button = QPushButton("…", self)
        self.browse_button.setMaximumWidth(self.browse_button.fontMetrics().horizontalAdvance("…") + 16)
        self.browse_button.setToolTip("Pick the reference: a capture bundle folder or a .vmfb module")
        self.browse_button.clicked.connect(self._browse_reference)
        self.kind.currentIndexChanged.connect(lambda _: self._update_completer())
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.kind, 1)
        row.addWidget(self.when)
        name_row = QHBoxLayout()
        name_row.setContentsMargins(0, 0, 0, 0)
        name_row.addWidget(self.name, 1)
        name_row.addWidget(self.browse_button)
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(row)
        layout.addLayout(name_row)
        layout.addLayout(buttons)
        layout.addWidget(self.list, 1)
        self.list.itemDoubleClicked.connect(
            lambda item: self.activated.emit(item.data(Qt.ItemDataRole.UserRole))
        )
        self.breakpoints: tuple[Breakpoint, ...] = ()
        self._names = {"import": [], "function": []}
        self._update_completer()

    def set_names(self, imports: list[str], functions: list[str]) -> None:
        """Names offered for completion: the module's imports and functions."""
        self._names = {"import": sorted(imports), "function": sorted(functions)}
        self._update_completer()

    def _update_completer(self) -> None:
        kind = self.kind.currentData()
        self.when.setVisible(kind == BreakpointKind.DISPATCH)
        self.name.setEnabled(kind != BreakpointKind.NAN)
        self.browse_button.setVisible(kind == BreakpointKind.DIVERGE)
        names = self._names.get(kind, [])
        completer = QCompleter(names, self.name)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        self.name.setCompleter(completer)
        self.name.setPlaceholderText(PLACEHOLDERS.get(kind, ""))
        self.name.setToolTip(TOOLTIPS.get(kind, ""))

    def set_breakpoints(self, breakpoints: tuple[Breakpoint, ...]) -> None:
        self.breakpoints = tuple(breakpoints)
        self.list.clear()
        for bp in self.breakpoints:
            item = QListWidgetItem(f"● {describe_breakpoint(bp)}")
            item.setToolTip(describe_breakpoint(bp))
            item.setData(Qt.ItemDataRole.UserRole, bp)
            self.list.addItem(item)

    def add(self, kind: str, name: str, when: str = DispatchWhen.BEFORE) -> Breakpoint | None:
        name = name.strip().lstrip("@")
        if kind == BreakpointKind.NAN:
            bp = Breakpoint(BreakpointKind.NAN, when=DispatchWhen.AFTER)
        elif not name:
            return None
        elif kind == BreakpointKind.DISPATCH:
            bp = (
                Breakpoint(BreakpointKind.DISPATCH, ordinal=int(name), when=when)
                if name.isdigit()
                else Breakpoint(BreakpointKind.DISPATCH, dispatch=name, when=when)
            )
        elif kind == BreakpointKind.DIVERGE:
            bp = diverge_breakpoint(name)
            if bp is None:
                self.refused.emit(f"Not set: tolerances must be numbers ({PLACEHOLDERS[BreakpointKind.DIVERGE]}).")
                return None
            problem = reference_problem(bp.reference) if self.references_are_local() else None
            if problem is not None:
                self.refused.emit(f"Not set: {problem}")
                return None
        elif kind == BreakpointKind.IMPORT:
            bp = Breakpoint(BreakpointKind.IMPORT, import_name=name)
        else:
            bp = Breakpoint(BreakpointKind.FUNCTION, function=name)
        self.addRequested.emit(bp)
        return bp

    def add_from_fields(self) -> None:
        if self.add(self.kind.currentData(), self.name.text(), self.when.currentData()) is not None:
            self.name.clear()

    def _browse_reference(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Capture bundle to compare with")
        if not folder:
            folder, _ = QFileDialog.getOpenFileName(self, "Reference module", "", "IREE modules (*.vmfb)")
        if folder:
            self.name.setText(folder)

    def remove_selected(self) -> None:
        for item in self.list.selectedItems():
            self.removeRequested.emit(item.data(Qt.ItemDataRole.UserRole))


def reference_problem(reference: str) -> str | None:
    """Why ``reference`` cannot be what a diverge breakpoint compares with (None: it can): it must be a capture
    bundle (a folder with manifest.json, the manifest, a .zip) or an IREE module (.vmfb)."""
    from app.views.dispatch_run_list import is_bundle

    path = Path(reference).expanduser()
    what = "a capture bundle folder or a reference .vmfb module"
    if not path.exists():
        return f"the reference {reference!r} does not exist (it must be {what})."
    if is_bundle(path):
        return None
    if path.is_dir():
        return f"the folder {reference} is not a capture bundle (no manifest.json; it must be {what})."
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                locate(view, str(path))
            finally:
                view.release()
    except (OSError, ValueError, LensError) as e:
        return f"{reference} is not an IREE module ({e}); it must be {what}."
    return None


def diverge_breakpoint(text: str) -> Breakpoint | None:
    """``REFERENCE [ATOL [RTOL]]`` as a diverge breakpoint (None when the tolerances are not numbers); without
    tolerances the engine's rounding rule decides what differs."""
    parts = text.split()
    if not parts:
        return None
    reference, numbers = parts[0], parts[1:3]
    try:
        atol = float(numbers[0]) if numbers else None
        rtol = float(numbers[1]) if len(numbers) > 1 else (0.0 if numbers else None)
    except ValueError:
        return None
    return Breakpoint(BreakpointKind.DIVERGE, when=DispatchWhen.AFTER, reference=reference, atol=atol, rtol=rtol)
