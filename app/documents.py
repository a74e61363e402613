"""The main window's central area: documents in closable, movable tabs (as in an IDE or RenderDoc).

A document is any widget a panel hands to :meth:`DocumentArea.open_document`: the disassembly of a
function, an IR snapshot, a diff, the phase timeline of a compilation. A document opened with a
``key`` is unique: opening the same key again brings the open tab forward instead of adding a twin
(the new widget is then discarded), so "show me function @main" never piles up copies.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QTabWidget, QWidget

KEY_PROPERTY = "lensDocumentKey"
# A document whose owner keeps it (the module inspector): closing its tab hides it instead of deleting it.
KEEP_ALIVE_PROPERTY = "lensKeepAlive"


def _tab_text(title: str) -> str:
    return title.replace("&", "&&")


class DocumentArea(QTabWidget):
    """Closable, movable document tabs; one tab per key."""

    documentOpened = Signal(QWidget)
    documentClosed = Signal(QWidget)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("documentArea")
        self.setTabsClosable(True)
        self.setMovable(True)
        self.setDocumentMode(True)
        self.setUsesScrollButtons(True)
        self.setElideMode(Qt.TextElideMode.ElideRight)  # many tabs shrink before any scrolls out of sight
        # ... but never below a readable width: past that the tabs scroll; the full title is the tooltip.
        self.tabBar().setStyleSheet("QTabBar::tab { min-width: 7em; max-width: 22em; }")
        self.tabCloseRequested.connect(self.close_document)
        self._pinned: set[int] = set()  # ids of widgets without a close button (the start page)

    # -- opening -------------------------------------------------------------------------------

    def open_document(
        self, widget: QWidget, title: str, key: str | None = None, *, closable: bool = True
    ) -> QWidget:
        """Show ``widget`` as a tab titled ``title`` and make it current; returns the tab's widget.

        With a ``key`` already open, the existing tab is activated (its title refreshed) and returned;
        ``widget`` is then not used and is scheduled for deletion unless it is that same tab.
        """
        if key is not None:
            existing = self.document(key)
            if existing is not None:
                if widget is not existing:
                    widget.deleteLater()
                index = self.indexOf(existing)
                self.setTabText(index, _tab_text(title))
                self.setTabToolTip(index, title)
                self.setCurrentIndex(index)
                return existing
            widget.setProperty(KEY_PROPERTY, key)
        index = self.addTab(widget, _tab_text(title))
        self.setTabToolTip(index, title)
        if not closable:
            self._pinned.add(id(widget))
            bar = self.tabBar()
            for side in (bar.ButtonPosition.RightSide, bar.ButtonPosition.LeftSide):
                if bar.tabButton(index, side) is not None:
                    bar.setTabButton(index, side, None)
        self.setCurrentIndex(index)
        self.documentOpened.emit(widget)
        return widget

    # -- finding and closing -------------------------------------------------------------------

    def document(self, key: str) -> QWidget | None:
        """The open document with ``key``, or ``None``."""
        for i in range(self.count()):
            widget = self.widget(i)
            if widget is not None and widget.property(KEY_PROPERTY) == key:
                return widget
        return None

    def documents(self) -> list[QWidget]:
        return [self.widget(i) for i in range(self.count())]

    def titles(self) -> list[str]:
        return [self.title(i) for i in range(self.count())]

    def title(self, index: int) -> str:
        """The title as given (a tab's text doubles ``&``, which Qt would take for a shortcut mark)."""
        return self.tabText(index).replace("&&", "&")

    def close_document(self, which: int | QWidget | str) -> bool:
        """Close a tab by index, widget or key; returns whether one was closed (pinned tabs stay)."""
        if isinstance(which, str):
            widget = self.document(which)
        elif isinstance(which, int):
            widget = self.widget(which)
        else:
            widget = which
        if widget is None or id(widget) in self._pinned:
            return False
        index = self.indexOf(widget)
        if index < 0:
            return False
        self.removeTab(index)
        self.documentClosed.emit(widget)
        if not widget.property(KEEP_ALIVE_PROPERTY):
            widget.deleteLater()
        return True
