"""The application's message log: errors and notes that the user reads in the Log panel and the banner."""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum

from PySide6.QtCore import QObject, Signal


class Level(Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Message:
    level: Level
    text: str  # one line the user reads
    details: str = ""  # a traceback or a compiler's diagnostics
    when: float = 0.0  # time.time()


class MessageLog(QObject):
    """Every message of the session, in order; ``messageAdded`` announces each new one."""

    messageAdded = Signal(object)  # Message
    # A message no longer true of the present (a run's failure the user has stepped back from): the banner
    # that shows it hides; the Log keeps it, as a record of what happened.
    messageRetired = Signal(object)  # Message

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.messages: list[Message] = []

    def add(self, level: Level, text: str, details: str = "") -> Message:
        msg = Message(level, text, details, time.time())
        self.messages.append(msg)
        self.messageAdded.emit(msg)
        return msg

    def retire(self, msg: Message) -> None:
        self.messageRetired.emit(msg)

    def info(self, text: str, details: str = "") -> Message:
        return self.add(Level.INFO, text, details)

    def warning(self, text: str, details: str = "") -> Message:
        return self.add(Level.WARNING, text, details)

    def error(self, text: str, details: str = "") -> Message:
        return self.add(Level.ERROR, text, details)
