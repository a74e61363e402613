"""The run dispatch list in a 1366x768 window: enough rows to find one's way in a model's dispatches."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app.views.run_dispatch_list import RunDispatch


@pytest.mark.parametrize("size,rows", [((1366, 768), 5), ((1920, 1080), 8)], ids=["1366x768", "1920x1080"])
def test_the_run_dispatch_list_shows_five_rows_at_1366(qtbot, main_window, size, rows):
    """Walk, attention_block stopped at a dispatch at 1366x768: the list showed three rows under its title, its
    filter row and its header (the bottom docks had 175 px)."""
    window = main_window
    window.resize(*size)
    window.apply_default_sizes()
    window.docks["run_dispatch_list"].raise_()
    QApplication.processEvents()
    qtbot.wait(50)
    runs = window.docks["run_dispatch_list"].widget()
    runs.model.set_rows([RunDispatch(i, f"model$async_dispatch_{i}_generic", None) for i in range(40)])
    runs.title.setText("40 dispatches in execution order · paused at #2 · the rest are listed as the run reaches them")
    QApplication.processEvents()
    table = runs.table
    shown = table.viewport().height() // table.verticalHeader().defaultSectionSize()
    assert shown >= rows, (shown, window.docks["run_dispatch_list"].height())
    # The title on the filter's row, one line: its whole text in the tooltip where the width cuts it.
    assert runs.title.y() == pytest.approx(runs.filter_edit.y(), abs=8)
    assert runs.title.toolTip() == runs.title.text()
    if size[0] == 1920:  # room for both: a finished run's title whole, the filter the rest
        runs.title.setText("962 dispatches in execution order · finished")
        QApplication.processEvents()
        assert not runs.title.is_elided() and runs.filter_edit.width() > runs.title.width()
    else:
        assert runs.filter_edit.width() >= runs.filter_edit.minimumWidth()


def test_enter_on_a_row_goes_to_that_dispatch(qtbot, main_window):
    """Walk, efficientvit finished: a row picked and Enter pressed did nothing (only a double-click went)."""
    from PySide6.QtCore import Qt

    runs = main_window.docks["run_dispatch_list"].widget()
    main_window.docks["run_dispatch_list"].raise_()
    runs.model.set_rows([RunDispatch(i, f"model$async_dispatch_{i}_generic", 36) for i in range(10)])
    asked = []
    runs.go_to = asked.append  # what Enter asks for (travelling needs a recorded run: test_run_state)
    runs.select_ordinal(4)
    runs.table.setFocus()
    qtbot.waitUntil(runs.table.hasFocus)
    qtbot.keyClick(runs.table, Qt.Key.Key_Return)
    assert asked == [4]
