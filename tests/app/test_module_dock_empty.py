"""The module dock with no module open shows its placeholder and nothing else.

Walk (the window opened with no file, or on an .mlir that did not compile, 1366x768): a white 100x30 box sat in
the module dock's top-left corner, over the placeholder's frame: the inspector's four views (text, disassembly,
hex, decoded), children of the module view that no tab held yet."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from engine.samples import sample_path

TIMEOUT = 120_000


def test_no_stray_views_before_a_module(qtbot, main_window):
    window = main_window
    QApplication.processEvents()
    view = window.module_view
    stray = [type(w).__name__ for w in (view.info, view.disassembly, view.hex, view.decoded) if w.isVisible()]
    assert stray == []
    # A module opened: the inspector shows its details in a tab.
    with qtbot.waitSignal(window.panels["stepper"].bridge.opened, timeout=TIMEOUT):
        window.open_file(sample_path("mlp"))
    qtbot.waitUntil(lambda: view.detail.count() > 0, timeout=10_000)
    window.documents.setCurrentWidget(view.detail)
    qtbot.waitUntil(lambda: view.detail.currentWidget().isVisible(), timeout=10_000)
    assert view.detail.currentWidget() is view.info
