"""The registry of dockable panels.

Adding a panel is one line in :data:`PANELS` (or one call of :func:`register_panel` from a plug-in)::

    PanelSpec("stepper", "VM Stepper", "app.views.stepper_view:StepperPanel", area="right"),

The factory named by ``factory`` ("module:callable", imported when the window is built) is called as
``factory(services)`` with the :class:`PanelServices` of the window and returns the panel's widget.
A panel reads and moves the current position only through ``services.context`` (a
:class:`~app.context.LensContext`), runs long work through ``services.worker``, and reports problems
through ``services.messages``; it never reaches into another panel.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

if TYPE_CHECKING:
    from app.context import LensContext
    from app.messages import MessageLog
    from app.session_bridge import SessionBridge
    from app.workbench import Workbench
    from app.workers import EngineWorker

AREAS = {
    "left": Qt.DockWidgetArea.LeftDockWidgetArea,
    "right": Qt.DockWidgetArea.RightDockWidgetArea,
    "top": Qt.DockWidgetArea.TopDockWidgetArea,
    "bottom": Qt.DockWidgetArea.BottomDockWidgetArea,
}


def _standalone(widget: QWidget, title: str) -> QWidget:
    """Without a main window (a panel built on its own), a document opens as a top-level window."""
    widget.setWindowTitle(title)
    widget.show()
    return widget


@dataclass(frozen=True)
class PanelServices:
    """What every panel gets: the shared position, the engine worker, the message log."""

    context: LensContext
    worker: EngineWorker
    messages: MessageLog
    open_file: Callable[[str], None]  # ask the window to open a file (path as text)
    # Show a widget as a document tab in the window's centre: ``open_document(widget, title, key=None)``
    # returns the tab's widget; an open document with the same key is re-activated instead.
    open_document: Callable[..., QWidget] = field(default=lambda widget, title, key=None: _standalone(widget, title))
    # The window's one debug session (``app.session_bridge.SessionBridge``): every panel that runs, steps
    # or inspects a program talks to this one; ``None`` for a panel built on its own (it makes its own).
    session_bridge: SessionBridge | None = None
    # The window's one current state (``app.workbench.Workbench``: module, device, function, inputs, run,
    # paused dispatch); ``None`` for a panel built on its own.
    workbench: Workbench | None = None


@dataclass(frozen=True)
class PanelSpec:
    id: str  # stable: names the dock's objectName, so saved layouts find it again
    title: str
    factory: str | Callable[[PanelServices], QWidget]  # "package.module:callable" or the callable
    area: str = "bottom"  # one of AREAS, or "document": a tab of the central area (for wide views)
    visible: bool = True  # shown on first start (later, the saved layout decides)
    tabify_with: str | None = None  # id of a panel to share a tab group with

    def create(self, services: PanelServices) -> QWidget:
        factory = self.factory
        if isinstance(factory, str):
            module_name, _, attr = factory.partition(":")
            factory = getattr(importlib.import_module(module_name), attr)
        return factory(services)


# The panels of the main window, in the order of the View menu.
PANELS: list[PanelSpec] = [
    PanelSpec("log", "Log", "app.views.log_view:LogPanel", area="bottom"),
    PanelSpec("compile", "Compile & Phases", "app.views.compile_panel:CompilePanel", area="document"),
    PanelSpec("device", "Device", "app.views.device_panel:DevicePanel", area="left", tabify_with="module"),
    PanelSpec("stepper", "VM Stepper", "app.views.stepper_panel:StepperPanel", area="right"),
    PanelSpec(
        "dispatches", "Dispatches", "app.views.dispatch_panel:DispatchPanel", area="right", tabify_with="stepper"
    ),
    PanelSpec(
        "run_dispatches", "Run Dispatches", "app.views.dispatch_run_live:run_dispatches_panel", area="document",
        visible=False,
    ),
    PanelSpec(
        "run_dispatch_list", "Run Dispatch List", "app.views.run_dispatch_list:run_dispatch_list", area="bottom", tabify_with="log"
    ),
    PanelSpec("editor", "Executable Editor", "app.views.executable_editor:ExecutableEditorPanel", area="document"),
    PanelSpec("zones", "Zones", "app.views.zones_view:zones_panel", area="document", visible=False),
]


def register_panel(spec: PanelSpec) -> None:
    """Add (or replace, by id) a panel; windows built afterwards show it."""
    for i, existing in enumerate(PANELS):
        if existing.id == spec.id:
            PANELS[i] = spec
            return
    PANELS.append(spec)
