"""A row of action buttons that wraps onto more rows instead of hiding actions.

A ``QToolBar`` that is narrower than its actions moves the last ones into its » extension menu, where a
user does not see them; in a dock of a 1366-px window the stepper's stepping actions did exactly that.
``ActionStrip`` lays its buttons out left to right and starts a new row when the next one does not fit,
so every action stays visible at its size hint whatever the width (the strip grows in height instead).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLayout, QLayoutItem, QSizePolicy, QToolButton, QWidget, QWidgetItem

SEPARATOR_WIDTH = 10


class FlowLayout(QLayout):
    """Items left to right, wrapped onto new rows; its height depends on its width (height-for-width)."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 2):
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:
        """One row of everything (what the strip would like)."""
        m = self.contentsMargins()
        visible = [i for i in self._items if not i.isEmpty()]
        width = sum(i.sizeHint().width() for i in visible) + self._spacing * max(0, len(visible) - 1)
        height = max((i.sizeHint().height() for i in visible), default=0)
        return QSize(width + m.left() + m.right(), height + m.top() + m.bottom())

    def minimumSize(self) -> QSize:
        """The widest single item: narrower than that, an item would be cut."""
        m = self.contentsMargins()
        size = QSize()
        for item in self._items:
            if not item.isEmpty():
                size = size.expandedTo(item.minimumSize()).expandedTo(QSize(item.sizeHint().width(), 0))
        return size + QSize(m.left() + m.right(), m.top() + m.bottom())

    def _arrange(self, rect: QRect, move: bool) -> int:
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        x, y, row_height = area.x(), area.y(), 0
        for item in self._items:
            if item.isEmpty():
                continue
            hint = item.sizeHint()
            if x > area.x() and x + hint.width() > area.right() + 1:
                x, y, row_height = area.x(), y + row_height + self._spacing, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self._spacing
            row_height = max(row_height, hint.height())
        return y + row_height - rect.y() + m.bottom()


class ActionStrip(QWidget):
    """Tool buttons for actions (and any widget), in rows that wrap: no action is ever hidden."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.flow = FlowLayout(self)
        self.flow.setContentsMargins(0, 0, 0, 0)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._buttons: dict[int, QToolButton] = {}

    def addAction(self, action: QAction) -> QToolButton:  # like QToolBar.addAction
        button = QToolButton(self)
        button.setDefaultAction(action)
        button.setAutoRaise(True)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self._buttons[id(action)] = button
        self.flow.addWidget(button)
        super().addAction(action)
        return button

    def addWidget(self, widget: QWidget) -> QWidget:  # like QToolBar.addWidget
        widget.setParent(self)
        self.flow.addItem(QWidgetItem(widget))
        return widget

    def addSeparator(self) -> None:  # like QToolBar.addSeparator
        gap = QWidget(self)
        gap.setFixedSize(SEPARATOR_WIDTH, 1)
        self.flow.addWidget(gap)

    def widgetForAction(self, action: QAction) -> QToolButton | None:  # like QToolBar's
        return self._buttons.get(id(action))

    def buttons(self) -> list[QToolButton]:
        return list(self._buttons.values())

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self.flow.heightForWidth(width)

    def sizeHint(self) -> QSize:
        hint = self.flow.sizeHint()
        return QSize(hint.width(), self.flow.heightForWidth(max(self.width(), 1)) if self.width() > 1 else hint.height())

    def minimumSizeHint(self) -> QSize:
        return self.flow.minimumSize()
