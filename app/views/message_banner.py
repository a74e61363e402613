"""A non-modal banner across the top of the window: the latest error, with a close button.

It never blocks (no message box): the application keeps running and tests keep driving it; the
full text and details also go to the Log panel.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QWidget

from app.messages import Level, Message

_STYLE = {
    Level.ERROR: "background:#f8d7da; color:#58151c; border-bottom:1px solid #f1aeb5;",
    Level.WARNING: "background:#fff3cd; color:#664d03; border-bottom:1px solid #ffe69c;",
    Level.INFO: "background:#cfe2ff; color:#052c65; border-bottom:1px solid #9ec5fe;",
}


MAX_CHARS = 200  # characters of a message the banner shows (one line at 1366 px)


class MessageBanner(QFrame):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("messageBanner")
        self.label = QLabel(self)
        self.label.setWordWrap(False)
        # Never wider than the window: the line is cut by the window, not the window widened by the line.
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = QToolButton(self)
        self.close_button.setText("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("Dismiss")
        self.close_button.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 6, 6)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.message: Message | None = None
        self.hide()

    def show_message(self, msg: Message) -> None:
        self.message = msg
        self.setStyleSheet(
            f"#messageBanner {{{_STYLE[msg.level]}}} QLabel {{{_STYLE[msg.level]} border:none;}}"
        )
        # One line: a long message (a compiler's or a driver's) must not take the window; all of it is in
        # the tooltip and the Log panel.
        lines = msg.text.strip().splitlines() or [""]
        first = lines[0]
        if len(first) > MAX_CHARS:
            first = first[: MAX_CHARS - 1] + "…"
        if len(lines) > 1 or first != lines[0]:
            first += "  (full text in the Log)"
        self.label.setText(first)
        tip = msg.text + (("\n\n" + msg.details[-4000:]) if msg.details else "")
        self.label.setToolTip(tip[:6000])
        self.show()

    def retire(self, msg: Message) -> None:
        """Hides the banner if it still shows ``msg`` (a later message stays)."""
        if self.message is msg:
            self.hide()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""
