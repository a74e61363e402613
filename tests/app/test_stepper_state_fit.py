"""The stepper's state pane in a 1366x768 window (~210 px wide): registers sized by their words, every state
tab in sight."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.views.stepper_state import RegistersView
from engine.session.protocol import RegisterFile

REF = "!hal.buffer_view<1x3x16x16xf32> 3072 bytes @0 of !hal.buffer 3072 bytes"


def test_a_refs_description_does_not_widen_the_i32_column(qtbot):
    """Walk, small_cnn stopped at a dispatch: the i32 column was as wide as the ref bank's buffer-view
    descriptions (~190 px), so neither hex nor f32 could be seen in the ~210-px pane."""
    view = RegistersView()
    qtbot.addWidget(view)
    view.resize(210, 260)
    view.show()
    view.set_registers(RegisterFile(i32=(16, 1, 553648160, 3075, *range(20)), ref=(REF, "null")), compare=False)
    QApplication.processEvents()
    metrics = view.fontMetrics()
    assert view.columnWidth(1) < metrics.horizontalAdvance(REF) / 2
    # The hex column starts inside the pane (its words begin in sight).
    assert view.header().sectionViewportPosition(2) < view.viewport().width() - metrics.horizontalAdvance("0x")
    # Every register's name whole ("%i119", not "%i…"): two indentations in (its bank, the root's arrows).
    view.set_registers(RegisterFile(i32=tuple(range(120)), ref=(REF,)), compare=False)
    name = view.topLevelItem(0).child(119).text(0)
    assert view.columnWidth(0) >= 2 * view.indentation() + metrics.horizontalAdvance(name), name
    view.set_registers(RegisterFile(i32=(16, 1, 553648160, 3075, *range(20)), ref=(REF, "null")), compare=False)
    refs = view.topLevelItem(1)
    assert refs.child(0).isFirstColumnSpanned() and REF in refs.child(0).text(0)
    assert view.value_text("ref", 0) == REF and view.value_text("i32", 2) == "553648160"


def test_every_state_tab_is_in_sight_at_1366(qtbot, main_window):
    """Walk at 1366x768: Call Stack and Breakpoints took the pane's width, Globals sat behind scroll arrows."""
    window = main_window
    window.resize(1366, 768)
    window.apply_default_sizes()
    QApplication.processEvents()
    qtbot.wait(50)
    panel = window.panels["stepper"]
    # The pane as narrow as it is in a real 1366-px window's fonts (the offscreen platform's are narrower).
    total = sum(panel.splitter.sizes())
    panel.splitter.setSizes([total - 170, 170])
    QApplication.processEvents()
    tabs = panel.state_tabs
    bar = tabs.tabBar()
    assert [tabs.tabToolTip(i) for i in range(tabs.count())] == ["Call Stack", "Breakpoints", "Globals"]
    # Said, not left to the style (the X11 window's style scrolled unelided tabs; the offscreen one elides).
    assert not bar.usesScrollButtons() and bar.elideMode() == Qt.TextElideMode.ElideRight
    assert all(bar.tabRect(i).right() <= bar.width() for i in range(bar.count())), (
        [bar.tabRect(i) for i in range(bar.count())], bar.width())
