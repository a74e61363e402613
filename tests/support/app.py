"""Helpers of the Qt application tests (tests/app only: this module imports Qt): real drag-and-drop, and
the stepper opened on a module with breakpoints added through its own widgets."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication


def drop_files(qtbot, widget, paths: list[Path]) -> bool:
    """Drag ``paths`` over ``widget`` and drop them, with real Qt drag-and-drop events."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    pos = widget.rect().center()
    enter = QDragEnterEvent(
        QPointF(pos),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(widget, enter)
    accepted = enter.isAccepted()
    drop = QDropEvent(
        QPointF(pos),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(widget, drop)
    return accepted and drop.isAccepted()


TIMEOUT = 120_000  # a child process opening Vulkan on a loaded 2-core machine can take a minute


def open_in_stepper(qtbot, window, vmfb):
    panel = window.panels["stepper"]
    window.docks["stepper"].show()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    return panel


def add_breakpoint(qtbot, panel, kind: str, name: str = "", when: str = "before"):
    view = panel.breakpoints_view
    view.kind.setCurrentIndex(view.kind.findData(kind))
    if kind == "dispatch":
        view.when.setCurrentIndex(view.when.findData(when))
    view.name.setText(name)
    with qtbot.waitSignal(panel.bridge.breakpointsChanged, timeout=TIMEOUT):
        qtbot.mouseClick(view.add_button, Qt.MouseButton.LeftButton)


def read_bindings(qtbot, bridge, timeout: int = 60000) -> list:
    """The paused dispatch's bound bytes (uint8 arrays): ``request_bindings()`` and its ``Bindings`` answer."""
    from engine.session.protocol import Bindings

    with qtbot.waitSignal(bridge.answered, timeout=timeout, check_params_cb=lambda a: isinstance(a, Bindings)) as got:
        bridge.request_bindings()
    return [ref.to_numpy() for ref in got.args[0].tensors]


def save_screenshot(widget, name: str) -> None:
    """``widget`` painted to an image (a painting error fails the test), kept as ``NAME.png`` in
    ``$LENS_TEST_SCREENSHOTS`` when that is set (to look at what a test saw), else thrown away: never at a
    fixed path that two runs at once would overwrite."""
    image = widget.grab()
    assert not image.isNull(), f"{name}: the widget painted nothing"
    folder = os.environ.get("LENS_TEST_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        image.save(str(Path(folder) / f"{name}.png"))
