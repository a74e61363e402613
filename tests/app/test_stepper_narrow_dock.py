"""The VM stepper in a 1366x768 window's right dock (~520 px): the code the dock's whole width over the
registers, instead of beside them. The walk at 1366x768 saw the disassembly cut to ~290 px (half of most
instructions) and the registers to ~210 (their hex column half hidden). At 1920x1080 (a ~730-px dock) the code
stays beside the registers, as before."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication

from app.views.hex_view import monospace_font
from app.views.stepper_panel import CODE_CHARS
from engine.session.protocol import RegisterFile

SIZES = [(1366, 768), (1920, 1080)]


def settle(qtbot, window, size) -> None:
    window.resize(*size)
    window.apply_default_sizes()
    QApplication.processEvents()
    qtbot.wait(100)
    QApplication.processEvents()


def hex_in_sight(view) -> bool:
    header = view.header()
    return header.sectionViewportPosition(2) + header.sectionSize(2) <= view.viewport().width()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_code_and_registers_are_readable(qtbot, main_window, size):
    window = main_window
    settle(qtbot, window, size)
    panel = window.panels["stepper"]
    char = QFontMetrics(monospace_font()).horizontalAdvance("0")
    panel.registers.set_registers(RegisterFile(i32=(16, 1, 553648160, 3075, *range(20)), ref=("null",)), compare=False)
    QApplication.processEvents()
    stacked = size[0] < 1600
    assert panel.splitter.orientation() == (Qt.Orientation.Vertical if stacked else Qt.Orientation.Horizontal)
    # A line of code: its pc and most of an instruction (vm.call @hal.device.queue.execute.indirect ...).
    assert panel.listing.viewport().width() >= CODE_CHARS * char, (panel.listing.width(), panel.splitter.sizes())
    assert hex_in_sight(panel.registers), panel.registers.width()
    # Most of the height still goes to the code, several registers in sight under it.
    code, state = panel.code_splitter.sizes()[0], panel.state_splitter.sizes()[0]
    assert panel.listing.height() >= 10 * panel.listing.fontMetrics().lineSpacing(), panel.splitter.sizes()
    assert code > 0 and state > 0
    assert panel.registers.viewport().height() >= 5 * panel.registers.fontMetrics().lineSpacing()


def test_a_dock_made_wider_puts_the_code_beside_the_registers_again(qtbot, main_window):
    window = main_window
    settle(qtbot, window, (1366, 768))
    panel = window.panels["stepper"]
    assert panel.splitter.orientation() == Qt.Orientation.Vertical
    dock = window.docks["stepper"]
    window.resizeDocks([dock], [panel.side_by_side_width() + 60], Qt.Orientation.Horizontal)
    QApplication.processEvents()
    qtbot.waitUntil(lambda: panel.splitter.orientation() == Qt.Orientation.Horizontal, timeout=2000)
    assert panel.state_splitter.orientation() == Qt.Orientation.Vertical
    qtbot.wait(50)
    left, right = panel.splitter.sizes()
    assert left > right > 0
