"""A hex dump that renders only the rows on screen (Qt's model/view asks only for visible cells).

The bytes stay where they are (a ``memoryview`` of the memory-mapped module), so a segment of a
gigabyte costs nothing until rows are scrolled into view.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QFont, QFontDatabase, QFontInfo
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

BYTES_PER_ROW = 16
_PRINTABLE = bytes(b if 0x20 <= b < 0x7F else 0x2E for b in range(256))  # '.' for the rest

_Index = QModelIndex | QPersistentModelIndex


# Tried in order when the system's fixed font does not resolve to a fixed-pitch face (fontconfig may map
# "monospace" to Noto Sans Mono, which Qt does not report as fixed pitch: columns would not line up).
_FIXED_FAMILIES = ("DejaVu Sans Mono", "Liberation Mono", "Noto Mono", "Ubuntu Mono", "Courier New", "Nimbus Mono PS")


def monospace_font() -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setStyleHint(QFont.StyleHint.Monospace)
    if QFontInfo(font).fixedPitch():
        return font
    families = set(QFontDatabase.families())
    for family in _FIXED_FAMILIES:
        if family in families:
            candidate = QFont(family, font.pointSize())
            candidate.setStyleHint(QFont.StyleHint.Monospace)
            if QFontInfo(candidate).fixedPitch():
                return candidate
    return font


def hex_row(data: memoryview, row: int, base: int = 0) -> tuple[str, str, str]:
    """``(offset, hex, ascii)`` text of one row, as ``xxd`` would show it."""
    start = row * BYTES_PER_ROW
    chunk = bytes(data[start : start + BYTES_PER_ROW])
    hex_part = " ".join(chunk[i : i + 2].hex() for i in range(0, len(chunk), 2))
    return f"{base + start:08x}", hex_part, chunk.translate(_PRINTABLE).decode("ascii")


class HexModel(QAbstractTableModel):
    HEADERS = ("Offset", "Bytes", "ASCII")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._data = memoryview(b"")
        self._base = 0

    def set_data(self, data: Any, base: int = 0) -> None:
        """Show ``data`` (bytes-like); offsets are printed from ``base`` (e.g. its file offset)."""
        self.beginResetModel()
        mv = memoryview(data)
        self._data = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
        self._base = base
        self.endResetModel()

    @property
    def byte_count(self) -> int:
        return len(self._data)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else (len(self._data) + BYTES_PER_ROW - 1) // BYTES_PER_ROW

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else 3

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and index.isValid():
            return hex_row(self._data, index.row(), self._base)[index.column()]
        if role == Qt.ItemDataRole.ForegroundRole and index.isValid() and index.column() == 0:
            return Qt.GlobalColor.darkGray
        return None

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.HEADERS[section]
        return None


class HexView(QTableView):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.hex_model = HexModel(self)
        self.setModel(self.hex_model)
        self.setFont(monospace_font())
        self.setShowGrid(False)
        self.setWordWrap(False)
        self.setAcceptDrops(False)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        vh = self.verticalHeader()
        vh.setVisible(False)
        # Fixed row heights: the view never measures rows it does not show.
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setDefaultSectionSize(self.fontMetrics().height() + 2)
        hh = self.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        hh.setStretchLastSection(True)
        hh.setHighlightSections(False)
        char = self.fontMetrics().horizontalAdvance("0")
        self.setColumnWidth(0, char * 11)
        self.setColumnWidth(1, char * 44)

    def set_data(self, data: Any, base: int = 0) -> None:
        self.hex_model.set_data(data, base)
        self.scrollToTop()
