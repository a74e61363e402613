"""Help > Keyboard Shortcuts: every action of the window that has a key, read from the actions themselves
(so the list cannot drift from the bindings)."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget


def shortcut_rows(window: QWidget) -> list[tuple[str, str, str]]:
    """(action, keys, where) for each action under ``window`` with a shortcut, sorted by where and name."""
    rows: dict[tuple[str, str], str] = {}
    for action in window.findChildren(QAction):
        keys = [k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts() if not k.isEmpty()]
        if not keys:
            continue
        name = action.text().replace("&", "").strip(" .…") or action.toolTip()
        owner = action.parent()
        where = owner.objectName() if owner is not None and owner is not window else "Window"
        rows[(name, ", ".join(keys))] = _where(where)
    return sorted(((n, k, w) for (n, k), w in rows.items()), key=lambda r: (r[2], r[0]))


def _where(object_name: str) -> str:
    return {"stepperPanel": "VM Stepper", "IreeLensMainWindow": "Window"}.get(object_name, object_name or "Window")


class ShortcutsView(QWidget):
    def __init__(self, window: QWidget, parent: QWidget | None = None):
        super().__init__(parent)
        rows = shortcut_rows(window)
        self.table = QTableWidget(len(rows), 3, self)
        self.table.setObjectName("shortcutsTable")
        self.table.setHorizontalHeaderLabels(["Action", "Keys", "Where"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(text))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"{len(rows)} keyboard shortcuts", self))
        layout.addWidget(self.table, 1)
        self.rows = rows
