"""The Log panel: every message of the session (errors with their details), newest last."""

from __future__ import annotations

import time

from PySide6.QtCore import QSize
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QPlainTextEdit, QVBoxLayout, QWidget

from app.messages import Level, Message
from app.panels import PanelServices

_PREFIX = {Level.INFO: "", Level.WARNING: "warning: ", Level.ERROR: "error: "}


class LogPanel(QWidget):
    def __init__(self, services: PanelServices, parent: QWidget | None = None):
        super().__init__(parent)
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setAcceptDrops(False)  # drops go to the window (open a file)
        self.text.setObjectName("logText")
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(font)
        self.text.setMaximumBlockCount(5000)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text)
        for msg in services.messages.messages:
            self.append(msg)
        services.messages.messageAdded.connect(self.append)

    def sizeHint(self) -> QSize:
        return QSize(600, 110)  # a few lines: the log is a side show, the module is the main one

    def append(self, msg: Message) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(msg.when))
        self.text.appendPlainText(f"[{stamp}] {_PREFIX[msg.level]}{msg.text}")
        if msg.details:
            self.text.appendPlainText("    " + msg.details.rstrip().replace("\n", "\n    "))
