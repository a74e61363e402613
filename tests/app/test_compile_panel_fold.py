"""The compile panel folds its options away once a compilation is shown, so its phases and IR are in sight.

Walk (squeezenet1_1.mlir opened, Compile & Phases, 1366x768): the options (target, CPU, five type
conversions, tracing, flags) and the timeline filled the panel; the compilation's phases, its IR and the diff
tabs began at its bottom edge, below the fold of its scroll area (at 1920x1080 the phase list showed three
rows). The button that shows them again says the options set."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QScrollArea

from engine.samples import sample_path

TIMEOUT = 120_000
SIZES = [(1366, 768), (1920, 1080)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_ir_is_in_sight_after_opening_a_program(qtbot, main_window, size):
    window = main_window
    window.resize(*size)
    window.apply_default_sizes()
    panel = window.panels["compile"]
    assert panel.options_tabs.isVisibleTo(panel)  # nothing compiled yet: the options are what there is
    with qtbot.waitSignal(window.panels["stepper"].bridge.opened, timeout=TIMEOUT):
        window.open_file(sample_path("mlp"))
    qtbot.waitUntil(lambda: bool(panel.compilations), timeout=10_000)
    window.show_panel("compile")
    QApplication.processEvents()
    qtbot.wait(50)
    assert not panel.options_tabs.isVisible()
    assert panel.options_button.text() == f"▸ Options: {panel.options.describe()}"
    # ... and it never widens the panel past the document (a first try in the buttons' row did, at 1366).
    assert panel.findChild(QScrollArea).horizontalScrollBar().maximum() == 0
    panel.options.flags.setText("--iree-opt-level=O3 " * 8)
    panel.show_options(True)
    panel.show_options(False)
    QApplication.processEvents()
    assert panel.options_button.text().endswith("…") and panel.options.describe() in panel.options_button.toolTip()
    assert panel.findChild(QScrollArea).horizontalScrollBar().maximum() == 0
    # The IR viewer's first lines are inside the scroll area's viewport, without scrolling.
    scroll = panel.findChild(QScrollArea)
    viewport = scroll.viewport()
    top = panel.viewer.mapTo(viewport, QPoint(0, 0)).y()
    assert 0 <= top and top + 120 <= viewport.height(), (top, viewport.height())
    # The phases, several in sight (the empty diagnostics list no longer takes a third of their column).
    assert panel.phase_list.height() >= 4 * panel.phase_list.sizeHintForRow(0), panel.phase_list.height()
    assert not panel.diagnostics.isVisible()
    # Shown again by the button, folded again by it.
    panel.options_button.click()
    assert panel.options_tabs.isVisible() and panel.options_button.text() == "▾ Options"
    panel.options_button.click()
    assert not panel.options_tabs.isVisible()
