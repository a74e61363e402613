"""The main window's central area: documents in closable, movable tabs (as in an IDE or RenderDoc).

A document is any widget a panel hands to :meth:`DocumentArea.open_document`: the disassembly of a
function, an IR snapshot, a diff, the phase timeline of a compilation. A document opened with a
``key`` is unique: opening the same key again brings the open tab forward instead of adding a twin
(the new widget is then discarded), so "show me function @main" never piles up copies.

More tabs than the width holds at a readable size: QTabBar's own scrolling moves by pixels and left the
first visible tab cut at the left edge (at 1366x768, after Step Into Workgroup…, only its close button
showed). The area shows instead a run of whole tabs that holds the current one, the others hidden, and a
corner with arrows (the previous/next document) and a menu of every document.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QMenu, QTabWidget, QToolButton, QWidget

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
        # Qt's scroll buttons stay on only so the bar's minimum width stays small (without them it is the sum of
        # every tab's): the run of whole tabs shown always fits, so they never show.
        self.setUsesScrollButtons(True)
        self.setElideMode(Qt.TextElideMode.ElideRight)  # many tabs shrink before any is hidden
        # ... but never below a readable width: past that tabs are hidden; the full title is the tooltip.
        # At most 14em: Qt gives the room left over in proportion to how much a tab's title wants, so one long
        # title (a dispatch's IREE name) kept 22em while the others were cut to five letters.
        self.tabBar().setStyleSheet("QTabBar::tab { min-width: 7em; max-width: 14em; }")
        self.tabCloseRequested.connect(self.close_document)
        self._pinned: set[int] = set()  # ids of widgets without a close button (the start page)
        self._first_shown = 0  # the first tab of the run shown when not all fit
        self._fitting = False
        self._build_overflow()
        self.currentChanged.connect(lambda _index: self.fit_tabs())
        self.tabBar().tabMoved.connect(lambda _a, _b: self.fit_tabs())

    def _build_overflow(self) -> None:
        """The corner shown while some tabs are hidden: previous/next document and the list of all."""
        self.overflow = QWidget(self)
        self.overflow.setObjectName("documentOverflow")
        row = QHBoxLayout(self.overflow)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        self.previous_button, self.next_button, self.list_button = (QToolButton(self.overflow) for _ in range(3))
        for button, arrow, tip, step in (
            (self.previous_button, Qt.ArrowType.LeftArrow, "The previous document", -1),
            (self.next_button, Qt.ArrowType.RightArrow, "The next document", 1),
        ):
            button.setArrowType(arrow)  # the style's own arrows: the glyphs ◂ ▸ were tiny
            button.setToolTip(tip)
            button.setAutoRaise(True)
            button.clicked.connect(lambda _checked=False, s=step: self.setCurrentIndex(self.currentIndex() + s))
            row.addWidget(button)
        self.list_button.setText("☰")
        self.list_button.setToolTip("Every open document (some tabs are hidden: the bar is too narrow for all)")
        self.list_button.setAutoRaise(True)
        self.list_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.list_button)
        menu.aboutToShow.connect(lambda: self._fill_list(menu))
        self.list_button.setMenu(menu)
        row.addWidget(self.list_button)
        row.setAlignment(Qt.AlignmentFlag.AlignVCenter)
        self.setCornerWidget(self.overflow, Qt.Corner.TopRightCorner)
        self.overflow.setVisible(False)

    def _fill_list(self, menu: QMenu) -> None:
        menu.clear()
        for i in range(self.count()):
            action = menu.addAction(self.tabText(i))  # "&" doubled, as the tab shows it (Qt's shortcut mark)
            action.setCheckable(True)
            action.triggered.connect(lambda _checked=False, i=i: self.setCurrentIndex(i))
            action.setChecked(i == self.currentIndex())

    # -- which tabs show -----------------------------------------------------------------------

    def shown_tabs(self) -> list[int]:
        """The indices of the tabs shown (all of them when they fit)."""
        return [i for i in range(self.count()) if self.isTabVisible(i)]

    def setCurrentIndex(self, index: int) -> None:  # noqa: N802 (Qt's name)
        """As QTabWidget's, for a hidden tab too (Qt does not make a hidden tab current: it is shown first, and
        the run of tabs shown then fits around it)."""
        if 0 <= index < self.count() and not self.isTabVisible(index):
            self.setTabVisible(index, True)
        super().setCurrentIndex(index)
        self.fit_tabs()

    def setCurrentWidget(self, widget: QWidget) -> None:  # noqa: N802 (Qt's name)
        self.setCurrentIndex(self.indexOf(widget))

    def fit_tabs(self) -> None:
        """Show the run of whole tabs, each at least its readable width (``QTabBar::minimumTabSizeHint``:
        7em of title), that holds the current tab; hide the others and show the corner."""
        if self._fitting:
            return
        self._fitting = True
        try:
            self._fit()
        finally:
            self._fitting = False

    def _fit(self) -> None:
        bar = self.tabBar()
        n = self.count()
        widths = [bar.minimumTabSizeHint(i).width() for i in range(n)]
        first, last = 0, n - 1
        room = self.width()
        if sum(widths) > room:
            room -= self.overflow.sizeHint().width()
            current = min(max(self.currentIndex(), 0), n - 1)
            first = min(max(self._first_shown, 0), current)
            last, used = first, widths[first]
            while last + 1 < n and used + widths[last + 1] <= room:
                last += 1
                used += widths[last]
            if current > last:  # the run ends at the current tab instead
                first = last = current
                used = widths[current]
            while first > 0 and used + widths[first - 1] <= room:  # fill towards the start
                first -= 1
                used += widths[first]
        self._first_shown = first
        for i in range(n):
            shown = first <= i <= last
            if self.isTabVisible(i) != shown:
                self.setTabVisible(i, shown)
        # Qt keeps the pixel offset it scrolled to while more tabs showed (a tab made current before the others
        # were hidden); its resize handling scrolls back to 0 when all shown tabs fit.
        QCoreApplication.sendEvent(bar, QResizeEvent(bar.size(), bar.size()))
        hidden = n - (last - first + 1) if n else 0
        self.overflow.setVisible(hidden > 0)
        self.previous_button.setEnabled(self.currentIndex() > 0)
        self.next_button.setEnabled(0 <= self.currentIndex() < n - 1)
        self.list_button.setToolTip(f"Every open document ({hidden} tabs hidden: the bar is too narrow for all)")

    def tabInserted(self, index: int) -> None:  # noqa: N802 (Qt's name)
        super().tabInserted(index)
        self.fit_tabs()

    def tabRemoved(self, index: int) -> None:  # noqa: N802 (Qt's name)
        super().tabRemoved(index)
        self.fit_tabs()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self.fit_tabs()

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
                self.fit_tabs()  # its title's width may have changed
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
